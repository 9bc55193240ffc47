"""Throwaway OpenSSH servers on loopback addresses (127.0.0.x), for tests.

Each server gets its own directory with config, ed25519 host key, pid file and
log; all servers of one SshLab accept the same throwaway client key, and the
lab's known_hosts file lists every server it started.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from storbench.core.model import Host

SSHD = "/usr/sbin/sshd"
SFTP_SERVER = "/usr/lib/openssh/sftp-server"
PRIVSEP_DIR = "/run/sshd"  # sshd refuses to start without it
INSTALL_HINT = "`make test` installs openssh-server (sshd, ssh-keygen)"
START_TIMEOUT_S = 10.0


class SshdUnavailable(RuntimeError):
    pass


def require_openssh() -> None:
    missing = [SSHD] if not os.access(SSHD, os.X_OK) else []
    if shutil.which("ssh-keygen") is None:
        missing.append("ssh-keygen")
    if missing:
        raise SshdUnavailable(f"{' and '.join(missing)} not found; {INSTALL_HINT}")


def generate_key(path: Path, comment: str = "storbench-test") -> str:
    """Write an ed25519 key pair without passphrase; return the public key line."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True, capture_output=True,
    )  # fmt: skip
    return Path(f"{path}.pub").read_text().strip()


def free_port(address: str) -> int:
    """A port nothing listens on right now (the kernel picks it for a bind to port 0)."""
    with socket.socket() as probe:
        probe.bind((address, 0))
        return probe.getsockname()[1]


@dataclass
class SshServer:
    address: str
    port: int
    directory: Path
    host_public_key: str  # 'ssh-ed25519 AAAA... comment'
    process: subprocess.Popen = field(repr=False)

    @property
    def log_path(self) -> Path:
        return self.directory / "sshd.log"

    def known_hosts_line(self) -> str:
        key_type, blob = self.host_public_key.split()[:2]
        return f"[{self.address}]:{self.port} {key_type} {blob}"

    def stop(self) -> None:
        """Stop the per-connection sshd processes, then the listener."""
        # Children first, while the listener can still reap them (else they linger as zombies).
        deadline = time.monotonic() + 5
        while (children := _child_pids(self.process.pid)) and time.monotonic() < deadline:
            for pid in children:
                _terminate(pid)
            time.sleep(0.05)
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_sshd(
    address: str,
    directory: Path,
    authorized_keys: Path,
    port: int | None = None,
    *,
    sftp: bool = True,
    session_home: Path | None = None,
    extra_config: str = "",
) -> SshServer:
    """Start `sshd -D` on address and port (default a free one); return once it sends its banner.

    session_home: the sessions' HOME, so that their shell reads no start-up files of the
    account (the benchmarks' lab: root's ~/.bashrc here costs 0.4 CPU-s per session).
    """
    require_openssh()
    directory.mkdir(parents=True, exist_ok=True)
    os.makedirs(PRIVSEP_DIR, mode=0o755, exist_ok=True)
    host_key = directory / "ssh_host_ed25519_key"
    host_public_key = generate_key(host_key, comment=f"host-{address}")
    port = port or free_port(address)
    config = directory / "sshd_config"
    text = _sshd_config(address, port, directory, host_key, authorized_keys)
    if not sftp:  # as some hardened hosts run it: shell access, no file transfer
        text = "\n".join(line for line in text.splitlines() if not line.startswith("Subsystem"))
    if session_home is not None:
        session_home.mkdir(parents=True, exist_ok=True)
        text = text.rstrip("\n") + f"\nSetEnv HOME={session_home}"
    if extra_config:  # e.g. MaxStartups, as a hardened bastion sets it
        text = text.rstrip("\n") + f"\n{extra_config}"
    config.write_text(text + "\n")
    with open(directory / "sshd.log", "wb") as log:
        process = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(config)],  # sshd re-execs itself: absolute path
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
        )  # fmt: skip
    server = SshServer(address, port, directory, host_public_key, process)
    try:
        _wait_for_banner(server)
    except BaseException:
        server.stop()
        raise
    return server


class SshLab:
    """Several sshd sharing one client key and one known_hosts file."""

    def __init__(self, directory: Path, session_home: Path | None = None):
        require_openssh()
        self.directory = directory
        self.session_home = session_home
        self.client_key = directory / "client_ed25519"
        self.authorized_keys = directory / "authorized_keys"
        self.authorized_keys.write_text(generate_key(self.client_key) + "\n")
        self.known_hosts = directory / "known_hosts"
        self.known_hosts.write_text("")
        self.servers: list[SshServer] = []

    def start(self, address: str, port: int | None = None) -> SshServer:
        """Start one more sshd on address (and port, default a free one) and add its host key
        to known_hosts."""
        server_dir = self.directory / f"sshd-{len(self.servers)}-{address}"
        server = start_sshd(
            address, server_dir, self.authorized_keys, port, session_home=self.session_home
        )
        self.servers.append(server)
        with open(self.known_hosts, "a") as known_hosts:
            known_hosts.write(server.known_hosts_line() + "\n")
        return server

    def host_groups(self, count: int, workdir, known_hosts=None) -> dict:
        """Config host groups client1..client<count>, one per server; workdir(server) -> path."""
        return {
            f"client{index}": {
                "transport": "ssh",
                "nodes": server.address,
                "user": "root",
                "port": server.port,
                "identity": str(self.client_key),
                "known_hosts": str(known_hosts or self.known_hosts),
                "workdir": str(workdir(server)),
            }
            for index, server in enumerate(self.servers[:count], start=1)
        }

    def stop_all(self) -> None:
        while self.servers:
            self.servers.pop().stop()


def _sshd_config(address, port, directory, host_key, authorized_keys) -> str:
    sftp = SFTP_SERVER if os.path.exists(SFTP_SERVER) else "internal-sftp"
    return f"""\
ListenAddress {address}:{port}
HostKey {host_key}
PidFile {directory}/sshd.pid
AuthorizedKeysFile {authorized_keys}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
UsePAM no
PrintMotd no
LogLevel VERBOSE
Subsystem sftp {sftp}
"""


def _wait_for_banner(server: SshServer) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(
                f"sshd on {server.address}:{server.port} exited with code"
                f" {server.process.returncode}; its log:\n{_read_log(server)}"
            )
        if _reads_banner(server.address, server.port):
            return
        time.sleep(0.05)
    raise RuntimeError(
        f"sshd on {server.address}:{server.port} sent no SSH-2.0 banner within"
        f" {START_TIMEOUT_S:g}s; its log:\n{_read_log(server)}"
    )


def _reads_banner(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=1) as sock:
            received = b""
            while b"\n" not in received and len(received) < 256:
                chunk = sock.recv(256)
                if not chunk:
                    break
                received += chunk
            return received.startswith(b"SSH-2.0")
    except OSError:
        return False


def _read_log(server: SshServer) -> str:
    try:
        return server.log_path.read_text(errors="replace")
    except OSError as exc:
        return f"(cannot read {server.log_path}: {exc})"


def _child_pids(pid: int) -> list[int]:
    children = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):  # the task may just have exited
            children += [int(child) for child in (task / "children").read_text().split()]
    return children


def _terminate(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)


def lab_host(lab: SshLab, server, workdir) -> Host:
    """The Host (transport ssh, user root) of one lab server, with its own workdir."""
    return Host(
        name=server.address,
        transport="ssh",
        user="root",
        port=server.port,
        identity=str(lab.client_key),
        known_hosts=str(lab.known_hosts),
        workdir=str(workdir),
    )
