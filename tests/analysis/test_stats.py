"""Statistics across iterations: spread of throughput, weighted latency, merged percentiles."""

from __future__ import annotations

import json
import math
import statistics

import pandas as pd
import pyarrow.parquet as pq
import pytest

from storbench.analysis import stats
from storbench.cli import main
from storbench.core import histogram, results
from storbench.core.results import PERCENTILE_COLUMNS, PERCENTILES
from storbench.report import paper_tables as report_tables
from tests.paths import FIXTURES

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


def test_every_hosts_summary_in_one_pass_equals_a_summary_per_host():
    shares = {"all": 1.0, "host10": 0.25, "host2": 0.75}
    rows = [
        row(run_id=run_id, iteration=it, host=host, op=op, bw_mib=(base + it) * share)
        for run_id, base in (("read-4k", 80), ("read-64k", 300))
        for it in (1, 2, 3)
        for host, share in shares.items()
        for op in ("read", "write")
    ]
    rows.append(row(run_id="read-4k", iteration=2, host="host2", attempt=1, bw_mib=5))  # retried
    table = results.table_from_rows(rows)
    hosts = ["host2", "host10"]
    each = stats.summarize_each_host(table, hosts)
    one_by_one = pd.concat(
        [stats.summarize(table, host=h).assign(host=h) for h in hosts], ignore_index=True
    )
    pd.testing.assert_frame_equal(each, one_by_one)
    assert each["host"].tolist() == ["host2"] * 4 + ["host10"] * 4
    retried = cell(each[each["host"] == "host2"], "read-4k")
    assert retried["bw_bytes_s_mean"] == pytest.approx((81 * 0.75 + 5 + 83 * 0.75) / 3 * MIB)
    assert stats.summarize_each_host(table, []).empty


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


# --- Interval: Student t on the log scale ------------------------------------------------

# Two-sided 95 % (p = 0.975) and other quantiles from a printed t table (3 decimals).
PUBLISHED_T = [
    (0.975, 1, 12.706),
    (0.975, 2, 4.303),
    (0.975, 3, 3.182),
    (0.975, 4, 2.776),
    (0.975, 5, 2.571),
    (0.975, 9, 2.262),
    (0.975, 10, 2.228),
    (0.975, 29, 2.045),
    (0.975, 30, 2.042),
    (0.975, 120, 1.980),
    (0.975, 1_000_000, 1.960),
    (0.975, math.inf, 1.960),
    (0.95, 1, 6.314),
    (0.95, 10, 1.812),
    (0.995, 4, 4.604),
    (0.9995, 9, 4.781),
]


@pytest.mark.parametrize(("p", "df", "published"), PUBLISHED_T)
def test_t_quantile_matches_published_table(p, df, published):
    assert round(stats.t_quantile(p, df), 3) == published
    assert stats.t_quantile(1 - p, df) == -stats.t_quantile(p, df)


@pytest.mark.parametrize("p", [1e-9, 0.01, 0.3, 0.5000001, 0.6, 0.9, 0.975, 0.999999])
def test_t_quantile_equals_closed_forms_for_df_1_and_2(p):
    tail = min(p, 1 - p)
    sign = math.copysign(1, p - 0.5)
    # df = 1 (Cauchy): t = tan(π(p - 1/2)), written as cot(π·tail) to stay well conditioned.
    assert stats.t_quantile(p, 1) == pytest.approx(sign / math.tan(math.pi * tail), rel=1e-9)
    two = (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    assert stats.t_quantile(p, 2) == pytest.approx(two, rel=1e-11)


@pytest.mark.parametrize("p", [1e-9, 0.01, 0.3, 0.6, 0.9, 0.975, 0.999999])
def test_t_quantile_equals_closed_form_for_df_4(p):
    # t = sign · 2 √(cos(θ/3)/√α - 1), α = 4p(1-p), θ = arccos √α (cancels near p = 1/2).
    alpha = 4 * p * (1 - p)
    theta = math.acos(math.sqrt(alpha))
    four = math.copysign(2 * math.sqrt(math.cos(theta / 3) / math.sqrt(alpha) - 1), p - 0.5)
    assert stats.t_quantile(p, 4) == pytest.approx(four, rel=1e-9)


def test_t_quantile_centre_and_large_df():
    assert stats.t_quantile(0.5, 7) == 0.0
    z = statistics.NormalDist().inv_cdf(0.975)
    assert stats.t_quantile(0.975, math.inf) == z
    # Both sides of the switch to the 1/df series agree with its first term.
    for df in (99_999, 100_001):
        assert stats.t_quantile(0.975, df) == pytest.approx(z + (z**3 + z) / (4 * df), abs=1e-9)


@pytest.mark.parametrize(("p", "df", "name"), [(0, 3, "p"), (1, 3, "p"), (0.9, 0, "df")])
def test_t_quantile_rejects_bad_arguments(p, df, name):
    with pytest.raises(ValueError, match=f"{name} must be"):
        stats.t_quantile(p, df)


T_975_DF1 = 12.706204736174698  # t(0.975, 1) = cot(π/40)
T_975_DF2 = 4.302652729749464  # t(0.975, 2)


def log_interval_by_hand(values, t):
    """exp(m ± t·s/√n) with m, s the mean and sample sd of the logs, written out."""
    logs = [math.log(v) for v in values]
    half_width = t * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(statistics.fmean(logs) - half_width), math.exp(
        statistics.fmean(logs) + half_width
    )


def test_interval_of_two_iterations_is_on_the_log_scale_and_positive():
    low, high = stats.positive_interval([100.0, 200.0])
    # mean(log) = log √20000, sd(log) = log 2 / √2: √20000 · 2^(∓12.7062 / 2).
    assert (low, high) == pytest.approx(log_interval_by_hand([100, 200], T_975_DF1), rel=1e-12)
    assert low == pytest.approx(math.sqrt(20000) / 2 ** (T_975_DF1 / 2), rel=1e-12)
    assert round(low, 3) == 1.730 and round(high, 1) == 11560.8
    # The symmetric interval 150 ± 12.7062 · 70.71 / √2 = [-485.3, 785.3] went below 0.
    assert stats.mean_confidence_interval(150.0, statistics.stdev([100, 200]), 2)[0] < -485
    assert low > 0


def test_interval_of_steady_iterations_is_close_to_the_symmetric_one():
    low, high = stats.positive_interval([1000.0, 1010.0, 990.0])
    assert (low, high) == pytest.approx(
        log_interval_by_hand([1000, 1010, 990], T_975_DF2), rel=1e-12
    )
    # symmetric: 1000 ± 4.3027 · 10 / √3 = [975.16, 1024.84]; log scale [975.43, 1025.12]
    assert (round(low, 2), round(high, 2)) == (975.43, 1025.12)
    symmetric = stats.mean_confidence_interval(1000.0, 10.0, 3)
    assert (low, high) == pytest.approx(symmetric, rel=5e-4)
    assert high - 1000 > 1000 - low  # wider above than below


@pytest.mark.parametrize("values", [[0.0, 10.0], [-1.0, 10.0], [math.nan, 10.0, 12.0]])
def test_interval_falls_back_to_the_plain_t_interval_without_all_values_positive(values):
    present = [v for v in values if not math.isnan(v)]
    low, high = stats.positive_interval(values)
    if len(present) == len(values):
        mean, sd = statistics.fmean(values), statistics.stdev(values)
        assert (low, high) == pytest.approx(
            stats.mean_confidence_interval(mean, sd, len(values)), rel=1e-12
        )
    else:  # a NaN among the values: no interval can be computed from them
        assert math.isnan(low) and math.isnan(high)


def test_zero_iteration_gives_the_plain_interval_in_the_summary():
    got = stats.spread(pd.Series([0.0, 10.0]))
    # 5 ± 12.7062 · 7.0711 / √2 = 5 ± 63.531: the plain interval, shown clamped at 0
    assert (got["ci_low"], got["ci_high"]) == pytest.approx((5 - 63.531, 5 + 63.531), abs=1e-3)


def test_confidence_interval_of_three_iterations():
    rows = [row(iteration=i, bw_mib=bw) for i, bw in enumerate([120, 100, 110], start=1)]
    got = summary_of(rows).iloc[0]
    low, high = log_interval_by_hand([120, 100, 110], T_975_DF2)
    # the symmetric interval would be 110 ± 24.84 MiB/s = [85.16, 134.84]
    assert (round(low, 2), round(high, 2)) == (87.46, 137.59)
    assert got["bw_bytes_s_ci_low"] == pytest.approx(low * MIB, rel=1e-12)
    assert got["bw_bytes_s_ci_high"] == pytest.approx(high * MIB, rel=1e-12)
    # IOPS = bandwidth / 4 KiB: the log-scale interval scales with the quantity
    assert got["iops_ci_low"] == pytest.approx(low * 256, rel=1e-12)
    assert got["iops_ci_high"] == pytest.approx(high * 256, rel=1e-12)


def test_confidence_interval_of_two_iterations_and_nan_for_one():
    rows = [row(run_id="two", iteration=i, bw_mib=bw) for i, bw in enumerate([100, 102])]
    rows.append(row(run_id="one", bw_mib=100))
    summary = summary_of(rows)
    two = cell(summary, "two")
    # geometric mean √10200 = 100.995, times 1.02^(∓12.7062 / 2): [89.056, 114.535]
    factor = 1.02 ** (T_975_DF1 / 2)
    assert two["bw_bytes_s_ci_low"] / MIB == pytest.approx(math.sqrt(10200) / factor, rel=1e-12)
    assert two["bw_bytes_s_ci_high"] / MIB == pytest.approx(math.sqrt(10200) * factor, rel=1e-12)
    assert round(two["bw_bytes_s_ci_low"] / MIB, 3) == 89.056
    one = cell(summary, "one")
    assert math.isnan(one["bw_bytes_s_ci_low"]) and math.isnan(one["bw_bytes_s_ci_high"])


def test_spread_of_identical_values_has_zero_width_interval():
    got = stats.spread(pd.Series([5.0, 5.0, 5.0, None]))
    assert (got["mean"], got["sd"], got["ci_low"], got["ci_high"]) == (5.0, 0.0, 5.0, 5.0)


# --- Outliers: more than 3 raw MADs from the median, marked, never dropped --------------


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        # median 100, |x - 100| = 0 1 1 0 30, MAD 1: only 130 is beyond 3.
        ([100, 101, 99, 100, 130], [False, False, False, False, True]),
        # 103 is exactly 3 MADs away: "more than" excludes it.
        ([100, 101, 99, 100, 103], [False] * 5),
        ([100, 101, 99, 100, 96.9], [False, False, False, False, True]),
        # MAD 0 (most values equal the median): every value that differs is an outlier.
        ([100, 100, 100, 101], [False, False, False, True]),
        ([7, 7, 7], [False, False, False]),
        # NaN is ignored: median of 100 101 99 150 is 100.5, MAD 1.0, so 150 is out.
        ([100, math.nan, 101, 99, 150], [False, False, False, False, True]),
        ([1, 1000], [False, False]),  # two values are always within 1 MAD
        ([42], [False]),
        ([], []),
        ([math.nan, None], [False, False]),
    ],
)
def test_outlier_mask(values, expected):
    assert stats.outlier_mask(values) == expected


def test_outliers_are_counted_and_kept_in_the_summary():
    bandwidths = [100, 101, 99, 100, 130]
    rows = [row(iteration=i, bw_mib=bw) for i, bw in enumerate(bandwidths, start=1)]
    got = summary_of(rows).iloc[0]
    assert got["n"] == 5
    assert got["bw_bytes_s_mean"] == pytest.approx(106 * MIB)  # 130 still counts
    assert got["bw_bytes_s_max"] == 130 * MIB
    assert got["bw_bytes_s_outliers"] == 1
    assert got["iops_outliers"] == 1


def test_summary_columns_and_dtypes_of_new_statistics():
    summary = summary_of([row(iteration=1), row(iteration=2, bw_mib=101)])
    expected_order = [
        f"{metric}_{stat}"
        for metric in ("bw_bytes_s", "iops")
        for stat in ("mean", "median", "sd", "cov", "min", "max", "ci_low", "ci_high", "outliers")
    ]
    columns = list(summary.columns)
    assert columns[columns.index("n") + 1 : columns.index("lat_mean_ns")] == expected_order
    assert columns == list(stats.SUMMARY_COLUMNS)
    for metric in ("bw_bytes_s", "iops"):
        assert summary[f"{metric}_ci_low"].dtype == "float64"
        assert summary[f"{metric}_ci_high"].dtype == "float64"
        assert summary[f"{metric}_outliers"].dtype == "Int64"
        assert summary[f"{metric}_outliers"].tolist() == [0]


def test_iteration_outliers_marks_rows_in_summary_order():
    rows = [
        row(run_id="rand-4k-qd8", iodepth=8, iteration=i, bw_mib=bw)
        for i, bw in enumerate([100, 101, 99, 100, 130], start=1)
    ]
    # IOPS alone is an outlier in iteration 2 (bandwidth stays put).
    rows += [
        row(run_id="rand-4k-qd1", iteration=i, iops=iops)
        for i, iops in [(3, 10.0), (1, 10.0), (2, 99.0)]
    ]
    rows.append(row(run_id="rand-4k-qd1", iteration=2, host="hostA", bw_mib=1))  # other host
    got = stats.iteration_outliers(results.table_from_rows(rows))

    assert list(got.columns) == list(stats.ITERATION_OUTLIER_COLUMNS)
    assert list(zip(got["run_id"], got["iteration"], strict=True)) == [
        ("rand-4k-qd1", 1),
        ("rand-4k-qd1", 2),
        ("rand-4k-qd1", 3),
        *[("rand-4k-qd8", i) for i in range(1, 6)],
    ]
    assert got["bw_outlier"].tolist() == [False] * 7 + [True]
    assert got["iops_outlier"].tolist() == [False, True, False, False, False, False, False, True]
    assert set(got["experiment"]) == {"exp"} and set(got["op"]) == {"read"}
    summary = summary_of(rows)
    assert summary["run_id"].tolist() == ["rand-4k-qd1", "rand-4k-qd8"]
    assert summary["iops_outliers"].tolist() == [1, 1]
    assert summary["bw_bytes_s_outliers"].tolist() == [0, 1]


def test_iteration_outliers_of_no_rows_is_empty_with_columns():
    got = stats.iteration_outliers(results.table_from_rows([row()]), host="nohost")
    assert got.empty
    assert list(got.columns) == list(stats.ITERATION_OUTLIER_COLUMNS)
    assert got["bw_outlier"].dtype == bool


def imported(tmp_path, tool: str, fixture: str) -> pd.DataFrame:
    output = tmp_path / f"{tool}.parquet"
    argv = ["import", "--tool", tool, "-o", str(output), str(FIXTURES / fixture)]
    assert main(argv) == 0
    return pq.read_table(output).to_pandas()


def summary_cell(summary: pd.DataFrame, run_id: str, job: str | None = None, op: str = "read"):
    chosen = summary[(summary["run_id"] == run_id) & (summary["op"] == op)]
    if job is not None:
        chosen = chosen[chosen["job"] == job]
    assert len(chosen) == 1
    return chosen.iloc[0]


def test_a_run_of_one_iteration_without_bins_keeps_the_tools_own_percentiles(tmp_path):
    """warp and elbencho print percentiles without bins, as does fio's plain json: for one
    iteration they are exact, and Tables 1 and 3 show them (pct_source 'tool')."""
    warp = summary_cell(stats.summarize(imported(tmp_path, "warp", "warp/warp-put.json.zst")),
                        "warp-put", op="write")  # fmt: skip
    # warp-put.console.txt: "Reqs: Avg: 10.1ms, 50%: 6.7ms, 90%: 23.3ms, 99%: 45.9ms"
    assert warp["pct_source"] == "tool"
    assert [round(warp[c] / MS, 1) for c in ("p50_ns", "p90_ns", "p99_ns")] == [6.7, 23.3, 45.9]

    elbencho = stats.summarize(
        imported(tmp_path, "elbencho", "elbencho/service-2hosts-bigfile-rand4k")
    )
    # results.txt: "IO lat % us : [ 1%<=181 50%<=362 75%<=512 99%<=1218 ]"
    cell = elbencho.iloc[0]
    assert (cell["p50_ns"], cell["p99_ns"], cell["pct_source"]) == (362_000, 1_218_000, "tool")

    fio_rows = imported(tmp_path, "fio", "fio/standalone-group.json")
    document = json.loads((FIXTURES / "fio/standalone-group.json").read_text())
    (job,) = [job for job in document["jobs"] if job["jobname"] == "randread-4k"]
    cell = summary_cell(stats.summarize(fio_rows), "standalone-group", "randread-4k")
    assert cell["p99_ns"] == job["read"]["clat_ns"]["percentile"]["99.000000"] == 374784
    assert cell["pct_source"] == "tool"
    table = report_tables.latency_table(stats.summarize(fio_rows))
    cells = [dict(zip(table.columns, cells, strict=True)) for cells in table.rows]
    shown = [cell["p99 µs"] for cell in cells if cell["rw"] == "randread"]
    assert shown == ["375"]  # µs, with the decimals the table's values need

    # Two iterations of those rows: their printed percentiles would need averaging, so none.
    again = fio_rows.assign(iteration=2, p99_ns=fio_rows["p99_ns"] * 2)
    cell = summary_cell(stats.summarize(pd.concat([fio_rows, again])), "standalone-group",
                        "randread-4k")  # fmt: skip
    assert math.isnan(cell["p99_ns"]) and cell["pct_source"] is None


def test_the_mean_is_on_the_percentiles_basis(tmp_path):
    """fio json+ without lat_percentiles: percentiles are clat, so the mean is clat's too
    (the I/O-weighted clat_ns.mean of the two jobs, not lat_ns.mean)."""
    fixture = "fio/standalone-nogroup.jsonplus.json"
    summary = stats.summarize(imported(tmp_path, "fio", fixture))
    cell = summary_cell(summary, "standalone-nogroup.jsonplus", "randread-4k")
    jobs = [job["read"] for job in json.loads((FIXTURES / fixture).read_text())["jobs"]
            if job["jobname"] == "randread-4k"]  # fmt: skip
    ios = [job["total_ios"] for job in jobs]
    clat = sum(job["clat_ns"]["mean"] * n for job, n in zip(jobs, ios, strict=True)) / sum(ios)
    lat = sum(job["lat_ns"]["mean"] * n for job, n in zip(jobs, ios, strict=True)) / sum(ios)
    assert cell["lat_basis"] == "clat"
    assert cell["lat_mean_ns"] == pytest.approx(clat, rel=1e-9)
    assert round(clat / 1000, 1) == 188.1 and round(lat / 1000, 1) == 196.9
