"""vdbench: SD/WD/RD or FSD/FWD/RD parameter files, one vdbench run per host, output folders.

Parameter file (``templates/vdbench/job.vdb.j2``) from the experiment's options:

- ``workload``: ``raw`` (default; SD/WD on a device or file) or ``filesystem`` (FSD/FWD).
- Raw: target ``block`` -> ``sd=sd1,lun=<path>``; target ``directory`` -> a file lun
  ``<path>/<host>/vdb.file`` (``size`` required; vdbench creates and fills it first in an
  ``SD_format`` run). ``size`` -> sd ``size``, ``iodepth`` -> sd ``threads`` (vdbench's
  outstanding I/Os per SD), ``bs`` -> wd ``xfersize``, ``rw``/``rwmixread`` -> wd ``rdpct``
  (read/randread 100, write/randwrite 0, rw/randrw ``rwmixread``, default 50), ``rw``
  random -> ``seekpct=100``, sequential -> ``seekpct=0`` (option ``seekpct`` overrides, e.g.
  ``eof`` for one pass to the end), ``rate`` -> rd ``iorate`` (default ``max``). ``numjobs``
  has no raw equivalent (only 1 is accepted).
- File system: anchor ``<path>/<host>/fsd`` (target ``directory`` only; vdbench creates and,
  with ``format`` (default ``yes``), fills it), ``depth``/``width`` (default 1), ``files``
  and ``size`` (each file's size) required -> fsd; ``operation`` (default from ``rw``: read,
  write, or read with ``rdpct`` for a mix), ``bs`` -> ``xfersize``, ``fileio`` (default from
  ``rw``: random/sequential), ``fileselect`` (default random), ``numjobs`` (else
  ``iodepth``) -> fwd ``threads``; ``rate`` -> rd ``fwdrate``.
- Both: ``runtime`` -> ``elapsed``, ``ramp_time`` -> ``warmup`` (whole seconds; vdbench
  counts ``elapsed`` after the warm-up, and without ``warmup`` it drops the first interval
  from its averages), ``interval`` (default 1; ``elapsed`` and ``warmup`` must be multiples),
  ``openflags`` (``direct: 1`` -> ``o_direct``), ``compratio`` (general parameter),
  ``forxfersize``/``forrdpct``/``forthreads``/``forseekpct`` (comma lists such as
  ``"4k,64k"`` -> ``forxfersize=(4k,64k)``: one vdbench run per combination, each parsed into
  its own rows; they run one after another, which storbench's default iteration timeout,
  computed from ``runtime``, does not know: set the experiment's ``timeout``),
  ``run_name`` (rd, default ``rd1``), ``workload_name`` (wd/fwd, default
  ``wd1``/``fwd1``), and any vdbench parameter as ``sd_<name>``, ``wd_<name>``,
  ``fsd_<name>``, ``fwd_<name>``, ``rd_<name>`` or ``hd_<name>`` (added to that line).
  Other options are an error: vdbench would run the same test for every value.

Hosts: standalone, every host of the experiment runs the same file on its own, and the
per-host path holds ``$storbench_host``, which vdbench replaces with the
``storbench_host=<host>`` argument of :meth:`command`. In service mode
(``execution: service``) one vdbench master on the controller drives every host of the run
(its slaves, which it starts over ssh itself): the file has one ``hd=`` line per host and
one SD per host and LUN (``sdN`` for a single target, ``sdN_M`` for LUN M of a target set),
so a target set of many LUNs over a host group is one vdbench run. ``vdbench_hosts:
"client01,client02"`` names the driven hosts by hand (give the experiment a host group
holding only the master). The file then has ``hd=default,vdbench=<vdbench_dir>
(default /opt/vdbench),user=root,shell=ssh`` (``hd_user``/``hd_shell`` override), one
``hd=hdN,system=<host>`` per host (its ``data_address`` when it has one, as other tools'
service endpoints) and one ``sd=sdN,host=hdN`` (or ``fsd``/``fwd``) each; a directory
target's per-host folders must then exist on the slaves (storbench creates the master's only).

Run: ``vdbench -f <job> -o <output folder> [storbench_host=<host>]``; the argument is
passed only when the file mentions ``$storbench_host`` (vdbench stops on an unused one),
so own job files need not. ``-o``: vdbench creates the folder (only the last path
component, so its parent must exist) or reuses an existing one after deleting the
``.html``/``.bin``/``swat_mon`` files in it (vdbench 5.04 ``reporting.rep_mkdir``); a name
ending in ``+`` or ``.tod`` would be renamed, which ``<host>.vdbench`` never is. vdbench has
no ``--version``: it prints ``Vdbench distribution: vdbench50407 ...`` before it opens the
output folder, so :meth:`version_command` asks for an impossible one under ``/dev/null``.

Values: vdbench (5.04, ``Vdb_scan``) reads a parameter line up to its first blank (the rest is
a comment); ``,`` outside parentheses starts the next parameter and ``(a,b,...)`` is a list;
double quotes hide blanks, commas, ``=`` and ``-`` (as ``[ ^ { }``, turned back afterwards);
``$name``/``!name`` are command-line variables and ``$host``/``#host`` host names and numbers.
``*``, ``#`` and ``/`` start a comment only at the start of a line, where no value is. So
:meth:`VdbenchAdapter.job_value_problem` and ``target_path_problem`` refuse blanks, quotes,
those four escape characters, ``$``, ``!``, ``#host``, unbalanced parentheses and commas
outside them (:func:`value_problem`); lists such as ``wd_xfersize: "(4k,50,8k,50)"`` pass.

Parsing: :mod:`storbench.tools.vdbench_output`. Rows per host from its output folder plus
``host='all'`` rows; a multi-host (``hd=``) output's flatfile holds the aggregate, which
gives the ``all`` rows (the master's own totals and merged histograms), and each host's
rows come from the master's host reports (``hd1.html`` ...: rates and mean response times
by op; a raw workload's percentiles from ``hd1.histogram.html``), named by the host in the
hd's place (verified with vdbench 5.04.06 built from source, one master and four slaves
over ssh, raw and file-system workloads: tests/fixtures/vdbench/storbench-service-4hosts*).
A target set standalone: one SD per member on each host (``sd*``).
"""

from __future__ import annotations

from pathlib import Path

from storbench.core.addresses import bare
from storbench.core.aggregate import aggregate_hosts
from storbench.core.options import normalized_options, truthy
from storbench.core.schema_names import ALL_HOSTS
from storbench.core.specs import Manifest
from storbench.core.suggest import did_you_mean
from storbench.core.units import UnitError, job_size, parse_duration
from storbench.tools.base import Capabilities, RenderError, ToolAdapter, whole_rate

HOST_VARIABLE = "$storbench_host"
SEARCH_OPTIONS = ("iodepth", "rate", "rd_distribution")
ARRIVALS = {"poisson": "exponential", "linear": "deterministic"}  # vdbench rd distribution=
HOST_ARGUMENT = "storbench_host"
DEFAULT_VDBENCH_DIR = "/opt/vdbench"
DEFAULT_HD_USER = "root"  # the user its master logs in to the hosts as, unless told
SD_FILE = "vdb.file"
FSD_SUBDIR = "fsd"
RAW, FILESYSTEM = "raw", "filesystem"
FOR_LOOPS = ("forxfersize", "forrdpct", "forthreads", "forseekpct")
PASSTHROUGH_PREFIXES = ("sd_", "wd_", "fsd_", "fwd_", "rd_", "hd_")
GENERIC_OPTIONS = frozenset(
    {"rw", "bs", "iodepth", "numjobs", "rwmixread", "size", "runtime", "ramp_time", "direct"}
)
COMMON_OPTIONS = frozenset(
    {
        "workload",
        "rate",
        "compratio",
        "interval",
        "openflags",
        "run_name",
        "workload_name",
        "vdbench_dir",
        "vdbench_hosts",
        "multihost",
        *FOR_LOOPS,
    }
)
MODE_OPTIONS = {
    RAW: frozenset({"seekpct"}),
    FILESYSTEM: frozenset(
        {"depth", "width", "files", "fileio", "fileselect", "operation", "format"}
    ),
}
# vdbench's own keywords that storbench writes from its generic options
GENERIC_OF_OWN = {
    "xfersize": "bs",
    "elapsed": "runtime",
    "warmup": "ramp_time",
    "rdpct": "rwmixread",
    "threads": "iodepth",
}
# options storbench turns into numbers or keywords of its own: their text never reaches the file
DERIVED_OPTIONS = frozenset(
    {"workload", "multihost", "rw", "rwmixread", "numjobs", "interval", "runtime", "ramp_time",
     "direct"}
)  # fmt: skip
READS, WRITES = frozenset({"read", "randread"}), frozenset({"write", "randwrite"})
MIXED = frozenset({"rw", "readwrite", "randrw"})

# Pass storbench_host=<host> only to a job file that uses it: vdbench fails on unused ones.
_RUN = (
    'job="$1" out="$2" host="$3"; '
    f'if grep -q "[$]{HOST_ARGUMENT}" "$job"; then '
    f'exec vdbench -f "$job" -o "$out" "{HOST_ARGUMENT}=$host"; fi; '
    'exec vdbench -f "$job" -o "$out"'
)
# vdbench prints its banner, then fails to create this output folder: nothing is written.
_VERSION = (
    "command -v vdbench >/dev/null || { echo 'vdbench: not found on PATH' >&2; exit 127; }; "
    "out=$(vdbench -o /dev/null/storbench-version-probe 2>&1); "
    "printf '%s\\n' \"$out\" | grep -m1 'Vdbench distribution' "
    "|| { printf '%s\\n' \"$out\" >&2; exit 1; }"
)


class VdbenchJobError(RenderError):
    """An experiment's options cannot become a vdbench parameter file."""


class VdbenchAdapter(ToolAdapter):
    name = "vdbench"
    job_suffix = ".vdb"
    default_template = "vdbench/job.vdb.j2"
    install_hint = (
        "vdbench: download vdbench50407.zip from "
        "https://www.oracle.com/downloads/server-storage/vdbench-downloads.html (Oracle "
        "account), unzip it to /opt/vdbench, install Java (e.g. apt-get install "
        "default-jre-headless), and put a wrapper on PATH (a symlink breaks its class path): "
        "printf '#!/bin/sh\\nexec /opt/vdbench/vdbench \"$@\"\\n' > /usr/local/bin/vdbench "
        "&& chmod +x /usr/local/bin/vdbench"
    )
    capabilities = Capabilities(
        target_types=("directory", "block"),
        execution=("standalone", "service"),
        target_sets=True,
        search_metrics=("iops",),  # rd iorate holds an offered rate (raw workloads)
        interval_series=True,
        import_formats=("output folder", "flatfile.html"),
    )
    output_is_folder = True
    exit_statuses = {157: "vdbench's own failure exit, -99: see its message"}
    default_port = 5570  # its master's port; a second master at once takes 5571.. (8 tries)
    job_login_user = DEFAULT_HD_USER  # hd=default's user
    service_job_shared = True  # one parameter file with an hd= line per host
    service_per_run = True  # vdbench's master starts its slaves over ssh itself (hd shell=ssh)
    # histogram.html: buckets ending at 20, 40, 60, 80, 100, 200, 400, 600, 800 µs, 1, 2 ms ...
    histogram_bins_text = (
        "vdbench's response-time buckets: 20 µs wide up to 100 µs, then 2, 4, 6, 8 and 10 "
        "times each power of ten"
    )
    latency_basis_texts = {
        "lat": "vdbench's response time: from the start of an I/O request until its completion",
    }
    percentile_resolution_text = (
        "vdbench's percentiles are the upper bounds of its response-time buckets (the first "
        "ends at 20 µs, then 40, 60, 80, 100, 200, 400 µs ...): a percentile is only as fine as "
        "its bucket, and lies above a mean of fast I/Os (I/Os of 2 µs show p50 = 20 µs)"
    )
    search_options = SEARCH_OPTIONS

    # --- render ---------------------------------------------------------------------------

    def template_context(self, spec: dict) -> dict:

        return {
            "experiment": spec["experiment"],
            "run_id": spec["run_id"],
            "target": spec["target"],
            "options": normalized_options(spec["params"]),
            "point": spec["point"],
            "host_variable": HOST_VARIABLE,
            **parameter_file(spec),
        }

    def job_value_problem(self, option: str, text: str) -> str | None:
        """Lists storbench splits itself (for-loops, vdbench_hosts) are checked per item."""
        if option in DERIVED_OPTIONS:
            problem = None
        elif option in ("seekpct", "forseekpct"):
            items = [text] if option == "seekpct" else _loop_items(text)
            seek = (found for found in map(_seekpct_problem, items) if found)
            problem = next(seek, None) or _items_problem(items)
        elif option in FOR_LOOPS:
            problem = _items_problem(_loop_items(text))
        elif option == "vdbench_hosts":
            problem = _items_problem(_host_names(text))
        else:
            problem = value_problem(text)
        return problem or super().job_value_problem(option, text)

    def target_path_problem(self, path: str) -> str | None:
        return value_problem(path)

    def job_names_hosts(self, params: dict, execution: str) -> bool:
        """hd= system= for the spec's hosts (vdbench_hosts are names given by hand)."""
        return "vdbench_hosts" not in params and _drives_spec_hosts(params, execution)

    # --- run ------------------------------------------------------------------------------

    def command(self, job_path: str, output_path: str, host: str) -> list[str]:
        return ["sh", "-c", _RUN, "storbench-vdbench", job_path, output_path, host]

    def version_command(self) -> list[str]:
        return ["sh", "-c", _VERSION]

    def version_programs(self) -> tuple[str, ...]:
        return ()  # a script asks: its shell's file says nothing of the tool's version

    def version_of(self, printed: str) -> str | None:
        """'vdbench50407' of its banner, as its output's logfile.html records it."""
        # parsing only: render and run stay light
        from storbench.tools.vdbench_output import parse_version

        return parse_version(printed)

    def worker_command(self, controller: str, port: int, own_port: int) -> list[str]:
        return []  # nothing to start: the master starts a slave on each hd= host itself

    def controller_command(
        self, job_path: list[str], output_path: str, endpoints: list[str]
    ) -> list[str]:
        """One vdbench master here for every host (its hd= lines); the files are equal."""
        return self.command(job_path[0], output_path, "")

    def search_job_problems(self, job: dict) -> list[str]:
        """A search sets threads (iodepth), iorate (rate) and the arrival distribution."""
        problems = super().search_job_problems(job)
        if str(job.get("workload", RAW)) != RAW:
            problems.append("workload: a search holds a raw workload's iorate (not fwdrate)")
        return problems

    def probe_options(
        self, params: dict, iodepth: int, rate_per_job: int | None, arrivals: str | None
    ) -> dict:
        """Closed loop: iodepth threads per SD at iorate=max; open loop: iorate on the host
        with vdbench's exponential (Poisson) or deterministic (linear) arrivals."""
        if rate_per_job is None:
            return {**params, "iodepth": iodepth}
        distribution = ARRIVALS[arrivals or "poisson"]
        return {**params, "iodepth": iodepth, "rate": rate_per_job, "rd_distribution": distribution}

    def search_rate_text(self, arrivals: str) -> str:
        return (
            f"vdbench iorate= of each host's run definition, the offered rate split evenly over"
            f" hosts, distribution={ARRIVALS.get(arrivals, arrivals)} ({arrivals} arrivals)"
        )

    search_latency_text = (
        "percentiles from vdbench's response-time histogram summed over every host (never "
        "averaged percentiles); mean weighted by I/O count"
    )

    def offered_iops(self, params: dict, hosts: int) -> float | None:
        # a raw workload's rd iorate is its rate on the host; fwdrate counts file operations
        if params.get("workload", "raw") != "raw":
            return None
        rate = whole_rate(params.get("rate"))
        return None if rate is None else rate * hosts

    def output_name(self, host: str) -> str:
        return f"{host}.vdbench"

    def target_directory(self, target: dict, host: str) -> str | None:
        if target.get("type") != "directory":
            return None
        path = target["path"].rstrip("/")
        return f"{path}/{host}" if target.get("per_host_subdir", True) else path

    # --- parse ----------------------------------------------------------------------------

    def parse(self, manifest: Manifest, raw_dir: Path, base: dict) -> list[dict]:
        # parsing only: render and run stay light
        from storbench.tools import vdbench_output

        rows = []
        aggregate_only = []
        if manifest.execution == "service" and manifest.controller:  # one master's output
            folder = raw_dir / manifest.controller["output"]
            runs = vdbench_output.read_runs(vdbench_output.flatfile_path(folder))
            host_base = _with_version(base, manifest.hosts[0].get("tool_version"))
            # one host may be the master of hosts named by hand (vdbench_hosts)
            if len(manifest.hosts) == 1 and len(vdbench_output.reported_hosts(folder)) <= 1:
                rows = vdbench_output.result_rows(
                    runs, host=manifest.hosts[0]["name"], base=host_base, folder=folder
                )
                return rows + aggregate_hosts(rows)
            names = [host["name"] for host in manifest.hosts]
            return _driven_host_rows(names, runs, host_base, folder) + _all_rows(
                runs, host_base, folder
            )
        for host in manifest.hosts:
            folder = raw_dir / host["output"]
            runs = vdbench_output.read_runs(vdbench_output.flatfile_path(folder))
            host_base = _with_version(base, host.get("tool_version"))
            if len(vdbench_output.reported_hosts(folder)) > 1:  # a master of its own hosts
                aggregate_only += _driven_host_rows([], runs, host_base, folder)
                aggregate_only += _all_rows(runs, host_base, folder)
            else:
                rows += vdbench_output.result_rows(
                    runs, host=host["name"], base=host_base, folder=folder
                )
        return rows + aggregate_hosts(rows) + aggregate_only

    def parse_timeseries(self, manifest: Manifest, raw_dir: Path, base: dict) -> list[dict]:
        # parsing only: render and run stay light
        from storbench.tools import vdbench_output

        rows = []
        if manifest.execution == "service" and manifest.controller:
            flatfile = vdbench_output.flatfile_path(raw_dir / manifest.controller["output"])
            runs = vdbench_output.read_runs(flatfile)
            hosts_reported = len(vdbench_output.reported_hosts(flatfile.parent))
            several = len(manifest.hosts) > 1 or hosts_reported > 1
            name = ALL_HOSTS if several else manifest.hosts[0]["name"]
            return vdbench_output.timeseries_rows(runs, host=name, base=base, source=flatfile)
        for host in manifest.hosts:
            flatfile = vdbench_output.flatfile_path(raw_dir / host["output"])
            runs = vdbench_output.read_runs(flatfile)
            several = len(vdbench_output.reported_hosts(flatfile.parent)) > 1
            name = ALL_HOSTS if several else host["name"]
            rows += vdbench_output.timeseries_rows(runs, host=name, base=base, source=flatfile)
        return rows

    def recognizes(self, path: Path, head: bytes) -> bool:
        return b"<title>Vdbench" in head and b"flatfile" in head

    def claims_folder(self, folder: Path) -> bool:
        flatfile = folder / "flatfile.html"
        return flatfile.is_file() and self.recognizes(flatfile, flatfile.read_bytes()[:4096])

    def import_series(self, paths: list[Path], base: dict) -> list[dict]:
        """vdbench's interval lines (flatfile.html), per run as the rows are."""
        # parsing only: render and run stay light
        from storbench.tools import vdbench_output

        rows = []
        for path in paths:
            flatfile = vdbench_output.flatfile_path(Path(path))
            hosts = vdbench_output.reported_hosts(flatfile.parent)
            host = ALL_HOSTS if len(hosts) > 1 else (hosts[0] if hosts else "localhost")
            for run in vdbench_output.read_runs(flatfile):
                run_base = {**base, "run_id": run.label}
                rows += vdbench_output.timeseries_rows(
                    [run], host=host, base=run_base, source=flatfile
                )
        return rows

    def import_outputs(self, paths: list[Path], base: dict) -> list[dict]:
        """Output folders (or their flatfile.html); run_id is the RD name plus loop values."""
        # parsing only: render and run stay light
        from storbench.tools import vdbench_output

        rows = []
        for path in paths:
            flatfile = vdbench_output.flatfile_path(Path(path))
            runs = vdbench_output.read_runs(flatfile)
            hosts = vdbench_output.reported_hosts(flatfile.parent)
            facts = vdbench_output.folder_facts(flatfile.parent)  # once, for all its runs
            # a multi-host output's hosts by their addresses (its parameter file's system=)
            driven = (
                vdbench_output.driven_host_runs(flatfile.parent, runs) if len(hosts) > 1 else []
            )
            path_rows = []
            for index, run in enumerate(runs):
                run_base = {**base, "run_id": run.label, "raw_path": str(path)}
                if len(hosts) > 1:
                    path_rows += vdbench_output.hosts_result_rows(
                        [(system, [host_runs[index]]) for system, host_runs in driven],
                        base=run_base, folder=flatfile.parent, with_errors=False, facts=facts,
                    )  # fmt: skip
                    path_rows += _all_rows([run], run_base, flatfile.parent, facts)
                    continue
                host = hosts[0] if hosts else "localhost"
                host_rows = vdbench_output.result_rows(
                    [run], host=host, base=run_base, folder=flatfile.parent, facts=facts
                )
                path_rows += host_rows + aggregate_hosts(host_rows)
            rows += path_rows
        return rows


def _with_version(base: dict, banner: str | None) -> dict:
    # parsing only: render and run stay light
    from storbench.tools.vdbench_output import parse_version

    version = parse_version(banner or "")
    return {**base, "tool_version": version} if version else base


def _driven_host_rows(names: list[str], runs: list, base: dict, folder: Path) -> list[dict]:
    """A multi-host run's rows per host, from the master's host reports (hd1.html ...): the
    host of that name, else the host of ``names`` (the run's hosts, as their hd lines were
    rendered, system= a host's tool address) in the hd's place, else the system= itself;
    [] when a report is missing or differs (the run's 'all' rows stand alone)."""
    # parsing only: render and run stay light
    from storbench.tools import vdbench_output

    driven = vdbench_output.driven_host_runs(folder, runs)
    in_order = len(driven) == len(names)
    named = [
        (system if system in names else names[index] if in_order else system, host_runs)
        for index, (system, host_runs) in enumerate(driven)
    ]
    return vdbench_output.hosts_result_rows(named, base=base, folder=folder, with_errors=False)


def _all_rows(runs: list, base: dict, folder: Path, facts: tuple | None = None) -> list[dict]:
    # parsing only: render and run stay light
    from storbench.tools.vdbench_output import result_rows

    return result_rows(runs, host=ALL_HOSTS, base=base, folder=folder, facts=facts)


# --- parameter file ----------------------------------------------------------------------


def parameter_file(spec: dict) -> dict:
    """The parameter file: general, host_definitions, storage, workloads, run.

    Each definition is {"keyword": "sd", "name": "sd1", "params": [(key, value), ...]},
    rendered ``sd=sd1,key=value,...``; ``general`` is a list of (key, value).
    """
    params = dict(spec["params"])
    mode = str(params.get("workload", RAW))
    if mode not in (RAW, FILESYSTEM):
        raise VdbenchJobError(
            f"vdbench: workload must be {RAW} or {FILESYSTEM}, got {mode!r}", "workload"
        )
    _check_options(params, mode)
    hosts = _hd_hosts(
        _driven_hosts(params, spec.get("hosts") or [], spec.get("execution") or "standalone"),
        spec.get("addresses") or {},
        {} if "hd_user" in params else spec.get("users") or {},
    )
    target = spec["target"]
    build = _raw_definitions if mode == RAW else _filesystem_definitions
    storage, workloads, run = build(params, target, hosts)
    general = [("compratio", params["compratio"])] if "compratio" in params else []
    return {
        "workload": mode,
        "general": general,
        "host_definitions": _host_definitions(params, hosts),
        "storage": storage,
        "workloads": workloads,
        "run": run,
    }


def _check_options(params: dict, mode: str) -> None:
    known = GENERIC_OPTIONS | COMMON_OPTIONS | MODE_OPTIONS[mode]
    unknown = [
        option
        for option in params
        if option not in known and not option.startswith(PASSTHROUGH_PREFIXES)
    ]
    for option in unknown:
        if generic := GENERIC_OF_OWN.get(option):
            generic = "numjobs" if option == "threads" and mode == FILESYSTEM else generic
            raise VdbenchJobError(f"vdbench: {option}: use storbench's option {generic!r}", option)
    if unknown:
        raise VdbenchJobError(
            f"vdbench ({mode} workload): unknown option(s) {', '.join(sorted(unknown))}; "
            "vdbench parameters go in as sd_/wd_/fsd_/fwd_/rd_/hd_<name>",
            unknown[0] if len(unknown) == 1 else None,
        )
    if mode == RAW and _integer(params.get("numjobs", 1), "numjobs") != 1:
        raise VdbenchJobError(
            "vdbench raw workloads have no numjobs; use iodepth (threads per SD)", "numjobs"
        )


def _driven_hosts(params: dict, spec_hosts: list, execution: str = "standalone") -> list:
    """Hosts one vdbench master drives (hd=): vdbench_hosts, or the spec's in service mode
    (or with multihost)."""
    if "vdbench_hosts" in params:
        return _host_names(params["vdbench_hosts"])
    return list(spec_hosts) if _drives_spec_hosts(params, execution) else []


def _drives_spec_hosts(params: dict, execution: str) -> bool:
    return execution == "service" or truthy(params.get("multihost", False))


def _host_names(value) -> list[str]:
    return [host.strip() for host in str(value).split(",") if host.strip()]


def _hd_hosts(hosts: list[str], addresses: dict, users: dict) -> list[dict]:
    """hd= per driven host; system= is where the master's ssh and its slaves' RMI reach the
    host: its tool address (data_address, else address) when it is a configured host; user=
    the SSH user its host group logs in with, where it names one (else hd=default's)."""
    hd_hosts = [
        {"hd": f"hd{index}", "name": name, "system": bare(str(addresses.get(name, name))),
         **({"user": str(users[name])} if name in users else {})}
        for index, name in enumerate(hosts, start=1)
    ]  # fmt: skip
    for host in hd_hosts:
        for key in ("system", "user"):
            value = host.get(key)
            if key in host and (problem := value_problem(value) if value else "empty"):
                raise VdbenchJobError(f"vdbench: host {host['name']}: {key} {value!r}: {problem}")
    return hd_hosts


def _host_definitions(params: dict, hosts: list[dict]) -> list[dict]:
    if not hosts:
        return []
    defaults = {
        "vdbench": params.get("vdbench_dir", DEFAULT_VDBENCH_DIR),
        "user": DEFAULT_HD_USER,
        "shell": "ssh",
        **_passthrough(params, "hd_"),
    }
    return [
        _definition("hd", "default", list(defaults.items())),
        *[_definition("hd", host["hd"], _hd_values(host)) for host in hosts],
    ]


def _hd_values(host: dict) -> list[tuple[str, str]]:
    return [("system", host["system"]), *([("user", host["user"])] if "user" in host else [])]


def _raw_definitions(params: dict, target: dict, hosts: list[dict]) -> tuple:
    if target["type"] == "directory" and "size" not in params:
        raise VdbenchJobError("vdbench: a directory target needs size (the lun file's size)")
    shared = [
        *_optional("size", _size(params.get("size"))),
        *_optional("threads", params.get("iodepth")),
        *_optional("openflags", _openflags(params)),
        *_passthrough(params, "sd_").items(),
    ]
    members = target.get("members") or [target]
    if hosts:
        storage = [_definition("sd", "default", shared)] if shared else []
        storage += [
            _definition(
                "sd", _sd_name(index, number, members), [("host", host["hd"]), ("lun", lun)]
            )
            for index, host in enumerate(hosts, start=1)
            for number, lun in enumerate((_lun(m, host["name"]) for m in members), start=1)
        ]
        sd = "sd*"
    elif len(members) > 1:
        storage = [_definition("sd", "default", shared)] if shared else []
        storage += [
            _definition("sd", f"sd{number}", [("lun", _lun(member, HOST_VARIABLE))])
            for number, member in enumerate(members, start=1)
        ]
        sd = "sd*"
    else:
        storage = [_definition("sd", "sd1", [("lun", _lun(target, HOST_VARIABLE)), *shared])]
        sd = "sd1"
    workload_name = str(params.get("workload_name", "wd1"))
    wd = [
        ("sd", sd),
        *_optional("xfersize", _size(params.get("bs"))),
        *_optional("rdpct", _rdpct(params)),
        *_optional("seekpct", _seekpct(params)),
        *_passthrough(params, "wd_").items(),
    ]
    run = _run_definition(params, ("wd", workload_name), ("iorate", params.get("rate", "max")))
    return storage, [_definition("wd", workload_name, wd)], run


def _filesystem_definitions(params: dict, target: dict, hosts: list[dict]) -> tuple:
    if target.get("members"):
        raise VdbenchJobError("vdbench: a target set runs a raw workload (one SD per LUN)")
    if target["type"] != "directory":
        raise VdbenchJobError("vdbench: a filesystem workload needs a directory target")
    missing = [option for option in ("files", "size") if option not in params]
    if missing:
        raise VdbenchJobError(f"vdbench filesystem workload: set {' and '.join(missing)}")
    fsd = [
        ("depth", params.get("depth", 1)),
        ("width", params.get("width", 1)),
        ("files", params["files"]),
        ("size", _size(params["size"])),
        *_optional("openflags", _openflags(params)),
        *_passthrough(params, "fsd_").items(),
    ]
    workload_name = str(params.get("workload_name", "fwd1"))
    operation, rdpct = _operation(params)
    fwd = [
        ("operation", operation),
        *_optional("rdpct", rdpct),
        *_optional("xfersize", _size(params.get("bs"))),
        *_optional("fileio", _fileio(params)),
        ("fileselect", params.get("fileselect", "random")),
        *_optional("threads", params.get("numjobs", params.get("iodepth"))),
        *_passthrough(params, "fwd_").items(),
    ]
    if hosts:
        storage = [_definition("fsd", "default", fsd)] + [
            _definition("fsd", f"fsd{i}", [("anchor", _anchor(target, host["name"]))])
            for i, host in enumerate(hosts, start=1)
        ]
        workloads = [_definition("fwd", "default", fwd)] + [
            _definition(
                "fwd", f"{workload_name}_{host['hd']}", [("fsd", f"fsd{i}"), ("host", host["hd"])]
            )
            for i, host in enumerate(hosts, start=1)
        ]
        fwd_names = f"{workload_name}_*"
    else:
        storage = [_definition("fsd", "fsd1", [("anchor", _anchor(target, HOST_VARIABLE)), *fsd])]
        workloads = [_definition("fwd", workload_name, [("fsd", "fsd1"), *fwd])]
        fwd_names = workload_name
    run = _run_definition(
        params,
        ("fwd", fwd_names),
        ("fwdrate", params.get("rate", "max")),
        ("format", _yes_no(params.get("format", "yes"))),
    )
    return storage, workloads, run


def _run_definition(params: dict, *workload: tuple) -> dict:
    interval = _integer(params.get("interval", 1), "interval")
    elapsed = _seconds(params.get("runtime"), "runtime")
    warmup = _seconds(params.get("ramp_time"), "ramp_time")
    if interval < 1:
        raise VdbenchJobError(
            f"vdbench: interval must be at least 1 second, got {interval}", "interval"
        )
    if elapsed is not None and (elapsed % interval or elapsed < 2 * interval):
        raise VdbenchJobError(
            f"vdbench: runtime ({elapsed} s) must be a multiple of interval ({interval} s) "
            "and at least twice it",
            "runtime",
        )
    if warmup is not None and warmup % interval:
        raise VdbenchJobError(
            f"vdbench: ramp_time ({warmup} s) must be a multiple of interval ({interval} s)",
            "ramp_time",
        )
    loops = [
        (option, _loop_values(option, params[option])) for option in FOR_LOOPS if option in params
    ]
    return _definition(
        "rd",
        str(params.get("run_name", "rd1")),
        [
            *workload,
            *_optional("elapsed", elapsed),
            *_optional("warmup", warmup),
            ("interval", interval),
            *loops,
            *_passthrough(params, "rd_").items(),
        ],
    )


def _definition(keyword: str, name: str, params: list) -> dict:
    return {"keyword": keyword, "name": name, "params": [(k, str(v)) for k, v in params]}


def _optional(key: str, value) -> list:
    return [] if value is None else [(key, value)]


def _passthrough(params: dict, prefix: str) -> dict:
    return {
        option.removeprefix(prefix): _scalar(value)
        for option, value in params.items()
        if option.startswith(prefix)
    }


def _scalar(value):
    if isinstance(value, bool):
        return "yes" if value else "no"
    return value


def _sd_name(host_index: int, number: int, members: list) -> str:
    """sd<host> for one LUN per host, sd<host>_<lun> for a target set (several LUNs each)."""
    return f"sd{host_index}" if len(members) == 1 else f"sd{host_index}_{number}"


def _lun(target: dict, host: str) -> str:
    if target["type"] == "block":
        return target["path"]
    return f"{_host_directory(target, host)}/{SD_FILE}"


def _anchor(target: dict, host: str) -> str:
    return f"{_host_directory(target, host)}/{FSD_SUBDIR}"


def _host_directory(target: dict, host: str) -> str:
    path = target["path"].rstrip("/")
    return f"{path}/{host}" if target.get("per_host_subdir", True) else path


def _size(value) -> str | None:
    """A size as vdbench reads it (binary k/m/g/t); other text (distributions) as given."""

    if value is None:
        return None
    try:
        return job_size(value)
    except UnitError:
        return str(value)


def _openflags(params: dict) -> str | None:
    if "openflags" in params:
        return str(params["openflags"])
    return "o_direct" if truthy(params.get("direct", 0)) else None


def _rw(params: dict) -> str | None:
    rw = params.get("rw")
    if rw is None:
        return None
    rw = str(rw)
    if rw not in READS | WRITES | MIXED:
        raise VdbenchJobError(f"vdbench: unsupported rw {rw!r} (read, write, rw, rand...)", "rw")
    return rw


def _rdpct(params: dict) -> int | None:
    rw = _rw(params)
    if rw in READS:
        return 100
    if rw in WRITES:
        return 0
    if "rwmixread" in params:
        return _percent(params["rwmixread"], "rwmixread")
    return 50 if rw in MIXED else None


def _percent(value, option: str) -> int:
    number = _integer(value, option)
    if not 0 <= number <= 100:
        raise VdbenchJobError(
            f"vdbench: {option} is a percentage of 0 to 100, got {value!r}", option
        )
    return number


def _seekpct(params: dict):
    if "seekpct" in params:
        return params["seekpct"]
    rw = _rw(params)
    return None if rw is None else (100 if rw.startswith("rand") else 0)


def _fileio(params: dict) -> str | None:
    if "fileio" in params:
        return str(params["fileio"])
    rw = _rw(params)
    return None if rw is None else ("random" if rw.startswith("rand") else "sequential")


def _operation(params: dict) -> tuple[str, int | None]:
    """fwd operation and rdpct: a read/write mix is operation=read with rdpct."""
    if "operation" in params:
        rdpct = _percent(params["rwmixread"], "rwmixread") if "rwmixread" in params else None
        return str(params["operation"]), rdpct
    rdpct = _rdpct(params)
    if rdpct == 0:
        return "write", None
    if rdpct is None or rdpct == 100:
        return "read", None
    return "read", rdpct


def _yes_no(value) -> str:
    return _scalar(value) if isinstance(value, bool) else str(value)


def _integer(value, option: str) -> int:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise VdbenchJobError(
            f"vdbench: {option} must be a whole number, got {value!r}", option
        ) from None
    if not number.is_integer():
        raise VdbenchJobError(f"vdbench: {option} must be a whole number, got {value!r}", option)
    return int(number)


def _seconds(value, option: str) -> int | None:

    if value is None:
        return None
    seconds = parse_duration(value)
    if not seconds.is_integer():
        raise VdbenchJobError(f"vdbench: {option} must be whole seconds, got {value!r}", option)
    return int(seconds)


def _loop_values(option: str, value) -> str:
    """'4k, 64k' -> '(4k,64k)'; sizes of forxfersize written as vdbench reads them."""
    items = _loop_items(value)
    if option == "forxfersize":
        items = [_size(item) or item for item in items]
    return f"({','.join(items)})"


def _loop_items(value) -> list[str]:
    return [item.strip() for item in str(value).strip().strip("()").split(",") if item.strip()]


# --- values in a parameter file ----------------------------------------------------------

# vdbench's quoting stores a quoted blank, ',', '=', '-' as these and turns them back
_ESCAPES = {"[": "a blank", "^": "','", "{": "'='", "}": "'-'"}


def value_problem(text: str) -> str | None:
    """Why vdbench would not read text as one parameter value, or None (see module doc)."""
    if " " in text:
        return "vdbench ends a parameter line at a blank (the rest is ignored); no blanks"
    if '"' in text:
        return "vdbench reads '\"' as a quote (hiding blanks and commas); the value cannot hold it"
    if escapes := [f"{char!r} into {meant}" for char, meant in _ESCAPES.items() if char in text]:
        return f"vdbench turns {', '.join(escapes)} (its quoting); the value cannot hold them"
    if "$" in text or "!" in text:
        return "vdbench replaces $name and !name with command-line variables; no '$' or '!'"
    if "#host" in text:
        return "vdbench replaces #host and #hosts with host numbers"
    return _list_problem(text)


def _list_problem(text: str) -> str | None:
    """A ',' outside parentheses starts another parameter; an open '(' takes in the rest."""
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")" and depth == 0:
            return "vdbench stops on a ')' without its '('"
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            return (
                "vdbench reads ',' outside parentheses as the start of another parameter "
                "(write a list as (a,b,...))"
            )
    if depth:
        return "vdbench reads the rest of the line into an unclosed '(' (parameters lost)"
    return None


SEEKPCT_WORDS = ("eof", "seq", "sequential", "random")


def _seekpct_problem(text: str) -> str | None:
    """A seekpct vdbench would refuse: a percentage out of 0..100, or a misspelt word."""
    try:
        percent = float(text)
    except ValueError:
        meant = "" if text.lower() in SEEKPCT_WORDS else did_you_mean(text.lower(), SEEKPCT_WORDS)
        # a word far from vdbench's is vdbench's to judge
        return f"vdbench has no seekpct={text}{meant}" if meant else None
    if not 0 <= percent <= 100:
        return f"seekpct is a percentage of random seeks (0 to 100), not {text}"
    return None


def _items_problem(items: list[str]) -> str | None:
    """The problem of the first bad item of a comma list storbench splits and rejoins."""
    for item in items:
        if problem := value_problem(item):
            return f"item {item!r}: {problem}"
    return None


ADAPTER = VdbenchAdapter()
