"""Network sanity check: the network tool (iperf3) from every client host to one server, alone
and all at once.

The server host runs one ``iperf3 --server`` per client on consecutive ports (``port`` ..
``port+N-1``; an iperf3 server serves one client at a time), bound to the server's address
(its Host ``tool_address``: the data-path address if the group gives one, else its SSH
address; that is what the clients connect to). Each server runs under
``timeout`` sized for the whole check, so a lost storbench cannot leave one running for long.

Phase ``single``: each client alone, one after the other. Phase ``all``: every client at
once, each to its own server port. The clients are ordinary runs of the run engine (a job
file per client, naming its server port), so raw output is kept as for every run:
``<out_dir>/single/<client>/a<N>/<client>.json`` and ``<out_dir>/all/a<N>/<client>.json``
(with the engine's ``run.json`` and each client's ``.stdout``/``.stderr``); the servers' text
logs in ``<out_dir>/servers/server-<port>.log``. Servers are stopped at the end, on failure and
on Ctrl-C/SIGTERM; on an interrupt the engine kills the clients' iperf3 as well.

Rows follow the result schema (experiment ``network``, run_id = phase, tool ``iperf3``,
host = client) with iperf3's receiver figures as in the iperf3 adapter; phase ``all`` adds
the ``host='all'`` sums. :func:`slow_clients` flags clients below a fraction of the median.
Light imports: this module is on the run path.
"""

from __future__ import annotations

import contextlib
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

from storbench.core import atomic
from storbench.core.aggregate import aggregate_hosts
from storbench.core.model import Host
from storbench.core.schema_names import ALL_HOSTS
from storbench.core.specs import RunSpec
from storbench.hosts.base import marker_pattern
from storbench.hosts.transport import KILL_AFTER_S, HostError, open_transport, raise_interrupt
from storbench.run.attempt import RunError, keep_log, next_kept_attempt
from storbench.run.engine import run_iteration
from storbench.tools import network_tool
from storbench.tools.base import ToolOutputError

EXPERIMENT = "network"
PHASES = ("single", "all")
MESH_PHASES = ("pairs", "mesh")  # every ordered pair alone; rounds of every node at once
CLIENT_SLACK_S = 30.0  # beyond the test duration: connecting, the JSON summary
READY_TIMEOUT_S = 15.0  # servers must listen within this
READY_POLL_S = 0.1
SERVER_MARGIN_S = 120.0  # server lifetime beyond the planned tests
SHELL_TIMEOUT_S = 60.0
MANIFEST_NAME = "run.json"
SPEC_KEYS = frozenset(
    {"server", "clients", "mesh", "port", "duration_s", "parallel", "min_fraction"}
)
TCP_LISTEN = "0A"  # socket state in /proc/net/tcp
_SERVER_LOG = re.compile(r"/server-(\d+)\.log\b")


class NetworkSpecError(ValueError):
    """A network check's spec that does not describe one (a hand-written --spec)."""


class NetcheckError(RuntimeError):
    """The check failed; the message names every bad host."""


# --- public API ----------------------------------------------------------------------------


def run_network_check(spec: dict, out_dir, log_path: str | None = None) -> list[dict]:
    """Run both phases; return the result rows (per client, plus host='all' for phase all).

    log_path: the check's log, kept for each attempt of the check (attempt.keep_log) as it
    starts: before its servers, whose failure leaves no raw attempt folder.

    spec: {"server": host dict, "clients": [host dicts], "port": int, "duration_s": number,
    "parallel": int}; host dicts are config host dicts (Host keys plus "group").
    A "min_fraction" key is allowed (for :func:`slow_clients`) and not used here.
    """
    unknown = sorted(set(spec) - SPEC_KEYS)
    if unknown:
        raise NetworkSpecError(f"network check spec: unknown key(s) {', '.join(unknown)}")
    if not spec.get("server") and not spec.get("mesh"):
        raise NetworkSpecError("network check spec: no server (with its clients) and no mesh")
    attempt = next_kept_attempt(log_path)
    keep_log(log_path, attempt, named=f"network check attempt {attempt}")  # no raw a<N> folder
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous_term = signal.signal(signal.SIGTERM, raise_interrupt) if in_main_thread else None
    rows: list[dict] = []
    try:
        if spec.get("server"):
            rows += _server_check(spec, Path(out_dir))
        if spec.get("mesh"):
            rows += _mesh_check(spec, Path(out_dir))
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous_term or signal.SIG_DFL)
    return rows


def _server_check(spec: dict, out_dir: Path) -> list[dict]:
    """Every client to the one server: alone, then all at once."""
    check = _Check({k: v for k, v in spec.items() if k != "mesh"}, out_dir)
    try:
        check.start_servers()
        rows = check.run_single()
        rows += check.run_all()
    except BaseException as error:  # the run engine has stopped the clients already
        check.stop_servers_after(error)
        raise
    check.stop_servers()
    check.remove_remote_dirs()
    return rows


def _mesh_check(spec: dict, out_dir: Path) -> list[dict]:
    """The Virtuozzo guide's full mesh: every node serves and every node is a client.

    Phase ``pairs``: each ordered pair alone, one after the other (every link on its own).
    Phase ``mesh``: rounds r = 1 .. N-1 in which node i sends to node i+r (mod N), every node
    at once, so each node sends one stream and receives one: the network under full load.
    """
    nodes = list(spec["mesh"])
    if len(nodes) < 2:
        raise NetworkSpecError("network.mesh: a mesh needs at least 2 hosts")
    base = {k: v for k, v in spec.items() if k not in ("mesh", "server", "clients")}
    # each node its own block of ports, so nodes that share a machine never share a port
    first_port = int(base.get("port", 5201))
    checks = {
        node["name"]: _Check(
            {
                **base,
                "port": first_port + index * (len(nodes) - 1),
                "server": node,
                "clients": [n for n in nodes if n["name"] != node["name"]],
            },
            out_dir / "servers-of" / node["name"],
        )
        for index, node in enumerate(nodes)
    }
    started: list[_Check] = []
    try:
        for check in checks.values():
            check.start_servers()
            started.append(check)
        rows: list[dict] = []
        for server, check in checks.items():
            for client in check.client_dicts:
                iteration_dir = out_dir / "pairs" / server / client["name"]
                rows += check.run_links("pairs", {client["name"]: check}, [client], iteration_dir)
        for shift in range(1, len(nodes)):
            pairs = {
                node["name"]: checks[nodes[(index + shift) % len(nodes)]["name"]]
                for index, node in enumerate(nodes)
            }
            measured = next(iter(checks.values())).run_links(
                "mesh", pairs, nodes, out_dir / "mesh" / f"r{shift}", iteration=shift
            )
            rows += measured + [{**row, "target": None} for row in aggregate_hosts(measured)]
    except BaseException as error:
        for check in started:
            check.stop_servers_after(error)
        raise
    for check in started:
        check.stop_servers()
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
        raise NetworkSpecError(f"network.min_fraction must be in (0, 1], got {min_fraction!r}")
    rows = as_links(rows)
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


def as_links(rows: list[dict]) -> list[dict]:
    """Mesh rows named by their link ('a → b'), so each link is one client of its phase."""
    return [
        {**row, "host": f"{row['host']} → {row['target']}"}
        if row["run_id"] in MESH_PHASES and row["host"] != ALL_HOSTS and row.get("target")
        else row
        for row in rows
    ]


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
            raise NetworkSpecError(f"network check spec: unknown key(s) {', '.join(unknown)}")
        self.server = _host_spec(spec.get("server"), "network.server")
        clients = spec.get("clients") or []
        if not clients:
            raise NetworkSpecError("network.clients: no client hosts")
        self.clients = [_host_spec(c, f"network.clients[{i}]") for i, c in enumerate(clients)]
        self.client_dicts = [dict(client) for client in clients]
        _check_client_names(self.server, self.clients)
        self.port = _integer(spec.get("port", 5201), "network.port", 1, 65535)
        if self.port + len(self.clients) - 1 > 65535:
            raise NetworkSpecError(
                f"network.port: {len(self.clients)} clients need ports {self.port}.."
                f"{self.port + len(self.clients) - 1}, beyond 65535"
            )
        self.duration = _whole_seconds(spec.get("duration_s", 10))
        self.parallel = spec.get("parallel", 1)
        for client in self.client_dicts:
            _integer(self.streams_of(client), "network.parallel", 1, 128)
        self.out_dir = out_dir
        self.token = f"netcheck-{uuid.uuid4().hex[:12]}"  # in every command line of this check
        self.server_dir = posixpath.join(self.server.workdir, self.token, "servers")
        self.ports = {c.name: self.port + i for i, c in enumerate(self.clients)}
        self.tool = network_tool()

    def streams_of(self, client: dict) -> int:
        """Parallel streams of a client: one number, or one per host group (default 1)."""
        if isinstance(self.parallel, dict):
            return self.parallel.get(client.get("group"), 1)
        return self.parallel

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
        argv += self.tool.network_server_command(self.server.tool_address, port, log)
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

    # -- clients: ordinary runs of the run engine, a job file per client (its server port) --

    def run_single(self) -> list[dict]:
        rows, errors = [], []
        for client in self.client_dicts:
            try:
                iteration_dir = self.out_dir / "single" / client["name"]
                rows += self._run_phase("single", [client], iteration_dir)
            except (RunError, ToolOutputError) as error:
                errors.append(_failure_lines(error))
        self._raise_if_failed("single", errors)
        return rows

    def run_all(self) -> list[dict]:
        try:
            measured = self._run_phase("all", self.client_dicts, self.out_dir / "all")
        except (RunError, ToolOutputError) as error:
            self._raise_if_failed("all", [_failure_lines(error)])
        return measured + [{**row, "target": None} for row in aggregate_hosts(measured)]

    def run_links(
        self, phase: str, servers: dict, clients: list[dict], iteration_dir: Path, iteration=1
    ) -> list[dict]:
        """One run of these clients, each to its own server's check (mesh phases); a mesh
        round is its own iteration."""
        try:
            return self._run_phase(phase, clients, iteration_dir, servers, iteration)
        except (RunError, ToolOutputError) as error:
            lines = [f"network check, phase {phase}: failed"]
            lines += [f"  {line}" for line in _failure_lines(error).splitlines()]
            lines.append(f"raw output kept in {iteration_dir}")
            raise NetcheckError("\n".join(lines)) from None

    def _run_phase(
        self,
        phase: str,
        clients: list[dict],
        iteration_dir: Path,
        servers: dict | None = None,
        iteration: int = 1,
    ) -> list[dict]:
        servers = servers or {client["name"]: self for client in clients}
        jobs_dir = iteration_dir / "jobs"
        jobs_dir.mkdir(parents=True, exist_ok=True)
        job_files = {}
        for client in clients:
            check = servers[client["name"]]
            text = self.tool.network_job(
                check.server.tool_address,
                check.ports[client["name"]],
                self.duration,
                self.streams_of(client),
            )
            job_files[client["name"]] = str(jobs_dir / f"{client['name']}{self.tool.job_suffix}")
            atomic.write_text(job_files[client["name"]], text)
        spec = RunSpec(
            experiment=EXPERIMENT,
            run_id=phase,
            tool=self.tool.name,
            target={},
            params=self._params(),
            hosts=tuple(clients),
            timeout_s=self.duration + CLIENT_SLACK_S,
            per_host_jobs=True,
        )
        manifest = run_iteration(spec, 1, job_files, str(iteration_dir / MANIFEST_NAME))
        raw_dir = iteration_dir / manifest.raw_dir
        rows = []
        for host in manifest.hosts:
            output = raw_dir / host["output"]
            check = servers[host["name"]]
            base = {
                "experiment": EXPERIMENT,
                "run_id": phase,
                "target": check.server.name,  # the server this client measured against
                "iteration": iteration,
                "attempt": manifest.attempt,
                "tool": self.tool.name,
                "hosts_in_run": len(clients),
                "params_json": json.dumps(self._params(), sort_keys=True),
                "command": shlex.join(host["command"]),
                "raw_path": str(output),
                "start_time": host["start_time"],
                "end_time": host["end_time"],
            }
            try:
                row = self.tool.network_row(output, host["name"], base)
                rows.append({**row, "target": check.server.name})
            except ToolOutputError as error:
                where = f"{self.tool.name} to {check._where(check.ports[host['name']])}"
                raise ToolOutputError(f"host {host['name']}: {where}: {error}") from error
        return rows

    def _params(self) -> dict:
        return {
            "server": self.server.name,
            "address": self.server.tool_address,
            "duration_s": self.duration,
            "parallel": self.parallel,
        }

    def _where(self, port: int) -> str:
        return f"{self.server.name} ({self.server.tool_address}) port {port}"

    def _raise_if_failed(self, phase: str, errors: list[str]) -> None:
        if errors:
            counted = f"{len(errors)} of {len(self.clients)} failed" if phase == "single" else ""
            lines = [f"network check, phase {phase}: {counted or 'failed'}"]
            lines += [f"  {line}" for error in errors for line in error.splitlines()]
            lines.append(f"raw output kept in {self.out_dir / phase}")
            raise NetcheckError("\n".join(lines))

    # -- cleanup --

    def remove_remote_dirs(self) -> None:
        """Best effort: the JSON is local now; leave no scratch folders on the hosts."""
        folders = {self.server.name: [posixpath.join(self.server.workdir, self.token)]}
        for client in self.clients:
            if client.transport != "local":  # a local client works in the raw folder itself
                folders[client.name] = [
                    posixpath.join(client.workdir, EXPERIMENT, phase)
                    for phase in (*PHASES, *MESH_PHASES)
                ]
        for host in [self.server, *self.clients]:
            quoted = " ".join(shlex.quote(folder) for folder in folders.get(host.name, []))
            if not quoted:
                continue
            try:
                with open_transport(host) as transport:
                    transport.shell(f"rm -rf -- {quoted}", timeout_s=SHELL_TIMEOUT_S)
            except (HostError, OSError):
                pass


# --- helpers ------------------------------------------------------------------------------


def _host_spec(host, key: str) -> Host:
    if not isinstance(host, dict):
        raise NetworkSpecError(f"{key}: expected a host mapping, got {host!r}")
    try:
        return Host.from_dict(host)
    except ValueError as error:
        raise NetworkSpecError(f"{key}: {error}") from error


def _check_client_names(server: Host, clients: list[Host]) -> None:
    seen = set()
    for client in clients:
        if client.name == server.name:
            raise NetworkSpecError(
                f"network.clients: host {client.name} is the iperf3 server itself;"
                " leave it out of the client groups"
            )
        if client.name in seen:
            raise NetworkSpecError(f"network.clients: host {client.name} is listed twice")
        seen.add(client.name)


def _integer(value, key: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise NetworkSpecError(f"{key}: expected a whole number in {low}..{high}, got {value!r}")
    return value


def _whole_seconds(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise NetworkSpecError(f"network.duration: expected seconds, got {value!r}")
    if value < 1 or value != int(value):  # iperf3 reads --time with atoi()
        raise NetworkSpecError(f"network.duration: must be whole seconds >= 1, got {value!r}")
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
    script = f"pgrep -af -- {shlex.quote(marker_pattern(marker))} || true"
    _, out, _ = transport.shell(script, timeout_s=SHELL_TIMEOUT_S)
    return {int(match.group(1)) for match in _SERVER_LOG.finditer(out)}


def _failure_lines(error: Exception) -> str:
    """The engine's message without its first line (the phase says which run failed)."""
    lines = str(error).splitlines()
    headline = len(lines) > 1 and lines[0].endswith((" failed", " did not start"))
    return "\n".join(lines[1:] if headline else lines)
