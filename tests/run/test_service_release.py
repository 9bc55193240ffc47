"""Service mode's first held start: released when every host's start hook waits.

Real fio and real shells on local hosts; the SSH hosts' case runs in
tests/workflow/test_scale_out.py (its first runs on each set of hosts)."""

import json
import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

from storbench.core import start_hook
from storbench.hosts.base import RELEASE_ACTION
from storbench.run import service_release, start
from storbench.run.service import Sessions

DEADLINE_S = 30.0  # far beyond what two small fio jobs take to reach their hooks
RUN_BOUND_S = 20.0
DELIVERY_S = 0.3  # an early release's instant, after every host waits


def shell(script: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env, timeout=30)


def test_the_preparation_makes_a_fresh_fifo_and_says_whether_the_host_waits_precisely(tmp_path):
    fifo = str(tmp_path / ".storbench-release.a")
    for suffix in (".hooks", ".released", ".sent"):  # what an earlier run left
        (tmp_path / f".storbench-release.a{suffix}").write_text("123\n")
    done = shell(service_release.prepare_script(fifo))
    assert done.returncode == 0 and start.waits_precisely(done.stderr)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and stat.S_IMODE(os.stat(fifo).st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == [".storbench-release.a"]
    # a host whose bash is not bash 5 (here: dash under that name) keeps the time
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bash").symlink_to(shutil.which("dash"))
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    assert not start.waits_precisely(shell(service_release.prepare_script(fifo), env).stderr)
    # and one where the FIFO cannot be made
    assert shell(service_release.prepare_script(str(tmp_path / "no/such/fifo"))).stderr == ""


def test_fio_on_two_hosts_goes_when_both_hooks_wait_long_before_the_deadline(tmp_path):
    """Each host's fio (numjobs=2) runs the service's hook with the deadline and its FIFO;
    each host's watcher says its hooks wait, then both hosts are released at once."""
    hosts = [{"name": name, "transport": "local"} for name in ("a", "b")]
    fifos, processes = {}, {}
    deadline = service_release.Deadline(time.time() + DEADLINE_S, DELIVERY_S)
    for host in hosts:
        folder = tmp_path / host["name"]
        folder.mkdir()
        fifos[host["name"]] = fifo = start.release_fifo(str(folder), host["name"])
        assert start.waits_precisely(shell(service_release.prepare_script(fifo)).stderr)
        (folder / start_hook.SCRIPT_NAME).write_text(start.hook_file_text())
        arguments = service_release.hook_arguments(deadline.release_epoch, fifo)
        (folder / "job.fio").write_text(
            f"[held]\ndirectory={folder}\nrw=write\nbs=64k\nsize=256k\nnumjobs=2\n"
            f"exec_prerun={start_hook.SERVICE_COMMAND.replace(start_hook.RELEASE, arguments)}\n"
        )
    sessions = Sessions()
    watchers = service_release.Watchers(deadline, tmp_path / "launch", len(hosts))
    watchers.start(sessions, hosts, fifos)
    began = time.time()
    for host in hosts:
        folder = tmp_path / host["name"]
        processes[host["name"]] = subprocess.Popen(
            ["fio", "job.fio", "--output-format=json", "--output=out.json"], cwd=folder
        )
    try:
        for process in processes.values():
            assert process.wait(RUN_BOUND_S) == 0
    finally:
        watchers.close(sessions, hosts)
        sessions.close()
    released = deadline.release_epoch
    assert began < released < began + RUN_BOUND_S  # not the deadline's time
    for host in hosts:
        folder = tmp_path / host["name"]
        started, armed = start.stamps_in((folder / "held.prerun.txt").read_text())
        assert armed is not None and started is not None
        # the job processes' hooks share this file: the stamp kept may be a second job's, which
        # a busy machine forks after the first hook's wait let the release be sent; it finds the
        # release there, so every hook waits by the instant itself
        assert armed < released
        assert released <= started < released + 0.5  # then went at the instant it named
        jobs = json.loads((folder / "out.json").read_text())["jobs"]
        assert [job["write"]["io_bytes"] for job in jobs] == [256 << 10] * 2
        watched = (tmp_path / "launch" / f"{host['name']}.watch.stderr").read_text()
        assert watched == f"{start.LISTENING_LINE}\n"
        released_us = Path(f"{fifos[host['name']]}.released").read_text().strip()
        assert int(released_us) == round(released * 1_000_000)


def test_a_watcher_whose_hooks_never_came_ends_at_close_and_the_deadline_stands(tmp_path):
    hosts = [{"name": "a", "transport": "local"}, {"name": "b", "transport": "local"}]
    fifos = {h["name"]: start.release_fifo(str(tmp_path), h["name"]) for h in hosts}
    for fifo in fifos.values():
        shell(service_release.prepare_script(fifo))
    due = time.time() + DEADLINE_S
    deadline = service_release.Deadline(due, DELIVERY_S)
    sessions = Sessions()
    watchers = service_release.Watchers(deadline, tmp_path / "launch", len(hosts))
    watchers.start(sessions, hosts, fifos)
    time.sleep(0.3)
    before = time.monotonic()
    watchers.close(sessions, hosts)
    sessions.close()
    assert time.monotonic() - before < service_release.END_GRACE_S
    assert deadline.release_epoch == due  # nobody listened: not released early
    for host in hosts:
        assert (tmp_path / "launch" / f"{host['name']}.watch.stderr").read_text() == ""


def test_a_watcher_ends_by_itself_at_the_deadline(tmp_path):
    fifo = start.release_fifo(str(tmp_path), "a")
    shell(service_release.prepare_script(fifo))
    deadline_us = int((time.time() + 0.3) * 1_000_000)
    done = subprocess.run(
        ["bash", "-c", service_release.WATCH_SCRIPT, "watch", fifo, str(deadline_us)],
        capture_output=True, text=True, timeout=RUN_BOUND_S,
    )  # fmt: skip
    assert done.returncode == 0 and done.stderr == ""
    assert time.time() * 1_000_000 >= deadline_us


def test_the_early_release_comes_the_delivery_margin_from_now_if_that_is_sooner():
    ahead = service_release.Deadline(time.time() + DEADLINE_S, DELIVERY_S)
    before = time.time()
    at = ahead.release_early()
    assert at is not None and ahead.release_epoch == at
    assert before + DELIVERY_S <= at <= time.time() + DELIVERY_S
    near = service_release.Deadline(time.time() + DELIVERY_S / 2, DELIVERY_S)
    due = near.release_epoch
    assert near.release_early() is None and near.release_epoch == due


def test_a_watcher_ends_only_once_every_hook_was_told(tmp_path):
    """The release action writes <fifo>.released, then a line per hook, then <fifo>.sent; the
    watcher's end stops the session's guard running it, so it must wait for .sent: ending on
    .released cut one host of 128 off before its hooks' line, and it went at its deadline."""
    fifo = start.release_fifo(str(tmp_path), "a")
    shell(service_release.prepare_script(fifo))
    deadline_us = int((time.time() + RUN_BOUND_S) * 1_000_000)
    watcher = subprocess.Popen(
        ["bash", "-c", service_release.WATCH_SCRIPT, "watch", fifo, str(deadline_us)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        Path(f"{fifo}.released").write_text("")  # the guard's first step, caught half-way
        time.sleep(0.3)  # thirty of the watcher's ticks
        assert watcher.poll() is None
        released_at = round(time.time() * 1_000_000)
        done = shell(f"line='release {released_at} {fifo}'; {RELEASE_ACTION}")
        assert done.returncode == 0
        assert watcher.wait(RUN_BOUND_S) == 0
        assert Path(f"{fifo}.released").read_text() == f"{released_at}\n"
        assert Path(f"{fifo}.sent").exists()
    finally:
        watcher.kill()
        watcher.wait()
