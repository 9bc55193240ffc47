"""The report's paper tables, CI and outlier marks, and latency CDF, from real fio runs.

Real fio 3.x runs (two hosts at once, three iterations, rate-capped) give the Parquet rows; the
numbers in every exported table are recomputed here from those rows, independently of
storbench.analysis.stats.
"""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import statistics
import subprocess
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from storbench.analysis import stats
from storbench.core import results
from storbench.report import experiment as report
from storbench.report import paper_tables as report_tables
from storbench.tools import fio_json
from tests.report.exported import html_table_cells, pipe_table_rows
from tests.report.test_report import META, result_row

HOSTS = ("hostA", "hostB")
ITERATIONS = (1, 2, 3)
T_975_DF2 = 4.302652729911275  # Student t 0.975 quantile, 2 degrees of freedom (tables)
GB, GIB = 1e9, 1024**3
# run_id: (rw, bs, fio rate option, preparation state)
RUNS = {
    "read_bs64k": ("read", "64k", "--rate=16m", "fresh"),
    "randread_bs4k": ("randread", "4k", "--rate_iops=2000", "fresh"),
    "randread_bs4k_steady": ("randread", "4k", "--rate_iops=2000", "steady"),
}
TABLE_STEMS = ("bandwidth", "latency", "prep_state", "per_host")


def run_fio(data, run_id: str, host: str) -> tuple[str, str]:
    rw, bs, rate, _ = RUNS[run_id]
    argv = ["fio", f"--name={run_id}", f"--filename={data}", f"--rw={rw}", f"--bs={bs}"]
    argv += ["--size=4m", "--time_based", "--runtime=1", rate, "--ioengine=psync"]
    argv += ["--iodepth=1", "--numjobs=1", "--output-format=json+"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    return host, done.stdout


@pytest.fixture(scope="module")
def raw_path(tmp_path_factory):
    if shutil.which("fio") is None:
        pytest.fail("fio is not installed (make test installs it)", pytrace=False)
    root = tmp_path_factory.mktemp("fio")
    data = root / "data"
    data.write_bytes(bytes(4 << 20))
    rows = []
    for run_id, (rw, bs, _, state) in RUNS.items():
        for iteration in ITERATIONS:
            with ThreadPoolExecutor(len(HOSTS)) as pool:
                outputs = list(pool.map(lambda h, r=run_id: run_fio(data, r, h), HOSTS))
            base = {"experiment": "exp", "run_id": run_id, "iteration": iteration,
                    "attempt": 0, "tool": "fio", "hosts_in_run": len(HOSTS),
                    "target": "tmp", "prep_state": state,
                    "params_json": json.dumps({"rw": rw, "bs": bs})}  # fmt: skip
            rows += fio_json.parse_outputs(outputs, base=base)
    path = root / "summary.parquet"
    results.write_rows(rows, path)
    return path


@pytest.fixture(scope="module")
def rows(raw_path):
    return results.read_parquet(raw_path).to_pandas()


@pytest.fixture(scope="module")
def built(raw_path, tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("report")
    return out_dir, report.build_report(raw_path, out_dir, title="fio tables", meta=META)


def read_csv(out_dir, stem: str) -> list[dict]:
    with open(out_dir / "tables" / f"{stem}.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def assert_shown(cell: str, expected: float) -> None:
    """The printed cell equals the expected value to the cell's own decimals."""
    decimals = len(cell.split(".")[1]) if "." in cell else 0
    assert float(cell) == pytest.approx(expected, abs=0.5 * 10**-decimals + 1e-12), cell


def iterations(rows, run_id: str, host: str = "all"):
    chosen = rows[(rows["run_id"] == run_id) & (rows["host"] == host)]
    return chosen.sort_values("iteration")


def mean_and_ci(values) -> tuple[float, float, float]:
    """The arithmetic mean and the 95 % interval on the log scale: exp(m ± t · s / √3)."""
    values = [float(v) for v in values]
    assert len(values) == 3 and min(values) > 0
    logs = [math.log(v) for v in values]
    half = T_975_DF2 * statistics.stdev(logs) / math.sqrt(3)
    centre = statistics.fmean(logs)
    return statistics.fmean(values), math.exp(centre - half), math.exp(centre + half)


def is_outlier(values) -> list[bool]:
    values = np.asarray(values, dtype=float)
    median = np.median(values)
    mad = np.median(np.abs(values - median))
    return [bool(abs(v - median) > 3 * mad) for v in values]


# --- Files ---------------------------------------------------------------------------------


def test_every_table_is_written_in_four_formats(built):
    out_dir, written = built
    for stem in TABLE_STEMS:
        for suffix in ("csv", "md", "tex", "html"):
            path = out_dir / "tables" / f"{stem}.{suffix}"
            assert written[f"tables/{stem}.{suffix}"] == path and path.stat().st_size > 0
        latex = (out_dir / "tables" / f"{stem}.tex").read_text()
        for rule in (r"\toprule", r"\midrule", r"\bottomrule", r"\caption{", r"\label{tab:"):
            assert rule in latex, (stem, rule)
        assert "interval on the log scale (geometric mean)" in latex or stem == "latency"
        markdown = (out_dir / "tables" / f"{stem}.md").read_text()
        assert markdown.startswith("Table: ") and "Run" in pipe_table_rows(markdown)[0]
        page = (out_dir / "tables" / f"{stem}.html").read_text()
        assert "Run" in html_table_cells(page)[1]["thead"][0]


# --- Numbers of each table against the Parquet rows ---------------------------------------


def test_bandwidth_table_gb_and_gib_with_ci(built, rows):
    out_dir, _ = built
    table = read_csv(out_dir, "bandwidth")
    assert [row["Run"] for row in table] == [
        "randread_bs4k",
        "randread_bs4k_steady",
        "read_bs64k",
    ]  # random before sequential (sorted by pattern), then by run order
    for row in table:
        expected_pattern = "sequential" if row["rw"] == "read" else "random"
        assert (row["Tool"], row["Pattern"], row["op"]) == ("fio", expected_pattern, "read")
        assert (row["Hosts"], row["n"]) == ("2", "3")
        mean, low, high = mean_and_ci(iterations(rows, row["Run"])["bw_bytes_s"])
        for unit, scale in (("GB/s", GB), ("GiB/s", GIB)):
            assert_shown(row[unit], mean / scale)
            assert_shown(row[f"{unit} CI low"], low / scale)
            assert_shown(row[f"{unit} CI high"], high / scale)


def basis_mean(chosen) -> float:
    """The I/O-weighted mean on the percentiles' basis: fio's clat mean where it is clat."""
    (basis,) = set(chosen["lat_basis"])
    column = "clat_mean_ns" if basis == "clat" else "lat_mean_ns"
    return (chosen[column] * chosen["ios"]).sum() / chosen["ios"].sum()


def merged_percentile(counts: Counter, p: float) -> float:
    """fio's rule: the first bin whose cumulative count reaches p % of all samples."""
    total = sum(counts.values())
    cumulative = 0
    for value in sorted(counts):
        cumulative += counts[value]
        if cumulative >= p / 100 * total:
            return float(value)
    raise AssertionError("empty histogram")


def merged_bins(rows, run_id: str) -> Counter:
    counts: Counter = Counter()
    for _, row in iterations(rows, run_id).iterrows():
        counts.update(dict(zip(map(int, row["hist_ns"]), map(int, row["hist_count"]), strict=True)))
    return counts


def test_latency_table_from_merged_histograms(built, rows):
    out_dir, _ = built
    table = read_csv(out_dir, "latency")
    assert sorted(row["Run"] for row in table) == sorted(RUNS)
    for row in table:
        chosen = iterations(rows, row["Run"])
        weighted = basis_mean(chosen)
        assert_shown(row["Mean µs"], weighted / 1000)
        counts = merged_bins(rows, row["Run"])
        for header, p in (("p50", 50), ("p90", 90), ("p99", 99), ("p99.9", 99.9)):
            assert_shown(row[f"{header} µs"], merged_percentile(counts, p) / 1000)
        assert_shown(row["p99.99 µs"], merged_percentile(counts, 99.99) / 1000)


def test_prep_state_table_one_row_per_workload_and_state(built, rows):
    out_dir, _ = built
    table = read_csv(out_dir, "prep_state")
    got = [(row["rw"], row["bs"], row["State"]) for row in table]
    assert got == [
        ("randread", "4k", "fresh"),
        ("randread", "4k", "steady"),
        ("read", "64k", "fresh"),
    ]
    run_of = {(rw, bs, state): run_id for run_id, (rw, bs, _, state) in RUNS.items()}
    for row in table:
        chosen = iterations(rows, run_of[(row["rw"], row["bs"], row["State"])])
        mean, low, high = mean_and_ci(chosen["iops"])
        assert_shown(row["IOPS"], mean)
        assert_shown(row["IOPS CI low"], low)
        assert_shown(row["IOPS CI high"], high)
        weighted = basis_mean(chosen)
        assert_shown(row["Mean lat µs"], weighted / 1000)


def test_per_host_table_nodes_then_system(built, rows):
    out_dir, _ = built
    table = read_csv(out_dir, "per_host")
    assert len(table) == len(RUNS) * (len(HOSTS) + 1)
    for start in range(0, len(table), 3):
        block = table[start : start + 3]
        assert [(r["Scope"], r["Host"]) for r in block] == [
            ("node", "hostA"),
            ("node", "hostB"),
            ("system", "all"),
        ]
        assert len({r["Run"] for r in block}) == 1
    for row in table:
        chosen = iterations(rows, row["Run"], row["Host"])
        mean, low, high = mean_and_ci(chosen["iops"])
        assert_shown(row["IOPS"], mean)
        assert_shown(row["IOPS CI low"], low)
        assert_shown(row["IOPS CI high"], high)
        assert_shown(row["GB/s"], statistics.fmean(chosen["bw_bytes_s"]) / GB)
    # The system is the sum of its nodes in every iteration (fio_json.aggregate_hosts).
    for run_id in RUNS:
        nodes = sum(iterations(rows, run_id, h)["iops"].to_numpy() for h in HOSTS)
        assert iterations(rows, run_id)["iops"].to_numpy() == pytest.approx(nodes)


def test_index_html_shows_the_tables(built):
    out_dir, _ = built
    html = (out_dir / "index.html").read_text()
    section = html.split('<section id="tables">')[1].split("</section>")[0]
    per_host = html.split('<section id="per-host">')[1].split("</section>")[0]
    for stem in TABLE_STEMS:
        part = per_host if stem == "per_host" else section
        assert f'id="table-{stem.replace("_", "-")}"' in part
        assert f'<a href="tables/{stem}.tex">tables/{stem}.tex</a>' in part
    first = read_csv(out_dir, "bandwidth")[0]
    assert f'<td style="text-align: right">{first["GB/s"]}</td>' in section


# --- Summary: CI and outlier marks --------------------------------------------------------


def table_row(html: str, run_id: str) -> list[str]:
    """The cells of the HTML table row that starts with the run id."""
    html = html.replace("<wbr>", "")  # run ids may wrap after '_'
    row = re.search(rf"<tr[^>]*><td>{re.escape(run_id)}</td>(.*?)</tr>", html)
    assert row, f"no row for {run_id}"
    return [run_id, *re.findall(r"<td>(.*?)</td>", row.group(1))]


def test_bandwidth_tables_put_the_configured_units_first():
    rows = [result_row("randread", 4096, 1, iteration, "all", 2048.0) for iteration in ITERATIONS]
    raw = stats.as_frame(results.table_from_rows(rows))
    summary = stats.summarize(raw)  # 2,048 MiB/s = 2 GiB/s = 2.147 GB/s in every iteration
    decimal = report_tables.bandwidth_table(summary)
    binary = report_tables.bandwidth_table(summary, "binary")
    assert [c for c in decimal.columns if c.endswith("/s")] == ["GB/s", "GiB/s"]
    assert [c for c in binary.columns if c.endswith("/s")] == ["GiB/s", "GB/s"]
    assert decimal.rows[0][decimal.columns.index("GB/s")] == "2.15"
    assert binary.rows[0][binary.columns.index("GiB/s")] == "2.00"
    assert "1 GiB = 2^30 bytes, 1 GB = 10^9 bytes" in binary.caption
    per_host = report_tables.per_host_table(raw, summary, "binary")
    assert "GiB/s" in per_host.columns and "GB/s" not in per_host.columns
    assert per_host.rows[-1][per_host.columns.index("GiB/s")] == "2.00"


def test_summary_shows_ci_and_marks_outliers_of_real_runs(built, rows):
    out_dir, _ = built
    html = (out_dir / "index.html").read_text().replace("<wbr>", "")  # run ids wrap after "_"
    summary = html.split('<section id="summary">')[1].split("</section>")[0]
    assert "interval on the log scale (geometric mean)" in summary
    assert f"{report.OUTLIER_MARK} marks" in summary
    per_run = html.split('<section id="per-run">')[1].split("</section>")[0]
    header = re.findall(r"<th>(.*?)</th>", summary)
    for run_id in RUNS:
        chosen = iterations(rows, run_id)
        cells = table_row(summary, run_id)
        mean, low, high = mean_and_ci(chosen["bw_bytes_s"] / 1e6)
        bw_cell = cells[header.index("BW MB/s (mean ± sd)")]
        ci_cell = cells[header.index("BW MB/s 95 % CI")]
        assert bw_cell.startswith(f"{mean:,.1f} ± ")
        assert ci_cell == f"{low:,.1f} – {high:,.1f}"
        outliers = is_outlier(chosen["bw_bytes_s"])
        assert bw_cell.endswith(report.OUTLIER_MARK) == any(outliers)
        for iteration, flagged in zip(ITERATIONS, outliers, strict=True):
            line = per_run.split(f"<tr><td>{run_id}</td><td>{iteration}</td><td>all</td>")[1]
            bw = line.split("</tr>")[0].split("<td>")[2].removesuffix("</td>")
            assert bw.endswith(report.OUTLIER_MARK) == flagged, (run_id, iteration)


def test_outlier_iteration_is_marked_and_kept(tmp_path):
    rows = [
        result_row("randread", 4096, 1, iteration, "all", bw)
        for iteration, bw in zip(ITERATIONS, (100.0, 101.0, 200.0), strict=True)
    ]
    written = report.build_report(results.table_from_rows(rows), tmp_path, title="t", meta={})
    html = written["index.html"].read_text()
    summary = html.split('<section id="summary">')[1].split("</table>")[0]
    # Mean of all three iterations (MiB/s 100, 101, 200 in MB/s): the outlier is marked, not
    # dropped.
    assert f"<td>140.2 ± 60.2 {report.OUTLIER_MARK}</td>" in summary
    per_run = html.split('<section id="per-run">')[1]
    assert f"<td>209.7 {report.OUTLIER_MARK}</td>" in per_run
    assert "<td>104.9</td>" in per_run and "<td>105.9</td>" in per_run
    methodology = html.split('<section id="methodology">')[1].split("</section>")[0]
    assert "interval on the log scale (geometric mean)" in methodology
    assert "3 raw median absolute deviations" in methodology
    # No preparation state in these rows: no state table, and none left from before.
    assert not (tmp_path / "tables" / "prep_state.csv").exists()


def test_two_iterations_are_marked_in_every_table_with_an_interval(tmp_path):
    # Two hosts of 50 and 150 MiB/s in iteration 1, 60 and 140 in iteration 2.
    rows = [
        result_row("randread", 4096, 1, iteration, host, bw)
        for iteration, by_host in ((1, (50.0, 150.0)), (2, (60.0, 140.0)))
        for host, bw in zip(("all", "hostA", "hostB"), (sum(by_host), *by_host), strict=False)
    ]
    report.build_report(results.table_from_rows(rows), tmp_path, title="t", meta={})
    mark = report_tables.SMALL_N_MARK
    for stem in ("bandwidth", "per_host"):
        assert {row["n"] for row in read_csv(tmp_path, stem)} == {f"2{mark}"}, stem
        notes = (tmp_path / "tables" / f"{stem}.md").read_text()
        assert report_tables.SMALL_N_NOTE in notes
    assert {row["n"] for row in read_csv(tmp_path, "latency")} == {"2"}  # no interval there
    html = (tmp_path / "index.html").read_text()
    summary = html.split('<section id="summary">')[1].split("</section>")[0]
    assert f"<td>2{mark}</td>" in summary and report_tables.SMALL_N_NOTE in summary
    # hostA: 50 and 60 MiB/s, IOPS = 256 per MiB/s; √3000 · (6/5)^(∓12.7062 / 2), never < 0
    host_a = next(row for row in read_csv(tmp_path, "per_host") if row["Host"] == "hostA")
    factor = 1.2 ** (12.706204736174698 / 2)
    assert_shown(host_a["IOPS"], 55 * 256)
    assert_shown(host_a["IOPS CI low"], math.sqrt(3000) / factor * 256)
    assert_shown(host_a["IOPS CI high"], math.sqrt(3000) * factor * 256)
    assert float(host_a["IOPS CI low"]) > 0


def test_stale_state_table_is_removed(raw_path, tmp_path):
    report.build_report(raw_path, tmp_path, title="t", meta={})
    assert (tmp_path / "tables" / "prep_state.tex").exists()
    rows = [result_row("randread", 4096, 1, 1, "all", 100.0)]
    written = report.build_report(results.table_from_rows(rows), tmp_path, title="t", meta={})
    assert not [p for p in (tmp_path / "tables").iterdir() if p.name.startswith("prep_state")]
    assert not [name for name in written if "prep_state" in name]


# --- Latency CDF --------------------------------------------------------------------------


def test_cdf_uses_histograms_merged_over_iterations(rows):
    summary = stats.summarize(rows)
    cells = report.cell_histograms(rows, summary)
    assert [row["run_id"] for row, _, _ in cells] == summary["run_id"].tolist()
    for row, values, counts in cells:
        expected = merged_bins(rows, row["run_id"])
        assert dict(zip(values, counts, strict=True)) == dict(expected)


def test_cdf_figure_files_are_deterministic(built, raw_path, tmp_path):
    out_dir, written = built
    again = report.build_report(raw_path, tmp_path, title="fio tables", meta=META)
    for suffix in ("png", "svg"):
        name = f"{report.LATENCY_CDF_FIGURE}.{suffix}"
        assert written[name] == out_dir / name
        assert written[name].read_bytes() == again[name].read_bytes()
    assert written["latency_cdf.png"].read_bytes().startswith(b"\x89PNG")
    svg = written["latency_cdf.svg"].read_text()
    assert "<dc:date>" not in svg
    for stem in TABLE_STEMS:
        for suffix in ("csv", "md", "tex", "html"):
            name = f"tables/{stem}.{suffix}"
            assert written[name].read_bytes() == again[name].read_bytes(), name
    html = (out_dir / "index.html").read_text()
    assert 'id="figure-latency_cdf"' in html and "log x axis in µs" in html


def test_column_decimals_give_three_significant_digits():
    assert report_tables.column_decimals([3.2, 12.0]) == 2
    assert report_tables.column_decimals([0.00205, 1.0]) == 5
    assert report_tables.column_decimals([1234.0]) == 0
    assert report_tables.column_decimals([None, float("nan")]) == 0
    assert report_tables.fixed(0.0020512, 5) == "0.00205"
    assert report_tables.access_pattern("randrw") == "random"
    assert report_tables.access_pattern("write") == "sequential"
