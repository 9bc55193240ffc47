"""Service mode: a fio server's job process killed as it starts, on one of two SSH hosts.

A job process SIGKILLed while it waits for its backend's go (each job does, right after
its fork) leaves the backend, once it has sent the host's results, in
pthread_cond_destroy for ever (the dead job still counts as a waiter): fio's client never
hears that host's end, and the run failed only at its time limit (here 600 s, plus the
held start's 60 s deadline and the kill's 30 s: 691 s, with no results kept). Now the run
looks at each host's service once the hosts' I/O should have ended, stops the backend left
so, lets the other host go and fails once its 3 s run is done, naming the host.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from storbench.core import start_hook
from storbench.core.specs import RunSpec
from storbench.hosts import services
from storbench.run import engine, service_stuck
from storbench.run.service import Sessions
from storbench.tools import get_tool
from tests.minio import free_port
from tests.run.test_interrupt import wait_for
from tests.run.test_run_faults import fio_processes
from tests.run.test_service_killed_job import last_report, own_workdirs, running

TIME_LIMIT_S = 600  # the run's: the code before waited for it
# past it, the guard stops the client, which fails the test (the code before hangs): far
# above the seconds the run now takes, far below the time limit
GUARD_S = 240
# stops the backend (its pid: $1) the instant it has forked a job process: a loop of bash
# builtins, not a Python thread of the run's process, which would wait for the GIL
CATCH_SCRIPT = """
children=/proc/$1/task/$1/children
while :; do
  kids=; { read -r kids || :; } 2>/dev/null < "$children" || exit 1
  if [ -n "$kids" ]; then kill -STOP "$1"; echo $kids; exit 0; fi
done
exit 1
"""


def children(pid: int) -> list[int]:
    kids = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            kids += [int(word) for word in task.read_text().split()]
        except OSError:
            continue
    return kids


def handler_and_backend(marker: str) -> tuple[int, int] | None:
    """The handler and the backend under a fio server's main process, once they run."""
    processes = fio_processes(marker)
    by_parent = {parent: pid for pid, parent in processes.items()}
    mains = [pid for pid, parent in processes.items() if parent not in processes]
    if len(mains) != 1 or mains[0] not in by_parent or by_parent[mains[0]] not in by_parent:
        return None
    handler = by_parent[mains[0]]
    return handler, by_parent[handler]


def kill_a_job_waiting_for_its_go(backend: int) -> int:
    """The backend stopped the instant it has forked its first job process (its startdelay
    gives the time to look), which then waits for the go; killed so, the backend let go on."""
    caught = subprocess.run(
        ["bash", "-c", CATCH_SCRIPT, "catch", str(backend)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert caught.returncode == 0, f"the victim's backend forked no job process: {caught}"
    try:
        job = int(caught.stdout.split()[0])
        time.sleep(0.2)
        waiting = Path(f"/proc/{job}/wchan").read_text()
        assert "futex" in waiting and not children(job), "the job was not caught waiting"
        os.kill(job, signal.SIGKILL)
    finally:
        os.kill(backend, signal.SIGCONT)
    return job


@pytest.mark.parametrize(
    ("clones", "connection"),
    [(1, "persistent"), (2, "persistent"), (1, "per-step"), (1, "tree")],
)
def test_a_job_killed_as_it_starts_fails_the_run_naming_the_host_not_at_the_time_limit(
    clones, connection, ssh_hosts, tmp_path, request
):
    """clones: the victim's numjobs; with 2, the second clone's results come back, and only
    the stuck backend tells of the killed one. connection: the hosts' sessions, which the
    release's watchers and the stuck watch share (OpenSSH's master, paramiko's, or the
    victim's through a ClusterShell gateway)."""
    port = free_port()
    hosts = [{**host, "connection": connection} for host in own_workdirs(ssh_hosts, tmp_path)]
    if connection == "tree":  # the fixture's gateway reaches the first host only
        gateway = request.getfixturevalue("tree_gateway")
        hosts = [
            {**hosts[0], "gateway": gateway, "gateway_python": sys.executable},
            {**hosts[1], "connection": "persistent"},
        ]
    victim, other = (host["name"] for host in hosts)
    target = tmp_path / "target"
    jobs = {}
    for name, own in ((victim, f"numjobs={clones}\nstartdelay=2\n"), (other, "")):
        jobs[name] = tmp_path / f"{name}.fio"
        jobs[name].write_text(  # held at the start, as rendered service jobs are
            f"[r]\ndirectory={target / name}\nrw=read\nbs=4k\nsize=1m\nioengine=psync\n{own}"
            f"time_based=1\nruntime=3\nexec_prerun={start_hook.SERVICE_COMMAND}\n"
        )
    spec = RunSpec(experiment="e", run_id="r", tool="fio", params={}, hosts=tuple(hosts),
                   target={"name": "t", "type": "directory", "path": str(target)},
                   timeout_s=TIME_LIMIT_S, execution="service",
                   service={"tool": "fio", "port": port, "hosts": hosts})  # fmt: skip
    marker = f"--server=ip:{victim},{port} "
    manifest_path = tmp_path / "raw/r/it1/run.json"
    kept = manifest_path.parent / "a1"
    client = f"--output={(kept / 'controller.json').resolve()} "
    seen: dict[str, int] = {}

    def kill_the_victims_job():
        seen["handler"], seen["backend"] = wait_for(
            lambda: handler_and_backend(marker), "the victim's backend"
        )
        seen["job"] = kill_a_job_waiting_for_its_go(seen["backend"])

    def stop_the_client():  # SIGKILL: on SIGTERM, fio's client waits for every server to quit
        for pid in fio_processes(client):
            os.kill(pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_the_victims_job, daemon=True)
    guard = threading.Timer(GUARD_S, stop_the_client)
    try:
        services.start_services(hosts, "fio", port)
        killer.start()
        guard.start()
        with pytest.raises(engine.RunError) as failed:
            engine.run_iteration(spec, 1, {n: str(p) for n, p in jobs.items()}, str(manifest_path))
        killer.join()
        service_kept = bool(fio_processes(marker))
    finally:
        guard.cancel()
        services.stop_services(hosts, "fio", port)

    why = (
        "empty results in fio's client output (no bytes and no job_runtime counted: its fio"
        " server's job process killed?)"
        if clones == 1
        else "its job ended early (its job process killed as it started?)"
    )
    assert str(failed.value).splitlines() == [
        "e/r: fio client exited 0 without every host's results",
        f"host {victim}: {why}; stopped its service's processes left waiting for it for ever:"
        f" {seen['backend']}",
        f"raw output kept in {kept}",
    ]
    assert not running(seen["backend"]) and not running(seen["handler"]) and service_kept
    assert not manifest_path.exists() and not (kept / engine.PUBLISHED_COPY).exists()
    assert (kept / engine.FAILED_NOTE).read_text().split(" ", 1)[1] == f"{failed.value}\n"
    read: dict[str, list[int]] = {victim: [], other: []}
    for entry in last_report(kept / "controller.json")["client_stats"]:
        if entry["jobname"] != "All clients":
            read[entry["hostname"]].append(entry["read"]["io_bytes"])
    assert len(read[other]) == 1 and read[other][0] > 0  # the other host's run is all there
    counted = sorted(read[victim])  # the killed clone's counts nothing, the other's all
    assert len(counted) == clones and counted[0] == 0 and all(counted[1:])


def test_the_watch_names_each_host_found_stuck_once_and_ends_at_stop(tmp_path, monkeypatch):
    """Each host's script runs on its session until stop(); a host whose script printed pids
    is not asked again, and is named once (it then no longer holds a listening start)."""
    monkeypatch.setattr(service_stuck, "LOOK_AFTER_S", 0.0)
    monkeypatch.setattr(service_stuck, "LOOK_EVERY_S", 0.05)
    hosts = [{"name": name, "transport": "local"} for name in ("a", "b", "c")]
    looks = tmp_path / "looks"
    scripts = {
        "a": f"echo a >> {looks}; echo 41 42",
        "b": f"echo b >> {looks}",
        "c": "",  # no script: never looked at
    }
    named: list[str] = []
    sessions = Sessions()
    watch = service_stuck.StuckWatch(scripts, sessions, hosts, named.append)
    watch.start()
    try:
        wait_for(lambda: looks.exists() and looks.read_text().count("b") >= 3, "three looks")
    finally:
        stopped = watch.stop()
        sessions.close()
    asked = looks.read_text().split()
    assert stopped == {"a": ("41", "42")} and named == ["a"]
    assert asked.count("a") == 1 and "c" not in asked
    time.sleep(0.2)
    assert looks.read_text().split() == asked  # none after stop()


def test_no_host_is_looked_at_while_the_hosts_measure(tmp_path, monkeypatch):
    """A listening start: the hosts are looked at until the release (a stuck one holds it),
    not from the release until LOOK_AFTER_S after their I/O should have ended, then again;
    the release known only as it comes (here moved 0.3 s ahead once looks were made)."""
    monkeypatch.setattr(service_stuck, "LOOK_AFTER_S", 0.2)
    monkeypatch.setattr(service_stuck, "LOOK_EVERY_S", 0.05)
    looks = tmp_path / "looks"
    hosts = [{"name": "a", "transport": "local"}]
    window = {"release": time.time() + 600.0}  # the deadline until the early release
    run_s = 1.0

    def measuring() -> tuple[float, float]:
        return window["release"], window["release"] + run_s

    sessions = Sessions()
    watch = service_stuck.StuckWatch({"a": f"date +%s.%N >> {looks}"}, sessions, hosts)
    watch.start(first_look_s=-0.2, measuring=measuring)  # the first look at once
    try:
        wait_for(lambda: looks.exists() and len(looks.read_text().split()) >= 2, "two looks")
        window["release"] = release = time.time() + 0.3
        quiet_until = release + run_s + service_stuck.LOOK_AFTER_S
        wait_for(lambda: float(looks.read_text().split()[-1]) >= quiet_until, "a look after")
    finally:
        watch.stop()
        sessions.close()
    stamps = [float(stamp) for stamp in looks.read_text().split()]
    # a look under way as the release came may end just after it (0.5 s, for a busy machine):
    # none starts within
    assert not [stamp for stamp in stamps if release + 0.5 <= stamp < quiet_until]
    assert stamps[0] < release and stamps[-1] >= quiet_until


def test_a_tool_without_a_stuck_state_is_never_looked_at():
    hosts = [{"name": "a", "transport": "local"}]
    watch = service_stuck.StuckWatch({"a": ""}, Sessions(), hosts)
    watch.start()
    assert watch.stop() == {} and not watch._thread.is_alive()
    assert get_tool("elbencho").stuck_service_script("/w", ["elbencho", "--service"]) == ""
