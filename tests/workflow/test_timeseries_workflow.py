"""Per-interval series through the real workflow: fio --status-interval into timeseries.parquet."""

from __future__ import annotations

import pyarrow.parquet as pq

from tests.workflow.test_workflow import snakemake, tiny_config


def test_status_interval_rows_add_up_to_the_run_totals(tmp_path):
    config = tiny_config(tmp_path / "target", rw=("randwrite",))
    experiment = config["experiments"]["tiny"]
    experiment["iterations"] = 1
    experiment["job"].update({"runtime": "3s", "status_interval": "1s"})
    snakemake(tmp_path, config)
    job = (tmp_path / "results/tiny/jobs/randwrite_bs4k_nj1.fio").read_text()
    assert "status_interval=" not in job  # a command-line option, never in the job file
    manifest = (tmp_path / "results/tiny/raw/randwrite_bs4k_nj1/it1/run.json").read_text()
    assert "--status-interval=1" in manifest
    series = pq.read_table(tmp_path / "results/tiny/timeseries.parquet").to_pylist()
    summary = pq.read_table(tmp_path / "results/tiny/summary.parquet").to_pylist()
    (host_row,) = [r for r in summary if r["host"] == "localhost" and r["op"] == "write"]
    writes = [r for r in series if r["op"] == "write"]
    assert len(writes) >= 2  # one per second of a 3 s run, give or take the edges
    assert sum(r["bytes"] for r in writes) == host_row["bytes"]
    assert sum(r["ios"] for r in writes) == host_row["ios"]
    assert [r["t_s"] for r in writes] == sorted(r["t_s"] for r in writes)
    assert {r["host"] for r in writes} == {"localhost"}
