"""Shared pytest fixtures."""

from __future__ import annotations

import pytest

from storbench.core.model import Host
from tests.sshd import SshdUnavailable, SshLab

SSH_ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")


@pytest.fixture(scope="session")
def ssh_lab(tmp_path_factory):
    """Four real sshd on 127.0.0.2 .. 127.0.0.5 (lab.servers), stopped at session end.

    lab.client_key, lab.known_hosts, lab.start(address) for an extra server.
    """
    try:
        lab = SshLab(tmp_path_factory.mktemp("sshd"))
    except SshdUnavailable as exc:
        # Not a skip: CI must not silently drop the SSH tests.
        pytest.fail(str(exc), pytrace=False)
    try:
        for address in SSH_ADDRESSES:
            lab.start(address)
        yield lab
    finally:
        lab.stop_all()


@pytest.fixture(scope="session")
def ssh_hosts(ssh_lab, tmp_path_factory) -> list[Host]:
    """HostSpecs (transport ssh, user root) for the lab's first two servers, in address order."""
    workdirs = tmp_path_factory.mktemp("ssh-workdirs")
    return [
        Host(
            name=server.address,
            transport="ssh",
            user="root",
            port=server.port,
            identity=str(ssh_lab.client_key),
            known_hosts=str(ssh_lab.known_hosts),
            workdir=str(workdirs / server.address),
        )
        for server in ssh_lab.servers[:2]
    ]


@pytest.fixture(scope="session")
def minio(tmp_path_factory):
    """A real MinIO on 127.0.0.1 with fresh random root credentials, stopped at session end."""
    import shutil

    from tests.minio import MinioUnavailable, start_minio

    try:
        server = start_minio(tmp_path_factory.mktemp("minio"))
    except MinioUnavailable as exc:
        if shutil.which("go") is None:
            pytest.skip(f"no Go toolchain to build MinIO ({exc})")
        pytest.fail(str(exc), pytrace=False)  # Go is here: `make test` builds it, never skip
    try:
        yield server
    finally:
        server.stop()
