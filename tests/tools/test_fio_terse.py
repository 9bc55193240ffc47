"""fio's terse output (--minimal), imported: the values of fio's own line, what it lacks
left empty."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from storbench.cli import main
from storbench.tools.base import ToolOutputError
from storbench.tools.fio_terse import is_terse, rows_from_terse
from tests.paths import FIXTURES

TERSE = FIXTURES / "fio/status-interval.terse.txt"  # a 5 s 4k randread, fio 3.33


def imported(tmp_path: Path, *paths: Path) -> list[dict]:
    output = tmp_path / "out.parquet"
    assert main(["import", "-o", str(output), *map(str, paths)]) == 0
    return pq.read_table(output).to_pylist()


def test_a_terse_line_imports_with_fios_own_figures(tmp_path, capsys):
    host = tmp_path / "client07"
    host.mkdir()
    (host / "randread.txt").write_bytes(TERSE.read_bytes())
    rows = imported(tmp_path, tmp_path)  # found in a folder, by content
    assert f"used (fio): {host / 'randread.txt'}" in capsys.readouterr().out
    (row,) = [row for row in rows if row["host"] == "client07"]
    assert (row["run_id"], row["job"], row["op"], row["tool_version"]) == (
        "randread",
        "randread-4k",
        "read",
        "fio-3.33",
    )
    assert row["bytes"] == 634928 * 1024
    assert row["duration_s"] == 5.001
    assert row["bw_bytes_s"] == 126960 * 1024
    assert row["iops"] == 31740
    assert row["ios"] is None  # terse prints no I/O count
    assert row["lat_mean_ns"] == pytest.approx(125263.367)
    assert row["clat_mean_ns"] == pytest.approx(114804.878)
    assert (row["lat_min_ns"], row["lat_max_ns"]) == (48000, 4867000)
    assert (row["p50_ns"], row["p99_ns"], row["p99_9_ns"], row["p99_99_ns"]) == (
        107000,
        199000,
        419000,
        1728000,
    )
    assert (row["lat_basis"], row["pct_source"], row["hist_ns"]) == ("clat", "tool", None)
    assert row["cpu_pct"] == pytest.approx(6.7 + 44.04)
    assert row["rw"] is None and row["bs"] is None  # terse prints no options
    (total,) = [row for row in rows if row["host"] == "all"]
    assert (total["bytes"], total["iops"], total["p99_ns"]) == (row["bytes"], 31740, 199000)
    assert total["lat_mean_ns"] == row["lat_mean_ns"]  # one job: its own figures


def test_numjobs_clones_are_told_apart_and_a_cut_line_is_named(tmp_path):
    line = TERSE.read_text().strip()
    rows = rows_from_terse(f"{line}\n{line}\n", host="h", base={"run_id": "r"}, source="f")
    assert [row["job"] for row in rows if row["host"] == "h"] == [
        "randread-4k[0]",
        "randread-4k[1]",
    ]
    (total,) = [row for row in rows if row["host"] == "all"]
    assert total["bytes"] == 2 * 634928 * 1024
    assert total["lat_mean_ns"] is None  # two jobs, no I/O counts to weigh their means
    cut = ";".join(line.split(";")[:50])
    with pytest.raises(ToolOutputError) as error:
        rows_from_terse(f"{line}\n{cut}\n", host="h", base={}, source="f")
    assert str(error.value) == (
        "f: line 2: not a fio terse version 3 line (50 fields; storbench reads fio's default"
        " terse version 3, at least 92 fields)"
    )
    assert is_terse(line.encode()) and not is_terse(b"4;fio-3.33;job;0;0")


def test_the_reports_of_a_status_interval_are_refused_not_summed():
    """terse prints every --status-interval report without marking where one ends: a job
    repeated with its runtime growing by the interval is refused, not read as clones."""
    fields = TERSE.read_text().strip().split(";")
    reports = []
    for runtime in (1000, 2001, 3001):
        fields[8] = str(runtime)  # the read direction's runtime, ms
        reports.append(";".join(fields))
    with pytest.raises(ToolOutputError) as error:
        rows_from_terse("\n".join(reports), host="h", base={}, source="f")
    assert str(error.value) == (
        "f: job 'randread-4k' is reported 3 times, its runtime growing (1000, 2001, 3001 ms):"
        " the reports of --status-interval, which terse output does not tell apart; import the"
        " JSON output, or the last report's lines alone"
    )
