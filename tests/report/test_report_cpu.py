"""CPU utilisation (schema v6) in the experiment report: Table 1 / summary.csv and the
per-host table, from real fio output; result files of schema v5 (no CPU columns) still
report, their CPU cells empty."""

from __future__ import annotations

import csv
import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storbench.core import results
from storbench.core.schema_names import CPU_COLUMNS
from storbench.report import experiment as report
from storbench.tools.fio_json import parse_outputs
from tests.paths import FIXTURES

NOGROUP = (FIXTURES / "fio" / "standalone-nogroup.jsonplus.json").read_text()
# standalone-nogroup.jsonplus.json, randread-4k's two jobs: usr_cpu 3.24 + sys_cpu 25.32 and
# usr_cpu 3.30 + sys_cpu 25.18 (lines 577-578, 1205-1206): together 57.04 % of one CPU
RANDREAD_CPU = 3.24 + 25.32 + 3.30 + 25.18
META = {"experiment": "exp", "tool": "fio", "hosts": ["node1"], "iterations": 2}


def fio_rows(run_id: str) -> list[dict]:
    rows = []
    for iteration in (1, 2):
        base = {"experiment": "exp", "run_id": run_id, "iteration": iteration, "tool": "fio"}
        rows += parse_outputs([("node1", NOGROUP)], base=base)
    return rows


def write_v5(rows: list[dict], path) -> None:
    """A result file as schema v5 wrote it: no CPU columns, schema_version 5."""
    table = results.table_from_rows(rows)
    table = table.drop_columns(list(CPU_COLUMNS))
    version = table.schema.get_field_index("schema_version")
    table = table.set_column(version, "schema_version", pa.array([5] * table.num_rows, pa.int32()))
    pq.write_table(table, path)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folder = tmp_path_factory.mktemp("results")
    new, old = folder / "v6.parquet", folder / "v5.parquet"
    results.write_rows(fio_rows("with-cpu"), new)
    write_v5(fio_rows("before-cpu"), old)
    assert "cpu_pct" not in pq.read_schema(old).names
    out_dir = tmp_path_factory.mktemp("report")
    report.build_report([new, old], out_dir, title="cpu", meta=META, workers=1)
    return out_dir


def summary_rows(out_dir) -> dict:
    rows = csv.DictReader(io.StringIO((out_dir / "summary.csv").read_text()))
    return {(row["run_id"], row["job"], row["op"]): row for row in rows}


def test_summary_csv_has_the_cpu_of_the_runs_that_measured_it(built):
    rows = summary_rows(built)
    new = rows[("with-cpu", "randread-4k", "read")]
    assert float(new["cpu_pct"]) == pytest.approx(RANDREAD_CPU)
    assert float(new["cpu_sys_pct"]) == pytest.approx(25.32 + 25.18)
    assert new["cpu_basis"] == "process"
    old = rows[("before-cpu", "randread-4k", "read")]
    assert (old["cpu_pct"], old["cpu_sys_pct"], old["cpu_basis"]) == ("", "", "")
    # the rest of the old run reports as before
    assert float(old["iops_mean"]) == pytest.approx(float(new["iops_mean"]))


def test_table_1_shows_cpu_with_its_basis_and_a_dash_for_older_files(built):
    markdown = (built / "summary.md").read_text()
    header = next(line for line in markdown.splitlines() if line.startswith("| Run"))
    assert header.rstrip(" |").endswith("CPU %")
    line = next(row for row in markdown.splitlines() if "with-cpu" in row and "randread" in row)
    assert line.rstrip(" |").endswith("57.0 process")
    old = next(row for row in markdown.splitlines() if "before-cpu" in row and "randread" in row)
    assert old.rstrip(" |").endswith("–")
    assert "'process' is % of one CPU" in markdown
    assert "57.0 process" in (built / "index.html").read_text()


def test_per_host_table_has_the_systems_cpu(built):
    rows = list(csv.DictReader(io.StringIO((built / "tables" / "per_host.csv").read_text())))
    randread = [row for row in rows if row["rw"] == "randread"]
    new = [(row["Scope"], row["CPU %"]) for row in randread if row["Run"] == "with-cpu"]
    # the system row sums the host's two jobs; each node row is one job (28.56, 28.48)
    assert new == [("system", "57.0 process"), ("node", "28.6 process"), ("node", "28.5 process")]
    assert {row["CPU %"] for row in randread if row["Run"] == "before-cpu"} == {""}


def test_a_report_of_older_files_alone_has_no_cpu_column(tmp_path):
    old = tmp_path / "v5.parquet"
    write_v5(fio_rows("before-cpu"), old)
    out_dir = tmp_path / "report"
    report.build_report(old, out_dir, title="old", meta=META, workers=1)
    assert "CPU %" not in (out_dir / "summary.md").read_text()
    assert "CPU %" not in (out_dir / "tables" / "per_host.csv").read_text()
    rows = summary_rows(out_dir)
    assert {row["cpu_pct"] for row in rows.values()} == {""}
