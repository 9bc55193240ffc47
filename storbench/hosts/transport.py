"""Run commands and move files on benchmark client hosts, locally or over SSH.

Every command runs under coreutils ``timeout`` so a hung tool is stopped on the
host itself, and a run() that is interrupted kills its tool before re-raising.
A tool also stops when the process that started it dies: a local one gets SIGTERM
(parent-death signal, via setpriv), a remote one when its SSH session ends (a lost
connection or a killed storbench). Only a host that stays up but unreachable keeps its
tool running, until its ``timeout``; the next attempt of that run kills it.
Host keys are verified by default (opt out per host with ``host_key_check: false``).

The SSH transport imports fabric/paramiko lazily: importing this module and the
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

KILL_AFTER_S = 30  # `timeout -k`: SIGKILL this long after the SIGTERM
BACKSTOP_S = 30  # our own wait beyond timeout + KILL_AFTER_S, in case `timeout` itself hangs
TERM_GRACE_S = 5.0  # kill_matching / local group kill: wait this long for SIGTERM to work
KEEPALIVE_S = 30  # without keepalives a dead peer hangs a channel for about an hour
PROBE_EVERY_S = 5.0  # silence on a running tool's channel before the host is asked
SHELL_TIMEOUT_S = 60.0  # limit for small helper commands (mkdir, pkill)
SFTP_STALL_S = 300.0  # an SFTP read/write that gets no answer this long fails
CHUNK = 64 * 1024
# Runs "$@" with stdin from /dev/null and SIGTERMs it when the session's stdin ends (sshd
# closes it when the channel or the connection goes away); exits with the tool's status.
SESSION_GUARD = (
    'exec 3<&0 </dev/null; "$@" 3<&- & tool=$!; '
    '{ while read -r _; do :; done <&3; kill -TERM "$tool" 2>/dev/null; } & guard=$!; '
    'exec 3<&-; wait "$tool"; rc=$?; kill "$guard" 2>/dev/null; exit "$rc"'
)
SESSION_GUARD_NAME = "storbench-session"  # $0 of the guard shell, shown in ps
MIN_MARKER_LEN = 8  # a short marker could match unrelated processes in pkill -f
_ERE_SPECIAL = set("\\.[]()*+?{}|^$")


class HostError(RuntimeError):
    """A host could not be reached or did not do what was asked.

    The message always starts with the host name: 'host 127.0.0.2: ssh authentication failed ...'
    """

    def __init__(self, host: str, reason: str):
        super().__init__(f"host {host}: {reason}")
        self.host = host
        self.reason = reason

    def __reduce__(self):  # keep picklable despite the two-argument constructor
        return (type(self), (self.host, self.reason))


def raise_interrupt(signum, frame):
    """SIGTERM handler: unwind like Ctrl-C, so every host's tool is stopped on the way out."""
    raise KeyboardInterrupt(f"signal {signum}")


def hold_signals() -> None:
    """While an interrupted run stops its tools: a second Ctrl-C or SIGTERM (Snakemake sends
    one after the terminal's) must not cut that cleanup short."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def open_transport(spec: Host) -> Transport:
    if spec.transport == "ssh":
        return SSHTransport(spec)
    return LocalTransport(spec)


class Transport:
    """Commands and files on one host. A context manager: closes on exit."""

    def __init__(self, spec: Host):
        self.spec = spec

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def check(self) -> None:
        """Raise HostError unless the host can be used (connects, for SSH)."""

    def check_file_transfer(self) -> None:
        """Raise HostError unless files can be copied to and from the host (SFTP, for SSH)."""

    def run(
        self, argv, *, timeout_s, stdout_path, stderr_path, marker, cwd=None, program=None
    ) -> int:
        """Run argv under `timeout`, streaming output to local files; return its exit code.

        124 means timed out. ``marker`` must occur in the command line: an interrupted
        run kills the processes matching it before re-raising. ``program``: the name errors
        give the command (argv's own program by default; a wrapper names what it runs).
        """
        raise NotImplementedError

    def put_text(self, text: str, path: str) -> None:
        raise NotImplementedError

    def fetch(self, path: str, local_path) -> None:
        raise NotImplementedError

    def mkdirs(self, path: str) -> None:
        raise NotImplementedError

    def put_private_text(self, text: str, path: str) -> None:
        """Write a file only its owner can read (mode 0600 before any content is written)."""
        raise NotImplementedError

    def fetch_tree(self, path: str, local_dir) -> None:
        """Copy a folder from the host, recursively, into local_dir."""
        raise NotImplementedError

    def shell(self, script: str, *, timeout_s: float) -> tuple[int, str, str]:
        """Run a small POSIX shell script (quote its arguments!): (exit code, stdout, stderr)."""
        return self._shell(script, timeout_s=timeout_s)

    def fresh_dir(self, path: str) -> None:
        """An empty folder at path: what an earlier session left there is removed first."""
        quoted = shlex.quote(path)
        script = f"rm -rf -- {quoted} && {_mkdir_script(path)}"
        rc, _, err = self._shell(script, timeout_s=SHELL_TIMEOUT_S)
        if rc != 0:
            raise self._error(f"cannot create an empty directory {path}: {_reason(rc, err)}")

    def remove(self, paths: list[str]) -> None:
        """Best effort rm -f of files on the host (private copies after a run)."""
        if paths:
            self._shell("rm -f -- " + " ".join(map(shlex.quote, paths)), timeout_s=SHELL_TIMEOUT_S)

    def kill_matching(self, marker: str) -> None:
        """SIGTERM the processes whose command line contains marker, SIGKILL leftovers."""
        _check_marker_text(marker)
        rc, _, err = self._shell(_kill_script(marker), timeout_s=SHELL_TIMEOUT_S)
        if rc != 0:
            raise self._error(f"could not kill processes matching {marker!r}: {err.strip()}")

    def close(self) -> None:
        pass

    def _shell(self, script: str, *, timeout_s: float) -> tuple[int, str, str]:
        """Run a small POSIX shell script on the host: (exit code, stdout, stderr)."""
        raise NotImplementedError

    def _error(self, reason: str) -> HostError:
        return HostError(self.spec.name, reason)

    def _kill_after_failure(self, marker: str, exc: BaseException) -> None:
        # Best effort: the original exception matters more than a failed cleanup.
        try:
            self.kill_matching(marker)
        except Exception as kill_exc:
            exc.add_note(f"also failed to kill the tool: {kill_exc}")


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


class SSHTransport(Transport):
    """A host reached over SSH (fabric Connection, paramiko channels underneath)."""

    def __init__(self, spec: Host):
        super().__init__(spec)
        self._conn = None
        self._gateway = None
        self._sftp = None
        self._open_lock = threading.Lock()  # paramiko races when one client is opened twice

    def check(self) -> None:
        self._connection()

    def check_file_transfer(self) -> None:
        self._sftp_client()

    def run(
        self, argv, *, timeout_s, stdout_path, stderr_path, marker, cwd=None, program=None
    ) -> int:
        guarded = ["sh", "-c", SESSION_GUARD, SESSION_GUARD_NAME]
        command = shlex.join(guarded + _timeout_argv(argv, timeout_s, marker))
        if cwd is not None:
            command = f"cd {shlex.quote(cwd)} && exec {command}"
        deadline = time.monotonic() + timeout_s + KILL_AFTER_S + BACKSTOP_S
        self._connection()  # connect first: if that fails, nothing was started to kill
        with _open_output(stdout_path) as out, _open_output(stderr_path) as err:
            channel = None
            try:
                action = f"running {program or program_name(argv)}"
                with self._translating(action):
                    channel = self._exec(command, keep_stdin=True)  # the guard watches it
                    return self._pump(channel, out, err, deadline, action=action, watch=True)
            except BaseException as exc:
                self._drop_lost_connection()  # so the kill below reconnects
                self._kill_after_failure(marker, exc)
                raise
            finally:
                if channel is not None:
                    channel.close()

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
        rc, _, err = self._shell(_mkdir_script(path), timeout_s=SHELL_TIMEOUT_S)
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
        for closable in (self._sftp, self._conn, self._gateway):
            if closable is not None:
                with contextlib.suppress(Exception):
                    closable.close()
        self._sftp = self._conn = self._gateway = None

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
        gateway = None
        if spec.jump:
            jump_user, jump_host, jump_port = parse_jump(spec.jump)
            gateway = self._new_connection(jump_host, jump_user or spec.user, jump_port)
        conn = self._new_connection(spec.address, spec.user, spec.port, gateway)
        try:
            conn.open()
        except Exception as exc:
            failed = gateway if gateway is not None and not gateway.is_connected else conn
            for opened in (conn, gateway):
                if opened is not None:
                    with contextlib.suppress(Exception):
                        opened.close()
            raise self._connect_error(exc, failed, is_jump=failed is not conn) from exc
        for opened in (conn, gateway):
            if opened is not None:
                opened.transport.set_keepalive(KEEPALIVE_S)
        self._gateway = gateway
        return conn

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
        conn = Connection(
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
                f" If the host was reinstalled: ssh-keygen -R '{_host_key_name(conn)}'"
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
        wakeup = channel.fileno()  # readable when output or EOF arrives
        probe_after = min(PROBE_EVERY_S, self.spec.unresponsive_s / 2)
        heard = time.monotonic()
        while True:
            select.select([wakeup], [], [], 0.5)  # the timeout lets us check the deadline
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
            # Exit status arrives after all output, so check it before the buffers.
            if channel.exit_status_ready() and not (
                channel.recv_ready() or channel.recv_stderr_ready()
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


# -- helpers ----------------------------------------------------------------------------


def _timeout_argv(argv, timeout_s: float, marker: str) -> list[str]:
    if isinstance(argv, str) or not argv:
        raise ValueError(f"argv must be a non-empty list of strings, got {argv!r}")
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
    _check_marker_text(marker)
    if marker not in " ".join(argv):  # pkill -f sees the arguments joined by spaces
        raise ValueError(f"marker {marker!r} does not occur in the command line")
    seconds = str(math.ceil(timeout_s))
    return ["timeout", "-s", "TERM", "-k", str(KILL_AFTER_S), seconds, *map(str, argv)]


def program_name(argv) -> str:
    """The program argv runs, looking through `env NAME=value ...`."""
    words = list(map(str, argv))
    if posixpath.basename(words[0]) == "env":
        words = [w for w in words[1:] if "=" not in w and not w.startswith("-")] or words
    return words[0]


@functools.cache
def _parent_death_argv() -> list[str]:
    """setpriv: the tool gets SIGTERM if the thread that started it dies (storbench killed)."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM", "--"] if setpriv else []


def _check_marker_text(marker: str) -> None:
    if len(marker) < MIN_MARKER_LEN or not any(c.isascii() and c.isalnum() for c in marker):
        raise ValueError(
            f"marker must be at least {MIN_MARKER_LEN} characters with a letter or digit,"
            f" got {marker!r}"
        )


def _marker_pattern(marker: str) -> str:
    """An ERE matching marker literally whose own text does not contain marker.

    The first letter goes in brackets ('[s]leep'), so the shell running pkill,
    whose command line holds the pattern, does not match and kill itself.
    """
    parts, bracketed = [], False
    for char in marker:
        if not bracketed and char.isascii() and char.isalnum():
            parts.append(f"[{char}]")
            bracketed = True
        elif char in _ERE_SPECIAL:
            parts.append("\\" + char)
        else:
            parts.append(char)
    return "".join(parts)


def _kill_script(marker: str) -> str:
    polls = int(TERM_GRACE_S / 0.1)
    return "\n".join([
        f"pattern={shlex.quote(_marker_pattern(marker))}",
        'pkill -TERM -f -- "$pattern"; rc=$?',
        '[ "$rc" -eq 1 ] && exit 0',  # 1: nothing was running
        '[ "$rc" -eq 0 ] || exit "$rc"',
        "n=0",
        f'while pgrep -f -- "$pattern" >/dev/null && [ "$n" -lt {polls} ]; do',
        "  sleep 0.1; n=$((n + 1))",
        "done",
        'pkill -KILL -f -- "$pattern"; [ "$?" -le 1 ]',
    ])  # fmt: skip


def _kill_process_group(proc: subprocess.Popen) -> None:
    """SIGTERM the process group, wait a grace period, then SIGKILL what is left."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=TERM_GRACE_S)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # also stragglers that outlived the leader
    proc.wait()


def _local_pids_matching(marker: str) -> set[int]:
    """PIDs whose command line (arguments joined by spaces, as pkill -f sees it) has marker."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):  # processes come and go while we look
            args = Path(f"/proc/{entry}/cmdline").read_bytes().rstrip(b"\0").replace(b"\0", b" ")
            if marker in args.decode(errors="replace"):
                found.add(int(entry))
    return found


def _ancestry(pid: int) -> set[int]:
    """pid and its parents up to (not including) init."""
    chain = set()
    while pid > 1 and pid not in chain:
        chain.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rpartition(")")[2].split()[1])  # field 4 (ppid), after "(comm)"
    return chain


def _signal_pids(pids, sig) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


@contextlib.contextmanager
def _open_output(path):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb", buffering=0) as stream:  # unbuffered: readable while the tool runs
        yield stream


def _copy_chunk(ready, receive, sink) -> bool:
    if not ready():
        return False
    sink.write(receive(CHUNK))
    return True


def _host_key_name(conn) -> str:
    return conn.host if int(conn.port) == 22 else f"[{conn.host}]:{conn.port}"


def _describe(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def _mkdir_script(path: str) -> str:
    """mkdir -p, tried again: on a work folder shared by hosts (an NFS home) two hosts making
    the same parent at once can see it fail, then exist."""
    quoted = shlex.quote(path)
    return (
        f"(for try in 1 2 3; do mkdir -p -- {quoted} 2>/dev/null && exit 0; sleep 0.2; done;"
        f" mkdir -p -- {quoted})"
    )


def _reason(rc: int, err: str) -> str:
    return err.strip() or f"exit {rc} without a message"
