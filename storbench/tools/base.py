"""The interface every tool adapter implements: render, command, services, parse, import.

Adapters are imported on the run path, so they import nothing heavy at module level.

Result rows are dicts with keys of ``storbench.core.results.COLUMNS`` (missing keys become
nulls): per-host rows plus ``host='all'`` rows (see ``storbench.core.aggregate.aggregate_hosts``),
``op`` in ``storbench.core.schema_names.OPERATIONS`` (``normalize_op`` maps GET/PUT/...), sizes
in bytes, times in ns or s as the column names say. Time-series rows use
``storbench.core.results.TIMESERIES_COLUMNS``.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from pathlib import Path

from storbench.core import hostfacts
from storbench.core.specs import Manifest

# Job files of S3 tools that need keys in the file itself carry these placeholders; the runner
# replaces them only in the host's private copy (mode 0600, outside results/), never on disk here.
SECRET_PLACEHOLDERS = {
    "access_key": "@@STORBENCH_ACCESS_KEY@@",
    "secret_key": "@@STORBENCH_SECRET_KEY@@",
}


# POSIX sh for tools without a job file: append each line of the args file "$job" to "$@"
# verbatim (no word splitting, quotes stay literal), skipping blank and '#' lines.
ARGS_FILE_LOOP = (
    'while IFS= read -r arg || [ -n "$arg" ]; do '
    'case $arg in ""|"#"*) ;; *) set -- "$@" "$arg" ;; esac; '
    'done < "$job"'
)


# sh -c script: $1 a private file of VAR=value lines, then the tool's argv; the keys reach the
# tool's environment, never its command line
ENV_FILE_SCRIPT = 'set -a; . "$1"; set +a; shift; exec "$@"'


# the runner fills SECRET_PLACEHOLDERS into the whole job file, values included
SECRET_PLACEHOLDER_PROBLEM = (
    "holds a key placeholder; the runner would write the S3 key into this value"
)


def job_file_text(value) -> str:
    """A job value as a job file shows it: each host expression ({cores}) as a number.

    Job files get the expressions' numbers (storbench.core.hostfacts), so a tool's value checks
    look at the text around them; a malformed expression stays as written (hostfacts names it).
    """

    text = str(value)
    if not hostfacts.has_expression(value):
        return text
    try:
        parts = hostfacts.split_expressions(text)
    except hostfacts.HostFactError:
        return text
    return "".join(part if isinstance(part, str) else "0" for part in parts)


@functools.cache
def result_columns() -> frozenset[str]:
    """The result schema's column names (results imports pyarrow, so only when parsing)."""
    # pyarrow: parsing only
    from storbench.core.results import COLUMNS

    return frozenset(COLUMNS)


@functools.cache
def timeseries_columns() -> frozenset[str]:
    # pyarrow: parsing only
    from storbench.core.results import TIMESERIES_COLUMNS

    return frozenset(TIMESERIES_COLUMNS)


DATA_DIR = Path(__file__).parent / "data"  # tools' option lists, pinned to a version


def pinned_lines(name: str) -> list[str]:
    """The lines of a file in DATA_DIR, without its '#' comments and blank lines."""
    lines = (DATA_DIR / name).read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


@dataclass(frozen=True)
class Capabilities:
    """What a tool can do in a campaign; config, plan and run ask these, never a tool's name."""

    target_types: tuple[str, ...] = ("directory",)  # target types it can benchmark
    execution: tuple[str, ...] = ("standalone",)  # "service": the run engine drives its services
    target_sets: bool = False  # several targets in one run (one job section each)
    host_split: bool = False  # rwmixreadhost: each host reads or writes (role_options)
    schedules: bool = False  # a schedule file: one workload of the tool's options per line
    prepared_runs: bool = False  # runs on datasets and preconditioned targets
    preparation: bool = False  # lays out datasets and runs preconditioning recipes
    search_metrics: tuple[str, ...] = ()  # latency-SLO search: metrics it can hold a rate of
    faults: bool = True  # fault commands may run during its workload
    interval_series: bool = False  # per-interval rows (parse_timeseries)
    import_formats: tuple[str, ...] = ()  # outputs `storbench import` reads (import_outputs)
    network_check: bool = False  # measures the network between hosts (`snakemake network`)
    version: bool = True  # prints its version: the hosts' and results' versions are compared


class RenderError(ValueError):
    """A job file cannot be made: the message names the template, host or option; `option`
    is the job option refused, where one is (`check` names its key and line)."""

    def __init__(self, message: str, option: str | None = None):
        super().__init__(message)
        self.option = option


# What an adapter's template_context raises for options it cannot write (a RenderError, or
# Python's own error on a value of the wrong kind): `check` and the render step name them
REFUSALS = (ValueError, KeyError, TypeError)


def refusal_text(error: BaseException) -> str:
    """An adapter's refusal as one line (a KeyError's message without repr's quotes)."""
    if isinstance(error, KeyError) and error.args:
        return str(error.args[0])
    return str(error)


class ToolOutputError(ValueError):
    """A file is not this tool's output, or is empty or truncated; the message names the file."""


# What a parser meets in output of an unexpected shape (a key or item missing, a number
# where a mapping was, a value that is no number): named as that output's, not a traceback
UNEXPECTED_SHAPE = (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError)


@contextlib.contextmanager
def reading_output(source: str | Path, tool: str):
    """Parsing ``source`` (a file or a run's raw folder) as ``tool``'s output: an error of
    UNEXPECTED_SHAPE becomes a ToolOutputError naming it, as does one that names no file."""
    try:
        yield
    except ToolOutputError as error:
        if str(source) in str(error):
            raise
        raise ToolOutputError(f"{source}: {error}") from error
    except UNEXPECTED_SHAPE as error:
        detail = f"{type(error).__name__}: {error}"
        raise ToolOutputError(
            f"{source}: not {tool} output as storbench reads it ({detail}); is it cut off or "
            "from another version?"
        ) from error


class ToolAdapter:
    name: str = ""
    job_suffix: str = ".job"
    default_template: str = ""  # relative to the workflow's templates/ folder
    install_hint: str = ""  # how to install the tool, shown when a host lacks it
    secret_env: dict[str, str] = {}  # env variable the tool reads -> "access_key" / "secret_key"
    output_is_folder: bool = False  # output_name() is a folder the runner creates and fetches
    capabilities: Capabilities = Capabilities()
    preparation_template: str = ""  # the job template of preparation stages (preparation tools)
    # a job holding its start (core/start_hook): seconds from the tool's exec to its hook on
    # an idle host, which a held start's release leaves on top of the launch's margin
    start_setup_s: float = 0.0
    # its own exit statuses above 128, which a shell also gives a tool killed by a signal
    exit_statuses: dict[int, str] = {}

    @property
    def target_types(self) -> tuple[str, ...]:
        return self.capabilities.target_types

    @property
    def has_services(self) -> bool:
        """The tool has a service (server) mode; the engine drives it when execution says so."""
        return bool(self.default_port)

    # --- render ---------------------------------------------------------------------------

    def template_context(self, spec: dict) -> dict:
        """Variables a job template sees (see README: templates)."""
        raise NotImplementedError

    def job_names_hosts(self, params: dict, execution: str) -> bool:
        """The job file names the run's hosts where its tool reaches them (the render spec
        then holds each host's tool address); no tool's does by default."""
        return False

    # a job file that names its hosts: the user the tool logs in to them as unless told (the
    # render spec holds each host group's own SSH user where it is another)
    job_login_user: str | None = None

    # the tool's own value of a result column a job that does not set it ran with (comparisons
    # pair a run that left numjobs unset with one that set it to the tool's default)
    parameter_defaults: dict[str, object] = {}

    def job_value_problem(self, option: str, text: str) -> str | None:
        """Why a job option's value (as job_file_text gives it) would not reach the tool as
        written -- it would be cut, split into more options or lines, or expanded -- or None.

        Adapters add their job file's syntax; they keep this check (call super()).
        """
        if any(placeholder in text for placeholder in SECRET_PLACEHOLDERS.values()):
            return SECRET_PLACEHOLDER_PROBLEM
        return None

    def job_file_secret(self, key: str) -> str:
        """A key as the job file must spell it where a placeholder stands (quoting)."""
        return key

    def option_problems(self, sections: list[dict]) -> dict[str, str]:
        """{option: why} for job options (each section a job with one swept value applied)
        that the tool itself would refuse, checked at `storbench check` time; none by default."""
        return {}

    def target_path_problem(self, path: str) -> str | None:
        """Why a directory or block target's path would not reach the tool intact, or None."""
        return None

    def own_job_problem(self, text: str) -> str | None:
        """Why a user's own rendered job (template or ready job file) would not run as written
        on the hosts, or None."""
        return None

    # --- run ------------------------------------------------------------------------------

    def command(self, job_path: str, output_path: str, host: str) -> list[str]:
        """argv that runs one job file on one host, writing the tool's result to output_path."""
        raise NotImplementedError

    def run_command(self, job_path: str, output_path: str, host: str, params: dict) -> list[str]:
        """command() for one run; adapters whose command line depends on options override it."""
        return self.command(job_path, output_path, host)

    def version_command(self) -> list[str]:
        raise NotImplementedError

    def version_of(self, printed: str) -> str | None:
        """The version in what version_command printed (its first line here), compared across
        a run's hosts; None where the tool prints none."""
        lines = [line.strip() for line in printed.splitlines() if line.strip()]
        return lines[0] if lines and self.capabilities.version else None

    def version_programs(self) -> tuple[str, ...]:
        """The programs whose files the version belongs to: a host keeps the version it printed
        per identity of those files (hosts.services.kept_version_script); () asks every run
        (a version command whose output says nothing of a file's identity)."""
        return (self.version_command()[0],)

    def host_requirements(
        self, job: dict, sweep: dict, execution: str = "standalone"
    ) -> list[dict]:
        """What each host must pass before an experiment's first run (run the ``execution``
        way), beyond the tool's version: [{"problem": what a failure means, "argv": the
        command}], run at preflight."""
        return []

    # --- preparation (capabilities.preparation): (global options, sections) of each job ---

    def pass_job(self, spec, host_index: int, host: str) -> tuple[dict, list[dict]]:
        """One chunk of a preconditioning pass (a StageSpec) on a host."""
        raise NotImplementedError(f"{self.name} does not precondition targets")

    def round_job(self, spec, host_index: int, host: str) -> tuple[dict, list[dict]]:
        """One round of a steady-state recipe (a StageSpec) on a host."""
        raise NotImplementedError(f"{self.name} does not precondition targets")

    def dataset_job(self, spec, host: str) -> tuple[dict, list[dict]]:
        """A dataset's layout or fill (a DatasetSpec) on a host."""
        raise NotImplementedError(f"{self.name} does not lay out datasets")

    def unusable(self, exit_code: int, detail: str) -> str:
        """Why the version command failed on a host, with how to install the tool."""
        command = " ".join(self.version_command())
        state = "is not installed" if exit_code == 127 else "does not start"  # 127: not found
        hint = f"; install it: {self.install_hint}" if self.install_hint else ""
        return f"{self.name} {state}{hint} ('{command}' exited {exit_code}: {detail})"

    def with_interval_series(self, job: dict) -> dict:
        """The job options that make the tool report per interval (fault and soak runs)."""
        return job

    # what a job sets for the tool to report per interval, said where a report has no series
    interval_series_hint: str = ""

    def role_options(self, params: dict, role: str) -> dict:
        """A host's options in a host-level read/write split (capabilities.host_split)."""
        raise NotImplementedError(f"{self.name} has no host-level read/write split")

    def bytes_per_host(self, params: dict) -> int | None:
        """Bytes a run's files take on a directory target per host, when the options say
        (preflight compares it with the free space); None when they do not."""
        return None

    def command_options(self, params: dict) -> dict[str, str]:
        """{option: the command it runs} for job options that make the tool run commands on
        the host (refused unless the experiment says allow_commands: true)."""
        return {}

    def role_problem(self, params: dict) -> str | None:
        """Why these options cannot be split into a read and a write role, or None."""
        return f"{self.name} has no host-level read/write split"

    # --- latency-SLO search (capabilities.search_metrics) ---------------------------------

    search_options: tuple[str, ...] = ()  # job options a search sets for each probe

    def search_job_problems(self, job: dict) -> list[str]:
        """'<option>: <problem>' for job options a search cannot run (it sets some itself)."""
        problems = [
            f"{option}: set by the search for each probe; remove it"
            for option in self.search_options
            if option in job
        ]
        if self.capabilities.search_metrics and "runtime" not in job:
            problems.append("runtime: a search needs a runtime for each probe (e.g. 10s)")
        return problems

    def job_warnings(self, job: dict, sweep: dict) -> dict[str, str]:
        """{option: why} for options the tool takes but whose runs would not measure what
        the options say (a queue depth a synchronous engine never reaches): warnings at
        `check`; none by default."""
        return {}

    def search_job_warnings(self, job: dict) -> list[str]:
        """Known tool faults a search's probes would meet with this job (warnings)."""
        return []

    def jobs_per_host(self, params: dict) -> int:
        """How many workers share a host's offered rate (rates step by hosts x this)."""
        return 1

    def probe_options(
        self, params: dict, iodepth: int, rate_per_job: int | None, arrivals: str | None
    ) -> dict:
        """A probe's options: closed loop at iodepth, or open loop at rate_per_job per worker."""
        raise NotImplementedError(f"{self.name} has no latency-SLO search")

    def search_rate_text(self, arrivals: str) -> str:
        """How an open-loop probe offers its rate, for the search report's methodology."""
        tool = self.name or "the tool"
        return f"{tool} holds the offered rate, split evenly over hosts ({arrivals} arrivals)"

    # how its latency is measured and merged, for the search report's methodology
    search_latency_text: str = (
        "percentiles from the tool's histogram bins summed over every host (never averaged "
        "percentiles); mean weighted by I/O count"
    )

    # --- report wording: the report names no tool, each adapter says its own -------------

    # what its latency histogram's bins are, for the histogram figure's caption
    histogram_bins_text: str = "the tool's own bins"
    # what each latency basis of its rows (lat_basis) measures, for the report's methodology
    latency_basis_texts: dict[str, str] = {
        "lat": "total latency: from the start of an operation until its completion, as the "
        "tool measures it",
        "clat": "completion latency: from submission of an I/O until its completion",
    }
    # set where its percentiles are the bounds of coarse buckets: said under the latency
    # table and figure ("": as exact as the tool's output allows)
    percentile_resolution_text: str = ""
    # what its bandwidth figure counts, where the op alone does not say (methodology)
    bandwidth_basis_text: str = ""
    # why storbench's total of a run can differ from the tool's own (tool_bw_bytes_s)
    own_total_text: str = (
        "storbench sums the rows of the hosts (or clients); the tool computes its own total "
        "otherwise"
    )

    # --- network check (capabilities.network_check) --------------------------------------

    def network_server_command(self, address: str, port: int, log_path: str) -> list[str]:
        """argv of one server on the server host, bound to address:port, logging to log_path."""
        raise NotImplementedError(f"{self.name} does not check networks")

    def network_job(self, address: str, port: int, duration_s: int, parallel: int) -> str:
        """The job file of one client test against address:port (run by run_command)."""
        raise NotImplementedError(f"{self.name} does not check networks")

    def network_row(self, output: Path, host: str, base: dict) -> dict:
        """The result row of one client test (raises ToolOutputError for a bad output)."""
        raise NotImplementedError(f"{self.name} does not check networks")

    def start_stamp_names(self, spec: dict) -> list[str]:
        """Files in the service's folder that hold each host's actual start ([]: none)."""
        return []

    def hook_output_names(self, job_text: str) -> list[str]:
        """Files a job holding its start (core/start_hook) leaves in the tool's working folder."""
        return []

    def offered_iops(self, params: dict, hosts: int) -> float | None:
        """The aggregate I/O rate a run offers (open loop), or None for a closed-loop run."""
        return None

    def output_name(self, host: str) -> str:
        """File (or folder) name of a host's result inside the raw iteration folder."""
        raise NotImplementedError

    def output_problem(self, path: Path) -> str | None:
        """Why a host's fetched output is not a whole result though the tool exited 0 (cut
        short by a full disk), or None; light: it runs on the run path, before publishing."""
        return None

    def hosts_without_results(self, path: Path, endpoints: dict[str, str]) -> dict[str, str]:
        """Service mode, the controller exited 0: {host: why} for each host whose results its
        output at path lacks or holds empty (a service's job killed mid-run, which fio's client
        does not count as a failure). endpoints: {host: its service's address}. Light: it runs
        on the run path, before publishing; {} where the tool's output cannot tell."""
        return {}

    def stuck_service_script(self, folder: str, argv: list[str]) -> str:
        """Service mode: a shell script run on each host while the tool's client runs (folder:
        the service's, holding its service.pid; argv: its command line). It stops the
        service's processes that wait for ever for a job process gone before its end (fio: a
        backend whose job process was killed as it started), which would hold the client
        until the run's time limit, and prints their pids; nothing where there are none. Light
        and time-bounded: it runs every few seconds. '' where the tool has no such state: the
        run then does not look."""
        return ""

    def lost_hosts(self, text: str) -> list[str]:
        """The hosts a failed controller (service mode) says it lost, from its output's
        text: a host whose service or machine went away mid-run is named first."""
        return []

    def target_directory(self, target: dict, host: str) -> str | None:
        """Directory the tool needs on the host before it starts (created by the runner)."""
        return None

    def target_directories(self, target: dict, host: str) -> list[str]:
        """Every directory a run needs on a host, one per member of a target set."""
        targets = target.get("members") or [target]
        return [d for t in targets if (d := self.target_directory(t, host))]

    # --- multi-host service mode (tools that have one) ------------------------------------

    default_port: int = 0
    # service mode sends one job to every service: the hosts' job files must be equal
    service_job_shared: bool = False
    # each service prints its own part of a run to its log: the engine keeps each host's part
    service_log_results: bool = False
    # the hosts' workers dial the controller's server and end with its run: they are started
    # for each run (worker_command) instead of once per campaign
    service_per_run: bool = False
    worker_port: int = 0  # a per-run worker's own listening port, if it has one
    workers_dial_controller: bool = False  # workers connect to the controller (its address)

    def service_start_command(self, host: str, port: int) -> list[str]:
        """argv that starts the tool's service on a host (in the foreground)."""
        raise NotImplementedError(f"{self.name} has no service mode")

    def worker_command(self, controller: str, port: int, own_port: int) -> list[str]:
        """argv of a host's worker that dials the controller's server at controller:port
        (service_per_run); own_port is the host's port for the worker's own listener."""
        raise NotImplementedError(f"{self.name} has no workers that dial the controller")

    def service_log_name(self, host: str) -> str:
        """File in the raw folder that keeps a host's part of its service log (a run's share)."""
        return f"{host}.service.log"

    def service_stop_command(self, endpoints: list[str]) -> list[str]:
        """argv run on the controller that asks the services at host:port endpoints to quit
        (before each host's service is killed anyway); [] when the tool has none."""
        return []

    def controller_command(
        self, job_path: list[str], output_path: str, endpoints: list[str]
    ) -> list[str]:
        """argv run on the controller that drives every service at once."""
        raise NotImplementedError(f"{self.name} has no service mode")

    def controller_requirements(self) -> list[dict]:
        """What the controller (the machine running Snakemake) must pass before a service-mode
        experiment's first run, as host_requirements: the tool itself by default (its version
        command), as its client runs there."""
        install = f"; install it: {self.install_hint}" if self.install_hint else ""
        return [
            {
                "problem": f"{self.name} is not usable here (execution: service runs its client"
                f" on this machine){install}",
                "argv": self.version_command(),
            }
        ]

    # --- parse ----------------------------------------------------------------------------

    def parse(self, manifest: Manifest, raw_dir: Path, base: dict) -> list[dict]:
        """Rows in the result schema (per host and host='all') from one iteration's raw files."""
        raise NotImplementedError

    def parse_timeseries(self, manifest: Manifest, raw_dir: Path, base: dict) -> list[dict]:
        """Per-interval rows from one iteration's raw files; none by default."""
        return []

    def recognizes(self, path: Path, head: bytes) -> bool:
        """Whether a file is this tool's output, by its content (``head``: its first bytes,
        decompressed when the tool writes compressed files); ``storbench import`` asks."""
        return False

    def claims_folder(self, folder: Path) -> bool:
        """Whether a folder is one output of this tool as a whole (imported as one unit)."""
        return False

    def import_series(self, paths: list[Path], base: dict) -> list[dict]:
        """Per-interval rows of outputs made elsewhere, as ``parse_timeseries`` gives them for
        the workflow's own runs; none by default."""
        return []

    def import_outputs(self, paths: list[Path], base: dict) -> list[dict]:
        """Rows from raw outputs produced outside storbench (``storbench import``).

        ``base`` has experiment, iteration, attempt and tool; rows set ``run_id`` (from the
        tool's own labels or the file name) and ``raw_path``. Raises ToolOutputError naming
        the file when a path is not this tool's output.
        """
        raise NotImplementedError(f"import of {self.name} outputs is not supported")


ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"  # the first bytes of zstd data (warp's benchmark data)


def whole_rate(value) -> float | None:
    """A plain number of I/Os per second from a job option, else None ('max', '100,50')."""
    if isinstance(value, bool):
        return None
    try:
        rate = float(value)
    except (TypeError, ValueError):
        return None
    return rate if rate > 0 else None
