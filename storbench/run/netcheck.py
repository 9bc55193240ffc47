"""Network sanity check: the network tool (iperf3) from every client host to one server, alone
and all at once.

The server host runs one ``iperf3 --server`` per client on consecutive ports (``port`` ..
``port+N-1``; an iperf3 server serves one client at a time), bound to the server's address
(its Host ``address``, which is what the clients connect to). Each server runs under
``timeout`` sized for the whole check, so a lost storbench cannot leave one running for long.

Phase ``single``: each client alone, one after the other. Phase ``all``: every client at
once, each to its own server port. Raw iperf3 JSON lands in ``<out_dir>/<phase>/<client>.json``
(with the client's ``.stdout``/``.stderr``); the servers' text logs in
``<out_dir>/servers/server-<port>.log``. Servers are stopped at the end, on failure and on
Ctrl-C/SIGTERM; on an interrupt the clients' iperf3 are killed as well.

Rows follow the result schema (experiment ``network``, run_id = phase, tool ``iperf3``,
host = client) with iperf3's receiver figures as in the iperf3 adapter; phase ``all`` adds
the ``host='all'`` sums. :func:`slow_clients` flags clients below a fraction of the median.
Light imports: this module is on the run path.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import posixpath
import re
import shlex
import signal
import statistics
import threading
import time
import uuid
from pathlib import Path

from storbench.core.aggregate import aggregate_hosts
from storbench.core.model import Host
from storbench.core.schema_names import ALL_HOSTS
from storbench.hosts.transport import KILL_AFTER_S, HostError, open_transport, raise_interrupt
from storbench.tools import network_tool
from storbench.tools.base import ToolOutputError

EXPERIMENT = "network"
PHASES = ("single", "all")
CLIENT_SLACK_S = 30.0  # beyond the test duration: connecting, the JSON summary
READY_TIMEOUT_S = 15.0  # servers must listen within this
READY_POLL_S = 0.1
SERVER_MARGIN_S = 120.0  # server lifetime beyond the planned tests
SHELL_TIMEOUT_S = 60.0
SPEC_KEYS = frozenset({"server", "clients", "port", "duration_s", "parallel", "min_fraction"})
TCP_LISTEN = "0A"  # socket state in /proc/net/tcp
_SERVER_LOG = re.compile(r"/server-(\d+)\.log\b")


class NetcheckError(RuntimeError):
    """The check failed; the message names every bad host."""


# --- public API ----------------------------------------------------------------------------


def run_network_check(spec: dict, out_dir) -> list[dict]:
    """Run both phases; return the result rows (per client, plus host='all' for phase all).

    spec: {"server": host dict, "clients": [host dicts], "port": int, "duration_s": number,
    "parallel": int}; host dicts are config host dicts (Host keys plus "group").
    A "min_fraction" key is allowed (for :func:`slow_clients`) and not used here.
    """
    check = _Check(spec, Path(out_dir))
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous_term = signal.signal(signal.SIGTERM, raise_interrupt) if in_main_thread else None
    try:
        try:
            check.start_servers()
            rows = check.run_single()
            rows += check.run_all()
        except BaseException as error:
            if isinstance(error, KeyboardInterrupt):
                check.kill_clients()
            check.stop_servers_after(error)
            raise
        check.stop_servers()
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous_term or signal.SIG_DFL)
    check.remove_remote_dirs()
    return rows


def write_results(rows: list[dict], parquet_path) -> None:
    """Publish the rows as one Parquet file in the result schema (atomically)."""
    from storbench.core.results import write_rows  # lazy: pyarrow

    write_rows(rows, parquet_path)


def slow_clients(rows: list[dict], min_fraction: float) -> list[dict]:
    """Per phase, the clients whose bandwidth is below min_fraction x the clients' median.

    A client's bandwidth is its ``receive`` row, else its ``send`` row (both carry the
    receiving side's figure). Each flagged client: host, phase, bw_bytes_s, median, fraction.
    """
    if not 0 < min_fraction <= 1:
        raise ValueError(f"network.min_fraction must be in (0, 1], got {min_fraction!r}")
    flagged = []
    for phase in dict.fromkeys(row["run_id"] for row in rows):
        bandwidth = _client_bandwidth([row for row in rows if row["run_id"] == phase])
        if not bandwidth:
            continue
        median = statistics.median(bandwidth.values())
        for host, value in bandwidth.items():
            if value < min_fraction * median:
                flagged.append(
                    {
                        "host": host,
                        "phase": phase,
                        "bw_bytes_s": value,
                        "median": median,
                        "fraction": value / median,
                    }
                )
    return flagged


def describe_slow_clients(flagged: list[dict], min_fraction: float) -> str:
    """One line per flagged client (Gbit/s), for the command line and the report."""
    if not flagged:
        return f"no client below {min_fraction:.0%} of the median"
    return "\n".join(
        f"{item['phase']}: {item['host']} at {_gbits(item['bw_bytes_s'])} is"
        f" {item['fraction']:.0%} of the median {_gbits(item['median'])}"
        f" (below {min_fraction:.0%})"
        for item in flagged
    )


def _gbits(bytes_per_s: float) -> str:
    return f"{bytes_per_s * 8 / 1e9:.2f} Gbit/s"


def _client_bandwidth(rows: list[dict]) -> dict[str, float]:
    chosen: dict[str, dict] = {}
    for row in rows:
        if row["host"] == ALL_HOSTS or row.get("bw_bytes_s") is None:
            continue
        if row["host"] not in chosen or row["op"] == "receive":
            chosen[row["host"]] = row
    return {host: row["bw_bytes_s"] for host, row in chosen.items()}


# --- the check ----------------------------------------------------------------------------


class _Check:
    def __init__(self, spec: dict, out_dir: Path):
        unknown = sorted(set(spec) - SPEC_KEYS)
        if unknown:
            raise ValueError(f"network check spec: unknown key(s) {', '.join(unknown)}")
        self.server = _host_spec(spec.get("server"), "network.server")
        clients = spec.get("clients") or []
        if not clients:
            raise ValueError("network.clients: no client hosts")
        self.clients = [_host_spec(c, f"network.clients[{i}]") for i, c in enumerate(clients)]
        _check_client_names(self.server, self.clients)
        self.port = _integer(spec.get("port", 5201), "network.port", 1, 65535)
        if self.port + len(self.clients) - 1 > 65535:
            raise ValueError(
                f"network.port: {len(self.clients)} clients need ports {self.port}.."
                f"{self.port + len(self.clients) - 1}, beyond 65535"
            )
        self.duration = _whole_seconds(spec.get("duration_s", 10))
        self.parallel = _integer(spec.get("parallel", 1), "network.parallel", 1, 128)
        self.out_dir = out_dir
        self.token = f"netcheck-{uuid.uuid4().hex[:12]}"  # in every command line of this check
        self.server_dir = posixpath.join(self.server.workdir, self.token, "servers")
        self.ports = {c.name: self.port + i for i, c in enumerate(self.clients)}
        self.tool = network_tool()

    # -- servers --

    def start_servers(self) -> None:
        lifetime = SERVER_MARGIN_S + READY_TIMEOUT_S
        lifetime += (len(self.clients) + 1) * (self.duration + CLIENT_SLACK_S + KILL_AFTER_S)
        with open_transport(self.server) as transport:
            transport.check()
            busy = sorted(set(self.ports.values()) & _listening_ports(transport))
            if busy:
                raise HostError(
                    self.server.name,
                    f"port(s) {', '.join(map(str, busy))} already in use; is an"
                    f" {self.tool.name} server still running there? (network.port chooses the"
                    " first port)",
                )
            lines = [f"mkdir -p -- {shlex.quote(self.server_dir)}"]
            lines += [self._server_line(port, lifetime) for port in self.ports.values()]
            rc, _, err = transport.shell("\n".join(lines), timeout_s=SHELL_TIMEOUT_S)
            if rc != 0:
                raise HostError(
                    self.server.name, f"cannot start {self.tool.name} servers: {err.strip()}"
                )
            self._wait_until_listening(transport)

    def _server_line(self, port: int, lifetime: float) -> str:
        log = posixpath.join(self.server_dir, f"server-{port}.log")
        argv = ["timeout", "-s", "TERM", "-k", str(KILL_AFTER_S), str(int(lifetime))]
        argv += self.tool.network_server_command(self.server.address, port, log)
        out = shlex.quote(posixpath.join(self.server_dir, f"server-{port}.out"))
        return f"nohup {shlex.join(argv)} </dev/null >{out} 2>&1 &"

    def _wait_until_listening(self, transport) -> None:
        wanted = set(self.ports.values())
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            alive = _alive_server_ports(transport, self._server_marker())
            dead = sorted(wanted - alive)
            if dead:
                raise HostError(
                    self.server.name,
                    f"{self.tool.name} server on port {dead[0]} exited at start:"
                    f" {self._server_output(transport, dead[0])}",
                )
            waiting = sorted(wanted - _listening_ports(transport))
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise HostError(
                    self.server.name,
                    f"{self.tool.name} server on port {waiting[0]} does not accept connections"
                    f" after {READY_TIMEOUT_S:g}s: {self._server_output(transport, waiting[0])}",
                )
            time.sleep(READY_POLL_S)

    def _server_output(self, transport, port: int) -> str:
        paths = [posixpath.join(self.server_dir, f"server-{port}.{ext}") for ext in ("out", "log")]
        script = f"tail -n 5 -- {' '.join(map(shlex.quote, paths))} 2>/dev/null"
        _, out, _ = transport.shell(script, timeout_s=SHELL_TIMEOUT_S)
        return " ".join(out.split()) or "(no output)"

    def stop_servers_after(self, error: BaseException) -> None:
        """Stop the servers while error propagates; a failure to do so becomes a note on it."""
        try:
            self.stop_servers()
        except Exception as stop_error:
            error.add_note(f"also failed to stop the {self.tool.name} servers: {stop_error}")

    def _server_marker(self) -> str:
        return f"{self.token}/servers/server-"

    def stop_servers(self) -> None:
        with open_transport(self.server) as transport:
            transport.kill_matching(self._server_marker())
            for port in self.ports.values():
                remote = posixpath.join(self.server_dir, f"server-{port}.log")
                # the logs only help diagnose; the rows come from the clients' JSON
                with contextlib.suppress(HostError):
                    transport.fetch(remote, self.out_dir / "servers" / f"server-{port}.log")

    # -- clients --

    def run_single(self) -> list[dict]:
        rows, errors = [], []
        for client in self.clients:
            try:
                with open_transport(client) as transport:
                    rows.append(self._run_client(transport, "single", hosts_in_run=1))
            except (HostError, ToolOutputError) as error:
                errors.append(str(error))
        self._raise_if_failed("single", errors)
        return rows

    def run_all(self) -> list[dict]:
        rows: list[dict | None] = [None] * len(self.clients)
        errors: list[str | None] = [None] * len(self.clients)
        start_together = threading.Barrier(len(self.clients))

        def run(index: int, client: Host) -> None:
            try:
                with open_transport(client) as transport:
                    transport.check()
                    start_together.wait()
                    rows[index] = self._run_client(transport, "all", len(self.clients))
            except threading.BrokenBarrierError:
                errors[index] = f"host {client.name}: not started (another client failed)"
            except Exception as error:  # reported per host, like the runner
                start_together.abort()
                errors[index] = _describe_error(client, error)

        threads = [
            threading.Thread(target=run, args=(i, c), name=f"netcheck-{c.name}", daemon=True)
            for i, c in enumerate(self.clients)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)  # short joins keep Ctrl-C and SIGTERM responsive
        self._raise_if_failed("all", [e for e in errors if e])
        measured = [row for row in rows if row is not None]
        return measured + aggregate_hosts(measured)

    def _run_client(self, transport, phase: str, hosts_in_run: int) -> dict:
        client = transport.spec
        port = self.ports[client.name]
        remote_dir = posixpath.join(client.workdir, self.token, phase)
        remote_json = posixpath.join(remote_dir, f"{client.name}.json")
        local_dir = self.out_dir / phase
        local_json = local_dir / f"{client.name}.json"
        argv = self.tool.network_client_command(
            self.server.address, port, self.duration, self.parallel, remote_json
        )
        transport.mkdirs(remote_dir)
        started = _now()
        rc = transport.run(
            argv,
            timeout_s=self.duration + CLIENT_SLACK_S,
            stdout_path=local_dir / f"{client.name}.stdout",
            stderr_path=local_dir / f"{client.name}.stderr",
            marker=remote_json,
        )
        ended = _now()
        if rc != 0:
            tail = _tail(local_dir / f"{client.name}.stderr")
            raise HostError(
                client.name, f"{self.tool.name} to {self._where(port)} exited {rc}: {tail}"
            )
        transport.fetch(remote_json, local_json)
        base = {
            "experiment": EXPERIMENT,
            "run_id": phase,
            "iteration": 1,
            "attempt": 1,
            "tool": self.tool.name,
            "hosts_in_run": hosts_in_run,
            "params_json": json.dumps(self._params(), sort_keys=True),
            "command": shlex.join(argv),
            "raw_path": str(local_json),
            "start_time": started,
            "end_time": ended,
        }
        try:
            return self.tool.network_row(local_json, client.name, base)
        except ToolOutputError as error:
            where = f"{self.tool.name} to {self._where(port)}"
            raise HostError(client.name, f"{where}: {error}") from error

    def _params(self) -> dict:
        return {
            "server": self.server.name,
            "address": self.server.address,
            "duration_s": self.duration,
            "parallel": self.parallel,
        }

    def _where(self, port: int) -> str:
        return f"{self.server.name} ({self.server.address}) port {port}"

    def _raise_if_failed(self, phase: str, errors: list[str]) -> None:
        if errors:
            lines = [f"network check, phase {phase}: {len(errors)} of {len(self.clients)} failed"]
            lines += [f"  {error}" for error in errors]
            lines.append(f"raw output kept in {self.out_dir / phase}")
            raise NetcheckError("\n".join(lines))

    # -- cleanup --

    def kill_clients(self) -> None:
        """After an interrupt: kill this check's iperf3 clients on every client host."""
        threads = [
            threading.Thread(target=_kill_quietly, args=(client, self.token), daemon=True)
            for client in self.clients
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(SHELL_TIMEOUT_S)

    def remove_remote_dirs(self) -> None:
        """Best effort: the JSON is local now; leave no scratch folders on the hosts."""
        for host in [self.server, *self.clients]:
            folder = shlex.quote(posixpath.join(host.workdir, self.token))
            try:
                with open_transport(host) as transport:
                    transport.shell(f"rm -rf -- {folder}", timeout_s=SHELL_TIMEOUT_S)
            except (HostError, OSError):
                pass


# --- helpers ------------------------------------------------------------------------------


def _host_spec(host, key: str) -> Host:
    if not isinstance(host, dict):
        raise ValueError(f"{key}: expected a host mapping, got {host!r}")
    try:
        return Host.from_dict(host)
    except ValueError as error:
        raise ValueError(f"{key}: {error}") from error


def _check_client_names(server: Host, clients: list[Host]) -> None:
    seen = set()
    for client in clients:
        if client.name == server.name:
            raise ValueError(
                f"network.clients: host {client.name} is the iperf3 server itself;"
                " leave it out of the client groups"
            )
        if client.name in seen:
            raise ValueError(f"network.clients: host {client.name} is listed twice")
        seen.add(client.name)


def _integer(value, key: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{key}: expected a whole number in {low}..{high}, got {value!r}")
    return value


def _whole_seconds(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"network.duration: expected seconds, got {value!r}")
    if value < 1 or value != int(value):  # iperf3 reads --time with atoi()
        raise ValueError(f"network.duration: must be whole seconds >= 1, got {value!r}")
    return int(value)


def _listening_ports(transport) -> set[int]:
    """TCP ports in LISTEN state on the host (any address, IPv4 or IPv6)."""
    rc, out, err = transport.shell(
        "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null", timeout_s=SHELL_TIMEOUT_S
    )
    ports = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) > 3 and fields[3] == TCP_LISTEN and ":" in fields[1]:
            ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    if not ports and rc != 0:
        raise HostError(transport.spec.name, f"cannot read /proc/net/tcp: {err.strip()}")
    return ports


def _alive_server_ports(transport, marker: str) -> set[int]:
    """Ports of this check's iperf3 servers that are still running on the host."""
    script = f"pgrep -af -- {shlex.quote(_pgrep_pattern(marker))} || true"
    _, out, _ = transport.shell(script, timeout_s=SHELL_TIMEOUT_S)
    return {int(match.group(1)) for match in _SERVER_LOG.finditer(out)}


def _pgrep_pattern(marker: str) -> str:
    """marker as an ERE whose own text does not match it (the shell running pgrep has it)."""
    escaped = re.sub(r"([\\.\[\]()*+?{}|^$])", r"\\\1", marker)
    first = next(i for i, char in enumerate(escaped) if char.isalnum())
    return f"{escaped[:first]}[{escaped[first]}]{escaped[first + 1 :]}"


def _kill_quietly(host: Host, marker: str) -> None:
    try:
        with open_transport(host) as transport:
            transport.kill_matching(marker)
    except Exception:  # best effort after an interrupt; the servers' timeout is the backstop
        pass


def _describe_error(client: Host, error: Exception) -> str:
    if isinstance(error, HostError):
        return str(error)
    return f"host {client.name}: {type(error).__name__}: {error}"


def _tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return "(no stderr)"
    return " | ".join(text.splitlines()[-lines:]) or "(empty stderr)"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
