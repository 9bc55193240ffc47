"""Service mode: a fio server's job killed mid-run on one of two SSH hosts.

fio --client exits 0 all the same: with its backend process (the one running the host's jobs)
SIGKILLed, the host is missing from client_stats; with its job process SIGKILLed, the host's
entry counts no bytes and no job_runtime. The run was published, and its parse failed ("the
JSON document lists no jobs") or, with the other host's results there, gave one host's rows
and none for the killed one; the job process the killed backend left (in a session of its
own) ran on after the run. Now the run fails naming the host, publishes nothing, keeps the
client's output and stops that job process. A client output cut short fails the run too.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import threading
from pathlib import Path

import pytest

from storbench.core.specs import RunSpec
from storbench.hosts import services
from storbench.run import engine
from tests.minio import free_port
from tests.run.test_interrupt import wait_for
from tests.run.test_run_faults import fio_processes

OTHER_RUNTIME_S = 8  # the other host's run: the victim's service is killed meanwhile
VICTIM_RUNTIME_S = 120  # longer: a job process its killed backend left is still running after


def service_chain(processes: dict[int, int]) -> dict[str, int] | None:
    """{main, handler, backend, job} of a fio server running one job, once the job runs:
    the main process forks a handler per connection, which forks the backend, which forks
    the job process."""
    by_parent = {parent: pid for pid, parent in processes.items()}
    (main,) = [pid for pid, parent in processes.items() if parent not in processes] or [None]
    chain = [main]
    while chain[-1] in by_parent:
        chain.append(by_parent[chain[-1]])
    if len(chain) < 4 or not reading(chain[3]):
        return None
    return dict(zip(("main", "handler", "backend", "job"), chain, strict=False))


def reading(pid: int) -> bool:
    """Whether fio's job process has read its 1 MiB file through once: it is in its I/O
    loop (a job process killed while it starts up leaves its backend waiting for ever)."""
    try:
        counts = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    except OSError:
        return False
    return int(counts["rchar"]) > 1 << 20


def running(pid: int) -> bool:
    """Whether pid runs (a zombie, ended but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def own_workdirs(ssh_hosts, tmp_path: Path) -> list[dict]:
    """The SSH hosts as a run spec's host entries, each with a workdir of its own."""
    return [
        dataclasses.replace(host, workdir=str(tmp_path / f"w-{host.name}")).to_dict()
        for host in ssh_hosts
    ]


def last_report(path: Path) -> dict:
    text = path.read_text()  # the servers' notes, then the JSON report
    return json.loads(text[text.index("\n{") + 1 :])


@pytest.mark.parametrize("killed", ["backend", "job"])
def test_a_service_job_killed_on_one_host_fails_the_run_naming_the_host(
    killed, ssh_hosts, tmp_path
):
    port = free_port()
    hosts = own_workdirs(ssh_hosts, tmp_path)
    victim, other = (host["name"] for host in hosts)
    target = tmp_path / "target"
    jobs = {}
    for name, runtime in ((victim, VICTIM_RUNTIME_S), (other, OTHER_RUNTIME_S)):
        jobs[name] = tmp_path / f"{name}.fio"
        jobs[name].write_text(
            f"[r]\ndirectory={target / name}\nrw=read\nbs=4k\nsize=1m\nioengine=psync\n"
            f"time_based=1\nruntime={runtime}\n"
        )
    spec = RunSpec(experiment="e", run_id="r", tool="fio", params={}, hosts=tuple(hosts),
                   target={"name": "t", "type": "directory", "path": str(target)},
                   timeout_s=VICTIM_RUNTIME_S + 60, execution="service",
                   service={"tool": "fio", "port": port, "hosts": hosts})  # fmt: skip
    marker = f"--server=ip:{victim},{port} "
    seen: dict[str, int] = {}

    def kill_the_victims_job():
        chain = wait_for(lambda: service_chain(fio_processes(marker)), "the victim's job")
        seen.update(chain)
        os.kill(chain[killed], signal.SIGKILL)

    killer = threading.Thread(target=kill_the_victims_job, daemon=True)
    manifest_path = tmp_path / "raw/r/it1/run.json"
    try:
        services.start_services(hosts, "fio", port)
        killer.start()
        with pytest.raises(engine.RunError) as failed:
            engine.run_iteration(spec, 1, {n: str(p) for n, p in jobs.items()}, str(manifest_path))
        killer.join()
        service_kept = running(seen["main"])  # only what lost its parent is stopped
    finally:
        services.stop_services(hosts, "fio", port)

    kept = manifest_path.parent / "a1"
    lines = str(failed.value).splitlines()
    assert lines[0] == "e/r: fio client exited 0 without every host's results"
    if killed == "backend":
        assert lines[1] == (
            f"host {victim}: no results in fio's client output (its fio server's job ended"
            f" early?); stopped the processes it left: {seen['job']}"
        )
    else:
        assert lines[1] == (
            f"host {victim}: empty results in fio's client output (no bytes and no job_runtime"
            " counted: its fio server's job process killed?)"
        )
    assert lines[2:] == [f"raw output kept in {kept}"]
    assert not running(seen["job"]) and service_kept
    assert not manifest_path.exists() and not (kept / engine.PUBLISHED_COPY).exists()
    assert (kept / engine.FAILED_NOTE).read_text().split(" ", 1)[1] == f"{failed.value}\n"
    entries = {
        (entry["hostname"], entry["port"]): entry
        for entry in last_report(kept / "controller.json")["client_stats"]
    }
    assert entries[(other, port)]["read"]["io_bytes"] > 0  # the other host's run is all there
    if killed == "backend":
        assert set(entries) == {(other, port)}
    else:  # fio counted the victim's I/Os, but neither their bytes nor its runtime
        assert entries[(victim, port)]["read"]["total_ios"] > 0
        assert entries[(victim, port)]["read"]["io_bytes"] == 0
        assert entries[(victim, port)]["job_runtime"] == 0


FIO_CUT_SHORT = """\
#!/bin/sh
# the real fio; its --output then loses its last 100 bytes, as on a full disk
for argument in "$@"; do case $argument in --output=*) output=${{argument#--output=}};; esac; done
{fio} "$@"; status=$?
[ -z "$output" ] || truncate -s -100 "$output"
exit $status
"""


def test_a_client_output_cut_short_fails_the_service_run(ssh_hosts, tmp_path, monkeypatch):
    """fio's client exits 0 having written a report cut short (a full disk here): the run
    fails as a standalone run does. Before, it was published and its parse failed."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "fio").write_text(FIO_CUT_SHORT.format(fio=shutil.which("fio")))
    (bin_dir / "fio").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    port = free_port()
    hosts = [dataclasses.replace(ssh_hosts[0], workdir=str(tmp_path / "w")).to_dict()]
    target = tmp_path / "target"
    job = tmp_path / "job.fio"
    job.write_text(f"[r]\ndirectory={target}\nrw=read\nbs=4k\nsize=64k\nioengine=psync\n")
    spec = RunSpec(experiment="e", run_id="r", tool="fio", params={}, hosts=tuple(hosts),
                   target={"name": "t", "type": "directory", "path": str(target)},
                   timeout_s=60, execution="service",
                   service={"tool": "fio", "port": port, "hosts": hosts})  # fmt: skip
    manifest_path = tmp_path / "raw/r/it1/run.json"
    try:
        services.start_services(hosts, "fio", port)
        with pytest.raises(engine.RunError) as failed:
            engine.run_iteration(spec, 1, {hosts[0]["name"]: str(job)}, str(manifest_path))
    finally:
        services.stop_services(hosts, "fio", port)
    kept = manifest_path.parent / "a1"
    text = (kept / "controller.json").read_text()
    assert '"client_stats"' in text and not text.rstrip().endswith("}")
    assert str(failed.value).splitlines() == [
        f"e/r: fio client: fio exited 0, but its output controller.json ({len(text)} characters)"
        " holds no whole JSON report: cut short (a full disk where it was written?)",
        f"raw output kept in {kept}",
    ]
    assert not manifest_path.exists() and not (kept / engine.PUBLISHED_COPY).exists()
