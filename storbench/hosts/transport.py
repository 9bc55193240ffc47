"""Run commands and move files on benchmark client hosts: locally, or over SSH.

Three ways over SSH: the system's OpenSSH client over one persistent multiplexed connection
per host (``connection: persistent``, the default; storbench.hosts.openssh); paramiko
(fabric), one connection per step (``connection: per-step``); and ClusterShell's tree mode
through a gateway (``connection: tree``, storbench.hosts.tree). The shared interface and
shell helpers are in storbench.hosts.base.

Every command runs under coreutils ``timeout`` so a hung tool is stopped on the
host itself, and a run() that is interrupted kills its tool before re-raising.
A tool also stops when the process that started it dies: a local one gets SIGTERM
(parent-death signal, via setpriv), a remote one when its SSH session ends (a lost
connection or a killed storbench). Only a host that stays up but unreachable keeps its
tool running, until its ``timeout``; the next attempt of that run kills it.
Host keys are verified by default (opt out per host with ``host_key_check: false``).

The paramiko transport imports fabric/paramiko lazily: importing this module and the
local transport need only the standard library.

Use one Transport per thread; opening is serialised, but sharing one between
threads gains nothing and mixes up interrupt handling.
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import os
import posixpath
import select
import shlex
import shutil
import signal
import stat as stat_module
import subprocess
import threading
import time
import uuid
from pathlib import Path

from storbench.core.atomic import atomic_output, write_text
from storbench.core.model import Host, parse_jump
from storbench.hosts.base import (
    BACKSTOP_S,
    KEEPALIVE_S,
    KILL_AFTER_S,
    PROBE_EVERY_S,
    RELEASE_ACTION,
    SFTP_STALL_S,
    SHELL_TIMEOUT_S,
    TERM_GRACE_S,
    HostError,
    Transport,
    _ancestry,
    _check_marker_text,
    _copy_chunk,
    _describe,
    _kill_process_group,
    _local_pids_matching,
    _open_output,
    _parent_death_argv,
    _reason,
    _signal_pids,
    _timeout_argv,
    guarded_command,
    hold_signals,
    host_key_name,
    mkdir_script,
    program_name,
    raise_interrupt,
    release_line,
)
from storbench.hosts.openssh import OpenSSHTransport

OUTPUT_AFTER_EXIT_S = 2.0  # a command's output still arriving after its exit status

__all__ = [
    "KILL_AFTER_S",
    "SHELL_TIMEOUT_S",
    "HostError",
    "LocalTransport",
    "OpenSSHTransport",
    "SSHTransport",
    "Transport",
    "hold_signals",
    "disconnect",
    "open_transport",
    "program_name",
    "raise_interrupt",
]


def open_transport(spec: Host) -> Transport:
    if spec.transport == "ssh" and spec.connection == "persistent":
        return OpenSSHTransport(spec)
    if spec.transport == "ssh" and spec.connection == "tree":
        from storbench.hosts.tree import TreeTransport  # ClusterShell only where it is used

        return TreeTransport(spec)
    if spec.transport == "ssh":
        return SSHTransport(spec)
    return LocalTransport(spec)


def disconnect(specs: list[Host]) -> list[str]:
    """Close the persistent connections of these hosts now (`snakemake cleanup`): what was
    closed, one line each. Per-step connections end with their step: nothing to close."""
    done = []
    for spec in specs:
        if spec.transport == "ssh" and spec.connection == "persistent":
            OpenSSHTransport(spec).disconnect()
            done.append(f"host {spec.name}: persistent connection closed")
    behind_gateways = [s for s in specs if s.transport == "ssh" and s.connection == "tree"]
    if behind_gateways:
        from storbench.hosts import tree  # ClusterShell only where it is used

        done += tree.disconnect(behind_gateways)
    return done


class LocalTransport(Transport):
    """The machine running storbench itself."""

    def run(
        self, argv, *, timeout_s, stdout_path, stderr_path, marker, cwd=None, program=None
    ) -> int:
        command = _parent_death_argv() + _timeout_argv(argv, timeout_s, marker)
        backstop_s = timeout_s + KILL_AFTER_S + BACKSTOP_S
        program = program or program_name(argv)
        with _open_output(stdout_path) as out, _open_output(stderr_path) as err:
            try:
                # A new session keeps terminal Ctrl-C away from the tool; we kill it ourselves.
                proc = subprocess.Popen(
                    command, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                    cwd=cwd, start_new_session=True,
                )  # fmt: skip
            except OSError as exc:
                raise self._error(f"cannot start {program}: {_describe(exc)}") from exc
            try:
                return proc.wait(timeout=backstop_s)
            except BaseException as exc:
                _kill_process_group(proc)
                if isinstance(exc, subprocess.TimeoutExpired):
                    reason = f"{program} still running after {backstop_s:.0f}s; killed"
                    raise self._error(reason) from exc
                raise

    def put_text(self, text: str, path: str) -> None:
        try:
            write_text(path, text)
        except OSError as exc:
            raise self._error(f"cannot write {path}: {_describe(exc)}") from exc

    def fetch(self, path: str, local_path) -> None:
        try:
            if os.path.exists(local_path) and os.path.samefile(path, local_path):
                return
            with atomic_output(local_path) as tmp:
                shutil.copyfile(path, tmp)
        except OSError as exc:
            raise self._error(f"cannot fetch {path}: {_describe(exc)}") from exc

    def mkdirs(self, path: str) -> None:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:
            raise self._error(f"cannot create directory {path}: {_describe(exc)}") from exc

    def put_private_text(self, text: str, path: str) -> None:
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as exc:
            raise self._error(f"cannot write {path}: {_describe(exc)}") from exc

    def fetch_tree(self, path: str, local_dir) -> None:
        try:
            if os.path.exists(local_dir) and os.path.samefile(path, local_dir):
                return
            shutil.copytree(path, local_dir, dirs_exist_ok=True)
        except (OSError, shutil.Error) as exc:
            raise self._error(f"cannot fetch {path}: {exc}") from exc

    def release(self, fifo: str, at_epoch: float) -> None:
        """The session guard's release action, here (a local tool has no session)."""
        with contextlib.suppress(OSError, subprocess.SubprocessError):  # best effort, as there
            line = release_line(fifo, at_epoch).decode().rstrip("\n")
            self._shell(f"line={shlex.quote(line)}; {RELEASE_ACTION}", timeout_s=SHELL_TIMEOUT_S)

    def kill_matching(self, marker: str) -> None:
        """Like pkill -f, but sparing this process and its ancestors.

        Here the marker (a job file path) may well be in storbench's own command line
        or in the shell that started it.
        """
        _check_marker_text(marker)
        spared = _ancestry(os.getpid())
        victims = _local_pids_matching(marker) - spared
        _signal_pids(victims, signal.SIGTERM)
        deadline = time.monotonic() + TERM_GRACE_S
        while victims and time.monotonic() < deadline:
            time.sleep(0.1)
            victims = _local_pids_matching(marker) - spared
        _signal_pids(victims, signal.SIGKILL)

    def _shell(self, script: str, *, timeout_s: float) -> tuple[int, str, str]:
        done = subprocess.run(
            ["sh", "-c", script], capture_output=True, text=True, timeout=timeout_s
        )
        return done.returncode, done.stdout, done.stderr


class _Gateway:
    """A jump host's connection in this process, shared by every host behind it."""

    def __init__(self, key: tuple, conn):
        self.key = key
        self.conn = conn
        self.users = 0
        self.opening = threading.Lock()
        self.error: Exception | None = None  # why it could not be opened, for every waiter


_GATEWAYS: dict[tuple, _Gateway] = {}
_GATEWAYS_LOCK = threading.Lock()


def _forget(gateway: _Gateway) -> None:
    """The next host behind this jump host opens a new gateway (call with _GATEWAYS_LOCK)."""
    if _GATEWAYS.get(gateway.key) is gateway:
        del _GATEWAYS[gateway.key]


def _release(gateway: _Gateway) -> None:
    """One host behind the gateway is done with it; the last one closes it."""
    with _GATEWAYS_LOCK:
        gateway.users -= 1
        if gateway.users > 0:
            return
        _forget(gateway)
    with contextlib.suppress(Exception):
        gateway.conn.close()


class _JumpChannel:
    """The direct-tcpip channel through a jump host that one host's SSH connection runs in,
    with each send and the close made one after the other: paramiko checks that a channel is
    open and sends its data outside one lock, so the host's last packet, sent by its
    transport's thread as another thread closed the connection, arrived after the channel's
    close, and the jump host's sshd dropped its connection and every host behind it."""

    def __init__(self, channel):
        self._channel = channel
        self._turn = threading.Lock()

    def send(self, data):
        with self._turn:
            return self._channel.send(data)

    def close(self):
        with self._turn:
            self._channel.close()

    def __getattr__(self, name):
        return getattr(self._channel, name)


@functools.cache
def _behind_jump_connection():
    """fabric's Connection for a host behind a jump host: its channel a _JumpChannel."""
    from fabric import Connection  # lazy: loads fabric, importlib.metadata, paramiko, yaml

    class BehindJump(Connection):
        def open_gateway(self):
            return _JumpChannel(super().open_gateway())

    return BehindJump


class SSHTransport(Transport):
    """A host reached over SSH (fabric Connection, paramiko channels underneath)."""

    def __init__(self, spec: Host):
        super().__init__(spec)
        self._conn = None
        self._gateway: _Gateway | None = None
        self._sftp = None
        self._open_lock = threading.Lock()  # paramiko races when one client is opened twice
        self._running = None  # the channel of the tool run() waits for

    def check(self) -> None:
        self._connection()

    def check_file_transfer(self) -> None:
        self._sftp_client()

    def run(
        self, argv, *, timeout_s, stdout_path, stderr_path, marker, cwd=None, program=None
    ) -> int:
        command = guarded_command(argv, timeout_s, marker, cwd)
        deadline = time.monotonic() + timeout_s + KILL_AFTER_S + BACKSTOP_S
        self._connection()  # connect first: if that fails, nothing was started to kill
        with _open_output(stdout_path) as out, _open_output(stderr_path) as err:
            channel = None
            try:
                action = f"running {program or program_name(argv)}"
                with self._translating(action):
                    channel = self._exec(command, keep_stdin=True)  # the guard watches it
                    self._running = channel
                    return self._pump(channel, out, err, deadline, action=action, watch=True)
            except BaseException as exc:
                self._drop_lost_connection()  # so the kill below reconnects
                self._kill_after_failure(marker, exc)
                raise
            finally:
                self._running = None
                if channel is not None:
                    channel.close()

    def _send_to_session(self, line: bytes) -> None:
        channel = self._running
        if channel is not None:
            with contextlib.suppress(Exception):  # a channel closing under us: nothing to release
                channel.sendall(line)

    def put_text(self, text: str, path: str) -> None:
        directory, name = posixpath.split(path)
        self.mkdirs(directory or ".")
        tmp = posixpath.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")
        sftp = self._sftp_client()
        with self._translating(f"writing {path}"):
            try:
                sftp.putfo(io.BytesIO(text.encode()), tmp)
                sftp.posix_rename(tmp, path)  # rename(2) on the host: readers never see half a file
            except BaseException:
                with contextlib.suppress(Exception):
                    sftp.remove(tmp)
                raise

    def fetch(self, path: str, local_path) -> None:
        sftp = self._sftp_client()
        with self._translating(f"fetching {path}"), atomic_output(local_path) as tmp:
            sftp.get(path, str(tmp))

    def mkdirs(self, path: str) -> None:
        rc, _, err = self._shell(mkdir_script(path), timeout_s=SHELL_TIMEOUT_S)
        if rc != 0:
            raise self._error(f"cannot create directory {path}: {_reason(rc, err)}")

    def put_private_text(self, text: str, path: str) -> None:
        sftp = self._sftp_client()
        with self._translating(f"writing {path}"):
            with contextlib.suppress(OSError):
                sftp.remove(path)
            with sftp.open(path, "w") as handle:
                handle.chmod(0o600)  # before the content arrives
                handle.write(text.encode())

    def fetch_tree(self, path: str, local_dir) -> None:

        sftp = self._sftp_client()
        local_dir = Path(local_dir)
        local_dir.mkdir(parents=True, exist_ok=True)
        with self._translating(f"fetching {path}"):
            for entry in sftp.listdir_attr(path):
                remote = posixpath.join(path, entry.filename)
                if stat_module.S_ISDIR(entry.st_mode or 0):
                    self.fetch_tree(remote, local_dir / entry.filename)
                else:
                    with atomic_output(local_dir / entry.filename) as tmp:
                        sftp.get(remote, str(tmp))

    def close(self) -> None:
        for closable in (self._sftp, self._conn):
            if closable is not None:
                with contextlib.suppress(Exception):
                    closable.close()
        self._sftp = self._conn = None
        if self._gateway is not None:
            _release(self._gateway)
            self._gateway = None

    def _shell(self, script: str, *, timeout_s: float) -> tuple[int, str, str]:
        out, err = io.BytesIO(), io.BytesIO()
        with self._translating("running a shell command"):
            channel = self._exec(script)
            try:
                rc = self._pump(channel, out, err, time.monotonic() + timeout_s)
            finally:
                channel.close()
        return rc, out.getvalue().decode(errors="replace"), err.getvalue().decode(errors="replace")

    # -- connection -------------------------------------------------------------------

    def _connection(self):
        with self._open_lock:
            if self._conn is None:
                self._conn = self._connect()
            return self._conn

    def _connect(self):
        spec = self.spec
        for label, path in (("identity", spec.identity), ("known_hosts", spec.known_hosts)):
            if path is not None and not os.path.isfile(path):
                raise self._error(f"{label} file not found: {path}")
        gateway = self._open_gateway() if spec.jump else None
        conn = self._new_connection(spec.address, spec.user, spec.port, gateway)
        try:
            conn.open()
        except Exception as exc:
            with contextlib.suppress(Exception):
                conn.close()
            self.close()  # this host's share of the gateway
            raise self._connect_error(exc, conn, is_jump=False) from exc
        conn.transport.set_keepalive(KEEPALIVE_S)
        return conn

    def _open_gateway(self):
        """The jump host's connection, opened once in this process for every host behind it:
        a bastion's sshd drops connections that arrive together past its MaxStartups (10 by
        default; 16 of 47 hosts failed when each opened its own)."""
        spec = self.spec
        assert spec.jump is not None
        jump_user, jump_host, jump_port = parse_jump(spec.jump)
        login = jump_user or spec.user
        key = (login, jump_host, jump_port, spec.identity, spec.known_hosts,
               spec.host_key_check, spec.connect_timeout)  # fmt: skip
        with _GATEWAYS_LOCK:
            gateway = _GATEWAYS.get(key)
            if gateway is None:
                gateway = _GATEWAYS[key] = _Gateway(
                    key, self._new_connection(jump_host, login, jump_port)
                )
            gateway.users += 1
        self._gateway = gateway
        with gateway.opening:  # the first host connects; the others wait and share it
            try:
                if gateway.error is None:
                    gateway.conn.open()  # nothing to do once connected
                    gateway.conn.transport.set_keepalive(KEEPALIVE_S)
            except Exception as exc:
                gateway.error = exc
            if gateway.error is not None:
                with _GATEWAYS_LOCK:  # the next step tries again
                    _forget(gateway)
                error = gateway.error
                self.close()
                raise self._connect_error(error, gateway.conn, is_jump=True) from error
        return gateway.conn

    def _new_connection(self, host: str, user: str | None, port: int, gateway=None):
        import paramiko  # lazy: loads importlib.metadata, paramiko, yaml
        from fabric import Connection  # lazy: loads fabric, importlib.metadata, paramiko, yaml

        timeout_s = self.spec.connect_timeout
        connect_kwargs: dict[str, object] = {"banner_timeout": timeout_s, "auth_timeout": timeout_s}
        if self.spec.identity:
            # Like IdentitiesOnly: an agent full of keys would otherwise exhaust MaxAuthTries.
            connect_kwargs |= {
                "key_filename": self.spec.identity,
                "look_for_keys": False,
                "allow_agent": False,
            }
        conn = (Connection if gateway is None else _behind_jump_connection())(
            host, user=user, port=port, gateway=gateway, connect_kwargs=connect_kwargs,
            # fabric truncates to int and treats 0 as "no timeout"
            connect_timeout=max(1, math.ceil(timeout_s)),
        )  # fmt: skip
        client = conn.client
        client.load_system_host_keys()  # ~/.ssh/known_hosts; fabric does not load it
        if self.spec.known_hosts:
            client.load_host_keys(self.spec.known_hosts)
        if self.spec.host_key_check:
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
        else:
            # The base policy accepts silently; AutoAddPolicy would write to known_hosts.
            client.set_missing_host_key_policy(paramiko.MissingHostKeyPolicy())
        return conn

    def _connect_error(self, exc: Exception, conn, *, is_jump: bool) -> HostError:
        import paramiko  # lazy: loads importlib.metadata, paramiko, yaml

        where = f"{conn.host}:{conn.port}" + (" (jump host)" if is_jump else "")
        if isinstance(exc, paramiko.BadHostKeyException):
            return self._error(
                f"host key CHANGED for {where}: server offered {exc.key.get_name()}"
                f" {exc.key.fingerprint}, known_hosts has {exc.expected_key.fingerprint};"
                f" refusing to connect (known_hosts: {self._known_hosts_files()})."
                f" If the host was reinstalled:"
                f" ssh-keygen -R '{host_key_name(conn.host, conn.port)}'"
            )
        if isinstance(exc, paramiko.AuthenticationException):
            key = self.spec.identity or "default keys and agent"
            return self._error(
                f"ssh authentication failed for user {conn.user} at {where} (key: {key}): {exc}"
            )
        if isinstance(exc, paramiko.SSHException) and "not found in known_hosts" in str(exc):
            return self._error(
                f"host key unknown for {where} (known_hosts: {self._known_hosts_files()});"
                f" add it to known_hosts (ssh-keyscan -p {conn.port} {conn.host})"
                " or set host_key_check: false"
            )
        if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
            reasons = sorted({_describe(error) for error in exc.errors.values()})
            return self._error(f"unreachable at {where} ({'; '.join(reasons)})")
        if isinstance(exc, TimeoutError):
            return self._error(
                f"unreachable at {where} (timed out after {self.spec.connect_timeout:g}s)"
            )
        if isinstance(exc, OSError):
            return self._error(f"unreachable at {where} ({_describe(exc)})")
        return self._error(f"ssh connection to {where} failed: {_describe(exc)}")

    def _known_hosts_files(self) -> str:
        return ", ".join(filter(None, ["~/.ssh/known_hosts", self.spec.known_hosts]))

    # -- channels ---------------------------------------------------------------------

    def _exec(self, command: str, *, keep_stdin: bool = False):
        channel = self._connection().transport.open_session(timeout=self.spec.connect_timeout)
        channel.exec_command(command)
        if not keep_stdin:
            channel.shutdown_write()  # tools reading stdin get EOF instead of waiting forever
        return channel

    def _answers(self, timeout_s: float) -> bool:
        """Whether the host's sshd still answers: it opens (and we close) a session channel."""
        try:
            probe = self._connection().transport.open_session(timeout=timeout_s)
        except Exception:  # a timeout, or the connection is gone
            return False
        with contextlib.suppress(Exception):
            probe.close()
        return True

    def _drop_lost_connection(self) -> None:
        if self._conn is not None and not self._conn.is_connected:
            self.close()

    def _pump(
        self,
        channel,
        out,
        err,
        deadline: float,
        action: str = "running a command",
        *,
        watch: bool = False,
    ) -> int:
        """Copy the channel's stdout/stderr into out/err until the command exits.

        A channel closed without exit status and without end of output lost its connection.
        With ``watch``, a host silent for a while is asked whether it still answers (a new
        session channel); one that does not within ``unresponsive_s`` is named unresponsive.
        """
        wakeup = select.poll()  # poll, not select: past 1,024 open files select fails
        wakeup.register(channel.fileno(), select.POLLIN)  # readable on output or EOF
        probe_after = min(PROBE_EVERY_S, self.spec.unresponsive_s / 2)
        heard = time.monotonic()
        exited_at = None
        while True:
            wakeup.poll(500)  # the timeout (ms) lets us check the deadline
            got_output = _copy_chunk(channel.recv_ready, channel.recv, out)
            got_output |= _copy_chunk(channel.recv_stderr_ready, channel.recv_stderr, err)
            if got_output:
                heard = time.monotonic()
            elif (
                watch and time.monotonic() - heard > probe_after and not channel.exit_status_ready()
            ):
                if not self._answers(self.spec.unresponsive_s):
                    raise self._error(
                        f"{action}: unresponsive: the host sends nothing and did not answer"
                        f" an SSH probe within {self.spec.unresponsive_s:g} s (unresponsive_after)"
                    )
                heard = time.monotonic()
            # sshd may send the exit status before the last output still in the command's
            # pipes: done once the output has ended too (or a moment after, for a background
            # process left holding it)
            if channel.exit_status_ready() and not (
                channel.recv_ready() or channel.recv_stderr_ready()
            ):
                exited_at = exited_at or time.monotonic()
                if (
                    channel.eof_received
                    or channel.closed
                    or (time.monotonic() - exited_at > OUTPUT_AFTER_EXIT_S)
                ):
                    status = channel.recv_exit_status()
                    if status == -1 and not channel.eof_received:
                        raise self._error(f"{action}: connection lost (SSH session closed)")
                    return status
            if time.monotonic() > deadline:
                raise self._error("command still running past its deadline; killing it")
            if not got_output and channel.eof_received:
                channel.status_event.wait(0.5)  # after EOF the wakeup fd stays readable

    def _sftp_client(self):
        if self._sftp is None:
            conn = self._connection()
            with self._translating("opening SFTP (is the sftp Subsystem enabled in sshd?)"):
                self._sftp = conn.client.open_sftp()
                self._sftp.get_channel().settimeout(SFTP_STALL_S)
        return self._sftp

    @contextlib.contextmanager
    def _translating(self, action: str):
        """Turn paramiko and socket errors inside the block into HostError."""
        import paramiko  # lazy: loads importlib.metadata, paramiko, yaml

        try:
            yield
        except HostError:
            raise
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise self._error(f"{action}: {_describe(exc)}") from exc
