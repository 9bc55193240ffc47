"""Statistics across iterations: spread of throughput, weighted latency, merged percentiles."""

from __future__ import annotations

import math
import statistics

import pandas as pd
import pytest

from storbench import histogram, results, stats
from storbench.results import PERCENTILE_COLUMNS, PERCENTILES

MIB = 1024**2
MS = 1_000_000  # ns


def row(run_id="randread-4k", iteration=1, bw_mib=100.0, host="all", op="read", **extra):
    """One result row; bandwidth in MiB/s, IOPS derived from the 4 KiB block size."""
    base = {
        "experiment": "exp",
        "run_id": run_id,
        "iteration": iteration,
        "attempt": 0,
        "tool": "fio",
        "host": host,
        "job": "job",
        "op": op,
        "rw": "randread",
        "bs": 4096,
        "iodepth": 1,
        "numjobs": 1,
        "bw_bytes_s": bw_mib * MIB,
        "iops": bw_mib * MIB / 4096,
        "ios": 1000,
        "lat_mean_ns": 1000.0,
        "hist_ns": [1000],
        "hist_count": [1000],
        "lat_basis": "clat",
        "errors": 0,
    }
    base.update(extra)
    return base


def summary_of(rows, **kwargs) -> pd.DataFrame:
    return stats.summarize(results.table_from_rows(rows), **kwargs)


def cell(summary: pd.DataFrame, run_id: str, op: str = "read") -> pd.Series:
    match = summary[(summary["run_id"] == run_id) & (summary["op"] == op)]
    assert len(match) == 1
    return match.iloc[0]


def test_throughput_spread_over_three_iterations():
    rows = [row(iteration=i, bw_mib=bw) for i, bw in enumerate([120, 100, 110], start=1)]
    summary = summary_of(rows)

    assert len(summary) == 1
    got = summary.iloc[0]
    assert got["n"] == 3
    assert got["bw_bytes_s_mean"] == pytest.approx(110 * MIB, rel=1e-12)
    assert got["bw_bytes_s_median"] == pytest.approx(110 * MIB, rel=1e-12)
    assert got["bw_bytes_s_sd"] == pytest.approx(10 * MIB, rel=1e-12)  # sample sd, ddof=1
    assert got["bw_bytes_s_cov"] == pytest.approx(10 / 110, rel=1e-12)
    assert got["bw_bytes_s_min"] == 100 * MIB
    assert got["bw_bytes_s_max"] == 120 * MIB
    assert got["iops_mean"] == pytest.approx(110 * 256, rel=1e-12)
    assert got["iops_sd"] == pytest.approx(10 * 256, rel=1e-12)
    assert bool(got["cov_flag"]) is True


def test_cov_flag_false_for_stable_cell_and_sd_nan_for_one_iteration():
    rows = [row(run_id="stable", iteration=i, bw_mib=bw) for i, bw in enumerate([100, 101, 100])]
    rows.append(row(run_id="single", bw_mib=100))
    summary = summary_of(rows)

    stable = cell(summary, "stable")
    expected_sd = statistics.stdev([100, 101, 100]) * MIB
    assert stable["bw_bytes_s_sd"] == pytest.approx(expected_sd, rel=1e-12)
    assert stable["bw_bytes_s_cov"] < stats.COV_LIMIT
    assert bool(stable["cov_flag"]) is False

    single = cell(summary, "single")
    assert single["n"] == 1
    assert math.isnan(single["bw_bytes_s_sd"])
    assert math.isnan(single["bw_bytes_s_cov"])
    assert bool(single["cov_flag"]) is False


def test_latency_mean_is_weighted_by_io_count():
    rows = [
        row(iteration=1, ios=1000, lat_mean_ns=100.0),
        row(iteration=2, ios=3000, lat_mean_ns=500.0),
    ]
    got = summary_of(rows).iloc[0]
    # (1000*100 + 3000*500) / 4000 = 400, not the plain average 300.
    assert got["lat_mean_ns"] == pytest.approx(400.0)


def test_percentiles_come_from_merged_histograms_not_averages():
    # Iteration 1: every I/O at 1 ms. Iteration 2: 96 % at 1 ms, 4 % at 50 ms.
    first = row(iteration=1, hist_ns=[1 * MS], hist_count=[1000], p99_ns=1.0 * MS)
    second = row(iteration=2, hist_ns=[1 * MS, 50 * MS], hist_count=[960, 40], p99_ns=50.0 * MS)
    got = summary_of([first, second]).iloc[0]

    values, counts = histogram.merge(
        [(first["hist_ns"], first["hist_count"]), (second["hist_ns"], second["hist_count"])]
    )
    expected = histogram.percentiles(values, counts, PERCENTILES)
    assert [got[column] for column in PERCENTILE_COLUMNS] == expected
    # 40 of 2000 I/Os (2 %) are slow, so the merged p99 is 50 ms ...
    assert got["p99_ns"] == 50 * MS
    assert got["p50_ns"] == 1 * MS
    # ... while averaging the per-iteration p99 would claim 25.5 ms.
    assert (first["p99_ns"] + second["p99_ns"]) / 2 == 25.5 * MS
    assert got["p99_ns"] != 25.5 * MS


def test_percentiles_missing_when_one_iteration_lacks_bins():
    rows = [row(iteration=1), row(iteration=2, hist_ns=None, hist_count=None, p99_ns=2000.0)]
    got = summary_of(rows).iloc[0]
    assert all(pd.isna(got[column]) for column in PERCENTILE_COLUMNS)
    assert got["lat_mean_ns"] == pytest.approx(1000.0)  # the mean does not need bins


def test_host_filter_selects_rows_of_that_host():
    rows = [
        row(iteration=1, host="all", bw_mib=200),
        row(iteration=1, host="hostA", bw_mib=80),
        row(iteration=2, host="all", bw_mib=220),
        row(iteration=2, host="hostA", bw_mib=90),
    ]
    assert summary_of(rows)["bw_bytes_s_mean"].tolist() == [210 * MIB]
    assert summary_of(rows, host="hostA")["bw_bytes_s_mean"].tolist() == [85 * MIB]
    assert summary_of(rows, host="nohost").empty


def test_retried_iteration_counts_once_with_its_last_attempt():
    rows = [
        row(iteration=1, bw_mib=100),
        row(iteration=2, attempt=0, bw_mib=1),
        row(iteration=2, attempt=1, bw_mib=120),
    ]
    got = summary_of(rows).iloc[0]
    assert got["n"] == 2
    assert got["bw_bytes_s_mean"] == pytest.approx(110 * MIB)


def test_cells_are_split_by_op_and_sorted_by_parameters():
    rows = [
        row(run_id="seq-1m", rw="read", bs=1 << 20),
        row(run_id="mix-4k", rw="randrw", rwmixread=70, op="read", bw_mib=70),
        row(run_id="mix-4k", rw="randrw", rwmixread=70, op="write", bw_mib=30),
        row(run_id="rand-4k-qd8", iodepth=8),
        row(run_id="rand-4k-qd1", iodepth=1),
    ]
    summary = summary_of(rows)
    assert list(zip(summary["run_id"], summary["op"], strict=True)) == [
        ("rand-4k-qd1", "read"),
        ("rand-4k-qd8", "read"),
        ("mix-4k", "read"),
        ("mix-4k", "write"),
        ("seq-1m", "read"),
    ]
    assert cell(summary, "mix-4k", "write")["rwmixread"] == 70
    assert pd.isna(cell(summary, "seq-1m")["rwmixread"])
    assert list(summary.columns) == list(stats.SUMMARY_COLUMNS)


def test_placement_columns_are_carried_and_steps_sort_by_host_count():
    rows = [
        row(run_id=f"seq_h{hosts}", step=f"h{hosts}", hosts_in_run=hosts, target="vast")
        for hosts in (10, 2, 4)
    ]
    summary = summary_of(rows)
    assert summary["run_id"].tolist() == ["seq_h2", "seq_h4", "seq_h10"]  # not h10, h2, h4
    assert summary["step"].tolist() == ["h2", "h4", "h10"]
    assert summary["hosts_in_run"].tolist() == [2, 4, 10]
    assert summary["target"].tolist() == ["vast"] * 3


def test_rows_without_placement_columns_still_summarize():
    frame = results.table_from_rows([row(iteration=1), row(iteration=2)]).to_pandas()
    frame = frame.drop(columns=["step", "hosts_in_run", "target", "start_skew_s"])
    summary = stats.summarize(frame)
    assert summary["n"].tolist() == [2]
    assert summary[["target", "step", "hosts_in_run"]].isna().all().all()
