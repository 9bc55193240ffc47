"""Hosts sharing one work folder (an NFS home; here two sshd hosts on one machine) each run
their own job in their own attempt folder, and what an earlier session left is cleared."""

from __future__ import annotations

import dataclasses
import json

from storbench.core.specs import RunSpec
from storbench.run import engine

SIZES = {0: 1 << 20, 1: 3 << 20}  # a different job on each host, told apart in fio's output


def test_hosts_sharing_a_work_folder_run_their_own_jobs(ssh_hosts, tmp_path):
    shared = tmp_path / "shared-home"
    hosts = [dataclasses.replace(host, workdir=str(shared)) for host in ssh_hosts]
    target_dir = tmp_path / "target"
    jobs = {}
    for index, host in enumerate(hosts):
        job = tmp_path / "jobs" / f"{host.name}.fio"
        job.parent.mkdir(exist_ok=True)
        job.write_text(
            f"[w{index}]\ndirectory={target_dir}/{host.name}\nrw=write\nbs=64k\n"
            f"size={SIZES[index]}\nioengine=psync\n"
        )
        jobs[host.name] = str(job)
    # an earlier session's leftovers where this attempt will work, on the shared folder
    stale = shared / "e" / "r" / "it1" / hosts[0].name / "a1"
    stale.mkdir(parents=True)
    (stale / f"{hosts[0].name}.json").write_text("{not fio output")
    spec = RunSpec(
        experiment="e",
        run_id="r",
        tool="fio",
        target={"name": "t", "type": "directory", "path": str(target_dir)},
        params={"rw": "write"},
        hosts=tuple(host.to_dict() for host in hosts),
        timeout_s=60,
        per_host_jobs=True,
    )
    manifest_path = tmp_path / "results/it1/run.json"
    manifest = engine.run_iteration(spec, 1, jobs, str(manifest_path))
    for index, host in enumerate(hosts):
        output = json.loads((manifest_path.parent / "a1" / f"{host.name}.json").read_text())
        (job,) = output["jobs"]
        assert (job["jobname"], job["write"]["io_bytes"]) == (f"w{index}", SIZES[index])
    assert [h["exit_code"] for h in manifest.hosts] == [0, 0]
    remote = sorted(p.relative_to(shared) for p in shared.rglob("job.fio"))
    assert [str(p) for p in remote] == [f"e/r/it1/{host.name}/a1/job.fio" for host in hosts]
