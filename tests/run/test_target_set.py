"""A target set: every target alone, then all at once with per-target rows and their sum."""

import json

import pyarrow.parquet as pq

from tests.workflow.test_workflow import snakemake

LOCKS = ("--resources", "lock_disk1=1", "lock_disk2=1")


def test_each_target_alone_and_all_together(tmp_path):
    config = {
        "hosts": {"localhost": {"transport": "local"}},
        "targets": {
            "disk1": {"type": "directory", "path": str(tmp_path / "disk1")},
            "disk2": {"type": "directory", "path": str(tmp_path / "disk2")},
        },
        "experiments": {
            "disks": {
                "tool": "fio",
                "hosts": "localhost",
                "target": ["disk1", "disk2"],
                "job": {"size": "4MiB", "runtime": "1s", "ioengine": "psync", "rw": "randread"},
                "sweep": {"bs": ["4k"]},
            }
        },
    }
    snakemake(tmp_path, config, *LOCKS)
    rows = pq.read_table(tmp_path / "results/disks/summary.parquet").to_pylist()
    assert sorted({r["run_id"] for r in rows}) == [
        "randread_bs4k_t-all",
        "randread_bs4k_t-disk1",
        "randread_bs4k_t-disk2",
    ]
    for name in ("disk1", "disk2"):
        alone = [r for r in rows if r["run_id"] == f"randread_bs4k_t-{name}"]
        assert {r["target"] for r in alone} == {name}
        assert (tmp_path / name / "localhost").is_dir()

    it_dir = tmp_path / "results/disks/raw/randread_bs4k_t-all/it1"
    manifest = json.loads((it_dir / "run.json").read_text())
    raw = json.loads((it_dir / manifest["raw_dir"] / "localhost.json").read_text())
    by_job = {job["jobname"]: job["read"]["io_bytes"] for job in raw["jobs"]}
    together = [r for r in rows if r["run_id"] == "randread_bs4k_t-all"]
    for name in ("disk1", "disk2"):
        (row,) = [r for r in together if r["host"] == "localhost" and r["target"] == name]
        assert row["bytes"] == by_job[name]
    (total,) = [r for r in together if r["target"] == "disk1+disk2"]
    assert total["host"] == "all" and total["bytes"] == by_job["disk1"] + by_job["disk2"]
