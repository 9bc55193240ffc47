"""iperf3: network sanity checks between a client host and an iperf3 server, via ``--json``.

Job file: iperf3 reads no config file, so the job file is an *args file*: one client argument
per line (``--client``, ``--port`` and the test options), blank lines and ``#`` lines ignored;
``command()`` reads it on the host into the argument list of ``iperf3 --json --logfile``.
:func:`job_text` writes that file from a spec; ``templates/iperf3/job.iperf3.j2`` renders the
same lines from ``arguments`` (see :meth:`template_context`).

Options (``job:``/``sweep:``): ``server`` (required; an iperf3 server must already listen
there, e.g. ``iperf3 --server``, and it serves one client at a time), ``port`` (5201),
``streams`` or ``numjobs`` -> ``--parallel``, ``duration`` or ``runtime`` -> ``--time``,
``omit`` or ``ramp_time`` -> ``--omit`` (whole seconds), ``reverse`` (or ``rw: read``;
``rw: write`` is the default direction) -> ``--reverse``, ``udp`` -> ``--udp``, ``bitrate``
-> ``--bitrate`` (iperf3's own syntax, decimal: ``200M``), ``bs`` -> ``--length`` (bytes),
``window``, ``congestion``, ``zerocopy``, ``no_delay``. Other options are an error: iperf3
would silently run the same test for every value. The storage target is not used (the
config requires one; a ``directory`` or ``block`` target, never read or written).

Rows: one per client host, ``job='iperf3'``, ``op='send'`` (client to server) or
``'receive'`` (``--reverse``: server to client), plus the ``host='all'`` sums. Throughput is
the *receiver's* figure (``end.sum_received``): the sender counts bytes handed to its socket,
including data still buffered or lost when the test stops; the receiver counts what crossed
the network. The server's file of a reverse run has no receiver figure (only the client's
file carries both), so that file alone gives the sender's ``end.sum_sent``. ``bs`` is
iperf3's block length, ``numjobs`` the stream count, ``runtime_s`` the configured duration.
TCP retransmits and UDP lost packets have no column in the result schema: they are kept
out of ``errors`` (which counts failed runs, always 0 here since a failure raises) and out
of ``params_json`` (parameters, not measurements); :func:`transport_counters` gives them.

CPU (``cpu_pct``, ``cpu_sys_pct``, basis ``process``): ``end.cpu_utilization_percent``
``host_total`` and ``host_system`` of the file's own iperf3 process (the row's host): its
getrusage time over the test's wall time, percent of one CPU. The other end's ``remote_*``
figures are not kept (a server file has them as 0).

Time series: the file's own ``intervals[]`` (the client measures the sending side, unless
reversed), omitted (``--omit``) intervals left out; no timestamp, since iperf3 records the
start only to the second.

Import (``storbench import``): each file is one run seen by its own host: a client file as
above; a server file alone is the server (its own address) receiving, or sending when the
run was reversed (``file_view``).
"""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path

from storbench.core.addresses import bare
from storbench.core.aggregate import aggregate_hosts
from storbench.core.schema_names import CPU_PROCESS
from storbench.core.specs import Manifest
from storbench.core.units import UnitError, parse_duration, parse_size
from storbench.tools.base import (
    ARGS_FILE_LOOP,
    Capabilities,
    RenderError,
    ToolAdapter,
    ToolOutputError,
)
from storbench.tools.base import timeseries_columns as _timeseries_columns

DEFAULT_PORT = 5201
JOB = "iperf3"
PROGRAM_NAME = "storbench-iperf3"  # $0 of the sh snippet in command()

# One argument per line into "$@" (no word splitting, no quote processing), then iperf3.
_RUN_ARGS_FILE = (
    f'job="$1" out="$2"; set --; {ARGS_FILE_LOOP}; exec iperf3 --json --logfile "$out" "$@"'
)

_VALUE_OPTIONS = {"bitrate": "--bitrate", "window": "--window", "congestion": "--congestion"}
_FLAG_OPTIONS = {"udp": "--udp", "zerocopy": "--zerocopy", "no_delay": "--no-delay"}
_ALIASES = {"streams": "numjobs", "duration": "runtime", "omit": "ramp_time"}
_HANDLED = frozenset(
    {"server", "port", "rw", "reverse", "bs", *_ALIASES, *_ALIASES.values()}
    | set(_VALUE_OPTIONS)
    | set(_FLAG_OPTIONS)
)
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})


# --- command line ------------------------------------------------------------------------


def client_arguments(server: str, port: int | str, options: dict) -> list[str]:
    """iperf3 client arguments (no program name, no output options) for one test."""
    unknown = sorted(set(options) - _HANDLED)
    if unknown:
        raise RenderError(
            f"iperf3 does not know option(s) {', '.join(unknown)} "
            f"(known: {', '.join(sorted(_HANDLED))})",
            unknown[0] if len(unknown) == 1 else None,
        )
    arguments = ["--client", str(server), "--port", str(int(port))]
    streams = _either(options, "streams")
    if streams is not None:
        arguments += ["--parallel", str(_positive_int("streams", streams))]
    duration = _either(options, "duration")
    if duration is not None:
        arguments += ["--time", str(_whole_seconds("duration", duration))]
    omit = _either(options, "omit")
    if omit is not None:
        arguments += ["--omit", str(_whole_seconds("omit", omit))]
    if "bs" in options:
        arguments += ["--length", str(parse_size(options["bs"]))]
    if _reverse(options):
        arguments.append("--reverse")
    for option, flag in _FLAG_OPTIONS.items():
        if _flag(option, options.get(option, False)):
            arguments.append(flag)
    for option, flag in _VALUE_OPTIONS.items():
        if option in options:
            arguments += [flag, str(options[option])]
    return arguments


def command_for(server: str, port: int | str, options: dict) -> list[str]:
    """The whole iperf3 command of one test, JSON to stdout (what the args file runs)."""
    return ["iperf3", "--json", *client_arguments(server, port, options)]


def job_text(spec: dict) -> str:
    """The args file of one run: a comment line, then one iperf3 argument per line."""
    lines = [f"# storbench experiment {spec['experiment']}, run {spec['run_id']}"]
    return "\n".join(lines + _spec_arguments(spec["params"])) + "\n"


def _spec_arguments(params: dict) -> list[str]:
    if not params.get("server"):
        raise RenderError("iperf3 needs option 'server' (the host running 'iperf3 --server')")
    options = {k: v for k, v in params.items() if k not in ("server", "port")}
    return client_arguments(params["server"], params.get("port", DEFAULT_PORT), options)


def _either(options: dict, name: str):
    """The iperf3-named option, else its storbench generic name (streams, else numjobs)."""
    return options.get(name, options.get(_ALIASES[name]))


def _positive_int(name: str, value) -> int:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = 0.0
    if number < 1 or not number.is_integer():
        raise RenderError(
            f"iperf3 option {name} must be a positive whole number, got {value!r}", name
        )
    return int(number)


def _whole_seconds(name: str, value) -> int:
    try:
        seconds = parse_duration(value)
    except UnitError as error:
        raise RenderError(f"iperf3 option {name}: {error}", name) from error
    if seconds != int(seconds):  # iperf3 reads -t and -O with atoi()
        raise RenderError(f"iperf3 option {name} must be whole seconds, got {value!r}", name)
    return int(seconds)


def _flag(name: str, value) -> bool:
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise RenderError(f"iperf3 option {name} must be true or false, got {value!r}", name)


def _reverse(options: dict) -> bool:
    if "reverse" in options:
        return _flag("reverse", options["reverse"])
    rw = str(options.get("rw", "write")).strip().lower()
    if rw not in ("read", "write"):
        raise RenderError(f"iperf3 option rw must be read (reverse) or write, got {rw!r}", "rw")
    return rw == "read"


# --- adapter -----------------------------------------------------------------------------


CONNECT_TIMEOUT_MS = 10_000  # --connect-timeout: an unreachable server fails fast


class Iperf3Adapter(ToolAdapter):
    name = "iperf3"
    job_suffix = ".iperf3"
    default_template = "iperf3/job.iperf3.j2"
    install_hint = "apt-get install iperf3"
    # targets are not used; an s3 target would create a bucket
    capabilities = Capabilities(
        target_types=("directory", "block"),
        interval_series=True,
        import_formats=("json",),
        network_check=True,
    )
    bandwidth_basis_text = (
        "iperf3's receiver figure (its 'receiver' line, end.sum_received), the usual headline: "
        "op send is data from the client to the server, counted where the server received it; "
        "op receive (--reverse) is data from the server, counted where the client received "
        "it (a reverse run's server file alone has only the server's sent figure)"
    )

    def network_server_command(self, address: str, port: int, log_path: str) -> list[str]:
        return [
            "iperf3", "--server", "--bind", bare(address), "--port", str(port),
            "--logfile", log_path,
        ]  # fmt: skip

    def network_job(self, address: str, port: int, duration_s: int, parallel: int) -> str:
        options = {"duration": duration_s, "streams": parallel}
        arguments = [
            *client_arguments(bare(address), port, options),
            "--connect-timeout", str(CONNECT_TIMEOUT_MS),
        ]  # fmt: skip
        return "\n".join(["# storbench network check", *arguments]) + "\n"

    def network_row(self, output: Path, host: str, base: dict) -> dict:
        return result_row(load_result(output), host=host, base=base)

    def template_context(self, spec: dict) -> dict:
        return {
            "experiment": spec["experiment"],
            "run_id": spec["run_id"],
            "target": spec["target"],
            "arguments": _spec_arguments(spec["params"]),
            "point": spec["point"],
        }

    def command(self, job_path: str, output_path: str, host: str) -> list[str]:
        return ["sh", "-c", _RUN_ARGS_FILE, PROGRAM_NAME, job_path, output_path]

    def version_command(self) -> list[str]:
        return ["iperf3", "--version"]

    def output_name(self, host: str) -> str:
        return f"{host}.json"

    def parse(self, manifest: Manifest, raw_dir: Path, base: dict) -> list[dict]:
        rows = []
        for host in manifest.hosts:
            path = raw_dir / host["output"]
            rows.append(result_row(load_result(path), host=host["name"], base=base))
        return rows + aggregate_hosts(rows)

    def parse_timeseries(self, manifest: Manifest, raw_dir: Path, base: dict) -> list[dict]:
        rows = []
        for host in manifest.hosts:
            path = raw_dir / host["output"]
            rows += interval_rows(load_result(path), host=host["name"], base=base, source=path)
        return rows

    def recognizes(self, path: Path, head: bytes) -> bool:
        # any iperf version: one other than 3 is then refused naming its version
        return re.search(rb'"version":\s*"iperf \d', head) is not None

    def import_series(self, paths: list[Path], base: dict) -> list[dict]:
        rows = []
        for path in map(Path, paths):
            document = load_result(path)
            host, op = file_view(document)
            file_base = {**base, "run_id": path.stem}
            rows += [
                {**row, "op": op}
                for row in interval_rows(document, host=host, base=file_base, source=path)
            ]
        return rows

    def import_outputs(self, paths: list[Path], base: dict) -> list[dict]:
        """One run per file (run_id = file stem); host = the client's address in the file."""
        rows = []
        for path in map(Path, paths):
            document = load_result(path)
            host, op = file_view(document)
            file_base = {**base, "run_id": path.stem, "raw_path": str(path)}
            per_host = [{**result_row(document, host=host, base=file_base), "op": op}]
            rows += per_host + aggregate_hosts(per_host)
        return rows


# --- parse -------------------------------------------------------------------------------


def load_result(path: Path) -> dict:
    """The JSON document of one successful iperf3 run; ToolOutputError naming the file."""
    try:
        text = Path(path).read_bytes().decode("utf-8", errors="replace")
    except OSError as error:
        raise ToolOutputError(f"{path}: cannot read: {error.strerror}") from error
    if not text.strip():
        raise ToolOutputError(f"{path}: empty file, no iperf3 JSON output")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise ToolOutputError(f"{path}: not iperf3 JSON output (or truncated): {error}") from error
    return check_document(document, path)


def check_document(document, path) -> dict:
    if not isinstance(document, dict) or not {"start", "intervals", "end"} <= set(document):
        raise ToolOutputError(f"{path}: not iperf3 JSON output (no start/intervals/end)")
    version = document["start"].get("version") if isinstance(document["start"], dict) else None
    if isinstance(version, str) and not version.startswith("iperf 3"):
        raise ToolOutputError(
            f"{path}: iperf JSON output of version {version!r}; storbench reads iperf 3.x"
        )
    if "error" in document:
        raise ToolOutputError(f"{path}: iperf3 failed: {document['error']}")
    end = document["end"]
    if "sum_received" not in end or "sum_sent" not in end:
        raise ToolOutputError(f"{path}: iperf3 output has no end.sum_sent/sum_received")
    if "sum_received_bidir_reverse" in end:
        raise ToolOutputError(f"{path}: bidirectional (--bidir) iperf3 output is not supported")
    if "test_start" not in document["start"]:
        raise ToolOutputError(f"{path}: iperf3 output has no start.test_start")
    return document


def is_server_side(document: dict) -> bool:
    return "accepted_connection" in document["start"]


def op_of(document: dict) -> str:
    return "receive" if document["start"]["test_start"].get("reverse") else "send"


def throughput_summary(document: dict) -> dict:
    """The receiver's end sum, except in a reverse run's server file (only the sender's)."""
    end = document["end"]
    if is_server_side(document) and op_of(document) == "receive":
        return end["sum_sent"]
    return end["sum_received"]


def file_view(document: dict) -> tuple[str | None, str]:
    """(host, op) of an imported file as its own host saw the run: a client file is the
    client sending (or receiving, reversed); a server file alone is the server receiving
    (or sending, reversed), never labelled as the client's send."""
    if not is_server_side(document):
        return client_address(document), op_of(document)
    server = (document["start"].get("connected") or [{}])[0].get("local_host")
    return server, "send" if op_of(document) == "receive" else "receive"


def client_address(document: dict) -> str | None:
    """The client's address as the file records it (the same in client and server files)."""
    connected = document["start"].get("connected") or [{}]
    key = "remote_host" if is_server_side(document) else "local_host"
    return connected[0].get(key)


def result_row(document: dict, *, host: str | None, base: dict) -> dict:
    start = document["start"]
    test = start["test_start"]
    summary = throughput_summary(document)
    return {
        **{key: value for key, value in base.items() if key in _columns()},
        "host": host,
        "job": JOB,
        "op": op_of(document),
        "bs": test.get("blksize"),
        "numjobs": test.get("num_streams"),
        "runtime_s": float(test["duration"]) if test.get("duration") else None,
        "bytes": summary["bytes"],
        "duration_s": float(summary["seconds"]),
        "bw_bytes_s": summary["bits_per_second"] / 8,
        "errors": 0,
        "tool_version": start.get("version"),
        **process_cpu(document),
    }


def process_cpu(document: dict) -> dict:
    """The CPU columns of the file's own iperf3 process; nothing without numbers."""
    cpu = document["end"].get("cpu_utilization_percent")
    if not isinstance(cpu, dict):
        return {}
    total = _percent(cpu.get("host_total"))
    if total is None:
        return {}
    return {
        "cpu_pct": total,
        "cpu_sys_pct": _percent(cpu.get("host_system")),
        "cpu_basis": CPU_PROCESS,
    }


def _percent(value) -> float | None:
    if type(value) in (int, float) and 0 <= value < math.inf:
        return float(value)
    return None


def transport_counters(document: dict) -> dict:
    """TCP retransmits (sender side) and UDP loss (receiver side) of a run, when present."""
    end = document["end"]
    counters = {"retransmits": end["sum_sent"].get("retransmits")}
    if document["start"]["test_start"].get("protocol") == "UDP":
        received = end["sum_received"]
        for key in ("lost_packets", "packets", "lost_percent", "jitter_ms"):
            counters[key] = received.get(key)
    return counters


def interval_rows(document: dict, *, host: str | None, base: dict, source) -> list[dict]:
    """Time-series rows from ``intervals[].sum`` (bits/s -> bytes/s), omitted ones skipped."""
    inherited = {key: value for key, value in base.items() if key in _timeseries_columns()}
    rows = []
    for interval in document["intervals"]:
        total = interval["sum"]
        if total.get("omitted"):
            continue
        rows.append(
            {
                **inherited,
                "host": host,
                "job": JOB,
                "op": op_of(document),
                "t_s": float(total["end"]),
                "interval_s": float(total["seconds"]),
                "bytes": total["bytes"],
                "bw_bytes_s": total["bits_per_second"] / 8,
                "source": str(source),
            }
        )
    return rows


@functools.cache
def _columns() -> frozenset[str]:
    from storbench.core.results import COLUMNS  # lazy: results imports pyarrow

    return frozenset(COLUMNS)


ADAPTER = Iperf3Adapter()
