"""A persistent connection's socket lives in a folder only its user can enter."""

import shutil
import tempfile

import pytest

from storbench.core.model import Host
from storbench.hosts import openssh
from storbench.hosts.transport import HostError, open_transport

HOST = Host(name="client01", transport="ssh", connection="persistent")


@pytest.fixture
def tmp_path():
    """A short folder: pytest's own is longer than a socket path may be."""
    folder = tempfile.mkdtemp(prefix="sb-", dir="/tmp")
    try:
        yield openssh.Path(folder)
    finally:
        shutil.rmtree(folder)


def test_sockets_differ_by_the_way_a_host_is_reached(monkeypatch, tmp_path):
    monkeypatch.setattr(openssh.tempfile, "gettempdir", lambda: str(tmp_path))
    other_key = Host(name="client01", transport="ssh", identity="/k", connection="persistent")
    assert openssh.control_socket(HOST) == openssh.control_socket(HOST)
    assert openssh.control_socket(HOST) != openssh.control_socket(other_key)
    assert len(str(openssh.control_socket(HOST))) < 107  # a unix socket path's limit
    monkeypatch.setattr(openssh.tempfile, "gettempdir", lambda: "/" + "long-tmpdir" * 10)
    assert openssh.socket_dir() == openssh.Path(f"/tmp/storbench-ssh-{openssh.os.getuid()}")
    assert (tmp_path / f"storbench-ssh-{openssh.os.getuid()}").stat().st_mode & 0o777 == 0o700


def test_a_folder_others_can_enter_is_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(openssh.tempfile, "gettempdir", lambda: str(tmp_path))
    shared = tmp_path / f"storbench-ssh-{openssh.os.getuid()}"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with pytest.raises(HostError, match="host client01: no private folder for its connection"
                       " socket: .* must belong to this user alone"):  # fmt: skip
        open_transport(HOST)
