"""Comparison of two result tables: matching, Welch intervals, thresholds, offline HTML."""

from __future__ import annotations

import json
import math
import re
import statistics
from collections import Counter

import pandas as pd
import pytest

from storbench.analysis import compare, stats
from storbench.core import results
from storbench.report import compare as compare_page
from storbench.tools import fio_json
from tests.paths import FIXTURES
from tests.report.exported import pipe_table_rows

MIB = 1024**2
US = 1000  # ns
T_975_DF4 = 2.7764451051977934  # closed form for 4 degrees of freedom, see test_t_quantile_*


def row(run_id, iteration, bw_mib, *, experiment, rw="randread", bs=4096, **extra):
    """One all-hosts result row; IOPS derived from bandwidth and block size."""
    base = {
        "experiment": experiment,
        "run_id": run_id,
        "iteration": iteration,
        "attempt": 0,
        "tool": "fio",
        "host": "all",
        "job": run_id,  # fio names the job after the run
        "op": "write" if "write" in rw else "read",
        "rw": rw,
        "bs": bs,
        "iodepth": 1,
        "numjobs": 1,
        "hosts_in_run": 1,
        "target": "old" if experiment == "before" else "new",
        "bw_bytes_s": bw_mib * MIB,
        "iops": bw_mib * MIB / bs,
        "ios": 1000,
        "lat_mean_ns": 1000.0,
        "p99_ns": 2000.0,
        "lat_basis": "clat",
        "errors": 0,
    }
    base.update(extra)
    return base


# Cell randread 4k: bandwidth A = [100, 102, 98] MiB/s, B = [90, 91, 89]; mean latency
# A = [1000, 1010, 990] ns, B = [1200, 1210, 1190]; p99 A = [100, 200, 300] µs, B + 50 µs.
BW_A, BW_B = (100, 102, 98), (90, 91, 89)
LAT_A, LAT_B = (1000.0, 1010.0, 990.0), (1200.0, 1210.0, 1190.0)
P99_A, P99_B = (100 * US, 200 * US, 300 * US), (150 * US, 250 * US, 350 * US)


def side_a() -> list[dict]:
    rows = [
        row("randread_bs4k_qd1", i, BW_A[i - 1], experiment="before", lat_mean_ns=LAT_A[i - 1])
        for i in (1, 2, 3)
    ]
    for i, p99 in enumerate(P99_A):
        rows[i]["p99_ns"] = p99
    # Iteration 2 was retried: only its last attempt (1) counts, not the failed one (0).
    rows[1]["attempt"] = 1
    rows.append(row("randread_bs4k_qd1", 2, 500, experiment="before", attempt=0))
    rows.append(row("randwrite_bs4k_qd1", 1, 50, experiment="before", rw="randwrite"))
    rows.append(row("read_bs1m_qd1", 1, 900, experiment="before", rw="read", bs=MIB))
    return rows


def side_b() -> list[dict]:
    # Run ids spelled differently from A (with _nj1): cells match by workload, not name.
    rows = [
        row(
            "randread_bs4k_qd1_nj1",
            i,
            BW_B[i - 1],
            experiment="after",
            lat_mean_ns=LAT_B[i - 1],
            p99_ns=P99_B[i - 1],
        )
        for i in (1, 2, 3)
    ]
    # A per-host row with an absurd value: only host 'all' is compared.
    rows.append(row("randread_bs4k_qd1_nj1", 1, 5000, experiment="after", host="client01"))
    rows += [
        row("randwrite_bs4k_qd1_nj1", i, bw, experiment="after", rw="randwrite")
        for i, bw in enumerate((40, 41, 39), start=1)
    ]
    rows.append(row("write_bs1m_qd1_nj1", 1, 700, experiment="after", rw="write", bs=MIB))
    return rows


THRESHOLDS = {"iops": "-5%", "bw_bytes_s": "-5%", "p99_ns": "+10%", "lat_mean_ns": "+10%"}
RANDREAD = "fio randread bs=4k qd=1 nj=1 hosts=1 read"
RANDWRITE = "fio randwrite bs=4k qd=1 nj=1 hosts=1 write"


@pytest.fixture
def sources(tmp_path):
    a_file = tmp_path / "results" / "before" / "summary.parquet"
    b_file = tmp_path / "results" / "after" / "summary.parquet"
    results.write_parquet(results.table_from_rows(side_a()), a_file)
    results.write_parquet(results.table_from_rows(side_b()), b_file)
    return a_file.parent, b_file  # a folder and a file: load_side takes either


@pytest.fixture
def built(sources, tmp_path):
    out = tmp_path / "reports" / "compare" / "before_vs_after"
    summary = compare_page.build_comparison(
        *sources, out, a_label="before", b_label="after", thresholds=THRESHOLDS
    )
    return summary, out


def change(table: pd.DataFrame, cell: str, metric: str) -> pd.Series:
    match = table[(table["cell"] == cell) & (table["metric"] == metric)]
    assert len(match) == 1, (cell, metric)
    return match.iloc[0]


def t_density(x: float, df: float) -> float:
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(log_norm - (df + 1) / 2 * math.log1p(x * x / df))


def t_probability_between_0_and(t: float, df: float, steps: int = 20_000) -> float:
    """Simpson's rule over the t density: a check of t_quantile independent of its method."""
    h = t / steps
    inner = sum((4 if k % 2 else 2) * t_density(k * h, df) for k in range(1, steps))
    return h / 3 * (t_density(0, df) + inner + t_density(t, df))


def test_welch_interval_matches_the_formula(built):
    summary, out = built
    table = pd.read_csv(out / "comparison.csv")
    bw = change(table, RANDREAD, "bw_bytes_s")

    # Means 100 and 90 MiB/s; variances (0+4+4)/2 = 4 and (0+1+1)/2 = 1; n = 3 each.
    squared_error = 4 / 3 + 1 / 3
    df = squared_error**2 / ((4 / 3) ** 2 / 2 + (1 / 3) ** 2 / 2)
    assert df == pytest.approx(50 / 17)
    t = stats.t_quantile(0.975, df)
    assert t_probability_between_0_and(t, df) == pytest.approx(0.475, abs=1e-9)
    half_width_pct = 100 * t * math.sqrt(squared_error) / 100  # divided by mean A = 100

    assert (bw["n_a"], bw["n_b"]) == (3, 3)  # A's failed first attempt does not count
    assert bw["mean_a"] == pytest.approx(100 * MIB)
    assert bw["mean_b"] == pytest.approx(90 * MIB)  # the client01 row does not count
    assert bw["change_pct"] == pytest.approx(-10.0)
    assert bw["df"] == pytest.approx(50 / 17)
    assert bw["ci_low_pct"] == pytest.approx(-10.0 - half_width_pct)
    assert bw["ci_high_pct"] == pytest.approx(-10.0 + half_width_pct)
    assert bool(bw["significant"]) is True
    assert (bw["experiment_a"], bw["experiment_b"]) == ("before", "after")
    assert (bw["target_a"], bw["target_b"]) == ("old", "new")

    iops = change(table, RANDREAD, "iops")
    assert iops["mean_a"] == pytest.approx(100 * MIB / 4096)
    assert iops["ci_low_pct"] == pytest.approx(bw["ci_low_pct"])

    # Latency: means 1000 and 1200 ns, variance 100 each: df = 4, half width t4 * sqrt(200/3).
    latency = change(table, RANDREAD, "lat_mean_ns")
    assert latency["change_pct"] == pytest.approx(20.0)
    assert latency["df"] == pytest.approx(4.0)
    half_width_pct = 100 * T_975_DF4 * math.sqrt(200 / 3) / 1000
    assert latency["ci_low_pct"] == pytest.approx(20.0 - half_width_pct)
    assert latency["ci_high_pct"] == pytest.approx(20.0 + half_width_pct)
    assert bool(latency["significant"]) is True

    # p99 per iteration: 200 -> 250 µs mean (+25 %), variance 10^10 ns² each: not significant.
    p99 = change(table, RANDREAD, "p99_ns")
    assert p99["mean_a"] == pytest.approx(200 * US)
    assert p99["change_pct"] == pytest.approx(25.0)
    half_width_pct = 100 * T_975_DF4 * math.sqrt(2 * (100 * US) ** 2 / 3) / (200 * US)
    assert p99["ci_high_pct"] == pytest.approx(25.0 + half_width_pct)
    assert p99["ci_low_pct"] < 0 < p99["ci_high_pct"]
    assert bool(p99["significant"]) is False


def test_one_iteration_has_no_interval(built):
    summary, out = built
    table = pd.read_csv(out / "comparison.csv")
    bw = change(table, RANDWRITE, "bw_bytes_s")
    assert (bw["n_a"], bw["n_b"]) == (1, 3)
    assert bw["change_pct"] == pytest.approx(-20.0)  # 50 -> 40 MiB/s
    assert math.isnan(bw["ci_low_pct"]) and math.isnan(bw["ci_high_pct"])
    assert math.isnan(bw["significant"])  # empty in the CSV
    markdown = (out / "comparison.md").read_text()
    # 50 -> 40 MiB/s in decimal MB/s, the default report.units
    expected = [RANDWRITE, "bandwidth (MB/s)", "1", "3", "52.4", "41.9", "−20.0 %", "n/a", "n/a"]
    assert expected in [row[: len(expected)] for row in pipe_table_rows(markdown)]
    assert "Bandwidth in decimal units (1 GB/s = 10^9 bytes/s" in markdown


def test_unmatched_cells_are_listed(built):
    summary, out = built
    unmatched = pd.read_csv(out / "unmatched.csv")
    assert unmatched[["cell", "side", "run_id", "reason"]].values.tolist() == [
        [
            "fio read bs=1m qd=1 nj=1 hosts=1 read",
            "A",
            "read_bs1m_qd1",
            "no matching cell on side B",
        ],
        [
            "fio write bs=1m qd=1 nj=1 hosts=1 write",
            "B",
            "write_bs1m_qd1_nj1",
            "no matching cell on side A",
        ],
    ]
    assert summary["unmatched"] == 2
    assert "write_bs1m_qd1_nj1" in (out / "comparison.md").read_text()
    assert "write_bs1m_qd1_nj1" in (out / "index.html").read_text()


def test_thresholds_flag_significant_changes_only(built):
    summary, out = built
    assert summary["cells"] == 2
    assert summary["significant"] == 3  # randread bandwidth, IOPS and mean latency
    # p99 +25 % (not significant) and randwrite -20 % (n=1, no interval) do not count.
    assert summary["regressions"] == [
        f"{RANDREAD}: bw_bytes_s (bandwidth) 104.9 -> 94.4 MB/s (-10.0 %, 95 % CI "
        f"{_ci(summary, 'bw')}) crosses the threshold -5 %",
        f"{RANDREAD}: iops (IOPS) 25,600 -> 23,040 IOPS (-10.0 %, 95 % CI "
        f"{_ci(summary, 'bw')}) crosses the threshold -5 %",
        f"{RANDREAD}: lat_mean_ns (mean latency) 1.0 -> 1.2 µs (+20.0 %, 95 % CI "
        f"{_ci(summary, 'lat')}) crosses the threshold +10 %",
    ]
    written = json.loads((out / "regressions.json").read_text())
    assert written["regressions"] == summary["regressions"]
    assert written["thresholds"] == THRESHOLDS


def test_binary_units_show_mib_per_second(sources, tmp_path):
    summary = compare_page.build_comparison(
        *sources, tmp_path, a_label="before", b_label="after", thresholds=THRESHOLDS,
        units="binary",
    )  # fmt: skip
    assert summary["regressions"][0].startswith(
        f"{RANDREAD}: bw_bytes_s (bandwidth) 100.0 -> 90.0 MiB/s (-10.0 %"
    )
    markdown = (tmp_path / "comparison.md").read_text()
    expected = [RANDWRITE, "bandwidth (MiB/s)", "1", "3", "50.0", "40.0", "−20.0 %", "n/a", "n/a"]
    assert expected in [row[: len(expected)] for row in pipe_table_rows(markdown)]
    assert "binary units (1 GiB/s = 2^30 bytes/s" in markdown


def _ci(summary, which: str) -> str:
    """The interval as the message prints it, from the formulas of the first test."""
    if which == "bw":
        half = stats.t_quantile(0.975, 50 / 17) * math.sqrt(5 / 3)
        return f"{-10 - half:+.1f} % to {-10 + half:+.1f} %"
    half = 100 * T_975_DF4 * math.sqrt(200 / 3) / 1000
    return f"{20 - half:+.1f} % to {20 + half:+.1f} %"


def test_check_thresholds_on_a_comparison_and_looser_limits(sources):
    a_folder, b_file = sources
    comparison = compare.compare(compare.load_side(a_folder), compare.load_side(b_file))
    # -10 % bandwidth does not cross -15 %; +20 % latency crosses +19.5 % but not +25 %.
    loose = {"bw_bytes_s": "-15%", "lat_mean_ns": "+19.5 %"}
    messages = compare.check_thresholds(comparison, loose)
    assert len(messages) == 1 and messages[0].startswith(f"{RANDREAD}: lat_mean_ns")
    assert compare.check_thresholds(comparison.changes, {"lat_mean_ns": "+25%"}) == []
    assert compare.check_thresholds(comparison, {}) == []


@pytest.mark.parametrize(
    ("thresholds", "message"),
    [
        (
            {"iops": "5%"},
            "thresholds.iops: expected a signed percentage such as '-5%' or '+10%', got '5%'"
            " (did you mean '-5%'?)",
        ),
        ({"p99_ns": "10%"}, "got '10%' (did you mean '+10%'?)"),
        ({"iops": -5}, "thresholds.iops: expected a signed percentage"),
        ({"iops": "+5%"}, "thresholds.iops: a regression of iops is a drop"),
        ({"p99_ns": "-10%"}, "thresholds.p99_ns: a regression of p99_ns is a rise"),
        ({"p999": "+10%"}, "thresholds.p999: unknown metric"),
        ({"p99": "+10%"}, "thresholds.p99: unknown metric (did you mean 'p99_ns'?); known:"),
        ({"bw": "-5%"}, "thresholds.bw: unknown metric (did you mean 'bw_bytes_s'?)"),
    ],
)
def test_bad_thresholds_are_named(thresholds, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        compare.parse_thresholds(thresholds)


def test_html_is_offline_escaped_and_reproducible(sources, tmp_path):
    outputs = []
    for name in ("first", "second"):
        out = tmp_path / name
        compare_page.build_comparison(
            *sources, out, a_label="fw <1.0>", b_label="fw 1.1", thresholds=THRESHOLDS
        )
        outputs.append(out)
    html = (outputs[0] / "index.html").read_text()
    assert "http:" not in html and "https:" not in html
    sources_of = re.findall(r"""src\s*=\s*["']?([^"'\s>]*)""", html)
    assert sources_of and all(src.startswith("data:image/png;base64,") for src in sources_of)
    assert "<link" not in html and "@import" not in html and "url(" not in html
    assert "fw &lt;1.0&gt;" in html and "fw <1.0>" not in html
    assert 'class="flagged"' in html and "n/a" in html
    for name in ("index.html", "comparison.csv", "comparison.md", "regressions.json"):
        assert (outputs[0] / name).read_bytes() == (outputs[1] / name).read_bytes(), name


def test_workloads_repeated_on_a_side_match_by_run_id():
    def side(experiment, run_ids):
        rows = [
            row(run_id, i, 100 + i, experiment=experiment) for run_id in run_ids for i in (1, 2)
        ]
        return results.table_from_rows(rows).to_pandas()

    engines = ["randread_bs4k_qd1_ioengine-libaio", "randread_bs4k_qd1_ioengine-io-uring"]
    both = compare.compare(side("before", engines), side("after", engines))
    assert sorted(both.changes["cell"].unique()) == [
        f"{RANDREAD} [{run_id}]" for run_id in sorted(engines)
    ]
    assert both.unmatched.empty

    # B has the workload once, under another run id: nothing to pair it with unambiguously.
    one = compare.compare(side("before", engines), side("after", ["randread_bs4k_qd1"]))
    assert one.changes.empty
    assert sorted(one.unmatched["run_id"]) == ["randread_bs4k_qd1", *sorted(engines)]


def test_welch_change_edge_cases():
    # No spread on either side: a zero-width interval at the change, significant.
    flat = compare.welch_change([100, 100], [110, 110])
    assert (flat["change_pct"], flat["ci_low_pct"], flat["ci_high_pct"]) == (10.0, 10.0, 10.0)
    assert flat["significant"] is True and flat["df"] == math.inf
    same = compare.welch_change([100, 100], [100, 100])
    assert same["significant"] is False
    # Missing values are skipped; an empty side has no change.
    assert compare.welch_change([100, None, math.nan], [90])["n_a"] == 1
    assert math.isnan(compare.welch_change([], [90])["change_pct"])


def test_t_quantile_used_matches_closed_forms():
    # The interval uses stats.t_quantile; 2.5 % in each tail for 1, 2 and 4 degrees of freedom.
    p = 0.975
    assert stats.t_quantile(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-12)
    df2 = (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    assert stats.t_quantile(p, 2) == pytest.approx(df2, rel=1e-12)
    alpha = 4 * p * (1 - p)
    df4 = 2 * math.sqrt(math.cos(math.acos(math.sqrt(alpha)) / 3) / math.sqrt(alpha) - 1)
    assert df4 == pytest.approx(T_975_DF4, rel=1e-15)
    assert stats.t_quantile(p, 4) == pytest.approx(df4, rel=1e-12)


def test_load_side_names_a_missing_source(tmp_path):
    with pytest.raises(FileNotFoundError, match="results/<experiment>/summary.parquet"):
        compare.load_side(tmp_path / "nothing")


def test_a_job_that_left_numjobs_unset_pairs_with_fios_default():
    """The demo sweeps numjobs [1]; bench/overhead.py's sweep leaves it unset: 16 cells each
    side, none paired, though fio ran both with numjobs=1 and iodepth=1."""
    unset = [
        row("randread_bs4k", i, 100 + i, experiment="before", numjobs=None, iodepth=None)
        for i in (1, 2)
    ]
    explicit = [row("randread_bs4k_qd1_nj1", i, 90 + i, experiment="after") for i in (1, 2)]
    both = compare.compare(
        results.table_from_rows(unset).to_pandas(), results.table_from_rows(explicit).to_pandas()
    )
    assert both.unmatched.empty
    (bandwidth,) = both.changes[both.changes["metric"] == "bw_bytes_s"].itertuples()
    assert bandwidth.cell == "fio randread bs=4k qd=1 nj=1 hosts=1 read"
    assert bandwidth.change_pct == pytest.approx((90 + 1.5 - (100 + 1.5)) / (100 + 1.5) * 100)


def test_a_tool_without_defaults_keeps_an_unset_parameter_apart():
    unset = [row("w", 1, 100, experiment="before", tool="warp", numjobs=None)]
    explicit = [row("w", 1, 90, experiment="after", tool="warp", numjobs=1)]
    both = compare.compare(
        results.table_from_rows(unset).to_pandas(), results.table_from_rows(explicit).to_pandas()
    )
    assert both.changes.empty and len(both.unmatched) == 2


def test_a_runs_only_job_pairs_whatever_its_name():
    """fio JSON imported from a shell loop (`randread_bs4k_qd1.fio.json`, its job section
    named `randread_bs4k_qd1`) against a storbench run: 0 of 8 common cells paired."""
    imported = [
        row("randread_bs4k_qd1.fio", i, 100 + i, experiment="loop", job="randread_bs4k_qd1")
        for i in (1, 2)
    ]
    ours = [row("randread_bs4k_qd1_nj1", i, 90 + i, experiment="demo") for i in (1, 2)]
    both = compare.compare(
        results.table_from_rows(imported).to_pandas(), results.table_from_rows(ours).to_pandas()
    )
    assert both.unmatched.empty
    assert set(both.changes["cell"]) == {RANDREAD}


def test_a_runs_several_jobs_still_pair_by_name():
    def run(experiment, bw):
        return [
            row("mixed", 1, bw + offset, experiment=experiment, job=job)
            for offset, job in ((0, "reader"), (5, "writer"))
        ]

    both = compare.compare(
        results.table_from_rows(run("before", 100)).to_pandas(),
        results.table_from_rows(run("after", 90)).to_pandas(),
    )
    assert both.unmatched.empty
    assert sorted(both.changes["cell"].unique()) == [
        f"fio randread bs=4k qd=1 nj=1 hosts=1 job={job} read" for job in ("reader", "writer")
    ]


def fio_iterations(experiment: str) -> pd.DataFrame:
    """fio's randread-4k of standalone-group.jsonplus (iteration 1) and standalone-nogroup
    (iteration 2, two jobs) as the all-hosts rows of one run."""
    rows = []
    for iteration, name in enumerate(FIO_DOCUMENTS, start=1):
        base = {"experiment": experiment, "run_id": "randread", "iteration": iteration,
                "attempt": 0, "tool": "fio", "hosts_in_run": 1}  # fmt: skip
        text = (FIXTURES / "fio" / name).read_text()
        rows += fio_json.parse_outputs([("localhost", text)], base=base)
    frame = pd.DataFrame(rows)
    return frame[(frame["host"] == "all") & (frame["job"] == "randread-4k")]


FIO_DOCUMENTS = ("standalone-group.jsonplus.json", "standalone-nogroup.jsonplus.json")


def test_p99_and_mean_latency_are_the_experiment_reports_merged_and_weighted_values():
    jobs = [job["read"] for name in FIO_DOCUMENTS
            for job in json.loads((FIXTURES / "fio" / name).read_text())["jobs"]
            if job["jobname"] == "randread-4k"]  # fmt: skip
    bins: Counter = Counter()
    for job in jobs:
        bins.update({int(value): count for value, count in job["clat_ns"]["bins"].items()})
    total, running = sum(bins.values()), 0
    for value in sorted(bins):  # the first bin whose cumulative count reaches 99 %
        running += bins[value]
        if running >= 0.99 * total:
            merged_p99 = value
            break
    own_p99 = [3719168, 378880]  # fio's p99 of iteration 1, the all row's of iteration 2
    ios = [job["total_ios"] for job in jobs]
    clat_mean = sum(job["clat_ns"]["mean"] * n for job, n in zip(jobs, ios, strict=True)) / sum(ios)

    a, b = fio_iterations("before"), fio_iterations("after")
    changes = compare.compare(a, b).changes.set_index("metric")
    p99 = changes.loc["p99_ns"]
    assert p99["statistic"] == "merged histograms"
    assert p99["mean_a"] == merged_p99 == stats.summarize(a).loc[0, "p99_ns"]
    assert merged_p99 != statistics.fmean(own_p99)  # 2,049.0 µs: an average of p99s
    latency = changes.loc["lat_mean_ns"]
    assert latency["statistic"] == "mean weighted by I/O count"
    assert latency["mean_a"] == pytest.approx(clat_mean, rel=1e-12)
    assert latency["mean_a"] == pytest.approx(stats.summarize(a).loc[0, "lat_mean_ns"], rel=1e-12)
    assert p99["n_a"] == 2 and p99["change_pct"] == 0.0  # the interval still has its values

    no_bins = [side.assign(hist_ns=None, hist_count=None) for side in (a, b)]
    p99 = compare.compare(*no_bins).changes.set_index("metric").loc["p99_ns"]
    assert p99["statistic"] == "mean of per-iteration p99"
    assert p99["mean_a"] == statistics.fmean(own_p99)
    rows = compare_page.display_table(compare.compare(*no_bins).changes, set())["rows"]
    names = {row["cells"][1] for row in rows}
    assert "p99 latency, mean of per-iteration p99s (µs)" in names
