"""Client set-up steps for real: tmpfs mounts made over SSH on two lab hosts before the runs,
skipped when their check says done, undone by `snakemake cleanup`; a failure names the host."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.workflow.test_workflow import snakemake

pytestmark = [pytest.mark.workflow, pytest.mark.ssh]


@pytest.fixture(scope="module")
def can_mount(tmp_path_factory):
    """tmpfs mounts need CAP_SYS_ADMIN; a machine without it cannot run these tests."""
    point = tmp_path_factory.mktemp("probe")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "none", str(point)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"mount refused here: {done.stderr.decode().strip()}")
    subprocess.run(["umount", str(point)], check=True)


def mounted(path: Path) -> bool:
    return subprocess.run(["mountpoint", "-q", str(path)]).returncode == 0


def campaign(ssh_lab, tmp_path: Path, command: str) -> dict:
    hosts = ssh_lab.host_groups(2, lambda server: tmp_path / "remote" / server.address)
    mounts = tmp_path / "mnt"
    return {
        "hosts": hosts,
        "setup": {
            "scratch": {
                "hosts": list(hosts),
                "command": command.replace("MNT", str(mounts)),
                "check": f"mountpoint -q {mounts}/{{host}}",
                "undo": f"umount {mounts}/{{host}}",
            }
        },
        "targets": {"scratch": {"type": "directory", "path": str(mounts)}},
        "report": {"pdf": False},
        "experiments": {
            "write": {
                "tool": "fio",
                "hosts": list(hosts),
                "target": "scratch",
                "setup": "scratch",
                "job": {"rw": "write", "bs": "64k", "size": "4MiB", "ioengine": "psync"},
            }
        },
    }


def test_mounts_are_made_before_the_runs_kept_when_done_and_undone_by_cleanup(
    can_mount, ssh_lab, tmp_path
):
    command = (
        "mkdir -p MNT/{host} && mount -t tmpfs -o size={8 * (host_index + 1)}m none MNT/{host}"
    )
    config = campaign(ssh_lab, tmp_path, command)
    addresses = [server.address for server in ssh_lab.servers[:2]]
    try:
        snakemake(tmp_path, config)
        for index, address in enumerate(addresses):
            point = tmp_path / "mnt" / address
            assert mounted(point)
            stats = os.statvfs(point)
            assert stats.f_blocks * stats.f_frsize == 8 * (index + 1) << 20  # its host index
            marker = tmp_path / f"results/setup/scratch/{address}.json"
            assert json.loads(marker.read_text())["state"] == "done"
        rows = pq.read_table(tmp_path / "results/write/summary.parquet").to_pylist()
        assert {r["host"]: r["bytes"] for r in rows if r["op"] == "write"} == {
            addresses[0]: 4 << 20, addresses[1]: 4 << 20, "all": 8 << 20,
        }  # fmt: skip
        written = [p for p in (tmp_path / "mnt" / addresses[1]).iterdir() if p.is_file()]
        assert sum(p.stat().st_size for p in written) == 4 << 20  # fio wrote onto the mount
        # idempotent: a step whose check passes is not run again
        marker = tmp_path / f"results/setup/scratch/{addresses[0]}.json"
        marker.unlink()
        snakemake(tmp_path, config, str(marker.relative_to(tmp_path)))
        assert json.loads(marker.read_text())["state"] == "already done (its check passed)"
        snakemake(tmp_path, config, "cleanup")
        assert not any(mounted(tmp_path / "mnt" / address) for address in addresses)
        assert not list((tmp_path / "results/setup/scratch").glob("*.json"))
        snakemake(tmp_path, config, "cleanup")  # again: nothing left to undo, no umount error
    finally:
        for address in addresses:
            subprocess.run(["umount", str(tmp_path / "mnt" / address)], capture_output=True)


def test_a_step_that_fails_names_its_host_and_no_run_starts(ssh_lab, tmp_path):
    second = ssh_lab.servers[1].address
    config = campaign(ssh_lab, tmp_path, f"test {{host}} != {second} || exit 7")
    config["setup"]["scratch"]["check"] = "false"
    failed = snakemake(tmp_path, config, check=False)
    assert failed.returncode != 0
    log = (tmp_path / f"results/logs/setup/scratch/{second}.log").read_text()
    assert f"setup scratch on host {second}: `test {second} != {second} || exit 7` exited 7" in log
    assert not (tmp_path / "results/write/raw").exists()
