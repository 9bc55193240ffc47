"""fio: job files from Jinja templates, standalone runs per host, json+ parsing."""

from __future__ import annotations

import functools
import json
import re
import shlex
from pathlib import Path

from storbench.core import start_hook
from storbench.core.addresses import bare, is_ipv6, split_endpoint
from storbench.core.hostfacts import has_expression
from storbench.core.options import normalized_options, truthy
from storbench.core.specs import Manifest
from storbench.core.units import UnitError, parse_duration, parse_size
from storbench.tools.base import Capabilities, ToolAdapter, whole_rate

HOST_VARIABLE = "STORBENCH_HOST"
# fio reads these on its command line only, not in job files
COMMAND_LINE_OPTIONS = ("status_interval",)
# a job-file line is 'option=value' up to the first ';' or '#': fio reads the rest as a comment
COMMENT_CHARACTERS = (";", "#")
# fio expands ${VAR} and its keywords ($ncpus, $mb_memory ...) in job files
_EXPANSION = re.compile(r"\$(\{|[A-Za-z_])")
# what fio --client writes when a host's service or machine goes away mid-run
_INCLUDE = re.compile(r"^[ \t]*include[ \t]+(\S[^\n]*?)[ \t]*$", re.MULTILINE)
_LOST_CLIENT = re.compile(r"client: host=(\S+) disconnected")


# A latency-SLO search sets these itself for every probe.
SEARCH_OPTIONS = ("iodepth", "rate_iops", "rate", "rate_min", "rate_process", "rate_cycle")
DEFAULT_STATUS_INTERVAL = "1s"  # fault and soak runs: one interval row per second
# A host-level read/write split: each host's pattern becomes its read or write counterpart.
READ_PATTERNS = {"read": "read", "write": "read", "randread": "randread", "randwrite": "randread"}
WRITE_PATTERNS = {
    "read": "write",
    "write": "write",
    "randread": "randwrite",
    "randwrite": "randwrite",
}
PATTERNS_WITH_WRITES = {"write", "randwrite", "rw", "readwrite", "randrw", "trimwrite"}
SYNC_ENGINES = frozenset({"psync", "sync", "pvsync", "pvsync2", "vsync"})


class FioAdapter(ToolAdapter):
    name = "fio"
    job_suffix = ".fio"
    default_template = "fio/job.fio.j2"
    install_hint = "apt-get install fio (Debian/Ubuntu), dnf install fio (RHEL/Fedora)"
    # fio's HOWTO: rw=read, bs=4k, iodepth=1, numjobs=1 unless a job says otherwise
    parameter_defaults = {"rw": "read", "bs": 4096, "iodepth": 1, "numjobs": 1}
    capabilities = Capabilities(
        target_types=("directory", "block"),
        execution=("standalone", "service"),
        target_sets=True,
        host_split=True,
        schedules=True,
        prepared_runs=True,
        preparation=True,
        search_metrics=("iops",),
        interval_series=True,
        import_formats=("json", "json+", "terse (--minimal)"),
    )
    preparation_template = "fio/prepare.fio.j2"
    # measured here: 0.27 s from exec to a null job's exec_prerun, 0.14 s of it CPU (fio's
    # start-up, its clock calibration among it); twice that
    start_setup_s = 0.5
    default_port = 8765  # fio's own default server port
    search_options = SEARCH_OPTIONS

    def template_context(self, spec: dict) -> dict:

        target = spec["target"]
        host = spec.get("host")
        members = [
            {**member, "directory": _job_directory(member, host)}
            for member in target.get("members", [])
        ]
        return {
            "experiment": spec["experiment"],
            "run_id": spec["run_id"],
            "target": target,
            "directory": _job_directory(target, host),
            # a target set: one job section per target, each reported on its own (new_group)
            "members": members,
            "options": {
                option: value
                for option, value in normalized_options(spec["params"]).items()
                if option not in COMMAND_LINE_OPTIONS
            },
            "point": spec["point"],
            # per-host job files put options in the job section: client/server output has one
            # 'global options' block for all clients, but per-client 'job options'
            "per_host": "host" in spec,
            # each host's fio waits for the run's release after its set-up, and stamps its start
            "start_hook": _start_hook(spec),
        }

    def option_problems(self, sections: list[dict]) -> dict[str, str]:
        # lazy: a fio process at check time only
        from storbench.tools import fio_options

        normalized = [
            normalized_options({k: 1 if has_expression(v) else v for k, v in section.items()})
            for section in sections
        ]
        problems = fio_options.option_problems(normalized, frozenset(COMMAND_LINE_OPTIONS))
        for section in sections:  # what --parse-only takes and the run refuses
            if "size" not in problems and (problem := _size_below_block(section)):
                problems["size"] = problem
        return problems

    def bytes_per_host(self, params: dict) -> int | None:
        try:
            jobs = int(params.get("numjobs", 1))
            if "filesize" in params:
                per_job = parse_size(params["filesize"]) * int(params.get("nrfiles", 1))
            elif "size" in params:
                per_job = parse_size(params["size"])
            else:
                return None
        except (UnitError, ValueError, TypeError):  # a percentage, a range, a host fact
            return None
        return per_job * jobs

    def command_options(self, params: dict) -> dict[str, str]:
        found = {option: str(params[option]) for option in EXEC_OPTIONS if option in params}
        if str(params.get("ioengine", "")).strip() == "exec":
            found["ioengine"] = f"exec: {params.get('program', '(no program)')}"
        return found

    def job_value_problem(self, option: str, text: str) -> str | None:
        return (
            value_problem(text)
            or placement_problem(option, text)
            or mix_problem(option, text)
            or runtime_problem(option, text)
            or super().job_value_problem(option, text)
        )

    def target_path_problem(self, path: str) -> str | None:
        return path_problem(path)

    def own_job_problem(self, text: str) -> str | None:
        if found := _INCLUDE.search(text):
            line = text.count("\n", 0, found.start()) + 1
            return (
                f"line {line}: 'include {found.group(1)}' is read where fio runs, and storbench"
                " sends the hosts only the job file itself: write the included options into it"
            )
        return None

    def command(self, job_path: str, output_path: str, host: str) -> list[str]:
        return [
            "env",
            f"{HOST_VARIABLE}={host}",
            "fio",
            "--output-format=json+",
            f"--output={output_path}",
            job_path,
        ]

    def run_command(self, job_path: str, output_path: str, host: str, params: dict) -> list[str]:
        """With status_interval, fio also prints a cumulative report every interval."""
        argv = self.command(job_path, output_path, host)
        if "status_interval" in params:
            seconds = max(1, round(parse_duration(params["status_interval"])))
            argv.insert(argv.index("fio") + 1, f"--status-interval={seconds}")
        return argv

    def version_command(self) -> list[str]:
        return ["fio", "--version"]

    def pass_job(self, spec, host_index: int, host: str) -> tuple[dict, list[dict]]:
        from storbench.tools import fio_preparation  # lazy: preparation steps only

        return fio_preparation.pass_sections(spec, host_index, host, self.target_directory)

    def round_job(self, spec, host_index: int, host: str) -> tuple[dict, list[dict]]:
        from storbench.tools import fio_preparation  # lazy: preparation steps only

        return fio_preparation.round_sections(spec, host_index, host, self.target_directory)

    def dataset_job(self, spec, host: str) -> tuple[dict, list[dict]]:
        from storbench.tools import fio_preparation  # lazy: preparation steps only

        return fio_preparation.dataset_sections(spec, host, self.target_directory)

    def host_requirements(
        self, job: dict, sweep: dict, execution: str = "standalone"
    ) -> list[dict]:
        """Each ioengine loads on the host (a job file's --parse-only does not load it)."""
        engines = [job.get("ioengine"), *(sweep.get("ioengine") or [])]
        return [
            {
                "problem": f"fio cannot load ioengine {engine!r}",
                "argv": ["fio", "--parse-only", "--name=storbench-check", f"--ioengine={engine}"],
            }
            for engine in dict.fromkeys(engines)
            if isinstance(engine, str) and engine and not has_expression(engine)
        ]

    def service_start_command(self, host: str, port: int) -> list[str]:
        return ["fio", f"--server={_fio_address(host)},{port}"]

    def controller_command(
        self, job_path: list[str], output_path: str, endpoints: list[str]
    ) -> list[str]:
        """One fio client for every server; each --client is followed by that host's job file."""
        argv = ["fio", "--output-format=json+", f"--output={output_path}"]
        for endpoint, host_job in zip(endpoints, job_path, strict=True):
            address, port = split_endpoint(endpoint)
            argv += [f"--client={_fio_address(address)},{port}", host_job]
        return argv

    interval_series_hint = "set status_interval in the job, e.g. 1s"
    histogram_bins_text = "fio's log-linear bins"
    latency_basis_texts = {
        "clat": "completion latency (clat): from submission of an I/O until its completion",
        "lat": "total latency (lat = slat + clat): from creation of an I/O until its completion",
    }

    def with_interval_series(self, job: dict) -> dict:
        """fio jobs report every second unless they say otherwise (the series is the evidence)."""
        if "status_interval" not in job:
            return {**job, "status_interval": DEFAULT_STATUS_INTERVAL}
        return job

    def role_options(self, params: dict, role: str) -> dict:
        patterns = READ_PATTERNS if role == "read" else WRITE_PATTERNS
        return {**params, "rw": patterns[params["rw"]]}

    def role_problem(self, params: dict) -> str | None:
        if "rw" not in params:
            return "needs a job or sweep 'rw' to split"
        if params["rw"] not in READ_PATTERNS:
            return (
                f"rw {params['rw']!r} has no read/write counterpart "
                f"(use one of {', '.join(READ_PATTERNS)})"
            )
        return None

    def search_job_problems(self, job: dict) -> list[str]:
        problems = super().search_job_problems(job)
        numjobs = job.get("numjobs", 1)
        if has_expression(numjobs):
            return problems  # the config allows {hosts} and storage facts only
        if not isinstance(numjobs, int) or isinstance(numjobs, bool) or numjobs < 1:
            problems.append(f"numjobs: a search needs a whole number >= 1, not {numjobs!r}")
        return problems

    def job_warnings(self, job: dict, sweep: dict) -> dict[str, str]:
        zipped = sweep.get("zip") or {}

        def values(option: str) -> list:
            return [*([job[option]] if option in job else []), *sweep.get(option, ()),
                    *zipped.get(option, ())]  # fmt: skip

        engines = [str(engine) for engine in values("ioengine")] or ["psync"]
        depths = [d for d in values("iodepth") if type(d) is int and d > 1]
        synchronous = [engine for engine in engines if engine in SYNC_ENGINES]
        warnings = {}
        if synchronous and depths:
            default = "" if values("ioengine") else " (fio's default)"
            warnings["iodepth"] = (
                f"{max(depths)} with ioengine {synchronous[0]}{default}: a synchronous engine"
                " keeps one I/O in flight per job whatever iodepth says; set ioengine: libaio or"
                " io_uring for a queue depth (numjobs for more jobs)"
            )
        unbuffered = [truthy(v) for v in values("direct")] + [
            not truthy(v) for v in values("buffered")
        ]
        if "libaio" in engines and not any(unbuffered) and depths:
            warnings["ioengine"] = (
                "libaio without direct: 1: Linux queues native AIO only for direct I/O; buffered,"
                " each I/O completes as it is submitted, so iodepth is not the I/Os in flight"
            )
        return warnings

    def search_job_warnings(self, job: dict) -> list[str]:
        writes = str(job.get("rw", "read")).partition(":")[0] in PATTERNS_WITH_WRITES
        files = job.get("nrfiles", 1)
        engine = str(job.get("ioengine", "psync"))
        if writes and str(files) != "1" and engine not in SYNC_ENGINES:
            # measured here, fio 3.33: 8 of 12 such probes abort (libaio, 2 files per job,
            # openfiles: 1 too); nrfiles: 1 or psync: none of 12
            return [
                f"nrfiles: {files!r} with writes at an offered rate (rate_iops) through "
                f"{engine}: fio 3.33 aborts in rate_ddir ('Assertion ddir_rw(ddir) failed') in "
                "most such runs; use nrfiles: 1 for the search, or a synchronous ioengine"
            ]
        return []

    def jobs_per_host(self, params: dict) -> int:
        return int(params.get("numjobs", 1))

    def probe_options(
        self, params: dict, iodepth: int, rate_per_job: int | None, arrivals: str | None
    ) -> dict:
        if rate_per_job is None:
            return {**params, "iodepth": iodepth}
        return {**params, "iodepth": iodepth, "rate_iops": rate_per_job, "rate_process": arrivals}

    def search_rate_text(self, arrivals: str) -> str:
        return (
            f"fio rate_iops split evenly over hosts and jobs, rate_process={arrivals}. fio"
            " measures latency from submission, so a probe whose achieved rate falls short of"
            " the offered one fails: queueing before submission is not in its latency"
        )

    search_latency_text = (
        "percentiles from fio's histogram bins summed over every host and job (never averaged "
        "percentiles); mean weighted by I/O count"
    )

    def start_stamp_names(self, spec: dict) -> list[str]:
        """Files the job sections' exec_prerun leave in the service's folder (fio names them)."""
        sections = [m["name"] for m in spec["target"].get("members", [])] or [spec["run_id"]]
        return [f"{section}.prerun.txt" for section in sections]

    def hook_output_names(self, job_text: str) -> list[str]:
        """fio saves each job section's exec_prerun output as <section>.prerun.txt."""
        sections = SECTION_HEADER.findall(job_text)
        return [f"{section}.prerun.txt" for section in sections if section != "global"]

    def offered_iops(self, params: dict, hosts: int) -> float | None:
        # rate_iops is per job; 'r,w' pairs and host expressions are not summed here
        per_job = whole_rate(params.get("rate_iops"))
        numjobs = whole_rate(params.get("numjobs", 1))
        if per_job is None or numjobs is None:
            return None
        return per_job * numjobs * hosts

    def lost_hosts(self, text: str) -> list[str]:
        """fio --client writes 'client: host=<host> disconnected' at its output's head."""
        return list(dict.fromkeys(_LOST_CLIENT.findall(text)))

    def output_problem(self, path: Path) -> str | None:
        """fio exits 0 when its output was cut short (a full disk): its last report (the final
        one; status-interval reports come before it) must decode."""
        try:
            characters, report = _last_report(path)
        except OSError:
            return None  # the fetch named it already
        if report is None:
            return (
                f"fio exited 0, but its output {path.name} ({characters} characters) holds no"
                " whole JSON report: cut short (a full disk where it was written?)"
            )
        return None

    def hosts_without_results(self, path: Path, endpoints: dict[str, str]) -> dict[str, str]:
        """fio --client exits 0 when a server's job ends early: its backend process killed,
        the host is missing from client_stats; its job process killed, the host's entries
        count no bytes and no job_runtime (fio records both as a job ends)."""
        # where the parser names its clients (1.6 ms to import)
        from storbench.tools.fio_json import ALL_CLIENTS, OPS, client_host

        try:
            report = _last_report(path)[1]
        except OSError:
            return {}
        if report is None:
            return {}  # not a whole report: output_problem says so
        names = {endpoint: name for name, endpoint in endpoints.items()}
        entries: dict[str, list[dict]] = {name: [] for name in endpoints}
        for entry in report.get("client_stats") or []:
            if isinstance(entry, dict) and entry.get("jobname") != ALL_CLIENTS:
                entries.setdefault(client_host(entry, names), []).append(entry)
        problems = {}
        for name in endpoints:
            if not entries[name]:
                problems[name] = (
                    "no results in fio's client output (its fio server's job ended early?)"
                )
            elif not any(_counted_io(entry, OPS) for entry in entries[name]):
                problems[name] = (
                    "empty results in fio's client output (no bytes and no job_runtime"
                    " counted: its fio server's job process killed?)"
                )
        return problems

    def stuck_service_script(self, folder: str, argv: list[str]) -> str:
        """A fio server forks a handler per client connection, the handler a backend per job
        file, the backend a job process per job. A job process SIGKILLed while it starts (in
        its wait for the backend's go) leaves the backend, once its other jobs are done, in
        pthread_cond_destroy for ever: fio's client never hears that host's end. Such a
        backend is alone (no child process, its helper thread gone), asleep on a futex, its
        CPU time still; one seen so twice a second apart is stopped (SIGKILL: it is blocked
        in the kernel, and its handler then reports the host's end)."""
        return _stuck_backends_script(f"{folder}/service.pid", argv)

    def output_name(self, host: str) -> str:
        return f"{host}.json"

    def target_directory(self, target: dict, host: str) -> str | None:
        if target["type"] != "directory" or "path" not in target:
            return None
        path = target["path"].rstrip("/")
        return f"{path}/{host}" if target.get("per_host_subdir", True) else path

    def parse(self, manifest: Manifest, raw_dir: Path, base: dict) -> list[dict]:
        # parsing only: render and run stay light
        from storbench.tools import fio_json

        if manifest.execution == "service" and manifest.controller:
            path = raw_dir / manifest.controller["output"]
            client_names = {host["endpoint"]: host["name"] for host in manifest.hosts}
            return fio_json.parse_outputs(
                [(None, _output_bytes(path))],
                base=base,
                client_names=client_names,
                sources=[str(path)],
            )
        paths = [raw_dir / host["output"] for host in manifest.hosts]
        outputs = [
            (host["name"], _output_bytes(path))
            for host, path in zip(manifest.hosts, paths, strict=True)
        ]
        return fio_json.parse_outputs(outputs, base=base, sources=[str(p) for p in paths])

    def parse_timeseries(self, manifest: Manifest, raw_dir: Path, base: dict) -> list[dict]:
        """Interval rows when the run printed status reports (status_interval), else none."""
        # parsing only: render and run stay light
        from storbench.tools import fio_timeseries

        if "status_interval" not in manifest.params or manifest.execution == "service":
            return []
        rows = []
        for host in manifest.hosts:
            path = raw_dir / host["output"]
            text = _output_text(path)
            rows += fio_timeseries.rows_from_status_interval(
                text, host=host["name"], base=base, source=str(path)
            )
        return rows

    def recognizes(self, path: Path, head: bytes) -> bool:
        # json, json+ or status-interval documents, or terse lines (parsing only: lazy)
        from storbench.tools import fio_terse

        return b'"fio version"' in head or fio_terse.is_terse(head)

    def import_series(self, paths: list[Path], base: dict) -> list[dict]:
        """The status-interval documents of each file (a run with --status-interval)."""
        # parsing only: render and run stay light
        from storbench.tools import fio_terse, fio_timeseries

        rows = []
        for path in _json_files(paths):
            text = path.read_bytes().decode("utf-8", errors="replace")
            if fio_terse.is_terse(text[:64].encode()):
                continue  # terse lines carry no intervals storbench reads
            run_base = {**base, "run_id": path.stem}
            rows += fio_timeseries.rows_from_status_interval(
                text, host=path.parent.name, base=run_base, source=str(path)
            )
        return rows

    def import_outputs(self, paths: list[Path], base: dict) -> list[dict]:
        """Each json/json+ or terse file is one run (run id = file stem) on one host (its
        folder name)."""
        # parsing only: render and run stay light
        from storbench.tools import fio_json, fio_terse

        rows = []
        for path in _json_files(paths):
            text = path.read_bytes().decode("utf-8", errors="replace")
            if not text.strip():
                raise fio_json.FioOutputError(f"{path}: empty file")
            run_base = {**base, "run_id": path.stem, "raw_path": str(path)}
            host = path.absolute().parent.name  # a file named in its own folder too
            if fio_terse.is_terse(text[:64].encode()):
                rows += fio_terse.rows_from_terse(text, host=host, base=run_base, source=str(path))
                continue
            try:
                rows += fio_json.parse_outputs([(host, text)], base=run_base)
            except fio_json.FioOutputError as error:
                raise fio_json.FioOutputError(f"{path}: not fio JSON output ({error})") from None
            if problem := _final_report_missing(text):
                raise fio_json.FioOutputError(f"{path}: {problem}")
        return rows


def _final_report_missing(text: str) -> str | None:
    """A --status-interval output cut between two reports: its last whole report is an
    interim one, a time-based job short of its runtime. Imported, it is a shorter run."""
    # parsing only, as import_outputs
    from storbench.tools.fio_json import DOCUMENT_START

    starts = [match.start() for match in DOCUMENT_START.finditer(text)]
    if len(starts) < 2:  # one report: the final one (a cut one does not decode)
        return None
    try:
        last, _ = json.JSONDecoder().raw_decode(text, starts[-1])
    except ValueError:
        return None  # the parser names a report it cannot read
    shared = last.get("global options") or {}
    for job in last.get("jobs") or []:
        options = {**shared, **(job.get("job options") or {})}
        ran_ms = job.get("job_runtime")
        if job.get("error") or "time_based" not in options or "runtime" not in options:
            continue  # a job that failed stops early, and says so
        try:
            planned_ms = parse_duration(options["runtime"]) * 1000
        except (UnitError, ValueError, TypeError):
            continue
        if isinstance(ran_ms, int | float) and ran_ms + max(100.0, planned_ms / 100) < planned_ms:
            return (
                f"its last whole report is a status report at {ran_ms / 1000:g} s of the"
                f" {planned_ms / 1000:g} s time-based job {job.get('jobname')!r}: the final"
                " report is missing (the output cut short?)"
            )
    return None


def _fio_address(address: str) -> str:
    """fio's --server/--client address: 'ip:host', or 'ip6:fd00::2' (fio reads 'ip:' as IPv4)."""
    return f"ip6:{bare(address)}" if is_ipv6(address) else f"ip:{address}"


def value_problem(text: str) -> str | None:
    """Why fio would not read this option value as written in a job file, or None."""
    for char in COMMENT_CHARACTERS:
        if char in text:
            return f"fio cuts a job-file value at {char!r} (a comment); the value cannot hold it"
    return None


MIX_OPTIONS = ("rwmixread", "rwmixwrite")


def _size_below_block(options: dict) -> str | None:
    """fio --parse-only takes size=4k with bs=1m; the run stops: 'size too small'."""
    try:
        size, block = parse_size(options["size"]), parse_size(options["bs"])
    except (KeyError, UnitError, TypeError):  # a percentage, a range, bs pairs: fio decides
        return None
    if 0 < size < block:
        return f"{options['size']} is smaller than bs {options['bs']}: fio refuses to run it"
    return None


def mix_problem(option: str, text: str) -> str | None:
    """fio reads 'rwmixread=70%' as 100 % reads (fio 3.33 did 20,260 reads, 0 writes) and
    --parse-only takes it: a mix is a whole number of percent, written bare."""
    if option not in MIX_OPTIONS or has_expression(text):
        return None
    value = text.strip()
    if re.fullmatch(r"-?\d+", value):  # fio --parse-only takes -1 (and ran 3 reads in 256)
        return None if 0 <= int(value) <= 100 else f"a percentage of 0 to 100, not {value}"
    if percent := re.fullmatch(r"(\d+)\s*%", value):
        number = percent.group(1)
        return f"written without '%' (write {number}): fio takes {value!r} but runs no mix"
    return None  # other text: fio --parse-only refuses it itself


def runtime_problem(option: str, text: str) -> str | None:
    """fio 3.33 runs time_based=1 with runtime=0 as one pass over size, exit status 0 (stderr
    'time_based requires a runtime/timeout setting'): a run of 3 ms published as 0 s."""
    if option != "runtime" or has_expression(text):
        return None
    try:
        seconds = parse_duration(text)
    except UnitError:
        return None  # the duration check names it
    return "must be more than 0s (leave runtime out for a run over size)" if seconds <= 0 else None


SECTION_HEADER = re.compile(r"^\[([^\]\n]+)\]", re.MULTILINE)
EXEC_OPTIONS = ("exec_prerun", "exec_postrun")  # fio runs these with system()
TARGET_OPTIONS = frozenset({"directory", "opendir"})  # storbench sets them from the target
FILE_NAME_OPTIONS = frozenset({"filename", "filename_format"})


def placement_problem(option: str, text: str) -> str | None:
    """Why an option would make fio read or write outside the experiment's target, or None."""
    if option in TARGET_OPTIONS:
        return "storbench sets it from the target; name another target for another folder"
    if option in FILE_NAME_OPTIONS:
        parts = re.split(r"[/:]", text)
        if text.startswith("/") or ":/" in text or ".." in parts:
            return (
                "must stay inside the target's directory: a relative name without '..'"
                " (name another target for another place)"
            )
    return None


def path_problem(path: str) -> str | None:
    """Why a target path would not reach fio intact as a directory= or filename= value."""
    if problem := value_problem(path):
        return problem
    if ":" in path:
        return "fio reads ':' in a directory or file name as a separator between paths"
    if _EXPANSION.search(path):
        return "fio expands '$' before a name or '{' in a job file (a variable or keyword)"
    if path != path.strip():
        return "fio strips leading and trailing spaces from a job-file value"
    return None


def _output_text(path: Path) -> str:
    """A raw output as text; bytes that are not UTF-8 (a wrapper's junk) become U+FFFD."""
    return _output_bytes(path).decode("utf-8", errors="replace")


def _output_bytes(path: Path) -> bytes:
    # parsing only: render and run stay light
    from storbench.tools.fio_json import FioOutputError

    try:
        return path.read_bytes()
    except OSError as error:
        raise FioOutputError(f"{path}: cannot read fio output: {error.strerror}") from None


def _stuck_backends_script(pid_file: str, argv: list[str]) -> str:
    """FioAdapter.stuck_service_script: from the service's main process (its pid file) down,
    with Linux's /proc (each process's children file) and shell builtins, but for the pause
    and the kill: it runs every few seconds on every host of a run."""
    words = " ".join(shlex.quote(word) for word in argv)
    return "\n".join([
        f"f={shlex.quote(pid_file)}",
        '{ read -r main || :; } 2>/dev/null < "$f" || exit 0',
        "case $main in ''|*[!0-9]*) exit 0;; esac",
        # the command line word by word: this script's own never holds it whole
        f'command=; for word in {words}; do command="${{command:+$command }}$word"; done',
        "children() {",
        "  kids=",
        '  for t in /proc/"$1"/task/*/children; do',
        '    line=; { read -r line || :; } 2>/dev/null < "$t"; kids="$kids $line"',
        "  done",
        "}",
        # alone: no child, one thread, asleep on a futex (or wchan hidden); cpu: its ticks
        "alone() {",
        "  children $1; case $kids in *[0-9]*) return 1;; esac",
        '  read -r s 2>/dev/null < "/proc/$1/stat" || return 1',
        "  w=0; read -r w 2>/dev/null < \"/proc/$1/wchan\"",
        "  case $w in *futex*|0|'') ;; *) return 1;; esac",
        "  s=${s##*) }; set -- $s",
        '  [ "$1" = S ] && [ "${18}" = 1 ] || return 1',
        '  cpu="${12}.${13}"',
        "}",
        'ours() { [ "$(tr "\\000" " " 2>/dev/null < "/proc/$1/cmdline")" = "$command " ]; }',
        "found=",
        "children $main",
        "for handler in $kids; do",
        "  children $handler",
        "  for backend in $kids; do",
        '    alone $backend && ours $backend && found="$found $backend:$cpu"',
        "  done",
        "done",
        '[ -n "$found" ] || exit 0',
        "sleep 1",
        "stuck=",
        "for seen in $found; do",
        '  alone ${seen%%:*} && [ "$cpu" = "${seen#*:}" ] && stuck="$stuck ${seen%%:*}"',
        "done",
        '[ -n "$stuck" ] || exit 0',
        "kill -KILL $stuck 2>/dev/null",
        "echo $stuck",
    ])  # fmt: skip


def _start_hook(spec: dict) -> str | None:
    """The exec_prerun holding each host's start until the run's release: in service mode
    always (it stamps the start too), standalone on several hosts."""
    if spec.get("execution") == "service":
        return start_hook.SERVICE_COMMAND
    return start_hook.COMMAND if len(spec.get("hosts", ())) > 1 else None


def _job_directory(target: dict, host: str | None) -> str | None:
    """The directory a job uses on a host; every host its own subdirectory by default."""
    if target["type"] != "directory" or "path" not in target:
        return None
    directory = target["path"].rstrip("/")
    if not target.get("per_host_subdir", True):
        return directory
    if host is not None:
        return f"{directory}/{host}"
    # fio expands ${VAR} in job files; the runner sets it per host: hosts never share files
    return f"{directory}/${{{HOST_VARIABLE}}}"


def _json_files(paths: list[Path]) -> list[Path]:
    files = []
    for path in paths:
        files += sorted(path.rglob("*.json")) if path.is_dir() else [path]
    return files


def _last_report(path: Path) -> tuple[int, dict | None]:
    """(characters, the output's last report, None where it does not decode); read once for
    the checks before publishing (output_problem, hosts_without_results), which ask in turn."""
    status = path.stat()
    return _decoded_last_report(str(path), status.st_size, status.st_mtime_ns)


@functools.lru_cache(maxsize=1)
def _decoded_last_report(path: str, size: int, mtime_ns: int) -> tuple[int, dict | None]:
    # where the parser finds a report (1.6 ms to import); decoded here by json, not msgspec
    from storbench.tools.fio_json import DOCUMENT_START

    text = Path(path).read_bytes().decode("utf-8", errors="replace")
    starts = [match.start() for match in DOCUMENT_START.finditer(text)]
    try:
        report, _ = json.JSONDecoder().raw_decode(text, starts[-1])
    except (IndexError, ValueError):
        return len(text), None
    return len(text), report if isinstance(report, dict) else None


def _counted_io(entry: dict, ops: tuple[str, ...]) -> bool:
    """Whether a client_stats entry counts any bytes or any job_runtime."""
    counts = [entry.get("job_runtime")]
    counts += [stats.get("io_bytes") for op in ops if isinstance(stats := entry.get(op), dict)]
    return any(isinstance(count, int | float) and count > 0 for count in counts)


ADAPTER = FioAdapter()
