"""SSH hosts behind a ClusterShell gateway (``connection: tree``): ClusterShell's tree mode.

The controller keeps one channel per gateway (an ``ssh`` to it running ClusterShell's own
gateway, ``python3 -m ClusterShell.Gateway``), and the gateway opens the sessions to its
hosts: the controller's work and connections grow with its gateways, not with the hosts.
Every step process shares one channel per gateway among all its hosts (one ClusterShell task
in a thread of its own) for as long as the process runs, and the gateway reaches each host
over a persistent OpenSSH connection of its own (ControlMaster on the gateway), so a command
is one multiplexed session.

ClusterShell carries output as lines and routes a session's stdin wrongly when several
sessions share a channel (its gateway writes to the last one started), so nothing here writes
to a session's stdin: files travel inside the command (base64) and come back as base64 lines
of 64 KiB (a message each: ClusterShell's work is per line),
and a held tool is released by a session of its own. The gateway reaches its hosts with the
hosts' own SSH settings (user, port, key and known_hosts paths): ClusterShell passes them on.
"""

from __future__ import annotations

import base64
import contextlib
import io
import math
import os
import posixpath
import re
import shlex
import subprocess
import tarfile
import threading
import time
from pathlib import Path

from ClusterShell.Event import EventHandler
from ClusterShell.NodeSet import NodeSet
from ClusterShell.Task import task_self
from ClusterShell.Topology import TopologyGraph

from storbench.core.atomic import atomic_output
from storbench.core.model import Host
from storbench.hosts.base import (
    BACKSTOP_S,
    KILL_AFTER_S,
    RELEASE_ACTION,
    SHELL_TIMEOUT_S,
    HostError,
    Transport,
    _open_output,
    _reason,
    guarded_command,
    mkdir_script,
    program_name,
)
from storbench.hosts.openssh import (  # SSH_FAILED: here, the gateway's ssh to the host
    CONTROL_TIMEOUT_S,
    PERSIST_S,
    SSH_FAILED,
    identity_options,
    keepalive_options,
)

GATEWAY_FAILED = 76  # os.EX_PROTOCOL: ClusterShell's status for a host whose gateway failed
UNCAPPED = 1 << 20  # ClusterShell's fan-out: the steps' own (STORBENCH_FANOUT) limits them
SETTLE_S = 0.05  # hosts of one step register within this; then the channel opens for all
# a session's lines leave the gateway as they come: grouping them (ClusterShell's "grooming",
# 0.25 s by default) keeps every line the channel ever carried in the gateway's memory and
# walks them all for each session (its MsgTree), and our channel lives as long as its step
GROOMING_S = 0
CHUNK_B64 = 96 * 1024  # base64 per command: far below Linux's 128 KiB for one argument
LINE_B64 = 64 * 1024  # base64 per line of a file fetched (base64's own 76: 25 s for 12 MB)
SOCKET_DIR = "/tmp/storbench-ssh-%i"  # as storbench.hosts.openssh's, on every hop
# ssh on every hop (ClusterShell passes its path on too), after making sure the sockets' folder
# is this user's alone: a socket planted there by someone else would receive our sessions. Once
# found private it is marked so (only its owner can change it since), and later sessions check
# with the shell's builtins: the gateway runs this for every session of every host.
PRIVATE_SOCKETS = (
    "uid=; { while read -r key value rest; do "
    'if [ "$key" = Uid: ]; then uid=$value; break; fi; done < /proc/self/status; } 2>/dev/null; '
    "d=/tmp/storbench-ssh-${uid:-$(id -u)}; "
    'if [ -L "$d" ] || [ ! -O "$d" ] || [ ! -e "$d/.private" ]; then '
    'mkdir -m 700 "$d" 2>/dev/null; '
    'if [ -L "$d" ] || [ ! -O "$d" ] || [ "$(stat -c %a "$d")" != 700 ]; then '
    'echo "ssh: $d must belong to $(id -un) alone (mode 0700)" >&2; exit 255; fi; '
    ': > "$d/.private"; fi; '
    'exec ssh "$@"'
)
SSH_PATH = shlex.join(["sh", "-c", PRIVATE_SOCKETS, "ssh"])
SSH_MESSAGE = re.compile(
    rb"^ssh: |Permission denied|Host key verification failed|REMOTE HOST IDENTIFICATION"
    rb"|Connection (closed|reset|timed out)|Timeout, server .* not responding"
)


class TreeTransport(Transport):
    """A host whose sessions go through its gateway (``gateway:``) with ClusterShell."""

    def __init__(self, spec: Host):
        super().__init__(spec)
        self._engine = _engine_for(spec)
        self._engine.register(spec.address)
        self._sessions: list[threading.Thread] = []

    def check(self) -> None:
        rc, _, err = self._shell("true", timeout_s=SHELL_TIMEOUT_S)
        if rc != 0:
            raise self._error(f"not reachable through gateway {self.spec.gateway}: {err.strip()}")

    def check_file_transfer(self) -> None:
        self.check()  # files travel inside sessions: nothing else to check

    def run(
        self, argv, *, timeout_s, stdout_path, stderr_path, marker, cwd=None, program=None
    ) -> int:
        command = guarded_command(argv, timeout_s, marker, cwd)
        action = f"running {program or program_name(argv)}"
        backstop_s = timeout_s + KILL_AFTER_S + BACKSTOP_S
        with _open_output(stdout_path) as out, _open_output(stderr_path) as err:
            session = _Session(out, err)
            try:
                self._engine.start(self.spec, command, session, backstop_s)
                status = self._wait(session, action, backstop_s)
            except BaseException as exc:
                self._kill_after_failure(marker, exc)
                raise
        return status

    def _send_to_session(self, line: bytes) -> None:
        """A session of its own writes the release: stdin cannot carry it (module docstring)."""
        script = f"line={shlex.quote(line.decode().rstrip(chr(10)))}; {RELEASE_ACTION}"
        thread = threading.Thread(
            target=self._best_effort, args=(script,), name="tree-release", daemon=True
        )
        thread.start()
        self._sessions.append(thread)

    def _best_effort(self, script: str) -> None:
        with contextlib.suppress(HostError):  # the hooks' own deadline stands behind it
            self._shell(script, timeout_s=SHELL_TIMEOUT_S)

    def put_text(self, text: str, path: str) -> None:
        """Through a temporary file moved into place, in pieces of at most CHUNK_B64 base64
        each: a job file is one session."""
        directory, name = posixpath.split(path)
        tmp = shlex.quote(posixpath.join(directory, f".{name}.{os.urandom(8).hex()}.tmp"))
        encoded = base64.b64encode(text.encode()).decode()
        pieces = [encoded[at : at + CHUNK_B64] for at in range(0, len(encoded), CHUNK_B64)]
        first, redirect = mkdir_script(directory or "."), ">"
        for index, piece in enumerate(pieces or ["''"], start=1):
            done = f" && mv -f -- {tmp} {shlex.quote(path)}" if index >= len(pieces) else ""
            self._checked(
                f"{first} && printf %s {piece} | base64 -d {redirect} {tmp}{done}"
                f" || {{ rc=$?; rm -f -- {tmp}; exit $rc; }}",
                f"writing {path}",
            )
            first, redirect = "true", ">>"

    def put_private_text(self, text: str, path: str) -> None:
        """On the session's stdin, never in a command (the host's and the gateway's process
        listings show those), over a channel of its own: the only session there, it is the
        one the gateway hands the input to."""
        quoted = shlex.quote(path)
        session = _Session()
        with self._engine.alone(self.spec.address) as generation:
            worker = self._engine.start(
                self.spec, f"umask 077 && rm -f -- {quoted} && cat > {quoted}", session,
                SHELL_TIMEOUT_S, generation,
            )  # fmt: skip
            if worker is not None:
                worker.write(text.encode())
                worker.set_write_eof()
            rc = self._wait(session, f"writing {path}", SHELL_TIMEOUT_S)
        if rc != 0:
            raise self._error(f"writing {path}: {_reason(rc, session.text('stderr'))}")

    def fetch(self, path: str, local_path) -> None:
        data = self._download(f"base64 -w {LINE_B64} < {shlex.quote(path)}", f"fetching {path}")
        try:
            with atomic_output(local_path) as tmp:
                Path(tmp).write_bytes(data)
        except OSError as error:  # a full disk here: the host's copy is the one left
            raise self._error(f"fetching {path}: {error}; the host keeps it") from error

    def fetch_tree(self, path: str, local_dir) -> None:
        local_dir = Path(local_dir)
        local_dir.mkdir(parents=True, exist_ok=True)
        script = f"tar -C {shlex.quote(path)} -cf - . | base64 -w {LINE_B64}"
        archive = self._download(script, f"fetching {path}")
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(local_dir, filter="data")

    def mkdirs(self, path: str) -> None:
        self._checked(mkdir_script(path), f"cannot create directory {path}")

    def close(self) -> None:
        for thread in self._sessions:  # releases still on their way
            thread.join(SHELL_TIMEOUT_S)
        self._sessions.clear()

    def _shell(self, script: str, *, timeout_s: float) -> tuple[int, str, str]:
        session = _Session()
        self._engine.start(self.spec, script, session, timeout_s)
        rc = self._wait(session, "running a shell command", timeout_s)
        return rc, session.text("stdout"), session.text("stderr")

    # -- helpers ----------------------------------------------------------------------

    def _wait(self, session: _Session, action: str, limit_s: float) -> int:
        if not session.done.wait(limit_s + SHELL_TIMEOUT_S):
            raise self._error(f"{action}: no answer through gateway {self.spec.gateway}")
        if session.timed_out:
            raise self._error("command still running past its deadline; killing it")
        if session.failure is not None or session.rc in (GATEWAY_FAILED, None):
            said = session.text("stderr").strip() or session.failure or "no reason given"
            raise self._error(f"{action}: gateway {self.spec.gateway} failed: {said}")
        if session.rc == SSH_FAILED and session.ssh_failed():
            raise self._error(
                f"{action}: the gateway {self.spec.gateway} cannot reach it:"
                f" {session.text('stderr').strip()}"
            )
        return session.rc

    def _checked(self, script: str, action: str) -> str:
        rc, out, err = self._shell(script, timeout_s=SHELL_TIMEOUT_S)
        if rc != 0:
            raise self._error(f"{action}: {_reason(rc, err)}")
        return out

    def _download(self, script: str, action: str) -> bytes:
        session = _Session()
        self._engine.start(self.spec, f"set -o pipefail 2>/dev/null; {script}", session,
                           SHELL_TIMEOUT_S)  # fmt: skip
        rc = self._wait(session, action, SHELL_TIMEOUT_S)
        if rc != 0:
            raise self._error(f"{action}: {_reason(rc, session.text('stderr'))}")
        return base64.b64decode(session.data("stdout"))


def disconnect(specs: list[Host]) -> list[str]:
    """Close the persistent connections now, per gateway: its own to each of its hosts (one
    session on it), then this machine's to it; the next session opens them anew. What was
    closed, one line each."""
    groups: dict[tuple[str, str], list[Host]] = {}
    for spec in specs:
        groups.setdefault((spec.gateway or "", _ssh_options(spec)), []).append(spec)
    closed = []
    for (gateway, options), hosts in groups.items():
        ssh = [*shlex.split(SSH_PATH), *shlex.split(options)]
        exits = [f"{SSH_PATH} {options} -O exit {shlex.quote(host.address)}" for host in hosts]
        on_gateway = "; ".join(f"{command} 2>/dev/null" for command in exits)
        rc, said = _quietly([*ssh, gateway, f"{on_gateway}; true"])
        if rc == 0:
            closed += [f"host {h.name}: connection via gateway {gateway} closed" for h in hosts]
        else:
            closed.append(f"gateway {gateway}: its connections to hosts not closed: {said}")
        rc, _ = _quietly([*ssh, "-O", "exit", gateway])  # the connection just used, too
        closed.append(f"gateway {gateway}: persistent connection {'closed' if rc == 0 else 'gone'}")
    return closed


def _quietly(argv: list[str]) -> tuple[int, str]:
    """argv's exit status and what it said on stderr; 255 and why when it could not run."""
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=CONTROL_TIMEOUT_S)  # fmt: skip
    except (subprocess.TimeoutExpired, OSError) as error:
        return 255, str(error)
    return done.returncode, done.stderr.strip()


class _Session(EventHandler):
    """What one ClusterShell worker on one host gave: its lines (or a file's), status, end.

    ClusterShell hands over lines without their newlines, so whether the output ended with
    one is lost: the command prints a line of its own after its output on both streams (an
    empty line first), and where it arrives exactly one newline too many was kept."""

    def __init__(self, stdout=None, stderr=None) -> None:
        super().__init__()
        self.sinks = {"stdout": stdout, "stderr": stderr}
        self.lines: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        self.ended: dict[str, int] = {}  # stream: how many lines came before the end line
        self.end_line = f"storbench-end-{os.urandom(8).hex()}"
        self.rc: int | None = None
        self.timed_out = False
        self.failure: str | None = None  # its gateway's, or an error of ours handling it
        self.generation: _Generation | None = None
        self.done = threading.Event()

    def fail(self, reason: str) -> None:
        self.failure = self.failure or reason
        self.done.set()

    def command(self, script: str) -> str:
        end = shlex.quote(f"\n{self.end_line}\n")
        return f"( {script}\n); rc=$?; printf {end}; printf {end} >&2; exit $rc"

    def text(self, stream: str) -> str:
        lines = self.lines[stream]
        before = self.ended.get(stream)
        if before is None:
            return b"".join(line + b"\n" for line in lines).decode(errors="replace")
        late = b"".join(line + b"\n" for line in lines[before:])  # from what the command left
        return (b"\n".join(lines[:before]) + late).decode(errors="replace")

    def data(self, stream: str) -> bytes:
        return b"".join(self.lines[stream])

    def ssh_failed(self) -> bool:
        """Whether the gateway's ssh to the host said it failed (its status 255 alone could be
        the command's own)."""
        return any(SSH_MESSAGE.search(line) for line in self.lines["stderr"])

    # called in the task's thread
    def ev_read(self, worker, node, sname, msg) -> None:
        try:
            self._read(sname, bytes(msg))
        except Exception as error:  # raised here, it would stop the task of every session
            self.failure = self.failure or f"reading its output: {error}"

    def _read(self, sname: str, line: bytes) -> None:
        sink = self.sinks.get(sname)
        if line == self.end_line.encode():
            self.ended[sname] = len(self.lines[sname])
            if sink is not None and sink.tell() > 0:  # the newline after the output's own
                with contextlib.suppress(OSError):  # a device (/dev/null) keeps it
                    sink.seek(-1, os.SEEK_END)
                    sink.truncate()
                sink.flush()
        elif sink is not None:
            sink.write(line + b"\n")
            sink.flush()
        else:
            self.lines.setdefault(sname, []).append(line)

    def ev_hup(self, worker, node, rc) -> None:
        self.rc = rc

    def ev_close(self, worker, timedout) -> None:
        self.timed_out = bool(timedout)
        if self.generation is not None:
            self.generation.discard(self)
        self.done.set()


class _Engine:
    """One gateway reached one way: a ClusterShell task in its own thread (a generation)
    routing every host registered so far. A host that registers after the task started gets a
    new generation (the gateway learns its routes when its channel opens), and so does every
    command after a generation failed (its gateway, or its channel, gone)."""

    def __init__(self, spec: Host):
        self.gateway = spec.gateway or ""
        self.python = spec.gateway_python
        self.options = _ssh_options(spec)
        self._lock = threading.Lock()
        self._hosts: set[str] = set()
        self._registered_at = 0.0
        self._current: _Generation | None = None

    def register(self, address: str) -> None:
        with self._lock:
            if address not in self._hosts:
                self._hosts.add(address)
                self._registered_at = time.monotonic()

    def start(
        self, spec: Host, command: str, session: _Session, timeout_s: float,
        generation: _Generation | None = None,
    ):  # fmt: skip
        """Start command on spec's host (in generation, else the current one): its worker,
        or None when the generation had already failed (the session says why)."""
        generation = generation or self._generation_for(spec.address)
        if not generation.add(session):
            session.fail(generation.failure or "its ClusterShell task ended")
            return None
        with _ENVIRONMENT:  # ClusterShell reads the gateway's python from the environment
            os.environ["CLUSTERSHELL_GW_PYTHON_EXECUTABLE"] = self.python
            return generation.task.shell(session.command(command), nodes=spec.address,
                                         handler=session, timeout=timeout_s, stderr=True,
                                         tree=True)  # fmt: skip

    @contextlib.contextmanager
    def alone(self, address: str):
        """A generation (and channel) of its own for one session, ended afterwards."""
        generation = _Generation(self.gateway, frozenset({address}), self.options)
        try:
            yield generation
        finally:
            generation.task.abort()

    def _generation_for(self, address: str) -> _Generation:
        while True:
            with self._lock:
                current = self._current
                if current and current.failure is None and address in current.routed:
                    return current
                quiet_s = time.monotonic() - self._registered_at
                if quiet_s >= SETTLE_S:
                    if current is not None and current.failure is None:  # a failed one's over
                        current.retire()
                    self._current = _Generation(self.gateway, frozenset(self._hosts), self.options)
                    return self._current
            time.sleep(SETTLE_S - quiet_s)


class _Generation:
    """A ClusterShell task routing a fixed set of hosts through one gateway, in a daemon thread
    (its own would keep the step alive), and the sessions it runs: when the task fails (the
    gateway unreachable, its channel lost) they fail at once instead of at their deadline."""

    def __init__(self, gateway: str, routed: frozenset[str], options: str):
        self.routed = routed
        self.failure: str | None = None
        self._sessions: set[_Session] = set()
        self._lock = threading.Lock()
        made: list = []
        settled = threading.Event()

        def serve() -> None:
            try:
                with _TASK_SETUP:  # ClusterShell loads its worker classes unsafely for threads
                    task = task_self()
                task.topology = _topology(gateway, routed)
                task.set_info("ssh_path", SSH_PATH)
                task.set_info("ssh_options", options)
                task.set_info("fanout", UNCAPPED)  # the gateway inherits it
                task.set_info("grooming_delay", GROOMING_S)
                for stream in ("stdout_msgtree", "stderr_msgtree"):  # the sessions take the lines
                    task.set_default(stream, False)
                let_go = _hold_channels(task)
                task.timer(PERSIST_S, _Idle(), PERSIST_S, autoclose=False)  # keeps it running
                made.append((task, let_go))
            except Exception as error:
                made.append(error)
                return
            finally:
                settled.set()
            try:
                task.run()
                self.fail("its ClusterShell task ended")
            except Exception as error:  # ClusterShell gives up on a failed gateway so
                self.fail(f"ClusterShell: {error}")

        threading.Thread(target=serve, name=f"tree-{gateway}", daemon=True).start()
        settled.wait()
        if isinstance(made[0], Exception):
            raise RuntimeError(f"ClusterShell could not set up gateway {gateway}: {made[0]}")
        self.task, self._let_go = made[0]

    def retire(self) -> None:
        """A newer generation takes its hosts: its channel closes once its sessions end."""
        self.task.timer(0, _Call(self._let_go))  # ClusterShell's state: in the task's thread

    def add(self, session: _Session) -> bool:
        with self._lock:
            if self.failure is not None:
                return False
            self._sessions.add(session)
            session.generation = self
            return True

    def discard(self, session: _Session) -> None:
        with self._lock:
            self._sessions.discard(session)

    def fail(self, reason: str) -> None:
        with self._lock:
            self.failure = reason
            pending = list(self._sessions)
            self._sessions.clear()
        for session in pending:
            session.fail(reason)


def _topology(gateway: str, hosts: frozenset[str]):
    root = "storbench-controller"  # ClusterShell routes from a root name, not this machine's
    graph = TopologyGraph()
    graph.add_route(NodeSet(root), NodeSet(gateway))
    graph.add_route(NodeSet(gateway), NodeSet.fromlist(sorted(hosts)))
    return graph.to_tree(root)


_ENGINES: dict[tuple, _Engine] = {}
_ENGINES_LOCK = threading.Lock()
_ENVIRONMENT = threading.Lock()
_TASK_SETUP = threading.Lock()


def _engine_for(spec: Host) -> _Engine:
    key = (spec.gateway, spec.gateway_python, _ssh_options(spec))
    with _ENGINES_LOCK:
        if key not in _ENGINES:
            _ENGINES[key] = _Engine(spec)
        return _ENGINES[key]


def _hold_channels(task):
    """Keep the task's channel to its gateway open between sessions: ClusterShell closes it
    when its last session ends, and the next session would start the gateway anew (its
    Python and ClusterShell, 0.1 s a command). A holder counts as one more session of the
    channel (ClusterShell 1.10's Task.gateways: {gateway: (channel worker, sessions)}).
    Returns what lets the channels go, as ClusterShell's own release does when no session is
    left on one (Task._pchannel_release); to be called in the task's thread."""
    open_channel = task._pchannel
    holding = True

    def channel_held(gateway, metaworker):
        channel = open_channel(gateway, metaworker)
        if holding:
            task.gateways[str(gateway)][1].add(_CHANNEL_HOLDER)
        return channel

    def let_go() -> None:
        nonlocal holding
        holding = False
        for channel_worker, sessions in list(task.gateways.values()):
            sessions.discard(_CHANNEL_HOLDER)
            if not sessions:
                channel_worker.eh._close(abort=True)

    task._pchannel = channel_held
    return let_go


class _Call(EventHandler):
    """A timer's handler that calls a function (in the task's thread)."""

    def __init__(self, function) -> None:
        super().__init__()
        self.function = function

    def ev_timer(self, timer) -> None:
        self.function()


class _ChannelHolder:
    """What ClusterShell tells the sessions of a channel it closes (a gateway gone)."""

    def _gateway_abort(self, gateway) -> None:
        pass  # the channel is gone: the next session opens another


_CHANNEL_HOLDER = _ChannelHolder()


class _Idle(EventHandler):
    """Handles the timer that keeps the task running between sessions: nothing to do."""


def _ssh_options(spec: Host) -> str:
    """The options of every hop (ClusterShell passes them on to the gateway): the hosts' user,
    port, key and known_hosts, and a persistent connection per host held by the gateway."""
    socket = f"{SOCKET_DIR}/tree-%C"  # ssh's %i: the uid of whoever runs it
    known_hosts = ["~/.ssh/known_hosts", *filter(None, [spec.known_hosts])]  # ssh expands ~
    options = [
        "-oBatchMode=yes", "-oLogLevel=ERROR",
        f"-oConnectTimeout={max(1, math.ceil(spec.connect_timeout))}",
        "-oControlMaster=auto", f"-oControlPath={socket}", f"-oControlPersist={PERSIST_S}",
        *keepalive_options(spec), *identity_options(spec, known_hosts), "-p", str(spec.port),
    ]  # fmt: skip
    if spec.user:
        options += ["-l", spec.user]
    return shlex.join(options)
