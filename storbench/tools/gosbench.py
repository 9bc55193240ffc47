"""GOSBench (mulbc/gosbench): a server hands YAML-defined S3 tests to workers on the hosts.

The job file is gosbench's YAML config with one test per run. The S3 keys are in it only
as base.SECRET_PLACEHOLDERS (gosbench reads keys from its config alone). The server runs
on the controller in the output folder, so its ``gosbench_results.csv`` lands there next
to its log ``server.console.txt``; a worker (``gosbench-worker -s <server>:<port>``) runs
on every host. On one host, ``command`` runs server and worker together.
Values reach the YAML as JSON strings (``tojson``) or through int() and true/false, so no
value can end its line or add a key: they need no further checks.

The server never exits by itself (it waits for more workers after the last test), so the
command stops it once the log says "All performance tests finished" and every worker was
told to shut down; a server that exits on its own has failed. Workers exit when the server
tells them to and the runner kills leftovers.

Service mode (``execution: service``): the server runs on the controller, and for each run
the engine starts one worker per host (``service_per_run``) that dials the controller at
the host group's ``controller_address`` (the worker's own Prometheus port: 8888, or the
host's ``service_ports.gosbench``). The server hands the workers the one config (keys filled
in a private copy only); with ``workers_share_buckets`` each worker writes its own object
names (``w<worker>obj<n>``), so no worker deletes another's objects.

Results: one host='all' row per test, from the server's ``PERF RESULTS`` log line (full
precision), else from ``gosbench_results.csv`` (6 decimals). In service mode each host also
gets its worker's own row, from the ``PROM VALUES`` line its worker logs (kept per run as
``<host>.service.log``); the 'all' row stays gosbench's own sum. Standalone, with one
worker on the run's only host, that host gets the same row as 'all'.
Columns: ios = Total Operations (successful requests), bytes = Total Bytes, bw_bytes_s =
gosbench's Average BW (sum of each worker's bytes / its own ~runtime), iops = ios x bw /
bytes (exact for a constant object size; none without payload bytes), duration_s = "Test
runtime on server" (it includes gosbench's 10 s wait after the work, so bytes / duration_s
is not the bandwidth), lat_mean_ns = gosbench's average latency, which is the unweighted
mean of the workers' averages of whole milliseconds. No percentiles, no error count.

Version: gosbench has no --version flag and its outputs name no build, so a host's version
is the content hash of its two binaries ('gosbench server sha256:<12 hex> worker sha256:<12
hex>'): the same build gives the same text on every host, and preflight compares it as any
tool's version. A host keeps it per identity of both files, so a run hashes them only after
one changed. Imported outputs have no binary: their rows record no version.

op: gosbench mixes operations within one test and reports them together. A test with one
non-zero weight gets that op (existing_read counts as read); a mixed test (read, write,
delete, list by weight) gets op='mixed', rw='mixed' and rwmixread = the read share of the
weights: gosbench's numbers are the mix's total, never one operation's.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

from storbench.core import units
from storbench.core.addresses import with_port
from storbench.core.aggregate import LATENCY_SUMMARY, aggregate_hosts, joined, no_percentiles
from storbench.core.options import truthy
from storbench.core.schema_names import ALL_HOSTS
from storbench.core.specs import Manifest
from storbench.core.suggest import closest, did_you_mean
from storbench.tools.base import (
    SECRET_PLACEHOLDERS,
    Capabilities,
    RenderError,
    ToolAdapter,
    ToolOutputError,
)

SERVER = "gosbench-server"
WORKER = "gosbench-worker"
SERVER_LOG = "server.console.txt"  # written by the command's script, like worker.console.txt
RESULTS_CSV = "gosbench_results.csv"
CSV_HEADER = (
    "testName",
    "Total Operations",
    "Total Bytes",
    "Average Bandwidth in Bytes/s",
    "Average Latency in ms",
    "Test duration seen by server in seconds",
)
MAX_BUCKET_NAME = 63  # S3's limit
PROMETHEUS_PORT = 8888  # the worker's exporter (gosbench's default); one worker per host
WEIGHTS = ("read_weight", "existing_read_weight", "write_weight", "delete_weight", "list_weight")
# the job options config_test and the template read; any other is not in the config gosbench gets
# gosbench config keys that storbench writes from its generic options (or from the target)
GENERIC_OF_OWN = {
    "parallel_clients": "numjobs",
    "stop_with_runtime": "runtime",
    "size_min": "bs",
    "size_max": "bs",
    "number_min": "objects",
    "number_max": "objects",
}
OPTIONS = ("bs", "part_size", "runtime", "stop_with_ops", "objects", "buckets", "object_prefix",
           "workers_share_buckets", "numjobs", "clean_after", "use_path_style", "rw",
           "rwmixread", *WEIGHTS)  # fmt: skip
_OP_OF_WEIGHT = {
    "read_weight": "read",
    "existing_read_weight": "read",
    "write_weight": "write",
    "delete_weight": "delete",
    "list_weight": "list",
}
_OP_ORDER = ("read", "write", "delete", "list")
_WEIGHTS_OF_RW = {"read": "read", "randread": "read", "write": "write", "randwrite": "write"}
_MIXED_RW = ("rw", "readwrite", "randrw")
_UNITS = ((4, "TB"), (3, "GB"), (2, "MB"), (1, "KB"))  # gosbench's units are binary
_UNIT_BYTES = {"B": 1, "KB": 1 << 10, "K": 1 << 10, "MB": 1 << 20, "M": 1 << 20,
               "GB": 1 << 30, "G": 1 << 30, "TB": 1 << 40, "T": 1 << 40}  # fmt: skip
_PERF_KEYS = {
    "Average BW in Byte/s": "bw",
    "Average latency in ms": "latency_ms",
    "Test runtime on server": "runtime",
    "Total Bytes": "bytes",
    "Total Operations": "operations",
    "test": "test",
}
_PERF_FIELD = re.compile(
    r"(?:^|\s)(" + "|".join(re.escape(key) for key in _PERF_KEYS) + r')=("(?:[^"\\]|\\.)*"|\S+)'
)

# $1 output folder, $2 config, $3 server port, $4 workers to wait for, $5 local worker's
# Prometheus port or '' (server only, the workers run as services on the hosts).
_SERVER_SCRIPT = """\
out=$1 config=$2 port=$3 workers=$4 local_worker=$5 link=
case $config in
  *.yaml|*.yml|*.json) ;;
  *) link=$config.yaml; ln -sf "$config" "$link" || exit; config=$link ;;
esac
mkdir -p "$out" && cd "$out" || exit
header='@HEADER@'
[ -e gosbench_results.csv ] || printf '%s\\n' "$header" > gosbench_results.csv
gosbench-server -c "$config" -p "$port" > server.console.txt 2>&1 &
server=$!
worker=
if [ -n "$local_worker" ]; then
  gosbench-worker -s "127.0.0.1:$port" -p "$local_worker" > worker.console.txt 2>&1 &
  worker=$!
fi
grace=30
while kill -0 "$server" 2>/dev/null; do
  if grep -q 'msg="All performance tests finished"' server.console.txt; then
    told=$(grep -c 'msg="Shutting down worker"' server.console.txt)
    if [ "$told" -ge "$workers" ] || [ "$grace" -le 0 ]; then
      kill "$server" $worker 2>/dev/null
      wait
      [ -z "$link" ] || rm -f "$link"
      exit 0
    fi
    grace=$((grace - 1))
  fi
  sleep 1
done
wait "$server"
rc=$?
[ -z "$worker" ] || kill "$worker" 2>/dev/null
[ -z "$link" ] || rm -f "$link"
echo "storbench-gosbench: gosbench-server stopped before finishing (exit $rc):" >&2
tail -n 20 server.console.txt >&2
[ "$rc" -ne 0 ] || rc=1
exit "$rc"
"""

_SERVER_SCRIPT = _SERVER_SCRIPT.replace("@HEADER@", ",".join(CSV_HEADER))

# gosbench has no --version flag: its builds are told apart by the content of its binaries
# ('gosbench server sha256:<12 hex> worker sha256:<12 hex>', the same on every host running the
# same build; 'gosbench worker sha256:<12 hex>' on a host with the worker only, as a service
# run's hosts need: the server runs on the controller); 127 without the worker, 1 when a
# binary cannot be read.
_VERSION_SCRIPT = (
    "worker=$(command -v gosbench-worker) || exit 127; "
    'worker=$(sha256sum < "$worker") || exit 1; '
    "if server=$(command -v gosbench-server); then "
    'server=$(sha256sum < "$server") || exit 1; '
    'printf \'gosbench server sha256:%.12s worker sha256:%.12s\\n\' "$server" "$worker"; '
    "else printf 'gosbench worker sha256:%.12s\\n' \"$worker\"; fi"
)


class GosbenchAdapter(ToolAdapter):
    name = "gosbench"
    job_suffix = ".yaml"  # gosbench picks its config parser by the file name suffix
    default_template = "gosbench/config.yaml.j2"
    install_hint = (
        "https://github.com/mulbc/gosbench (go install github.com/mulbc/gosbench/server@latest "
        "and .../worker@latest build 'server' and 'worker': put them on PATH as "
        "gosbench-server and gosbench-worker)"
    )
    capabilities = Capabilities(
        target_types=("s3",),
        execution=("standalone", "service"),
        import_formats=("result folder",),
        version=True,  # no --version: its version script prints its binaries' content hashes
    )
    output_is_folder = True
    default_port = 2000  # the server's port (gosbench's default); workers connect to it
    service_job_shared = True  # the server hands its one config to every worker
    service_log_results = True  # each worker logs its own results (PROM VALUES)
    service_per_run = True  # workers exit when the server's tests are done
    workers_dial_controller = True
    worker_port = PROMETHEUS_PORT  # a worker's own listener; service_ports.gosbench moves it

    def template_context(self, spec: dict) -> dict:
        target = spec["target"]
        if target.get("type") != "s3":
            raise _render_error(f"target {target.get('name')!r} is not an s3 target")
        return {
            "experiment": spec["experiment"],
            "run_id": spec["run_id"],
            "target": target,
            "point": spec["point"],
            "access_key": SECRET_PLACEHOLDERS["access_key"],
            "secret_key": SECRET_PLACEHOLDERS["secret_key"],
            "s3": {
                "endpoint": target["endpoint"],
                "region": target.get("region") or "us-east-1",
                "skip_ssl_verify": _yaml_bool(target.get("verify_tls") is False),
                "use_path_style": _yaml_bool(spec["params"].get("use_path_style", True)),
            },
            "test": config_test(spec),
        }

    def job_file_secret(self, key: str) -> str:
        return key.replace("'", "''")  # the template single-quotes the keys (YAML)

    def option_problems(self, sections: list[dict]) -> dict[str, str]:
        """Options storbench does not write into gosbench's config ('numjob: 32' ran with one
        parallel client, gosbench's default, and said nothing)."""
        problems: dict[str, str] = {}
        for option in dict.fromkeys(option for section in sections for option in section):
            if option in OPTIONS or option == "ramp_time":
                continue
            near = closest(option, OPTIONS)
            hint = f"did you mean {near!r}?" if near else f"its options: {', '.join(OPTIONS)}"
            if option in GENERIC_OF_OWN:
                hint = f"its config's {option}: use storbench's option {GENERIC_OF_OWN[option]!r}"
            problems[option] = f"gosbench has no option {option!r} ({hint})"
        return problems

    def command(self, job_path: str, output_path: str, host: str) -> list[str]:
        """Server and one worker on this host (a single-host run)."""
        port = str(self.default_port)
        return _server_argv(job_path, output_path, port, workers=1, worker=str(PROMETHEUS_PORT))

    def version_command(self) -> list[str]:
        return ["sh", "-c", _VERSION_SCRIPT]

    def host_requirements(
        self, job: dict, sweep: dict, execution: str = "standalone"
    ) -> list[dict]:
        """A standalone run starts the server on the host beside its worker (the version
        command needs only the worker: a service run's server runs on the controller)."""
        if execution != "standalone":
            return []
        return [
            _server_on_path(
                "the host's PATH (a standalone run starts it beside the worker; execution:"
                " service runs it on the controller)"
            )
        ]

    def version_programs(self) -> tuple[str, ...]:
        return (SERVER, WORKER)  # the files hashed: a host hashes them again once either changes

    def controller_requirements(self) -> list[dict]:
        """A service run's server runs here (its workers dial it): the worker is not needed."""
        return [
            _server_on_path(
                "this machine's PATH (execution: service runs gosbench's server here, which"
                f" the hosts' workers dial); {self.install_hint}"
            )
        ]

    def output_name(self, host: str) -> str:
        return f"{host}.gosbench"

    def worker_command(self, controller: str, port: int, own_port: int) -> list[str]:
        """A worker that connects to the server at controller:port (gosbench workers dial
        out; it retries every second until the server is up); own_port: its Prometheus port."""
        return [WORKER, "-s", with_port(controller, port), "-p", str(own_port)]

    def controller_command(
        self, job_path: list[str], output_path: str, endpoints: list[str]
    ) -> list[str]:
        """The server for one worker per host; endpoints are controller:port, once per host."""
        port = endpoints[0].rpartition(":")[2] if endpoints else str(self.default_port)
        return _server_argv(job_path[0], output_path, port, workers=len(endpoints), worker="")

    def parse(self, manifest: Manifest, raw_dir: Path, base: dict) -> list[dict]:

        config_path = raw_dir.parent / manifest.job_file
        tests = load_tests(config_path)
        hosts = manifest.hosts
        outputs = {h["output"] for h in hosts if (raw_dir / h["output"]).exists()}
        if len(outputs) != 1:
            expected = ", ".join(sorted({h["output"] for h in hosts}))
            raise ToolOutputError(f"{raw_dir}: expected one gosbench output folder of {expected}")
        folder = raw_dir / outputs.pop()
        results = load_results(folder)
        rows = result_rows(
            results, tests, base=base, params=manifest.params or {},
            tool_version=joined(h.get("tool_version") for h in hosts), source=folder,
        )  # fmt: skip
        if manifest.execution == "service":
            worker_rows = []
            for host in hosts:
                if host.get("service_log"):
                    path = raw_dir / host["service_log"]
                    worker_rows += _worker_rows(path, host, rows, tests)
            return worker_rows + rows
        workers = {tests[row["job"]].get("workers") for row in rows}
        if len(hosts) == 1 and workers == {1}:
            host_rows = [{**row, "host": hosts[0]["name"]} for row in rows]
            return host_rows + aggregate_hosts(host_rows)
        return rows

    def recognizes(self, path: Path, head: bytes) -> bool:
        if path.suffix in (".yaml", ".yml"):  # the test config: operation weights, object sizes
            return b"s3_config" in head and b"tests" in head
        if head.startswith(CSV_HEADER[0].encode() + b","):
            return True  # gosbench_results.csv
        return b'msg="PERF RESULTS"' in head and b"level=" in head  # the server's logrus log

    def claims_folder(self, folder: Path) -> bool:
        return (folder / RESULTS_CSV).is_file() or (folder / SERVER_LOG).is_file()

    def import_outputs(self, paths: list[Path], base: dict) -> list[dict]:
        paths = [Path(path) for path in paths]
        configs = [path for path in paths if path.suffix in (".yaml", ".yml")]
        rows = []
        for path in paths:
            if path in configs:
                continue
            results = load_results(path)
            tests = _tests_for(results, path, configs)
            run_id = path.name if path.is_dir() else path.parent.name
            run = {**base, "run_id": run_id, "raw_path": str(path)}
            rows += result_rows(results, tests, base=run, params={}, source=path)
        if not rows:
            raise ToolOutputError(f"{', '.join(map(str, paths))}: no gosbench output given")
        return rows


ADAPTER = GosbenchAdapter()


def _server_on_path(where: str) -> dict:
    """A preflight requirement: gosbench's server found on ``where`` (a PATH, and why)."""
    return {"problem": f"{SERVER} is not on {where}", "argv": ["sh", "-c", f"command -v {SERVER}"]}


def _server_argv(job_path: str, output_path: str, port: str, *, workers: int, worker: str):
    return ["sh", "-c", _SERVER_SCRIPT, "storbench-gosbench", output_path, job_path, port,
            str(workers), worker]  # fmt: skip


# --- config --------------------------------------------------------------------------------


def _render_error(message: str, option: str | None = None) -> Exception:

    return RenderError(f"gosbench: {message}", option)


def _yaml_bool(value) -> str:
    return "true" if truthy(value) else "false"


def config_test(spec: dict) -> dict:
    """The test entry of the config for one run (see templates/gosbench/config.yaml.j2)."""

    params = spec["params"]
    if "bs" not in params:
        raise _render_error("set bs (the object size, or a range such as 1k-100000k)")
    low, high = _size_range(params["bs"])
    unit = min(object_size_in_units(low)[1], object_size_in_units(high)[1], key=_UNIT_ORDER.index)
    size, size_max = low // _UNIT_BYTES[unit], high // _UNIT_BYTES[unit]
    part = params.get("part_size")
    part_size = 0  # gosbench's default: no multipart uploads
    if part:
        part_bytes = units.parse_size(part)
        if part_bytes % _UNIT_BYTES[unit]:
            raise _render_error(f"part_size {part!r} is not a whole number of {unit}", "part_size")
        part_size = part_bytes // _UNIT_BYTES[unit]
    runtime = units.job_duration(params["runtime"]) if "runtime" in params else "0s"
    stop_with_ops = _count(params, "stop_with_ops", 0, least=0)
    if runtime == "0s" and not stop_with_ops:
        raise _render_error("set runtime or stop_with_ops")
    objects = _count(params, "objects", 100, least=1)
    buckets = _count(params, "buckets", 1, least=1)
    longest = f"{spec['target']['bucket']}-{buckets - 1}"
    if len(longest) > MAX_BUCKET_NAME:
        raise _render_error(f"bucket name {longest!r} is longer than {MAX_BUCKET_NAME}")
    return {
        "name": spec["run_id"],
        **weights(params),
        "size": size,
        "size_max": size_max,
        # a range: each object's size drawn evenly from it (gosbench's 'random')
        "size_distribution": "constant" if size == size_max else "random",
        "unit": unit,
        "part_size": part_size,
        "objects": objects,
        "buckets": buckets,
        # storbench's cleanup removes buckets named <bucket>*; gosbench appends the number
        "bucket_prefix": f"{spec['target']['bucket']}-",
        "object_prefix": str(params.get("object_prefix", "obj")),
        "stop_with_runtime": runtime,
        "stop_with_ops": stop_with_ops,
        "workers": len(spec.get("hosts") or []) or 1,
        # shared: bucket names stay <bucket_prefix><n>, else gosbench prepends w<worker>
        "workers_share_buckets": _yaml_bool(params.get("workers_share_buckets", True)),
        "parallel_clients": int(params.get("numjobs", 1)),
        "clean_after": _yaml_bool(params.get("clean_after", True)),
    }


def _count(params: dict, option: str, default: int, *, least: int) -> int:
    """A whole-number option of the config (gosbench took objects: -1 and buckets: 0)."""
    value = int(params.get(option, default))
    if value < least:
        raise _render_error(f"{option} must be a whole number >= {least}, not {value}", option)
    return value


def weights(params: dict) -> dict:
    """Operation weights: the *_weight options, else from rw (and rwmixread for rw mixes)."""
    given = {name: _count(params, name, 0, least=0) for name in WEIGHTS if name in params}
    if given:
        chosen = {**dict.fromkeys(WEIGHTS, 0), **given}
    elif str(params.get("rw", "")).lower() in _WEIGHTS_OF_RW:
        chosen = {
            **dict.fromkeys(WEIGHTS, 0),
            f"{_WEIGHTS_OF_RW[str(params['rw']).lower()]}_weight": 100,
        }
    elif str(params.get("rw", "")).lower() in _MIXED_RW:
        reads = int(params.get("rwmixread", 50))
        chosen = {**dict.fromkeys(WEIGHTS, 0), "read_weight": reads, "write_weight": 100 - reads}
    elif "rw" in params:
        rw, known = str(params["rw"]), [*_WEIGHTS_OF_RW, *_MIXED_RW]
        meant = did_you_mean(rw.lower(), known)
        raise _render_error(f"rw {rw!r}{meant}: gosbench does {', '.join(known)}", "rw")
    else:
        raise _render_error("set rw (read, write, rw, randrw) or the *_weight options")
    if not any(chosen.values()):
        raise _render_error("every operation weight is 0")
    return chosen


_UNIT_ORDER = ("B", "KB", "MB", "GB", "TB")


def _size_range(value) -> tuple[int, int]:
    """bs as (smallest, largest) object size: '4k' -> (4096, 4096), '1k-100000k' a range."""
    text = str(value)
    low_text, dash, high_text = text.partition("-")
    low = units.parse_size(low_text if dash else value)
    high = units.parse_size(high_text) if dash else low
    if high < low:
        raise _render_error(f"bs {text!r}: the range's end is below its start", "bs")
    return low, high


def object_size_in_units(size: int) -> tuple[int, str]:
    """4096 -> (4, 'KB'): the largest gosbench unit (binary) that divides the size."""
    if size <= 0:
        raise _render_error("the object size must be at least 1 byte")
    count, unit = units.in_whole_units(size, _UNITS)
    return count, unit or "B"


def load_tests(path: Path) -> dict:
    """{test name: test entry} of a gosbench config file (YAML or JSON)."""
    # PyYAML: only for this file
    import yaml

    try:
        config = yaml.safe_load(Path(path).read_text())
    except yaml.MarkedYAMLError as error:  # its text quotes the line: a key, perhaps
        mark = error.problem_mark
        at = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ToolOutputError(
            f"{at}: not a readable gosbench config (YAML: {error.problem or error.context}; "
            "the line is not shown, it may hold a key)"
        ) from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise ToolOutputError(f"{path}: not a readable gosbench config ({error})") from None
    tests = config.get("tests") if isinstance(config, dict) else None
    if not isinstance(tests, list) or not all(isinstance(t, dict) and "name" in t for t in tests):
        raise ToolOutputError(f"{path}: not a gosbench config (no 'tests' list with names)")
    return {str(test["name"]): test for test in tests}


def _tests_for(results: list[dict], output: Path, configs: list[Path]) -> dict:
    """The tests of the given config files, else of a config beside the output or one up."""
    names = {result["test"] for result in results}
    folder = output if output.is_dir() else output.parent
    candidates = configs or sorted(
        path for directory in (folder, folder.parent) for pattern in ("*.yaml", "*.yml")
        for path in directory.glob(pattern)
    )  # fmt: skip
    for candidate in candidates:
        try:
            tests = load_tests(candidate)
        except ToolOutputError:
            if configs:  # a config given on the command line that cannot be read: say why
                raise
            continue
        if names <= set(tests):
            return tests
    raise ToolOutputError(
        f"{output}: no gosbench config with test(s) {', '.join(sorted(names))} given or next to "
        "it (needed for the operation weights and object size)"
    )


# --- results -------------------------------------------------------------------------------


def load_results(path: Path) -> list[dict]:
    """Per-test results from an output folder, the server log or gosbench_results.csv."""
    path = Path(path)
    if path.is_dir():
        for name in (SERVER_LOG, RESULTS_CSV):
            if (path / name).is_file():
                return load_results(path / name)
        raise ToolOutputError(f"{path}: no {SERVER_LOG} or {RESULTS_CSV} in the folder")
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise ToolOutputError(f"{path}: not text, not gosbench output") from None
    if not text.strip():
        raise ToolOutputError(f"{path}: empty file")
    if text.startswith(CSV_HEADER[0] + ","):
        return results_from_csv(text, source=path)
    return perf_results(text, source=path)


def perf_results(text: str, *, source) -> list[dict]:
    """The PERF RESULTS lines of the server's log (logrus text, keys with spaces)."""
    results = []
    for line in text.splitlines():
        if 'msg="PERF RESULTS"' not in line:
            continue
        fields = {_PERF_KEYS[key]: _unquote(value) for key, value in _PERF_FIELD.findall(line)}
        missing = sorted(set(_PERF_KEYS.values()) - set(fields))
        if missing:
            raise ToolOutputError(f"{source}: PERF RESULTS line lacks {', '.join(missing)}")
        try:
            results.append(_result_numbers(fields, fields["runtime"]))
        except ValueError as error:
            raise ToolOutputError(f"{source}: PERF RESULTS line: {error}") from None
    if not results:
        raise ToolOutputError(f"{source}: no PERF RESULTS line ({_first_line(text)})")
    return results


def _unquote(value: str) -> str:
    if value.startswith('"'):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value.strip('"')
    return value


def _first_line(text: str) -> str:
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return f"first line: {line[:200]!r}"


def results_from_csv(text: str, *, source) -> list[dict]:
    lines = list(csv.reader(io.StringIO(text)))
    if tuple(lines[0]) != CSV_HEADER:
        raise ToolOutputError(f"{source}: not gosbench_results.csv (header {lines[0]!r})")
    results = []
    for number, line in enumerate(lines[1:], start=2):
        if not line:
            continue
        if len(line) != len(CSV_HEADER):
            raise ToolOutputError(f"{source}:{number}: {len(line)} fields, not {len(CSV_HEADER)}")
        try:
            results.append({
                "test": line[0],
                "operations": float(line[1]),
                "bytes": float(line[2]),
                "bw": float(line[3]),
                "latency_ms": float(line[4]),
                "runtime_s": float(line[5]),
            })  # fmt: skip
        except ValueError as error:
            raise ToolOutputError(f"{source}:{number}: {error}") from None
    if not results:
        raise ToolOutputError(f"{source}: gosbench_results.csv without any test")
    return results


def result_rows(
    results: list[dict], tests: dict, *, base: dict, params: dict, tool_version=None, source
) -> list[dict]:
    """One host='all' row per test result, described by its test entry of the config."""
    from storbench.core.results import COLUMNS  # lazy: results imports pyarrow

    inherited = {key: value for key, value in base.items() if key in COLUMNS}
    unmeasured = {**dict.fromkeys(LATENCY_SUMMARY), **no_percentiles(), "errors": None}
    rows = []
    for result in results:
        test = tests.get(result["test"])
        if test is None:
            raise ToolOutputError(f"{source}: test {result['test']!r} is not in the config")
        op, rw, rwmixread = _operation(test, source)
        rows.append({
            **inherited,
            **unmeasured,
            "host": ALL_HOSTS,
            "job": result["test"],
            "op": op,
            "rw": str(params["rw"]) if "rw" in params else rw,
            "bs": _constant_object_size(test),
            "numjobs": test.get("parallel_clients"),
            "rwmixread": rwmixread,
            "runtime_s": _runtime_s(test),
            **_measures(result),
            "lat_basis": "lat",
            "tool_version": tool_version,
        })  # fmt: skip
    missing = sorted(set(tests) - {result["test"] for result in results})
    if missing:  # a server log cut short ends before the later tests' PERF RESULTS lines
        raise ToolOutputError(
            f"{source}: no result for test(s) {', '.join(map(repr, missing))} of the config "
            "(output cut short?)"
        )
    return rows


_PROM_VALUES = re.compile(
    r'msg="PROM VALUES \{TestName:(?P<test>\S+) Operations:(?P<operations>\S+) '
    r"Bytes:(?P<bytes>\S+) Bandwidth:(?P<bw>\S+) LatencyAvg:(?P<latency_ms>\S+) "
    r'Duration:(?P<duration>[^}\s]+)\}"'
)


def worker_results(path: Path) -> list[dict]:
    """A worker's own result per test, from its log's PROM VALUES lines."""
    results = []
    for line in path.read_text(errors="replace").splitlines():
        if match := _PROM_VALUES.search(line):
            try:
                results.append(_result_numbers(match.groupdict(), match["duration"]))
            except ValueError as error:
                raise ToolOutputError(f"{path}: PROM VALUES line: {error}") from None
    return results


def _result_numbers(values: dict, runtime: str) -> dict:
    """One test's result, from a PERF RESULTS (server) or PROM VALUES (worker) line."""
    # parsing only: render and run stay light
    from storbench.tools.warp import parse_go_duration

    return {
        "test": values["test"],
        "operations": float(values["operations"]),
        "bytes": float(values["bytes"]),
        "bw": float(values["bw"]),
        "latency_ms": float(values["latency_ms"]),
        "runtime_s": parse_go_duration(runtime),
    }


def _worker_rows(path: Path, host: dict, totals: list[dict], tests: dict) -> list[dict]:
    """The worker's rows: the run's totals with this worker's own counts and rates, and the
    version its host printed (a manifest's host entry)."""
    by_test = {row["job"]: row for row in totals}
    own = {"host": host["name"], "tool_version": host.get("tool_version")}
    rows = []
    for result in worker_results(path):
        total = by_test.get(result["test"])
        if total is None:
            continue  # a test of another run in the same log part
        rows.append({**total, **own, **_measures(result)})
    return rows


def _measures(result: dict) -> dict:
    """Counts and rates of one result; iops = ios x bw / bytes (exact for one object size)."""
    operations, payload, bw = result["operations"], result["bytes"], result["bw"]
    return {
        "bytes": round(payload),
        "ios": round(operations),
        "duration_s": result["runtime_s"],
        "bw_bytes_s": bw,
        "iops": operations * bw / payload if payload else None,
        "lat_mean_ns": result["latency_ms"] * 1e6,
    }


def _operation(test: dict, source) -> tuple[str, str, int | None]:
    """(op, rw, rwmixread) of a test from its weights (see the module doc)."""
    shares = dict.fromkeys(_OP_ORDER, 0)
    for name in WEIGHTS:
        shares[_OP_OF_WEIGHT[name]] += int(test.get(name) or 0)
    used = [op for op in _OP_ORDER if shares[op] > 0]
    if not used:
        raise ToolOutputError(f"{source}: test {test.get('name')!r} has no non-zero weight")
    if len(used) == 1:
        return used[0], used[0], None
    return "mixed", "mixed", round(100 * shares["read"] / sum(shares.values()))


def _constant_object_size(test: dict) -> int | None:
    objects = test.get("objects") or {}
    unit = str(objects.get("unit", "")).upper()
    if unit not in _UNIT_BYTES or objects.get("size_min") != objects.get("size_max"):
        return None
    return int(objects["size_min"]) * _UNIT_BYTES[unit]


def _runtime_s(test: dict) -> float | None:
    # parsing only: render and run stay light
    from storbench.tools.warp import parse_go_duration

    runtime = test.get("stop_with_runtime")
    if isinstance(runtime, (int, float)) and not isinstance(runtime, bool):
        return runtime / 1e9 or None  # a bare number is a Go duration in nanoseconds
    if isinstance(runtime, str) and runtime.strip():
        return parse_go_duration(runtime) or None
    return None
