"""A host that is up but no longer answers (its sshd stopped with SIGSTOP while fio runs) is
named unresponsive within unresponsive_after, not after the tool's time limit; one that
answers again within that time finishes its run normally."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from storbench.core.specs import RunSpec
from storbench.run import engine
from storbench.run.attempt import RunError
from storbench.run.processes import descendants
from tests.run.test_interrupt import processes_matching, wait_for
from tests.sshd import start_sshd

ADDRESS = "127.0.0.7"


@pytest.fixture(params=["per-step", "persistent"])
def connection(request) -> str:
    """paramiko asks a silent host with a new channel; a persistent OpenSSH connection's
    master sends keepalives."""
    return request.param


@pytest.fixture
def own_sshd(ssh_lab, tmp_path):
    """An sshd of this test alone: stopping it disturbs no other test."""
    server = start_sshd(ADDRESS, tmp_path / "sshd", ssh_lab.authorized_keys)
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(server.known_hosts_line() + "\n")
    try:
        yield server, ssh_lab.client_key, known_hosts
    finally:
        sshd_processes(server, signal.SIGCONT)
        server.stop()


def sshd_processes(server, sig) -> list[int]:
    """Signal the listener and every sshd below it (not the tools they started)."""
    pids = [server.process.pid]
    for pid in descendants(server.process.pid):
        # a session that just ended: gone before the open, or between the open and the read
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            if Path(f"/proc/{pid}/comm").read_text().startswith("sshd"):
                pids.append(pid)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
    return pids


def run(tmp_path: Path, own_sshd, seconds: int, connection: str) -> tuple[RunSpec, Path, Path]:
    server, key, known_hosts = own_sshd
    host = {"name": "stalling", "address": ADDRESS, "transport": "ssh", "user": "root",
            "port": server.port, "identity": str(key), "known_hosts": str(known_hosts),
            "workdir": str(tmp_path / "remote"), "unresponsive_s": 4.0,
            "connection": connection}  # fmt: skip
    job = tmp_path / "job.fio"
    job.write_text(
        f"[stall]\ndirectory={tmp_path}\nrw=write\nbs=4k\nsize=1m\nioengine=psync\n"
        f"time_based=1\nruntime={seconds}\n"
    )
    spec = RunSpec(experiment="e", run_id="r", tool="fio",
                   target={"name": "t", "type": "directory", "path": str(tmp_path)},
                   params={}, hosts=(host,), timeout_s=600)  # fmt: skip
    return spec, job, tmp_path / "results/it1/run.json"


def stop_sshd_while_fio_runs(server, remote: Path, pause_s: float | None) -> threading.Thread:
    def pause() -> None:
        wait_for(lambda: processes_matching(f"^fio .*{remote}"), "fio to start")
        sshd_processes(server, signal.SIGSTOP)
        if pause_s is not None:
            time.sleep(pause_s)
            sshd_processes(server, signal.SIGCONT)

    thread = threading.Thread(target=pause, daemon=True)
    thread.start()
    return thread


def test_a_stopped_sshd_is_named_unresponsive_long_before_the_time_limit(
    own_sshd, tmp_path, connection
):
    spec, job, manifest = run(tmp_path, own_sshd, seconds=3, connection=connection)
    pausing = stop_sshd_while_fio_runs(own_sshd[0], tmp_path / "remote", pause_s=None)
    with pytest.raises(RunError) as failed:
        engine.run_iteration(spec, 1, str(job), str(manifest))
    pausing.join()
    message = str(failed.value)
    assert "host stalling: running fio: unresponsive: the host sends nothing and did not" in message
    assert "answer an SSH probe within 4 s (unresponsive_after)" in message
    assert not manifest.exists()


def test_a_host_that_answers_again_in_time_finishes_its_run(own_sshd, tmp_path, connection):
    spec, job, manifest = run(tmp_path, own_sshd, seconds=3, connection=connection)
    pausing = stop_sshd_while_fio_runs(own_sshd[0], tmp_path / "remote", pause_s=2.0)
    done = engine.run_iteration(spec, 1, str(job), str(manifest))
    pausing.join()
    assert done.hosts[0]["exit_code"] == 0
    output = manifest.parent / "a1" / "stalling.json"
    assert '"jobname" : "stall"' in output.read_text()
