"""Hosts sharing one work folder (an NFS home; here two sshd hosts on one machine) each run
their own job in their own attempt folder, and what an earlier session left is cleared."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from storbench.core.specs import RunSpec
from storbench.run import engine
from storbench.run.attempt import RunError

SIZES = {0: 1 << 20, 1: 3 << 20}  # a different job on each host, told apart in fio's output


def own_jobs(tmp_path: Path, names: list[str]) -> tuple[RunSpec, dict[str, str]]:
    """A write of SIZES[i] by job w<i> on the i-th host: the spec (hosts left empty) and
    {host: job file}."""
    target_dir = tmp_path / "target"
    jobs = {}
    for index, name in enumerate(names):
        job = tmp_path / "jobs" / f"{name}.fio"
        job.parent.mkdir(exist_ok=True)
        job.write_text(
            f"[w{index}]\ndirectory={target_dir}/{name}\nrw=write\nbs=64k\n"
            f"size={SIZES[index]}\nioengine=psync\n"
        )
        jobs[name] = str(job)
    spec = RunSpec(
        experiment="e",
        run_id="r",
        tool="fio",
        target={"name": "t", "type": "directory", "path": str(target_dir)},
        params={"rw": "write"},
        hosts=(),
        timeout_s=60,
        per_host_jobs=True,
    )
    return spec, jobs


@pytest.mark.parametrize("keep", [0, 1])
def test_hosts_sharing_a_work_folder_run_their_own_jobs(ssh_hosts, tmp_path, keep):
    shared = tmp_path / "shared-home"
    hosts = [
        dataclasses.replace(host, workdir=str(shared), keep_attempts=keep) for host in ssh_hosts
    ]
    spec, jobs = own_jobs(tmp_path, [host.name for host in hosts])
    spec = dataclasses.replace(spec, hosts=tuple(host.to_dict() for host in hosts))
    # an earlier session's leftovers where this attempt will work, on the shared folder
    stale = shared / "e" / "r" / "it1" / hosts[0].name / "a1"
    stale.mkdir(parents=True)
    (stale / f"{hosts[0].name}.json").write_text("{not fio output")
    manifest_path = tmp_path / "results/it1/run.json"
    manifest = engine.run_iteration(spec, 1, jobs, str(manifest_path))
    for index, host in enumerate(hosts):
        output = json.loads((manifest_path.parent / "a1" / f"{host.name}.json").read_text())
        (job,) = output["jobs"]
        assert (job["jobname"], job["write"]["io_bytes"]) == (f"w{index}", SIZES[index])
    assert [h["exit_code"] for h in manifest.hosts] == [0, 0]
    remote = sorted(str(p.relative_to(shared)) for p in shared.rglob("*.fio"))
    if keep:  # each host's own folder, kept for diagnosis
        assert remote == [f"e/r/it1/{host.name}/a1/job.fio" for host in hosts]
    else:  # fetched, then removed from the hosts (the copies in results/ stay)
        assert remote == [] and not list((shared / "e/r/it1").iterdir())


def test_local_hosts_working_in_the_raw_folder_run_their_own_jobs(tmp_path):
    """Local hosts work in the run's raw folder itself: each gets a job file of its own
    there. Before, both wrote job.fio and ran whichever was written last."""
    names = ["h0", "h1"]
    spec, jobs = own_jobs(tmp_path, names)
    local = tuple({"name": name, "transport": "local"} for name in names)
    spec = dataclasses.replace(spec, hosts=local)
    manifest_path = tmp_path / "results/it1/run.json"
    manifest = engine.run_iteration(spec, 1, jobs, str(manifest_path))
    raw = manifest_path.parent / "a1"
    for index, name in enumerate(names):
        (job,) = json.loads((raw / f"{name}.json").read_text())["jobs"]
        assert (job["jobname"], job["write"]["io_bytes"]) == (f"w{index}", SIZES[index])
        assert (raw / f"job.{name}.fio").read_text() == Path(jobs[name]).read_text()
    assert [h["exit_code"] for h in manifest.hosts] == [0, 0]


def test_a_failed_attempt_keeps_what_the_tool_wrote(ssh_hosts, tmp_path):
    host = dataclasses.replace(ssh_hosts[0], workdir=str(tmp_path / "remote"))
    job = tmp_path / "broken.fio"  # fio writes its JSON, then exits 1 for the missing file
    job.write_text(
        "[broken]\nfilename=/nonexistent-sb/file\nrw=read\nbs=4k\nsize=1m\nallow_file_create=0\n"
    )
    spec = RunSpec(
        experiment="e",
        run_id="r",
        tool="fio",
        target={"name": "t", "type": "directory", "path": str(tmp_path / "target")},
        params={},
        hosts=(host.to_dict(),),
        timeout_s=60,
    )
    manifest_path = tmp_path / "results/it1/run.json"
    with pytest.raises(RunError, match=f"host {host.name}: fio exited 1; stderr tail"):
        engine.run_iteration(spec, 1, str(job), str(manifest_path))
    kept = manifest_path.parent / "a1" / f"{host.name}.json"
    text = kept.read_text()  # fio's own message, then its JSON: fetched from the host
    assert text.startswith("fio: file creation disallowed by allow_file_create=0\n{")
    assert json.loads(text[text.index("{") :])["jobs"][0]["jobname"] == "broken"
    assert not (tmp_path / "remote/e/r/it1").exists() or not list(
        (tmp_path / "remote/e/r/it1").iterdir()
    )
