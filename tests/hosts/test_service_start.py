"""A service starts in one session per host: a stale one (its command line, no longer
answering) is stopped first, in the same script, which never matches itself."""

import socket
import subprocess
import time

from storbench.hosts import services
from tests.sshd import free_port


def answers(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_a_stale_service_is_stopped_and_a_new_one_answers(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    port = free_port("127.0.0.1")
    host = {"name": "localhost", "address": "127.0.0.1", "workdir": str(tmp_path / "work")}
    marker = f"fio --server=ip:127.0.0.1,{port}"
    # a process with the service's command line that does not listen (`; :` keeps sh alive)
    stale = subprocess.Popen(["sh", "-c", "sleep 60; :", *marker.split()])
    try:
        time.sleep(0.2)
        (started,) = services.start_services([host], "fio", port)
        assert started["endpoint"] == f"127.0.0.1:{port}"
        assert stale.wait(timeout=10) != 0  # stopped by the start's own script
        assert answers(port)
        log = tmp_path / "work" / "services" / f"fio-127.0.0.1-{port}" / "service.log"
        assert log.exists()
    finally:
        stale.kill()
        services.stop_services([host], "fio", port)
    assert not answers(port)
