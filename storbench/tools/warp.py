"""warp (minio/warp): S3 get/put/mixed/delete/list/stat benchmarks from an args file.

warp takes command-line flags only, so the job file is an argument list, one per line
(``#`` lines are comments, the first argument is the benchmark). ``command`` reads it with
a ``while read`` loop into ``"$@"`` (no word splitting, quotes stay literal), adds
``--benchdata=<output>/warp`` and then runs ``warp analyze --json`` on the data file warp
wrote. The output is a folder: ``warp.json.zst`` (or ``warp.csv.zst`` with ``full: true``)
and ``analyze.json``. Keys reach warp as ``WARP_ACCESS_KEY`` / ``WARP_SECRET_KEY``.
Values need no further checks: each is one line ``--flag=value``, so one argument whatever
it holds (blanks, quotes, a leading '-'), and warp's flag parser (Go's ``flag``) takes
everything after the first '=' as the value.

warp clears the bucket before and after each run unless ``noclear: true``: every
experiment has its own bucket, so clearing keeps iterations independent and the bucket
small; two standalone warp processes on one bucket would delete each other's objects.

Multi-host: ``warp client :<port>`` on every host, the controller runs the same args file
with ``--warp-client h1:port,h2:port``. The controller does not forward keys it read from
the environment, so the clients need the same two variables. warp clients have no quit
command: the runner kills what it started. warp names its clients by random ids, never by
host, so a distributed run has one row per warp client (``warp-client-<id>``) and 'all'
rows summed over them (see :func:`client_rows` for why not warp's own merged total).

Results come from warp's aggregated JSON (``analyze --json`` or the ``.json.zst``), one row
per operation type. bw_bytes_s and iops are warp's "Average" over its steady window
(``throughput``: ramp-up and ramp-down dropped, iops counts objects per second as warp
prints ``obj/s``); bytes, ios and errors count every request of the run, and duration_s is
the span they cover (first request's start to last request's end), so bytes / duration_s
is the whole run's rate beside the steady window's bw_bytes_s.
Latency is the request duration ('lat'). warp keeps per-segment request statistics
(``requests_by_client``, ~10 s each): the mean and stdev here are pooled exactly over the
segments (request-weighted), min/max are the extremes; p50/p90/p99 are merged the way
warp's own report does (the plain average of the segments' values), so they equal what
warp prints, pct_source='tool'. That average weighs a short tail segment like a full one
(warp-put fixture: 'Avg: 10.1ms' printed, 7.3 ms over its 5,484 requests); the printed
percentiles carry the same bias, only warp has the requests to do better. Runs with
varying object sizes have no latency (warp reports only throughput per size range).

Hosts: warp names its clients with random ids, and ``by_host`` lists S3 endpoints, not
client hosts. So an output with one warp client becomes that host's rows (plus 'all');
the output of a distributed run (several clients) gives a row per warp client and 'all'.
"""

from __future__ import annotations

import datetime
import functools
import json
import math
import re
from pathlib import Path
from urllib.parse import urlsplit

from storbench.core import units
from storbench.core.aggregate import LATENCY_SUMMARY, aggregate_hosts, no_percentiles
from storbench.core.options import truthy
from storbench.core.schema_names import ALL_HOSTS, CONTROLLER, normalize_op
from storbench.core.specs import Manifest
from storbench.core.suggest import closest
from storbench.tools.base import (
    ARGS_FILE_LOOP,
    ZSTD_MAGIC,
    Capabilities,
    RenderError,
    ToolAdapter,
    ToolOutputError,
    pinned_lines,
)

BENCHMARKS = ("get", "put", "mixed", "delete", "list", "stat")
_BENCHMARK_OF_RW = {
    "read": "get",
    "randread": "get",
    "write": "put",
    "randwrite": "put",
    "rw": "mixed",
    "readwrite": "mixed",
    "randrw": "mixed",
}
DISTRIB_OPTIONS = ("get_distrib", "put_distrib", "delete_distrib", "stat_distrib")
_MAPPED = {
    "op",
    "rw",
    "bs",
    "numjobs",
    "runtime",
    "objects",
    "rwmixread",
    "noclear",
    *DISTRIB_OPTIONS,
}
_WITHOUT_COUNTERPART = {"iodepth", "size", "ramp_time"}  # generic options warp has no flag for
# warp's flags that storbench's generic options write: `duration: 30s` beside runtime would
# give warp two --duration, and without it storbench would not know the run's length
_GENERIC_OF_FLAG = {"duration": "runtime", "concurrent": "numjobs", "obj.size": "bs"}
_SET_BY_STORBENCH = {
    "access_key", "secret_key", "host", "bucket", "region", "tls", "insecure",
    "benchdata", "warp_client", "json", "no_color",
}  # fmt: skip
_DOTTED_PREFIXES = ("obj", "part", "autoterm", "analyze")  # warp's --obj.size, --part.size ...
_BINARY_UNITS = ((4, "TiB"), (3, "GiB"), (2, "MiB"), (1, "KiB"))
# go-humanize (warp's size parser): 'KiB' binary, 'KB' and 'K' decimal, bare number bytes
_HUMAN_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtpe]?)(i?)b?\s*$", re.IGNORECASE)
_GO_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_GO_DURATION_SECONDS = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0,
}  # fmt: skip

DATA_NAME = "warp"  # --benchdata prefix: warp appends .json.zst (.csv.zst with --full)
ANALYSIS_NAME = "analyze.json"

# Reads the args file into "$@" after any extra arguments, then rotates the extras to the end.
_RUN_SCRIPT = f"""\
job=$1 out=$2
shift 2
[ -r "$job" ] || {{ echo "storbench-warp: cannot read $job" >&2; exit 2; }}
extra=$#
{ARGS_FILE_LOOP}
while [ "$extra" -gt 0 ]; do
  set -- "$@" "$1"
  shift
  extra=$((extra - 1))
done
mkdir -p "$out" || exit
warp "$@" "--benchdata=$out/warp" || exit
for data in "$out/warp.json.zst" "$out/warp.csv.zst"; do
  if [ -f "$data" ]; then
    exec warp analyze --json "$data" > "$out/analyze.json"
  fi
done
echo "storbench-warp: warp wrote no benchmark data into $out" >&2
exit 1
"""


class WarpAdapter(ToolAdapter):
    name = "warp"
    job_suffix = ".warp"
    default_template = "warp/job.warp.j2"
    install_hint = "https://github.com/minio/warp/releases (one static binary; put warp on PATH)"
    capabilities = Capabilities(
        target_types=("s3",),
        execution=("standalone", "service"),
        interval_series=True,
        import_formats=("analysis json", "benchmark data (.csv.zst)"),
    )
    secret_env = {"WARP_ACCESS_KEY": "access_key", "WARP_SECRET_KEY": "secret_key"}
    output_is_folder = True
    default_port = 7761  # warp client's own default (cli/clientmode.go)
    service_job_shared = True  # the controller sends its one benchmark to every client
    latency_basis_texts = {
        "lat": "warp's request duration: from sending an S3 request until its response ended",
    }
    own_total_text = (
        "warp 1.1.3 divides a distributed run's merged requests by a window longer than its "
        "clients ran, so storbench sums each client's own steady-window rate, which warp "
        "prints under 'Throughput by client'"
    )

    def template_context(self, spec: dict) -> dict:
        benchmark, *arguments = warp_arguments(spec)
        return {
            "experiment": spec["experiment"],
            "run_id": spec["run_id"],
            "target": spec["target"],
            "point": spec["point"],
            "benchmark": benchmark,
            "arguments": arguments,
        }

    def command(self, job_path: str, output_path: str, host: str) -> list[str]:
        return ["sh", "-c", _RUN_SCRIPT, "storbench-warp", job_path, output_path]

    def option_problems(self, sections: list[dict]) -> dict[str, str]:
        """Options whose flag the section's benchmark lacks in warp 1.1.3 (a misspelt 'obj: 500'
        went to warp as --obj=500)."""
        problems: dict[str, str] = {}
        for section in sections:
            try:
                benchmark = benchmark_of(section)
            except RenderError:  # the render check names it
                continue
            known = benchmark_flags()[benchmark]
            if _influxdb_token(section.get("influxdb")):
                problems.setdefault("influxdb", _INFLUXDB_TOKEN_PROBLEM)
            for option in section:
                if option in _MAPPED or option in _WITHOUT_COUNTERPART:
                    continue
                flag = _flag_name(option)
                if option in _SET_BY_STORBENCH or flag in known:
                    continue
                near = closest(flag, known)
                hint = f" (did you mean {_option_name(near)!r}?)" if near else ""
                problems.setdefault(option, f"warp {benchmark} has no flag --{flag}{hint}")
        return problems

    def version_command(self) -> list[str]:
        return ["warp", "--version"]

    def output_name(self, host: str) -> str:
        return f"{host}.warp"

    def service_start_command(self, host: str, port: int) -> list[str]:
        # all interfaces: a configured name may be an SSH alias or resolve to 127.0.1.1 there
        return ["warp", "client", f":{port}"]

    def controller_command(
        self, job_path: list[str], output_path: str, endpoints: list[str]
    ) -> list[str]:
        """warp on the controller drives every client; the hosts' job files are equal."""
        clients = f"--warp-client={','.join(endpoints)}"
        return [*self.command(job_path[0], output_path, CONTROLLER), clients]

    def parse(self, manifest: Manifest, raw_dir: Path, base: dict) -> list[dict]:
        outputs = _manifest_outputs(manifest, raw_dir)
        params = manifest.params or {}
        return rows_from_outputs(outputs, base=base, params=params)

    def parse_timeseries(self, manifest: Manifest, raw_dir: Path, base: dict) -> list[dict]:
        series = []
        for host, _version, path in _manifest_outputs(manifest, raw_dir):
            document = load_result(path)
            name = host if _client_count(document) == 1 else ALL_HOSTS
            series += timeseries_rows(document, host=name, base=base, source=str(path))
        return series

    def recognizes(self, path: Path, head: bytes) -> bool:
        # the benchmark data (.json.zst, decompressed for head) or `warp analyze --json`
        if head.startswith(ZSTD_MAGIC):  # zstd that does not decompress: warp's, cut short
            return path.name.endswith(".json.zst")
        return b'"commandline":' in head and (
            b'"total_requests"' in head or b'"by_op_type"' in head
        )

    def import_series(self, paths: list[Path], base: dict) -> list[dict]:
        series = []
        for path in map(Path, paths):
            document = load_result(path)
            name = ALL_HOSTS
            run = {**base, "run_id": _run_id_of(path)}
            series += timeseries_rows(document, host=name, base=run, source=str(path))
        return series

    def import_outputs(self, paths: list[Path], base: dict) -> list[dict]:
        rows = []
        for path in map(Path, paths):
            run = {**base, "run_id": _run_id_of(path), "raw_path": str(path)}
            rows += rows_from_outputs([(None, None, path)], base=run, params={})
        return rows


ADAPTER = WarpAdapter()


# --- job file ------------------------------------------------------------------------------


def _render_error(message: str, option: str | None = None) -> Exception:

    return RenderError(f"warp: {message}", option)


def benchmark_of(params: dict) -> str:
    """The warp benchmark: option ``op``, else from rw (read -> get, write -> put, rw -> mixed)."""
    if "op" in params:
        benchmark = str(params["op"]).lower()
        if benchmark not in BENCHMARKS:
            raise _render_error(f"op {params['op']!r} is not one of {', '.join(BENCHMARKS)}", "op")
        return benchmark
    if "rw" in params:
        rw = str(params["rw"]).lower()
        if rw not in _BENCHMARK_OF_RW:
            raise _render_error(f"rw {params['rw']!r} has no warp benchmark; set op instead", "rw")
        return _BENCHMARK_OF_RW[rw]
    raise _render_error(f"set op ({', '.join(BENCHMARKS)}) or rw")


def warp_arguments(spec: dict) -> list[str]:
    """Benchmark name, then one ``--flag[=value]`` per argument, without keys or output paths."""

    target = spec["target"]
    if target.get("type") != "s3":
        raise _render_error(f"target {target.get('name')!r} is not an s3 target")
    params = spec["params"]
    benchmark = benchmark_of(params)
    endpoint = urlsplit(target["endpoint"])
    if endpoint.path not in ("", "/"):
        raise _render_error(f"endpoint {target['endpoint']!r}: warp takes host[:port] only")
    arguments = [benchmark, f"--host={endpoint.netloc}"]
    if endpoint.scheme == "https":
        arguments.append("--tls")
    if target.get("verify_tls") is False:
        arguments.append("--insecure")
    if target.get("region"):
        arguments.append(f"--region={target['region']}")
    arguments.append(f"--bucket={target['bucket']}")
    if "bs" in params:
        arguments.append(f"--obj.size={warp_size(params['bs'])}")
    if "numjobs" in params:
        arguments.append(f"--concurrent={int(params['numjobs'])}")
    if "runtime" in params:
        arguments.append(f"--duration={units.job_duration(params['runtime'])}")
    if "objects" in params and benchmark != "put":  # warp put has no --objects
        arguments.append(f"--objects={int(params['objects'])}")
    if benchmark == "mixed":
        arguments += _distribution(params)
    if truthy(params.get("noclear")):
        arguments.append("--noclear")
    arguments += _passed_through(params)
    arguments.append("--no-color")
    return arguments


def warp_size(value) -> str:
    """A size warp reads as binary: 4096 -> '4KiB' (warp reads '4KB' as 4000 bytes)."""

    count, suffix = units.in_whole_units(units.parse_size(value), _BINARY_UNITS)
    return f"{count}{suffix}"


def _distribution(params: dict) -> list[str]:
    """--get-distrib etc. as given; else from rwmixread (GET/PUT only); else warp's defaults."""
    given = [option for option in DISTRIB_OPTIONS if option in params]
    if given:
        return [f"--{option.replace('_', '-')}={params[option]}" for option in given]
    if "rwmixread" in params:
        reads = int(params["rwmixread"])
        return [
            f"--get-distrib={reads}",
            f"--put-distrib={100 - reads}",
            "--delete-distrib=0",
            "--stat-distrib=0",
        ]
    return []


def _passed_through(params: dict) -> list[str]:
    """Other options as warp flags: disable_multipart -> --disable-multipart, obj_randsize
    -> --obj.randsize; true -> bare flag, false -> left out, *size values in binary units."""
    arguments = []
    for option, value in params.items():
        if option in _MAPPED or option in _WITHOUT_COUNTERPART:
            continue
        if option in _SET_BY_STORBENCH:
            raise _render_error(f"option {option!r} is set by storbench from the target", option)
        flag = _flag_name(option)
        if flag in _GENERIC_OF_FLAG:
            generic = _GENERIC_OF_FLAG[flag]
            raise _render_error(f"{option}: use storbench's option {generic!r} (--{flag})", option)
        if isinstance(value, bool):
            if value:
                arguments.append(f"--{flag}")
        elif option.endswith("size"):
            arguments.append(f"--{flag}={warp_size(value)}")
        else:
            arguments.append(f"--{flag}={value}")
    return arguments


@functools.cache
def benchmark_flags() -> dict[str, frozenset[str]]:
    """{benchmark: its flags} as warp 1.1.3 declares them (tools/data)."""
    flags = {}
    for line in pinned_lines("warp-1.1.3-flags.txt"):
        benchmark, _, names = line.partition(":")
        flags[benchmark] = frozenset(names.split())
    return flags


def _option_name(flag: str) -> str:
    """A warp flag as the option a config writes: obj.randsize -> obj_randsize."""
    return flag.replace(".", "_").replace("-", "_")


def _flag_name(option: str) -> str:
    head, _, rest = option.partition("_")
    if head in _DOTTED_PREFIXES and rest:
        return f"{head}.{rest.replace('_', '-')}"
    return option.replace("_", "-")


# warp reads the same URL from its environment (cli/flags.go: EnvVar WARP_INFLUXDB_CONNECT)
_INFLUXDB_TOKEN_PROBLEM = (
    "the URL holds a token (before its '@'), which job files, each row's params and warp's"
    " command line would keep: leave the option out and set WARP_INFLUXDB_CONNECT to the URL"
    " in the hosts' environment instead"
)


def _influxdb_token(value) -> bool:
    return isinstance(value, str) and bool(urlsplit(value).username)


# --- reading warp's output -----------------------------------------------------------------


def _manifest_outputs(manifest: Manifest, raw_dir: Path) -> list[tuple]:
    """(host, tool version, output path) of every host that has an output (service hosts
    of a distributed run have none: the controller's output covers them)."""
    if manifest.execution == "service" and manifest.controller:
        path = raw_dir / manifest.controller["output"]
        if not path.exists():
            raise ToolOutputError(f"{raw_dir}: no warp output ({path.name})")
        return [(None, manifest.hosts[0].get("tool_version"), path)]
    outputs = [
        (host["name"], host.get("tool_version"), raw_dir / host["output"])
        for host in manifest.hosts
        if (raw_dir / host["output"]).exists()
    ]
    if not outputs:
        expected = ", ".join(host["output"] for host in manifest.hosts)
        raise ToolOutputError(f"{raw_dir}: no warp output ({expected})")
    return outputs


def load_result(path: Path) -> dict:
    """warp's aggregated result from analyze --json output, .json.zst data or an output folder."""
    path = Path(path)
    if path.is_dir():
        for name in (ANALYSIS_NAME, f"{DATA_NAME}.json.zst"):
            if (path / name).is_file():
                return load_result(path / name)
        raise ToolOutputError(f"{path}: no {ANALYSIS_NAME} or {DATA_NAME}.json.zst in the folder")
    if path.name.endswith(".csv.zst"):
        raise ToolOutputError(
            f"{path}: per-request data of warp --full; import the output of "
            f"`warp analyze --json {path.name}` instead"
        )
    raw = path.read_bytes()
    if not raw.strip():
        raise ToolOutputError(f"{path}: empty file")
    if path.suffix == ".zst":
        raw = _decompress(path, raw)
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ToolOutputError(f"{path}: {_not_json_reason(raw, error)}") from None
    _check_document(document, path)
    return document


def _decompress(path: Path, raw: bytes) -> bytes:
    # zstandard: only for .zst data
    import zstandard

    frame = zstandard.ZstdDecompressor().decompressobj()
    try:
        data = frame.decompress(raw)
    except zstandard.ZstdError as error:
        raise ToolOutputError(f"{path}: not readable zstd data ({error})") from None
    if not frame.eof:
        raise ToolOutputError(
            f"{path}: truncated: the zstd data ends inside its frame ({len(raw)} bytes; "
            "the file was cut while being written or copied)"
        )
    return data


def _not_json_reason(raw: bytes, error: Exception) -> str:
    text = raw.decode("utf-8", errors="replace")
    if text.lstrip().startswith("{") and not text.rstrip().endswith("}"):
        return f"truncated: the JSON document ends at byte {len(raw)} before it is complete"
    if "Report: " in text or "Operation: " in text:
        return (
            "warp's text report rounds every number (e.g. '2.09 MiB/s'); import the "
            "benchmark data (.json.zst) or `warp analyze --json` output instead"
        )
    return f"not warp JSON ({error})"


def _check_document(document, path: Path) -> None:
    if not isinstance(document, dict) or not isinstance(document.get("by_op_type"), dict):
        raise ToolOutputError(f"{path}: not warp's aggregated result (no 'by_op_type')")
    if document.get("final") is False and _client_count(document) <= 1:
        # warp 1.1's server never marks a distributed run's merged result final
        raise ToolOutputError(f"{path}: an intermediate warp update, not the final result")
    if not document["by_op_type"]:
        raise ToolOutputError(f"{path}: warp result without any operation")


def _client_count(document: dict) -> int:
    return len((document.get("total") or {}).get("clients") or [])


def _run_id_of(path: Path) -> str:
    name = path.name
    for suffix in (".json.zst", ".json"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


# --- result rows ---------------------------------------------------------------------------


def rows_from_outputs(outputs: list[tuple], *, base: dict, params: dict) -> list[dict]:
    """Rows of (host or None, tool version, path) outputs: per-host rows plus 'all' rows, or
    only 'all' rows for a distributed run's single output (or an output of unknown host)."""

    per_host, whole = [], []
    for host, version, path in outputs:
        document = load_result(path)
        rows = document_rows(document, base=base, params=params, tool_version=version, source=path)
        if host is not None and _client_count(document) == 1:
            per_host += [{**row, "host": host} for row in rows]
        elif _client_count(document) > 1:
            clients = client_rows(document, rows, path)
            merged = {row["op"]: row for row in rows}  # warp's own total, kept beside the sum
            whole.append(clients + [_with_own(row, merged) for row in aggregate_hosts(clients)])
        else:
            whole.append([_with_own({**row, "host": ALL_HOSTS}, {}) for row in rows])
    if whole and (per_host or len(whole) > 1):
        raise ToolOutputError(
            f"{outputs[0][2]}: a distributed warp result next to other outputs of the same run"
        )
    return whole[0] if whole else per_host + aggregate_hosts(per_host)


def _with_own(row: dict, merged: dict) -> dict:
    """An 'all' row with warp's own total beside it (the row itself when it is warp's)."""
    own = merged.get(row["op"], row)
    return {**row, "tool_bw_bytes_s": own.get("bw_bytes_s"), "tool_iops": own.get("iops")}


CLIENT_PREFIX = "warp-client-"  # warp names its clients by random ids, not by host


def client_rows(document: dict, rows: list[dict], source) -> list[dict]:
    """Per-client rows of a distributed run, one per operation type and warp client.

    Each client's throughput is warp's own for that client (its steady window); its latency
    is pooled over its own request segments. warp's merged total of a distributed run is not
    used: warp 1.1.3 divides the requests inside one merged window by a window longer than
    the clients ran (a 4-client put here: 'Average 25.69 MiB/s' printed, its four clients
    17.8-18.2 MiB/s each), so the 'all' rows are the sum over the clients.
    """
    by_op = {normalize_op(op_type): entry for op_type, entry in document["by_op_type"].items()}
    client_totals = document.get("by_client") or {}
    single_op = len(by_op) == 1
    result = []
    for row in rows:
        entry = by_op[row["op"]]
        throughputs = entry.get("throughput_by_client") or {}
        if not throughputs:
            raise ToolOutputError(f"{source}: a distributed warp result without per-client data")
        for client, throughput in sorted(throughputs.items()):
            seconds = (throughput.get("measure_duration_millis") or 0) / 1000
            requests = {"requests_by_client": {client: entry["requests_by_client"].get(client)}}
            total = client_totals.get(client) or {}
            result.append({
                **row,
                "host": f"{CLIENT_PREFIX}{client}",
                "bytes": int(total["total_bytes"]) if single_op and total else None,
                "ios": int(total["total_requests"]) if single_op and total else None,
                "errors": int(throughput.get("errors") or 0),
                "duration_s": span_s(total) if single_op and total else None,
                "bw_bytes_s": throughput["bytes"] / seconds if seconds else None,
                "iops": throughput["objects"] / seconds if seconds else None,
                **(request_latency(requests) if requests["requests_by_client"][client] else {}),
            })  # fmt: skip
    return result


def document_rows(
    document: dict, *, base: dict, params: dict, tool_version=None, source="warp result"
) -> list[dict]:
    """One row per operation type of a warp result (no host column yet)."""
    from storbench.core.results import COLUMNS  # lazy: results imports pyarrow

    inherited = {key: value for key, value in base.items() if key in COLUMNS}
    flags = command_line_flags(document.get("commandline") or "")
    flags.setdefault("benchmark", benchmark_of_operations(document))
    shared = {
        **inherited,
        **_parameters(document, params, flags),
        "job": flags.get("benchmark") or str(params.get("op") or "warp"),
        "tool_version": tool_version or document.get("warp_version"),
    }
    rows = []
    for op_type, entry in sorted(document["by_op_type"].items()):
        try:
            op = normalize_op(op_type)
        except ValueError:
            raise ToolOutputError(f"{source}: warp operation {op_type!r} has no op name") from None
        rows.append({**shared, "op": op, **_op_metrics(entry, op_type, source)})
    return rows


def benchmark_of_operations(document: dict) -> str | None:
    """The benchmark a result without a command line ran (`warp analyze` of a --full CSV):
    its one operation type (PUT: put), or mixed for several."""
    operations = sorted((document.get("by_op_type") or {}).keys())
    if len(operations) > 1:
        return "mixed"
    if operations and operations[0].lower() in BENCHMARKS:
        return operations[0].lower()
    return None


def command_line_flags(command_line: str) -> dict:
    """{'benchmark': 'put', 'obj.size': '4KiB', ...} from warp's stored command line."""
    words = command_line.split()
    flags = {}
    if len(words) > 1 and not words[1].startswith("-"):
        flags["benchmark"] = words[1]
    for word in words[2:]:
        if word.startswith("--"):
            name, _, value = word[2:].partition("=")
            flags[name] = value
    return flags


def _parameters(document: dict, params: dict, flags: dict) -> dict:

    bs = units.parse_size(params["bs"]) if "bs" in params else _bytes_of(flags.get("obj.size"))
    numjobs = params.get("numjobs", flags.get("concurrent")) or _concurrency_per_client(document)
    if "runtime" in params:
        runtime_s: float | None = units.parse_duration(params["runtime"])
    else:
        runtime_s = parse_go_duration(flags["duration"]) if flags.get("duration") else None
    return {
        "rw": str(params.get("rw") or flags.get("benchmark") or params.get("op") or "") or None,
        "bs": bs if bs is not None else _object_size(document),
        "numjobs": int(numjobs) if numjobs is not None else None,
        "rwmixread": int(params["rwmixread"]) if "rwmixread" in params else None,
        "runtime_s": runtime_s,
    }


def _concurrency_per_client(document: dict) -> int | None:
    total = document.get("total") or {}
    if not total.get("concurrency"):
        return None
    return total["concurrency"] // max(1, len(total.get("clients") or []))


def _bytes_of(text) -> int | None:
    """Bytes of a warp size flag as go-humanize reads it ('4KiB' = 4096, '4KB' = 4000)."""
    match = _HUMAN_SIZE.match(text or "")
    if not match:
        return None
    number, prefix, binary = match.groups()
    power = "kmgtpe".index(prefix.lower()) + 1 if prefix else 0
    return round(float(number) * (1024 if binary else 1000) ** power)


def _object_size(document: dict) -> int | None:
    """The object size warp saw (e.g. when analysing --full data, whose command line is empty)."""
    sizes = [
        segment["single_sized_requests"].get("obj_size") or 0
        for entry in document["by_op_type"].values()
        for segments in (entry.get("requests_by_client") or {}).values()
        for segment in segments
        if segment.get("single_sized_requests")
    ]
    return max(sizes) if sizes and max(sizes) > 0 else None


def span_s(entry: dict) -> float | None:
    """Seconds from an entry's start_time to its end_time (RFC 3339, nanoseconds)."""
    try:
        start = datetime.datetime.fromisoformat(entry["start_time"].replace("Z", "+00:00"))
        end = datetime.datetime.fromisoformat(entry["end_time"].replace("Z", "+00:00"))
    except (KeyError, AttributeError, ValueError):
        return None
    seconds = (end - start).total_seconds()
    return seconds if seconds > 0 else None


def parse_go_duration(text: str) -> float:
    """Seconds of a Go duration string: '18.199755783s' -> 18.199755783, '1m30s' -> 90.0."""
    text = text.strip()
    if text in ("0", "0s"):
        return 0.0
    parts = _GO_DURATION_PART.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text.lstrip("+"):
        raise ValueError(f"not a Go duration: {text!r}")
    return sum(float(number) * _GO_DURATION_SECONDS[unit] for number, unit in parts)


def _op_metrics(entry: dict, op_type: str, source) -> dict:
    missing = [key for key in ("total_requests", "total_bytes", "total_errors") if key not in entry]
    if missing:
        raise ToolOutputError(f"{source}: {op_type} lacks {', '.join(missing)} (truncated?)")
    throughput = entry.get("throughput") or {}
    seconds = (throughput.get("measure_duration_millis") or 0) / 1000
    return {
        "bytes": _count(entry, "total_bytes", op_type, source),
        "ios": _count(entry, "total_requests", op_type, source),
        "errors": _count(entry, "total_errors", op_type, source),
        "duration_s": span_s(entry),  # what bytes and ios cover
        "bw_bytes_s": throughput["bytes"] / seconds if seconds else None,
        "iops": throughput["objects"] / seconds if seconds else None,
        **request_latency(entry),
    }


def _count(entry: dict, key: str, op_type: str, source) -> int:
    """A count of an operation type's entry: a whole number >= 0, else an error naming it."""
    value = entry[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise ToolOutputError(f"{source}: {op_type}.{key} is {value!r}, not a number >= 0")
    return int(value)


def request_latency(entry: dict) -> dict:
    """Latency columns (ns) from the request segments of one operation type, see module doc."""

    segments = [
        segment
        for client_segments in (entry.get("requests_by_client") or {}).values()
        for segment in client_segments
    ]
    unknown = {**dict.fromkeys(LATENCY_SUMMARY), **no_percentiles()}
    if any(_multi_sized(segment) for segment in segments):
        return unknown
    single = [segment.get("single_sized_requests") or {} for segment in segments]
    measured = [s for s in single if s.get("requests") and not s.get("skipped")]
    if not measured:
        return unknown
    total = sum(s["requests"] for s in measured)
    mean = sum(s["requests"] * s["dur_avg_millis"] for s in measured) / total
    squares = sum(
        (s["requests"] - 1) * s["std_dev_millis"] ** 2
        + s["requests"] * (s["dur_avg_millis"] - mean) ** 2
        for s in measured
    )
    merged = sum(s.get("merged_entries") or 1 for s in measured)

    def warp_merged(key: str) -> float:  # warp's report: sum over segments / merged entries
        return sum(s[key] for s in measured) / merged * 1e6

    return {
        **unknown,
        "lat_mean_ns": mean * 1e6,
        "lat_stdev_ns": math.sqrt(squares / (total - 1)) * 1e6 if total > 1 else 0.0,
        "lat_min_ns": min(s["fastest_millis"] for s in measured) * 1e6,
        "lat_max_ns": max(s["slowest_millis"] for s in measured) * 1e6,
        "p50_ns": warp_merged("dur_median_millis"),
        "p90_ns": warp_merged("dur_90_millis"),
        "p99_ns": warp_merged("dur_99_millis"),
        "lat_basis": "lat",
        "pct_source": "tool",
    }


def _multi_sized(segment: dict) -> bool:
    requests = segment.get("multi_sized_requests")
    return bool(requests and not requests.get("skipped"))


# --- time series ---------------------------------------------------------------------------


def timeseries_rows(document: dict, *, host: str, base: dict, source: str) -> list[dict]:
    """Per-second (warp's segment length) throughput of every operation type."""

    # pyarrow: parsing only
    from storbench.core.results import TIMESERIES_COLUMNS

    inherited = {key: value for key, value in base.items() if key in TIMESERIES_COLUMNS}
    job = command_line_flags(document.get("commandline") or "").get("benchmark") or "warp"
    rows = []
    for op_type, entry in sorted(document["by_op_type"].items()):
        segmented = (entry.get("throughput") or {}).get("segmented") or {}
        interval_s = (segmented.get("segment_duration_millis") or 0) / 1000
        segments = sorted(segmented.get("segments") or [], key=lambda s: _timestamp(s["start"]))
        if not segments or not interval_s:
            continue
        first = _timestamp(segments[0]["start"])
        for segment in segments:
            end = _timestamp(segment["start"]) + datetime.timedelta(seconds=interval_s)
            rows.append({
                **inherited,
                "host": host,
                "job": job,
                "op": normalize_op(op_type),
                "t_s": (end - first).total_seconds(),
                "interval_s": interval_s,
                "bytes": round(segment["bytes_per_sec"] * interval_s),
                "ios": round(segment["obj_per_sec"] * interval_s),
                "bw_bytes_s": float(segment["bytes_per_sec"]),
                "iops": float(segment["obj_per_sec"]),
                "timestamp": end.isoformat().replace("+00:00", "Z"),
                "source": source,
            })  # fmt: skip
    return rows


def _timestamp(text: str):

    # RFC 3339 with up to 9 fractional digits; Python keeps 6
    match = re.match(r"^(.*?)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", text)
    if not match:
        raise ToolOutputError(f"not an RFC 3339 time: {text!r}")
    stem, fraction, zone = match.groups()
    fraction = f".{fraction[:6]}" if fraction else ""
    try:
        return datetime.datetime.fromisoformat(
            stem + fraction + ("+00:00" if zone == "Z" else zone)
        )
    except ValueError:
        raise ToolOutputError(f"not an RFC 3339 time: {text!r}") from None
