"""Every table and figure of the experiment and campaign reports, from a real campaign.

Real Snakemake runs two multi-iteration fio experiments on a local directory (a queue-depth
sweep with per-interval series, and a sequential one); the numbers in the reports are
recomputed here from the Parquet rows, independently of storbench.analysis.stats. The PDFs are
rendered to PNG with pdftoppm, and `snakemake --report` builds its HTML from the captions.
"""

from __future__ import annotations

import csv
import math
import shutil
import statistics
import subprocess
import zipfile
from pathlib import Path

import matplotlib.image
import matplotlib.pyplot as plt
import pandas as pd
import pyarrow.parquet as pq
import pytest

from storbench.analysis import stats
from storbench.report import campaign as campaign_page
from storbench.report import figures as report_figures
from tests.report.test_report import ALL_FIGURES
from tests.workflow.test_workflow import snakemake

T_975_DF1 = 12.706204736174698  # Student t 0.975 quantile, 1 degree of freedom (tables)
ITERATIONS = 2
CAMPAIGN = "paper"
TABLE_SUFFIXES = ("csv", "md", "tex", "html")


STORAGE_NODES = 2
PLAN_TABLES = {
    # WildFire's layout: block size x queue depth, IOPS and bandwidth per cell
    "qd_grid": {
        "experiments": ["qd"],
        "rows": ["bs"],
        "columns": ["iodepth"],
        "values": ["iops", "bw"],
        "per": ["system", "storage_node"],
    },
    # VAST's layout: a label (the client network there) x read/write, latency in ms
    "by_pattern": {"rows": ["pattern"], "columns": ["rw"], "values": ["bw", "lat_mean"]},
}


def campaign_config(target: Path) -> dict:
    job = {"size": "8MiB", "runtime": "2s", "ioengine": "libaio", "direct": 0}
    return {
        "hosts": {"localhost": {"transport": "local"}},
        "targets": {"scratch": {"type": "directory", "path": str(target)}},
        "report": {"name": CAMPAIGN, "title": "Campaign under test", "tables": PLAN_TABLES},
        "storage": {"nodes": STORAGE_NODES},
        "experiments": {
            "qd": {
                "description": "queue depth sweep",
                "labels": {"pattern": "random"},
                "tool": "fio",
                "hosts": "localhost",
                "target": "scratch",
                "iterations": ITERATIONS,
                "job": {**job, "rw": "randread", "status_interval": "1s"},
                "sweep": {"bs": ["4k", "64k"], "iodepth": [1, 4]},
            },
            "seq": {
                "tool": "fio",
                "hosts": "localhost",
                "target": "scratch",
                "iterations": ITERATIONS,
                "labels": {"pattern": "sequential"},
                "job": {**job, "bs": "1m", "iodepth": 2},
                "sweep": {"rw": ["read", "write"]},
            },
        },
    }


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    if shutil.which("chromium") is None or shutil.which("pdftoppm") is None:
        pytest.fail("chromium and pdftoppm are needed (make test-packages installs them)")
    workdir = tmp_path_factory.mktemp("paper")
    snakemake(workdir, campaign_config(workdir / "target"))
    return workdir


def rows_of(workdir: Path, experiment: str) -> pd.DataFrame:
    frame = pq.read_table(workdir / "results" / experiment / "summary.parquet").to_pandas()
    return frame[frame["host"] == "all"]


def cell_means(rows: pd.DataFrame, metric: str) -> dict[str, float]:
    """Mean over iterations of each run's metric (one op per run here), by hand."""
    return {run_id: statistics.fmean(group[metric]) for run_id, group in rows.groupby("run_id")}


def test_every_table_and_figure_is_written(campaign):
    for experiment in ("qd", "seq"):
        folder = campaign / "reports" / experiment
        for name in ALL_FIGURES:
            for suffix in ("png", "svg"):
                assert (folder / f"{name}.{suffix}").stat().st_size > 0, (experiment, name)
        for stem in ("bandwidth", "latency", "per_host"):
            for suffix in TABLE_SUFFIXES:
                assert (folder / "tables" / f"{stem}.{suffix}").stat().st_size > 0
        assert (folder / "report.pdf").read_bytes().startswith(b"%PDF-")
    folder = campaign / "reports" / CAMPAIGN
    for stem in ("key_results", "bandwidth", "latency", "per_host"):
        for suffix in TABLE_SUFFIXES:
            assert (folder / "tables" / f"{stem}.{suffix}").stat().st_size > 0
    assert (folder / "peaks.svg").stat().st_size > 0
    assert (folder / "report.pdf").read_bytes().startswith(b"%PDF-")


def test_key_results_are_the_peaks_of_the_rows(campaign):
    with open(campaign / "reports" / CAMPAIGN / "tables" / "key_results.csv") as handle:
        table = {row["Experiment"]: row for row in csv.DictReader(handle)}
    assert list(table) == ["qd", "seq"]  # config order
    for experiment in ("qd", "seq"):
        rows = rows_of(campaign, experiment)
        iops = cell_means(rows, "iops")
        best = max(iops, key=iops.get)
        logs = [math.log(v) for v in rows[rows["run_id"] == best]["iops"]]
        half_width = T_975_DF1 * statistics.stdev(logs) / math.sqrt(ITERATIONS)
        decimals = len(table[experiment]["Peak IOPS"].partition(".")[2])
        assert float(table[experiment]["Peak IOPS"]) == pytest.approx(iops[best], abs=10**-decimals)
        assert table[experiment]["IOPS peak at"].startswith(best)
        # numeric bounds of the interval on the log scale: exp(mean(log) ± t · sd(log) / √n)
        low = float(table[experiment]["IOPS CI low"])
        high = float(table[experiment]["IOPS CI high"])
        centre = statistics.fmean(logs)
        assert low == pytest.approx(math.exp(centre - half_width), abs=10**-decimals)
        assert high == pytest.approx(math.exp(centre + half_width), abs=10**-decimals)
        # rounded to the table's decimals, a wide interval's low bound may show as 0
        assert 0 <= low <= float(table[experiment]["Peak IOPS"]) <= high
        bandwidth = cell_means(rows, "bw_bytes_s")
        top = max(bandwidth, key=bandwidth.get)
        assert table[experiment]["Bandwidth peak at"].startswith(top)
        assert float(table[experiment]["Peak GB/s"]) == pytest.approx(
            bandwidth[top] / 1e9, rel=1e-2
        )
        assert table[experiment]["Runs"] == str(rows["run_id"].nunique())
        assert table[experiment]["n"] == f"{ITERATIONS}§"  # under 3 iterations: flagged


def test_key_results_follow_report_units():
    row = {"experiment": "e", "kind": "grid", "bw_mean": 2.5e9, "bw_ci_low": 2.4e9}
    row |= {"bw_ci_high": 2.6e9}
    decimal = campaign_page.key_results_table([row])
    assert decimal.rows[0][decimal.columns.index("Peak GB/s")] == "2.50"
    assert decimal.rows[0][decimal.columns.index("GB/s CI low")] == "2.40"
    binary = campaign_page.key_results_table([row], "binary")
    assert binary.rows[0][binary.columns.index("Peak GiB/s")] == "2.33"  # 2.5e9 / 2^30
    assert "binary units" in binary.notes[0]
    _, _, caption = campaign_page.peaks_figure([row], "binary")
    assert caption.startswith("Peak bandwidth (GiB/s, binary)")


def test_campaign_page_links_every_experiment_and_table(campaign):
    folder = campaign / "reports" / CAMPAIGN
    html = (folder / "index.html").read_text()
    assert "<h1>Campaign under test</h1>" in html
    for experiment in ("qd", "seq"):
        assert f'<a href="../{experiment}/index.html">{experiment}</a>' in html
        assert (folder / ".." / experiment / "index.html").is_file()
    for stem in ("key_results", "bandwidth"):
        assert f'<a href="tables/{stem}.tex">' in html
    assert '<h2 id="environment">' in html and "snakemake" in html
    assert "Experiment qd" in html and "queue depth sweep" in html


def test_latency_vs_iops_lines_are_the_cells_by_queue_depth(campaign):
    rows = rows_of(campaign, "qd")
    summary = stats.summarize(rows)
    fig, _ = report_figures.latency_vs_iops_figure(summary)
    (ax,) = [a for a in fig.axes if a.get_title() == "randread"]
    lines = {line.get_label(): line.get_xydata() for line in ax.get_lines()}
    assert set(lines) == {"4k", "4k p99", "64k", "64k p99"}
    for size, bs in (("4k", 4096), ("64k", 65536)):
        cells = rows[rows["bs"] == bs]
        expected = []
        for depth in (1, 4):
            at_depth = cells[cells["iodepth"] == depth]
            weights = at_depth["ios"]
            mean_latency = (at_depth["lat_mean_ns"] * weights).sum() / weights.sum()
            expected += [statistics.fmean(at_depth["iops"]), mean_latency / 1000]
        assert lines[size].flatten().tolist() == pytest.approx(expected, rel=1e-9)
    plt.close(fig)


def test_interval_series_sum_to_the_runs_io_counts(campaign):
    series = pq.read_table(campaign / "results" / "qd" / "timeseries.parquet").to_pandas()
    summed = report_figures.interval_series(series)
    rows = rows_of(campaign, "qd")
    for (run_id, iteration), points in summed.groupby(["run_id", "iteration"]):
        ios = series[(series["run_id"] == run_id) & (series["iteration"] == iteration)]["ios"]
        total = rows[(rows["run_id"] == run_id) & (rows["iteration"] == iteration)]["ios"]
        assert ios.sum() == total.sum()  # fio's intervals add up to its totals
        assert len(points) >= 2
    fig, _ = report_figures.timeseries_figure(series)
    titled = [ax for ax in fig.axes if ax.get_title()]
    assert sorted(ax.get_title() for ax in titled) == sorted(summed["run_id"].unique())
    plt.close(fig)


def test_per_host_bars_are_the_host_means(campaign):
    raw = pq.read_table(campaign / "results" / "seq" / "summary.parquet").to_pandas()
    means = report_figures.host_means(raw).set_index("run_id")
    for run_id, group in raw[raw["host"] == "localhost"].groupby("run_id"):
        per_iteration = group.groupby("iteration")["bw_bytes_s"].sum()
        assert means.loc[run_id, "bw_mean"] == pytest.approx(per_iteration.mean(), rel=1e-12)
        assert means.loc[run_id, "bw_sd"] == pytest.approx(per_iteration.std(), rel=1e-12)


def test_pdfs_render_to_non_blank_pages(campaign, tmp_path):
    for name in ("qd", CAMPAIGN):
        prefix = tmp_path / name
        subprocess.run(
            ["pdftoppm", "-r", "30", "-png", "-f", "1", "-l", "1",
             str(campaign / "reports" / name / "report.pdf"), str(prefix)],
            check=True,
        )  # fmt: skip
        (page,) = tmp_path.glob(f"{name}-*.png")
        image = matplotlib.image.imread(page)
        assert image.std() > 0.01, f"{name}: blank first page"


def test_snakemake_report_has_the_captions(campaign):
    snakemake(campaign, campaign_config(campaign / "target"), "--report", "report.zip")
    with zipfile.ZipFile(campaign / "report.zip") as archive:
        names = archive.namelist()
        text = "\n".join(
            archive.read(name).decode("utf-8", "replace")
            for name in names
            if name.endswith((".html", ".js"))
        )
    for stem in ("latency_vs_iops.png", "timeseries.png", "per_host.png", "key_results.csv"):
        assert any(name.endswith(stem) for name in names), stem
    assert "Key results per experiment" in text
    assert "Mean and p99 latency against achieved IOPS" in text


def test_parquet_loads_the_same_in_pandas_polars_and_duckdb(campaign):
    import duckdb
    import polars

    for name in ("summary.parquet", "timeseries.parquet"):
        path = campaign / "results" / "qd" / name
        frame = pd.read_parquet(path)
        assert polars.read_parquet(path).height == len(frame)
        assert duckdb.sql(f"select count(*) from '{path}'").fetchall()[0][0] == len(frame)
    path = campaign / "results" / "qd" / "summary.parquet"
    by_pandas = cell_means(rows_of(campaign, "qd"), "iops")
    by_polars = (
        polars.read_parquet(path)
        .filter(polars.col("host") == "all")
        .group_by("run_id")
        .agg(polars.col("iops").mean())
    )
    assert dict(by_polars.iter_rows()) == pytest.approx(by_pandas, rel=1e-12)
    query = f"select run_id, avg(iops) from '{path}' where host = 'all' group by run_id"
    assert dict(duckdb.sql(query).fetchall()) == pytest.approx(by_pandas, rel=1e-12)
    (histogram,) = duckdb.sql(f"select hist_ns, hist_count from '{path}' limit 1").fetchall()
    assert len(histogram[0]) == len(histogram[1]) > 0  # list columns survive


def table_csv(campaign: Path, stem: str) -> list[dict]:
    with open(campaign / "reports" / CAMPAIGN / "tables" / f"{stem}.csv") as handle:
        return list(csv.DictReader(handle))


def test_plan_tables_pivot_the_means_the_config_asks_for(campaign):
    rows = rows_of(campaign, "qd")
    iops, bw = cell_means(rows, "iops"), cell_means(rows, "bw_bytes_s")
    table = table_csv(campaign, "qd_grid")
    assert [row["bs"] for row in table] == ["4k", "64k"]
    for row in table:
        for depth in (1, 4):
            run_id = f"randread_bs{row['bs']}_qd{depth}"
            shown = float(row[f"iodepth {depth} IOPS"])
            assert shown == pytest.approx(iops[run_id], rel=1e-2)
            assert float(row[f"iodepth {depth} IOPS per node"]) == pytest.approx(
                iops[run_id] / STORAGE_NODES, rel=1e-2
            )
            assert float(row[f"iodepth {depth} GB/s"]) == pytest.approx(bw[run_id] / 1e9, rel=1e-2)
    by_pattern = {row["pattern"]: row for row in table_csv(campaign, "by_pattern")}
    assert set(by_pattern) == {"random", "sequential"}
    seq = rows_of(campaign, "seq")
    seq_bw = cell_means(seq, "bw_bytes_s")
    for rw in ("read", "write"):
        assert float(by_pattern["sequential"][f"{rw} GB/s"]) == pytest.approx(
            seq_bw[f"{rw}_bs1m_qd2"] / 1e9, rel=1e-2
        )
        lat = seq[seq["run_id"] == f"{rw}_bs1m_qd2"]
        weighted = (lat["lat_mean_ns"] * lat["ios"]).sum() / lat["ios"].sum() / 1e6
        assert float(by_pattern["sequential"][f"{rw} mean latency (ms)"]) == pytest.approx(
            weighted, rel=1e-2
        )
    # four runs of the qd sweep share the random/randread cell: the note names what differs
    assert " / " in by_pattern["random"]["randread GB/s"]
    tex = (campaign / "reports" / CAMPAIGN / "tables" / "by_pattern.tex").read_text()
    assert "they differ in bs, iodepth" in tex
    html = (campaign / "reports" / CAMPAIGN / "index.html").read_text()
    assert "Tables of the plan" in html and 'id="table-qd-grid"' in html


def test_the_campaign_page_flags_experiments_run_with_other_tool_versions(campaign, tmp_path):
    """The same campaign's rows, as if seq had run on hosts with another fio build: its
    numbers beside qd's in the key results are then partly the tool's."""
    qd = campaign / "results/qd/summary.parquet"
    seq = pq.read_table(campaign / "results/seq/summary.parquet").to_pandas()
    installed = seq["tool_version"].iloc[0]
    seq["tool_version"] = "fio-3.28"
    older = tmp_path / "seq.parquet"
    seq.to_parquet(older)
    meta = {"title": "t", "experiments": {"qd": {"tool": "fio"}, "seq": {"tool": "fio"}}}
    campaign_page.build_campaign_report([qd, older], [], tmp_path / "report", meta)
    html = (tmp_path / "report/index.html").read_text()
    assert (
        f"fio versions differ between the experiments: {installed} in qd; fio-3.28 in seq" in html
    )
    assert (
        "fio versions differ between"
        not in (campaign / "reports" / CAMPAIGN / "index.html").read_text()
    )
