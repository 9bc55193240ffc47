"""SSH hosts through the system's OpenSSH client, over one persistent connection per host.

The first command for a host starts an OpenSSH master connection (ControlMaster) in the
background. Every later command, from any step and any process of the campaign, is a session
multiplexed over it: no new TCP connection, key exchange or authentication per step. The
master closes itself after PERSIST_S without sessions, or at `snakemake cleanup`
(``transport.disconnect``).

Files move through the same sessions (cat, tar), so the hosts need no SFTP subsystem. A tool's
session keeps its stdin open: when storbench dies the session ends and the guard on the host
stops the tool, as with the paramiko transport. A host that stops answering is found by the
master's keepalives (``unresponsive_after``), which then ends every session of that host.

Standard library only: this is the run path.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import math
import os
import posixpath
import re
import shlex
import shutil
import socket
import subprocess
import tarfile
import tempfile
import threading
from pathlib import Path

from storbench.core.atomic import atomic_output
from storbench.core.model import Host, parse_jump
from storbench.hosts.base import (
    BACKSTOP_S,
    KILL_AFTER_S,
    SHELL_TIMEOUT_S,
    TERM_GRACE_S,
    HostError,
    Transport,
    _open_output,
    _reason,
    guarded_command,
    host_key_name,
    mkdir_script,
    program_name,
)
from storbench.hosts.kept_shell import KeptShell, ShellGone

PERSIST_S = 900  # a master without sessions this long closes (ControlPersist)
KEEPALIVE_COUNT = 3  # unanswered keepalives before the master gives the host up
SIZE_LINE = "storbench-size"  # a fetch's remote size, on its stderr
SSH_FAILED = 255  # ssh's own exit status: the connection, not the command, failed
CONTROL_TIMEOUT_S = 10.0  # `ssh -O check|exit` talks to the local master only
SHORT_BASE = 48  # bytes of $TMPDIR that still leave a socket path under 107
HOST_KEY_CHANGED = re.compile(r"REMOTE HOST IDENTIFICATION HAS CHANGED|Host key for .* has changed")
HOST_KEY_UNKNOWN = re.compile(r"host key is known for|Host key verification failed")
UNREACHABLE = re.compile(r"connect to host \S+ port \d+: (.+)|Could not resolve hostname \S+: (.+)")


def socket_dir() -> Path:
    """Short, per user and private: a socket path must fit in 107 bytes, and anyone able to
    plant a socket there could receive our sessions."""
    base = tempfile.gettempdir()
    if len(base) > SHORT_BASE:  # a long $TMPDIR would leave no room for the socket's name
        base = "/tmp"
    return Path(base) / f"storbench-ssh-{os.getuid()}"


class OpenSSHTransport(Transport):
    """A host reached with the ssh client over its campaign-long master connection."""

    def __init__(self, spec: Host, *, role: str = ""):
        """role: what the host is to the one we reach ('jump host'), named in its errors."""
        super().__init__(spec)
        self._role = role
        try:
            self._socket = control_socket(spec)
        except OSError as exc:
            raise self._error(f"no private folder for its connection socket: {exc}") from exc
        self._master_checked = False
        self._running: subprocess.Popen | None = None  # the session of the tool run() waits for
        self._jump = _jump_transport(spec) if spec.jump else None
        self._kept: KeptShell | None = None  # for short scripts, until close()
        self._kept_lock = threading.Lock()

    def check(self) -> None:
        self._ensure_master()

    def check_file_transfer(self) -> None:
        self._ensure_master()  # files travel through sessions: nothing else to check

    def run(
        self, argv, *, timeout_s, stdout_path, stderr_path, marker, cwd=None, program=None
    ) -> int:
        command = guarded_command(argv, timeout_s, marker, cwd)
        action = f"running {program or program_name(argv)}"
        backstop_s = timeout_s + KILL_AFTER_S + BACKSTOP_S
        self._ensure_master()  # connect first: if that fails, nothing was started to kill
        with _open_output(stdout_path) as out, _open_output(stderr_path) as err:
            # stdin stays open: the guard on the host stops the tool when the session ends
            proc = subprocess.Popen(
                self._session_argv(command), stdin=subprocess.PIPE, stdout=out, stderr=err,
                start_new_session=True,
            )  # fmt: skip
            self._running = proc
            try:
                try:
                    status = proc.wait(timeout=backstop_s)
                except subprocess.TimeoutExpired as exc:
                    raise self._error(
                        "command still running past its deadline; killing it"
                    ) from exc
                if status == SSH_FAILED and not self.master_alive():
                    raise self._connection_lost(action)
            except BaseException as exc:
                self._running = None
                _end_session(proc)
                self._kill_after_failure(marker, exc)
                raise
            self._running = None
            _end_session(proc)
        return status

    def _send_to_session(self, line: bytes) -> None:
        proc = self._running
        if proc is not None and proc.stdin is not None:
            with contextlib.suppress(OSError, ValueError):  # the session ending under us
                proc.stdin.write(line)
                proc.stdin.flush()

    def put_text(self, text: str, path: str) -> None:
        directory, name = posixpath.split(path)
        tmp = shlex.quote(posixpath.join(directory, f".{name}.{os.urandom(8).hex()}.tmp"))
        script = (
            f"{mkdir_script(directory or '.')} && {{ cat > {tmp} && mv -f -- {tmp}"
            f" {shlex.quote(path)} || {{ rc=$?; rm -f -- {tmp}; exit $rc; }}; }}"
        )
        self._check_done(self._session(script, text.encode()), f"writing {path}")

    def put_private_text(self, text: str, path: str) -> None:
        quoted = shlex.quote(path)  # umask before the file exists: never readable by others
        script = f"umask 077 && rm -f -- {quoted} && cat > {quoted}"
        self._check_done(self._session(script, text.encode()), f"writing {path}")

    def fetch(self, path: str, local_path) -> None:
        quoted = shlex.quote(path)
        # its size too: ssh exits 0 though it could not write it all here (a full disk)
        script = f'size=$(wc -c < {quoted}) && cat -- {quoted} && echo "{SIZE_LINE} $size" >&2'
        with atomic_output(local_path) as tmp, open(tmp, "wb") as sink:
            done = self._session(script, stdout=sink)
            self._check_done(done, f"fetching {path}")
            self._check_whole(done, path, os.fstat(sink.fileno()).st_size, local_path)

    def fetch_tree(self, path: str, local_dir) -> None:
        local_dir = Path(local_dir)
        local_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile() as archive:
            script = f"tar -C {shlex.quote(path)} -cf - ."
            self._check_done(self._session(script, stdout=archive), f"fetching {path}")
            archive.seek(0)
            with tarfile.open(fileobj=archive) as tar:
                tar.extractall(local_dir, filter="data")

    def mkdirs(self, path: str) -> None:
        rc, _, err = self._shell(mkdir_script(path), timeout_s=SHELL_TIMEOUT_S)
        if rc != 0:
            raise self._error(f"cannot create directory {path}: {_reason(rc, err)}")

    def close(self) -> None:
        """The kept shell ends; the master outlives the step on purpose (PERSIST_S)."""
        self._drop_kept()

    def disconnect(self) -> None:
        """Close the master connection now (`ssh -O exit`); sessions still open end too."""
        if self._socket.exists():
            _control(self._socket, self.spec.address, "exit")
        self._master_checked = False
        if self._jump is not None:  # the hosts behind it end their masters here too
            self._jump.disconnect()

    def own_shell(self, script: str, *, timeout_s: float) -> tuple[int, str, str]:
        """Through the kept shell (the next script's session costs no process here and no
        session there); through a session of its own while another thread's script runs
        in it, or if it has ended before the script could start."""
        self._ensure_master()
        kept = self._kept_shell()
        if kept.lock.acquire(blocking=False):  # busy (another thread's script): a session
            try:
                rc, out, err = kept.run(script, timeout_s)
            except ShellGone:
                self._drop_kept()  # nothing ran: a session of its own below
            except subprocess.TimeoutExpired as exc:
                self._drop_kept()
                raise self._error("command still running past its deadline; killing it") from exc
            else:
                if rc == SSH_FAILED and not kept.alive():
                    self._drop_kept()
                    if not self.master_alive():
                        raise self._connection_lost("running a shell command")
                return rc, out, err
            finally:
                kept.lock.release()
        return self._shell(script, timeout_s=timeout_s)

    def _shell(self, script: str, *, timeout_s: float) -> tuple[int, str, str]:
        done = self._session(script, timeout_s=timeout_s)
        return (
            done.returncode,
            done.stdout.decode(errors="replace"),
            done.stderr.decode(errors="replace"),
        )

    # -- sessions ---------------------------------------------------------------------

    def _kept_shell(self) -> KeptShell:
        with self._kept_lock:
            if self._kept is None or not self._kept.alive():
                # sh, as a local host runs them: the account's shell (bash) took twice
                # its time for 128 hosts' scripts, its start-up files already read here
                self._kept = KeptShell(self._session_argv("exec sh"))
            return self._kept

    def _drop_kept(self) -> None:
        with self._kept_lock:
            kept, self._kept = self._kept, None
        if kept is not None:
            kept.close()

    def _session(self, script: str, stdin: bytes = b"", *, stdout=None, timeout_s=SHELL_TIMEOUT_S):
        """One short session: script's exit status, output and error; HostError if the
        connection failed or it outlived timeout_s."""
        self._ensure_master()
        try:
            done = subprocess.run(
                self._session_argv(script), input=stdin, stdout=stdout or subprocess.PIPE,
                stderr=subprocess.PIPE, timeout=timeout_s, start_new_session=True,
            )  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            raise self._error("command still running past its deadline; killing it") from exc
        if done.returncode == SSH_FAILED and not self.master_alive():
            raise self._connection_lost("running a shell command")
        if done.stdout is None:
            done.stdout = b""
        return done

    def _check_done(self, done: subprocess.CompletedProcess, action: str) -> None:
        if done.returncode != 0:
            raise self._error(
                f"{action}: {_reason(done.returncode, done.stderr.decode(errors='replace'))}"
            )

    def _check_whole(self, done, path: str, written: int, local_path) -> None:
        """The whole file arrived: ssh exits 0 though it could not write it all (a full disk
        here), and then often before the size line after the file came."""
        sizes = re.findall(rf"^{SIZE_LINE} +(\d+)$", done.stderr.decode(errors="replace"), re.M)
        if sizes and written == int(sizes[-1]):
            return
        of_size = f" of its {sizes[-1]}" if sizes else ""
        folder = os.path.dirname(os.path.abspath(local_path))
        raise self._error(
            f"fetching {path}: only {written}{of_size} bytes could be written to {local_path}"
            f" ({shutil.disk_usage(folder).free} bytes free there); the host keeps it"
        )

    def _session_argv(self, command: str) -> list[str]:
        return ["ssh", *self._options(), "-o", "ControlMaster=no", "-T", self.spec.address,
                "--", command]  # fmt: skip

    # -- the master connection ----------------------------------------------------------

    def _ensure_master(self) -> None:
        if self._master_checked:
            return
        if self._jump is not None:
            self._ensure_jump_master()
        with _locked(self._socket.with_suffix(".lock")):
            if not self.master_alive():
                self._start_master()
        self._master_checked = True

    def _ensure_jump_master(self) -> None:
        """The jump host's own master, which every host behind it shares: one connection to
        the jump host, not one per host (a bastion's sshd drops connections that arrive
        together past its MaxStartups, 10 by default: 13 of 47 hosts failed at once)."""
        assert self._jump is not None
        try:
            self._jump._ensure_master()
        except HostError as error:
            raise self._error(error.reason) from error

    def master_alive(self) -> bool:
        """Whether a master listens on the socket: a connect, no `ssh -O check` process (a
        step on 128 hosts would start 128 of them)."""
        with socket.socket(socket.AF_UNIX) as probe:
            probe.settimeout(CONTROL_TIMEOUT_S)
            try:
                probe.connect(str(self._socket))
            except OSError:
                return False
        return True

    def _start_master(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._socket.unlink()  # a dead master's socket would make ssh skip multiplexing
        log = self._socket.with_suffix(".log")
        log.write_bytes(b"")
        argv = [
            "ssh", *self._options(log_level="INFO"), "-o", "ControlMaster=yes",
            "-o", f"ControlPersist={PERSIST_S}", *keepalive_options(self.spec),
            "-E", str(log), "-N", "-f", self.spec.address,
        ]  # fmt: skip
        self._jump_log().write_bytes(b"")
        limit_s = 2 * self.spec.connect_timeout + CONTROL_TIMEOUT_S
        # what ssh refuses before it logs (a user name it will not pass on) goes to stderr: a
        # file, not a pipe, which the master that forks to the background would keep open
        refused = self._socket.with_suffix(".stderr")
        try:
            with refused.open("wb") as stderr:
                done = subprocess.run(
                    argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                    timeout=limit_s,
                )  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            raise self._error(f"unreachable at {self._where()} (timed out after"
                              f" {self.spec.connect_timeout:g}s)") from exc  # fmt: skip
        except OSError as exc:
            raise self._error(f"cannot start ssh (openssh-client): {exc.strerror}") from exc
        jump_text = self._jump_log().read_text(errors="replace")
        if done.returncode != 0 or not self.master_alive():
            text = refused.read_text(errors="replace") + log.read_text(errors="replace")
            raise self._connect_error(text, jump_text)

    def _connect_error(self, text: str, jump_text: str):
        spec, where = self.spec, self._where()
        known = self._known_hosts_files()
        if self.spec.jump and (found := UNREACHABLE.search(jump_text)):
            jump_user, jump_host, jump_port = parse_jump(self.spec.jump)
            reason = found.group(1) or found.group(2)
            return self._error(f"unreachable at {jump_host}:{jump_port} (jump host) ({reason})")
        if HOST_KEY_CHANGED.search(text):
            return self._error(
                f"host key CHANGED for {where}; refusing to connect (known_hosts: {known})."
                f" If the host was reinstalled: ssh-keygen -R"
                f" '{host_key_name(spec.address, spec.port)}'"
            )
        if HOST_KEY_UNKNOWN.search(text):
            return self._error(
                f"host key unknown for {where} (known_hosts: {known}); add it to known_hosts"
                f" (ssh-keyscan -p {spec.port} {spec.address}) or set host_key_check: false"
            )
        if "Permission denied" in text:
            key = spec.identity or "default keys and agent"
            return self._error(
                f"ssh authentication failed for user {spec.user or os.environ.get('USER', '?')}"
                f" at {where} (key: {key}): {_last_line(text)}"
            )
        if found := UNREACHABLE.search(text):
            return self._error(f"unreachable at {where} ({found.group(1) or found.group(2)})")
        if "username contains invalid characters" in text:
            return self._error(
                f"ssh refuses the user name {spec.user} for {where}: {_last_line(text)}"
                " (OpenSSH passes no shell metacharacters on)"
            )
        return self._error(f"ssh connection to {where} failed: {_last_line(text + jump_text)}")

    def _connection_lost(self, action: str):
        log = self._socket.with_suffix(".log")
        text = log.read_text(errors="replace") if log.exists() else ""
        self._master_checked = False  # the next command starts a new master
        if "not responding" in text:
            return self._error(
                f"{action}: unresponsive: the host sends nothing and did not answer an SSH probe"
                f" within {self.spec.unresponsive_s:g} s (unresponsive_after)"
            )
        return self._error(f"{action}: connection lost (SSH session closed)")

    def _options(self, log_level: str = "ERROR") -> list[str]:
        spec = self.spec
        options = [
            "-o", "BatchMode=yes", "-o", f"ControlPath={self._socket}",
            "-o", f"LogLevel={log_level}",
            "-o", f"ConnectTimeout={max(1, math.ceil(spec.connect_timeout))}",
            *self._identity_options(), "-p", str(spec.port),
        ]  # fmt: skip
        if spec.user:
            options += ["-l", spec.user]
        if spec.jump:
            jump_user, jump_host, jump_port = parse_jump(spec.jump)
            login = jump_user or spec.user
            assert self._jump is not None
            jump = ["ssh", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
                    "-o", f"ControlPath={self._jump._socket}", "-o", "ControlMaster=no",
                    *self._identity_options(), "-p", str(jump_port), "-W", "%h:%p",
                    f"{login}@{jump_host}" if login else jump_host]  # fmt: skip
            # ssh sends a persistent master's ProxyCommand errors to /dev/null: keep them
            proxy = f"{shlex.join(jump)} 2>>{shlex.quote(str(self._jump_log()))}"
            options += ["-o", f"ProxyCommand={proxy}"]
        return options

    def _identity_options(self) -> list[str]:
        return identity_options(self.spec, self._known_hosts_paths())

    def _known_hosts_paths(self) -> list[str]:
        return [os.path.expanduser("~/.ssh/known_hosts"), *filter(None, [self.spec.known_hosts])]

    def _known_hosts_files(self) -> str:
        return ", ".join(filter(None, ["~/.ssh/known_hosts", self.spec.known_hosts]))

    def _jump_log(self) -> Path:
        return self._socket.with_suffix(".jump.log")

    def _where(self) -> str:
        return f"{self.spec.address}:{self.spec.port}" + (f" ({self._role})" if self._role else "")


def identity_options(spec: Host, known_hosts: list[str]) -> list[str]:
    """ssh options: spec's key alone, and the host's key checked against known_hosts (or not
    at all, with host_key_check: false)."""
    options = []
    if spec.identity:
        # Like IdentitiesOnly: an agent full of keys would otherwise exhaust MaxAuthTries.
        options += ["-i", spec.identity, "-o", "IdentitiesOnly=yes"]
    if spec.host_key_check:
        files = " ".join(f'"{path}"' for path in known_hosts)
        options += ["-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={files}"]
    else:  # accept any key silently, and write none to known_hosts
        options += ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                    "-o", "GlobalKnownHostsFile=/dev/null"]  # fmt: skip
    return options


def keepalive_options(spec: Host) -> list[str]:
    """A host silent for unresponsive_after (KEEPALIVE_COUNT keepalives unanswered) is given up."""
    interval = max(1, math.ceil(spec.unresponsive_s / KEEPALIVE_COUNT))
    return ["-o", f"ServerAliveInterval={interval}", "-o", f"ServerAliveCountMax={KEEPALIVE_COUNT}"]


def _jump_transport(spec: Host) -> OpenSSHTransport:
    """The jump host of spec, reached as spec says (its key, known_hosts and limits)."""
    assert spec.jump is not None
    user, host, port = parse_jump(spec.jump)
    jump = Host(
        name=host, transport="ssh", address=host, user=user or spec.user, port=port,
        identity=spec.identity, known_hosts=spec.known_hosts,
        host_key_check=spec.host_key_check, connect_timeout=spec.connect_timeout,
        unresponsive_s=spec.unresponsive_s, connection=spec.connection,
    )  # fmt: skip
    return OpenSSHTransport(jump, role="jump host")


def control_socket(spec: Host) -> Path:
    """The master's socket: one per host and way of reaching it (user, key, checks)."""
    directory = socket_dir()
    directory.mkdir(mode=0o700, exist_ok=True)
    status = directory.stat()
    if status.st_uid != os.getuid() or status.st_mode & 0o077:
        raise PermissionError(f"{directory} must belong to this user alone (mode 0700)")
    reached_as = [spec.user, spec.address, int(spec.port), spec.identity, spec.known_hosts,
                  spec.host_key_check, spec.jump, float(spec.connect_timeout),
                  float(spec.unresponsive_s)]  # fmt: skip
    digest = hashlib.sha256(repr(reached_as).encode()).hexdigest()[:20]
    return directory / f"{digest}.sock"


def _control(socket: Path, address: str, command: str) -> bool:
    """`ssh -O command`, answered by the local master alone."""
    with contextlib.suppress(subprocess.TimeoutExpired, OSError):
        done = subprocess.run(
            ["ssh", "-o", f"ControlPath={socket}", "-O", command, address],
            stdin=subprocess.DEVNULL, capture_output=True, timeout=CONTROL_TIMEOUT_S,
        )  # fmt: skip
        return done.returncode == 0
    return False


def _end_session(proc: subprocess.Popen) -> None:
    """Close the session: its stdin first (the guard's signal), then the ssh client."""
    with contextlib.suppress(OSError):
        if proc.stdin is not None:
            proc.stdin.close()
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=TERM_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def _locked(path: Path):
    """One process at a time starts a host's master."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no message"
