"""elbencho: a config file per run (``elbencho -c``), standalone or service mode, result folders.

Job options (experiment ``job:``/``sweep:``) and the elbencho option each becomes:

* ``rw``: read, randread, write, randwrite, rw/readwrite, randrw. ``rand*`` sets ``rand=1``;
  the mixed ones set ``rwmixpct`` = ``rwmixread`` (default 50), which turns elbencho's write
  phase into ``RWMIX<pct>`` (reads of blocks that must already exist, see ``phases``).
* ``phases`` (comma list, in any order; elbencho runs them as mkdirs, write, stat, read,
  rmfiles, rmdirs): ``mkdirs`` (-d), ``write`` (-w), ``stat`` (--stat), ``read`` (-r),
  ``rmfiles`` (-F), ``rmdirs`` (-D). Default from ``rw`` and the target type:
  directory read ``mkdirs,write,read,rmfiles,rmdirs`` (the write prepares the files),
  directory write ``mkdirs,write,rmfiles,rmdirs``; block read ``read``, write/mixed ``write``;
  s3 read ``write,read,rmfiles``, write ``write,rmfiles`` (the bucket belongs to storbench).
  Mixed workloads on directories have no default: elbencho's rwmix reads fail on files that
  do not exist yet, so give e.g. ``phases: write`` over files an earlier experiment left.
* ``numjobs`` -> ``threads`` (per host), ``iodepth`` -> ``iodepth``, ``bs`` -> ``block``,
  ``size`` -> ``size`` (per file; for a file or block device the dataset; for S3 the object
  size, default ``bs``), ``files`` -> ``files`` (-N, per dir and thread), ``dirs`` -> ``dirs``
  (-n, per thread), ``runtime`` -> ``timelimit`` (whole seconds; elbencho stops the phase that
  exceeds it and runs no later phase; add ``infloop: 1`` for time-based I/O).
  ``ramp_time`` has no elbencho equivalent and is rejected.
* Every other option is written as ``name=value``: elbencho's own long options (``direct``,
  ``blockvarpct``, ``latpercent9s``, ``limitread``, ``infloop``, ``nosvcshare`` ...). Defaults
  unless given: ``lat=1 latpercent=1 lathisto=1 cpu=1 liveint=1000``.
* S3 targets add ``s3endpoints`` and ``s3region``; the bucket is the path. Keys reach elbencho
  only through its environment (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, read in
  ProgArgs.cpp unless running as a service: in service mode the controller reads them).
  elbencho refuses mixed reads/writes on S3. Standalone runs of several hosts on one bucket
  would use the same object names: on S3, use one host or service mode.

elbencho takes no benchmark path from a config file (the path is a hidden positional option
that ``bpo::parse_config_file`` is not given), so the job file carries it in the comment line
``#storbench-path=...`` and the command reads it from there (``{host}`` becomes the host's
name: per-host subdirectories of a directory target, as for fio). In service mode elbencho
separates the services' files itself (rank subdirectories), so the controller drops ``{host}``.

Values: boost's config file parser cuts a line at ``#`` and strips blanks around a value, so
:meth:`ElbenchoAdapter.job_value_problem` refuses those in options written as given. A path
(one argument, blanks kept) must not hold ``[1-4]``-style lists (elbencho expands them into
several paths), ``,`` or ``@`` (services split the controller's path list there) or ``{host}``.

Outputs: a folder per host (``<host>-elbencho``) with results.json/.csv/.txt and live.csv;
:mod:`storbench.tools.elbencho_results` turns them into rows.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from storbench.core import units
from storbench.core.options import normalized_options
from storbench.core.specs import Manifest
from storbench.core.suggest import closest
from storbench.tools.base import Capabilities, RenderError, ToolAdapter, pinned_lines

RESULT_FOLDER_SUFFIX = "-elbencho"
PATH_LINE = "#storbench-path="
HOST_PLACEHOLDER = "{host}"

# sh -c script: $1 job file, $2 host name ('' for the controller), then elbencho's argv; every
# path line of the job file (one per target of a set) becomes one path argument, in order
_PATH_FROM_JOB_FILE = (
    "job=$1 host=$2; shift 2; found=0; "
    'while IFS= read -r line || [ -n "$line" ]; do '
    f'case $line in "{PATH_LINE}"*) path=${{line#"{PATH_LINE}"}}; '
    f'case $path in *"{HOST_PLACEHOLDER}"*) '
    f'path="${{path%%"{HOST_PLACEHOLDER}"*}}$host${{path#*"{HOST_PLACEHOLDER}"}}";; esac; '
    'set -- "$@" "$path"; found=1;; esac; '
    'done < "$job"; '
    f'[ "$found" = 1 ] || {{ echo "$job: no {PATH_LINE} line" >&2; exit 2; }}; '
    'exec "$@"'
)

PHASE_OPTIONS = {  # storbench phase name -> elbencho long option
    "mkdirs": "mkdirs",
    "write": "write",
    "stat": "stat",
    "read": "read",
    "rmfiles": "delfiles",
    "rmdirs": "deldirs",
}
DEFAULT_PHASES = {  # (target type, workload kind) -> phases
    ("directory", "read"): "mkdirs,write,read,rmfiles,rmdirs",
    ("directory", "write"): "mkdirs,write,rmfiles,rmdirs",
    ("block", "read"): "read",
    ("block", "write"): "write",
    ("block", "mixed"): "write",
    ("s3", "read"): "write,read,rmfiles",
    ("s3", "write"): "write,rmfiles",
}
RW_MODES = {  # rw -> (random offsets, workload kind)
    "read": (False, "read"),
    "randread": (True, "read"),
    "write": (False, "write"),
    "randwrite": (True, "write"),
    "rw": (False, "mixed"),
    "readwrite": (False, "mixed"),
    "randrw": (True, "mixed"),
}
MAPPED_OPTIONS = {  # storbench option -> elbencho long option
    "numjobs": "threads",
    "dirs": "dirs",
    "files": "files",
    "size": "size",
    "bs": "block",
    "iodepth": "iodepth",
}
HANDLED_OPTIONS = frozenset({*MAPPED_OPTIONS, "rw", "rwmixread", "phases", "runtime"})
DEFAULT_OPTIONS = {"lat": 1, "latpercent": 1, "lathisto": 1, "cpu": 1, "liveint": 1000}
GENERIC_SPELLING = {  # elbencho option -> the storbench option that sets it
    **{elbencho: option for option, elbencho in MAPPED_OPTIONS.items() if elbencho != option},
    **dict.fromkeys(PHASE_OPTIONS.values(), "phases"),
    "rand": "rw",
    "rwmixpct": "rwmixread",
    "timelimit": "runtime",
}
SET_BY_STORBENCH = frozenset(
    {"label", "configfile", "resfile", "csvfile", "jsonfile", "livecsv", "livecsvex",
     "hosts", "hostsfile", "service", "foreground", "port", "quit", "s3endpoints", "s3region"}
)  # fmt: skip
SECRET_OPTIONS = frozenset({"s3key", "s3secret", "s3sessiontoken", "s3credlist", "s3sseckey"})
# options storbench turns into elbencho options of its own: their text never reaches the file
DERIVED_OPTIONS = frozenset({"rw", "rwmixread", "phases", "runtime"})
# elbencho expands number lists and ranges in square brackets into several paths
_PATH_EXPANSION = re.compile(r"\[[0-9,-]+\]")
# ProgArgs.cpp BENCHPATH_DELIMITER: a service splits the controller's path list at these
_PATH_DELIMITERS = (",", "@")


class ElbenchoAdapter(ToolAdapter):
    name = "elbencho"
    job_suffix = ".elbencho"
    default_template = "elbencho/job.elbencho.j2"
    install_hint = (
        "install a release package (.deb/.rpm, static binary) or build from source: "
        "https://github.com/breuner/elbencho"
    )
    capabilities = Capabilities(
        target_types=("directory", "block", "s3"),
        execution=("standalone", "service"),
        target_sets=True,
        interval_series=True,
        import_formats=("result folder (resfile, csvfile, live csv)",),
    )
    secret_env = {"AWS_ACCESS_KEY_ID": "access_key", "AWS_SECRET_ACCESS_KEY": "secret_key"}
    output_is_folder = True
    default_port = 1611
    service_job_shared = True  # the controller sends its one config to every service
    service_log_results = True  # each service prints its own part of a run (per-host rows)
    # --latpercent: 'p<=upper bound' of its latency histogram, four buckets per power of two
    histogram_bins_text = "elbencho's buckets, four per power of two"
    latency_basis_texts = {
        "lat": "elbencho's latency: each read or write call (each entry operation in a "
        "metadata phase), from its start until it returns",
    }
    percentile_resolution_text = (
        "elbencho's percentiles are the upper bounds of its latency buckets (four per power "
        "of two, each about 19 % wider than the one below): a percentile can be up to 19 % "
        "above the latency it stands for, even above the maximum"
    )

    # --- render -----------------------------------------------------------------------------

    def template_context(self, spec: dict) -> dict:

        target = spec["target"]
        try:
            options = job_options(spec["params"], target, spec["run_id"])
            paths = [benchmark_path(member) for member in target.get("members") or [target]]
        except ValueError as error:
            option = getattr(error, "option", None)
            raise RenderError(
                f"elbencho experiment {spec['experiment']}: {error}", option
            ) from None
        return {
            "experiment": spec["experiment"],
            "run_id": spec["run_id"],
            "target": target,
            "path_line": "\n".join(PATH_LINE + path for path in paths),
            "options": options,
            "point": spec["point"],
        }

    def option_problems(self, sections: list[dict]) -> dict[str, str]:
        """Options elbencho 3.1's config file does not take ('file: 256' failed the run with
        boost's 'unrecognised option'); storbench's own names and what it refuses anyway pass."""
        known = config_file_options()
        problems: dict[str, str] = _count_problems(sections)
        for option in dict.fromkeys(option for section in sections for option in section):
            if option in HANDLED_OPTIONS or option in known or option == "ramp_time":
                continue
            near = closest(option, [*known, *HANDLED_OPTIONS])
            meant = GENERIC_SPELLING.get(near, near) if near else None  # block -> bs
            hint = f" (did you mean {meant!r}?)" if meant else ""
            problems[option] = f"elbencho has no option {option!r}{hint}"
        return problems

    def job_value_problem(self, option: str, text: str) -> str | None:
        if option in DERIVED_OPTIONS:
            return super().job_value_problem(option, text)
        return _config_value_problem(text) or super().job_value_problem(option, text)

    def target_path_problem(self, path: str) -> str | None:
        if _PATH_EXPANSION.search(path):
            return "elbencho expands a number list or range in '[...]' into several paths"
        if delimiters := [char for char in _PATH_DELIMITERS if char in path]:
            return (
                f"elbencho services split paths at {' and '.join(map(repr, delimiters))} "
                "(service mode); the path cannot hold it"
            )
        if HOST_PLACEHOLDER in path:
            return f"storbench's elbencho command replaces {HOST_PLACEHOLDER} with the host's name"
        return None

    # --- run --------------------------------------------------------------------------------

    def command(self, job_path: str, output_path: str, host: str) -> list[str]:
        elbencho = ["elbencho", "-c", job_path, *_output_arguments(output_path)]
        return ["sh", "-c", _PATH_FROM_JOB_FILE, "elbencho-job", job_path, host, *elbencho]

    def version_command(self) -> list[str]:
        return ["elbencho", "--version"]

    def version_of(self, printed: str) -> str | None:
        """'3.1-10' of ' * Version: 3.1-10' (the first line says only 'elbencho')."""
        # parsing only: render and run stay light
        from storbench.tools.elbencho_results import version_from_text

        return version_from_text(printed)

    def output_name(self, host: str) -> str:
        return f"{host}{RESULT_FOLDER_SUFFIX}"

    def target_directory(self, target: dict, host: str) -> str | None:
        if target["type"] != "directory":
            return None
        return benchmark_path(target).replace(HOST_PLACEHOLDER, host)

    def service_start_command(self, host: str, port: int) -> list[str]:
        return ["elbencho", "--service", "--foreground", "--port", str(port)]

    def controller_command(
        self, job_path: list[str], output_path: str, endpoints: list[str]
    ) -> list[str]:
        """One elbencho for every service: the hosts' job files are equal (service_job_shared),
        so the first one is the config; elbencho starts every service's threads together."""
        job = job_path[0]
        elbencho = [
            "elbencho",
            "--hosts",
            ",".join(endpoints),
            "-c",
            job,
            *_output_arguments(output_path),
        ]
        return ["sh", "-c", _PATH_FROM_JOB_FILE, "elbencho-job", job, "", *elbencho]

    def service_stop_command(self, endpoints: list[str]) -> list[str]:
        return ["elbencho", "--hosts", ",".join(endpoints), "--quit"]

    # --- parse ------------------------------------------------------------------------------

    def parse(self, manifest: Manifest, raw_dir: Path, base: dict) -> list[dict]:
        # parsing only: render and run stay light
        from storbench.tools import elbencho_results

        return elbencho_results.parse_run(manifest, raw_dir, base)

    def parse_timeseries(self, manifest: Manifest, raw_dir: Path, base: dict) -> list[dict]:
        # parsing only: render and run stay light
        from storbench.tools import elbencho_results

        return elbencho_results.parse_run_timeseries(manifest, raw_dir, base)

    def recognizes(self, path: Path, head: bytes) -> bool:
        first = head.lstrip()[:200]
        return first.startswith((b"ISO date,label,path type,", b"ISO DATE:", b"OPERATION ")) or (
            first.startswith(b"{") and b'"phase_type"' in first
        )

    def claims_folder(self, folder: Path) -> bool:
        # parsing only: render and run stay light
        from storbench.tools.elbencho_results import RESULT_FILES

        return any((folder / name).is_file() for name in RESULT_FILES)

    def import_series(self, paths: list[Path], base: dict) -> list[dict]:
        # parsing only: render and run stay light
        from storbench.tools import elbencho_results

        return elbencho_results.import_series(paths, base)

    def import_outputs(self, paths: list[Path], base: dict) -> list[dict]:
        # parsing only: render and run stay light
        from storbench.tools import elbencho_results

        return elbencho_results.import_paths(paths, base)


def _output_arguments(output_path: str) -> list[str]:
    return [
        "--resfile",
        f"{output_path}/results.txt",
        "--csvfile",
        f"{output_path}/results.csv",
        "--jsonfile",
        f"{output_path}/results.json",
        "--livecsv",
        f"{output_path}/live.csv",
        "--livecsvex",
    ]


def benchmark_path(target: dict) -> str:
    """elbencho's path argument; '{host}' stands for the host's name."""
    kind = target["type"]
    if kind not in ElbenchoAdapter.capabilities.target_types:
        raise ValueError(f"elbencho cannot benchmark a target of type {kind!r}")
    path = target.get("bucket" if kind == "s3" else "path") or ""
    if not path or "\n" in path or "\r" in path:
        raise ValueError(f"target {target.get('name')!r}: unusable path {path!r}")
    if kind == "directory" and target.get("per_host_subdir", True):
        return f"{path.rstrip('/')}/{HOST_PLACEHOLDER}"
    return path


def job_options(params: dict, target: dict, run_id: str) -> dict:
    """elbencho long options (config file lines) for one run, in a fixed readable order."""

    _check_option_names(params)
    normalized = normalized_options(params)
    random, kind = _workload(params)
    if kind == "mixed" and target["type"] == "s3":
        raise RenderError("elbencho cannot mix reads and writes on S3 (--rwmixpct)", "rw")
    options: dict = {"label": run_id}
    for phase in _phases(params, target["type"], kind):
        options[PHASE_OPTIONS[phase]] = 1
    for option, elbencho in MAPPED_OPTIONS.items():
        if option in normalized:
            options[elbencho] = normalized[option]
    if target["type"] == "s3" and "size" not in options and "block" in options:
        options["size"] = options["block"]  # one object per block unless size says otherwise
    if random:
        options["rand"] = 1
    if kind == "mixed":
        options["rwmixpct"] = int(params.get("rwmixread", 50))
    if "runtime" in params:
        seconds = units.parse_duration(params["runtime"])
        if seconds != int(seconds) or seconds < 1:
            raise RenderError(
                f"runtime {params['runtime']!r}: elbencho's timelimit is whole s", "runtime"
            )
        options["timelimit"] = int(seconds)
    if target["type"] == "s3":
        options["s3endpoints"] = target["endpoint"]
        if target.get("region"):
            options["s3region"] = target["region"]
    for option, value in normalized.items():
        if option not in HANDLED_OPTIONS:
            options[option] = value
    for option, value in DEFAULT_OPTIONS.items():
        options.setdefault(option, value)
    for option, value in options.items():
        _check_value(option, value)
    return options


def _check_option_names(params: dict) -> None:
    for option in params:
        if option == "ramp_time":
            raise RenderError("ramp_time: elbencho has no ramp time (no warm-up exclusion)", option)
        if option in SECRET_OPTIONS:
            raise RenderError(
                f"{option}: keys come from the target's credentials, never a job", option
            )
        if option in SET_BY_STORBENCH:
            raise RenderError(f"{option}: set by storbench, not by a job option", option)
        if option in GENERIC_SPELLING:
            raise RenderError(
                f"{option}: use storbench's option {GENERIC_SPELLING[option]!r}", option
            )


def _workload(params: dict) -> tuple[bool, str | None]:
    if "rw" not in params:
        if "phases" not in params:
            raise ValueError("set rw (read, randread, write, randwrite, rw, randrw) or phases")
        return False, None
    rw = str(params["rw"])
    if rw not in RW_MODES:
        raise RenderError(f"rw {rw!r}: elbencho does {', '.join(RW_MODES)}", "rw")
    return RW_MODES[rw]


def _phases(params: dict, target_type: str, kind: str | None) -> list[str]:
    if "phases" in params:
        phases = [part.strip() for part in str(params["phases"]).split(",") if part.strip()]
        unknown = [phase for phase in phases if phase not in PHASE_OPTIONS]
        if unknown or not phases:
            near = closest(unknown[0], PHASE_OPTIONS) if unknown else None
            meant = f" ({unknown[0]!r}: did you mean {near!r}?)" if near else ""
            raise RenderError(
                f"phases {params['phases']!r}{meant}: known are {', '.join(PHASE_OPTIONS)}",
                "phases",
            )
        return phases
    if kind is None or (target_type, kind) not in DEFAULT_PHASES:
        raise RenderError(
            f"rw {params['rw']!r} on a {target_type} target has no default phases: elbencho's "
            "rwmix reads need existing files; set phases (e.g. 'write' over files a previous "
            "experiment left)",
            "rw",
        )
    return DEFAULT_PHASES[(target_type, kind)].split(",")


@functools.cache
def config_file_options() -> frozenset[str]:
    """The long options elbencho 3.1-10's config file takes (tools/data, from its source)."""
    return frozenset(pinned_lines("elbencho-3.1-10-options.txt"))


# ProgArgs: dirs and files are whole numbers, with a unit letter ("4k") if any
_COUNT_OPTIONS = {"dirs": "directories per thread", "files": "files per directory"}
_COUNT = re.compile(r"[0-9]+[kKmMgGtT]?")


def _count_problems(sections: list[dict]) -> dict[str, str]:
    """dirs and files that elbencho would refuse at the run ('abc', -1, 2.5)."""
    problems: dict[str, str] = {}
    for section in sections:
        for option, counted in _COUNT_OPTIONS.items():
            value = section.get(option)
            if value is not None and not _COUNT.fullmatch(str(value)):
                problems.setdefault(
                    option,
                    f"elbencho's {option} is a whole number of {counted} (a unit letter"
                    f" allowed, as 4k), not {value!r}",
                )
    return problems


def _config_value_problem(text: str) -> str | None:
    """Why boost's config file parser would not read text as the whole value, or None."""
    if "#" in text:
        return "elbencho's config file parser cuts a line at '#' (a comment); no '#'"
    if text != text.strip(" \t"):
        return "elbencho's config file parser strips leading and trailing blanks from a value"
    return None


def _check_value(option: str, value) -> None:
    """At render time too: a host-fact value is only known then."""
    text = str(value)
    if "\n" in text or "\r" in text:
        raise RenderError(f"{option}: a newline in {text!r} would start another option", option)
    if problem := _config_value_problem(text):
        raise RenderError(f"{option}: {problem}", option)


ADAPTER = ElbenchoAdapter()
