"""Report labels that say what the numbers are, on the tools' own outputs (tests/fixtures):
no 'nan' for a row without an access pattern, each tool's own wording for its bins, latency
basis, percentile resolution and bandwidth basis, the tool's own total beside a different
one, a per-host figure that keeps its y label, and a report without a series file."""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from storbench.analysis import importing, stats
from storbench.core import results
from storbench.report import experiment as report
from storbench.report import extra_figures, figures, toolkit
from storbench.report import paper_tables as report_tables
from storbench.report.cells import workload_cells
from tests.paths import FIXTURES

MIB = 2**20


def imported(tmp_path_factory, tool: str, *paths: str) -> pd.DataFrame:
    """The rows `storbench import` makes of these fixture paths."""
    out = tmp_path_factory.mktemp(tool) / f"{tool}.parquet"
    importing.import_outputs(
        [FIXTURES / tool / path for path in paths],
        [tool],
        experiment=tool,
        output=out,
        series_output=None,
    )
    return results.read_parquet(out).to_pandas()


@pytest.fixture(scope="module")
def iperf3_raw(tmp_path_factory):
    return imported(tmp_path_factory, "iperf3", "client-single-stream.json", "client-udp.json")


@pytest.fixture(scope="module")
def elbencho_raw(tmp_path_factory):
    return imported(tmp_path_factory, "elbencho", "storbench-service-4hosts-file", "dirmode")


@pytest.fixture(scope="module")
def vdbench_raw(tmp_path_factory):
    return imported(tmp_path_factory, "vdbench", "storbench-service-4hosts-read")


@pytest.fixture(scope="module")
def warp_raw(tmp_path_factory):
    return imported(tmp_path_factory, "warp", "storbench-distributed-4clients")


def methodology_of(raw: pd.DataFrame) -> dict[str, str]:
    return dict(report.methodology({}, stats.summarize(raw), raw))


# --- 1. rw of rows without an access pattern ---------------------------------------------


def test_rows_without_a_pattern_show_no_nan(iperf3_raw, elbencho_raw):
    summary = stats.summarize(iperf3_raw)
    single = summary[summary["run_id"] == "client-single-stream"].iloc[0]
    # iperf3's own figure of the run: end.sum_received, 16 KiB... 128 KiB blocks, 1 stream
    document = json.loads((FIXTURES / "iperf3" / "client-single-stream.json").read_text())
    assert single["bw_bytes_s_mean"] == document["end"]["sum_received"]["bits_per_second"] / 8
    assert workload_cells(single)[:2] == ["–", "128k"]
    latency = report_tables.latency_table(summary).to_csv()
    rows = {line.split(",")[0]: line.split(",") for line in latency.splitlines()[1:]}
    assert rows["client-single-stream"][1:3] == ["", "128k"]  # empty, like iodepth
    assert "nan" not in latency and "nan" not in report_tables.bandwidth_table(summary).to_csv()
    # elbencho's metadata phases (mkdir, rmdir) have no pattern either; its data phases do
    elbencho = stats.summarize(elbencho_raw)
    mkdir = elbencho[elbencho["op"] == "mkdir"].iloc[0]
    assert workload_cells(mkdir)[0] == "–"
    assert "nan" not in report_tables.latency_table(elbencho).to_csv()


# --- 2. the per-host figure keeps its y label under long run ids --------------------------


def test_long_run_ids_wrap_at_their_separators():
    tick = figures.wrapped_tick("standalone-group.normal+jsonplus · randrw-70-30-4k")
    assert tick.split("\n") == ["standalone-group.normal+", "jsonplus · randrw-70-30-", "4k"]
    assert figures.wrapped_tick("status-interval.json") == "status-interval.json"


def test_per_host_figure_keeps_its_y_label_inside(tmp_path_factory):
    raw = imported(
        tmp_path_factory,
        "fio",
        "standalone-group.normal+jsonplus.txt",
        "standalone-nogroup.jsonplus.json",
        "client-server-nogroup.jsonplus.json",
    )
    with toolkit.style():
        fig, _ = figures.per_host_figure(raw[raw["host"] != "all"])
        try:
            fig.canvas.draw()
            (ax,) = fig.axes
            label = ax.yaxis.label.get_window_extent()
            box = fig.bbox
            assert ax.get_ylabel() == "bandwidth per host (MB/s)"
            assert box.y0 <= label.y0 and label.y1 <= box.y1  # cut off at the top before
            assert ax.get_window_extent().height >= 1.5 * fig.dpi  # not squashed by the ticks
            for tick in ax.get_xticklabels():
                assert fig.bbox.contains(*tick.get_window_extent().min)
        finally:
            plt.close(fig)


# --- 3. each tool's own words for its bins and latency basis -----------------------------


def test_histogram_caption_and_basis_name_the_tools_own_terms(elbencho_raw, vdbench_raw):
    for raw, bins in (
        (elbencho_raw, "elbencho's buckets, four per power of two"),
        (vdbench_raw, "vdbench's response-time buckets"),
    ):
        summary = stats.summarize(raw)
        cells = report.cell_histograms(raw, summary)
        assert cells
        (job,) = extra_figures.optional_figures(summary, cells, ["x"] * len(cells))[:1]
        _, caption = job.build(*job.args)
        plt.close("all")
        assert bins in caption and "fio" not in caption
        basis = methodology_of(raw)["Latency basis"]
        assert "slat" not in basis and "clat" not in basis
    assert methodology_of(elbencho_raw)["Latency basis"].startswith("elbencho's latency")


# --- 5. iperf3: the figure is the receiver's, and the report says so ----------------------


def test_iperf3_bandwidth_basis_says_it_is_the_receivers_figure(iperf3_raw):
    text = methodology_of(iperf3_raw)["Bandwidth basis"]
    assert "receiver" in text and "end.sum_received" in text and "op send" in text


# --- 6. warp's own total beside storbench's sum over the clients --------------------------


def test_warp_total_that_differs_from_warps_own_is_explained(warp_raw):
    text = methodology_of(warp_raw)["Tool's own totals"]
    # controller.stdout: 'Average: 25.69 MiB/s'; four clients 17.84 + 17.80 + 17.91 + 18.19
    assert "in warp's own output" in text and "window longer than its clients ran" in text
    assert "26.9 MB/s in warp's own output" in text
    assert f"{(17.84 + 17.80 + 17.91 + 18.19) * MIB / 1e6:.1f} MB/s here" in text  # 75.2


def test_no_own_total_note_where_the_numbers_agree(elbencho_raw, tmp_path_factory):
    assert "Tool's own totals" not in methodology_of(elbencho_raw)
    fio = imported(tmp_path_factory, "fio", "client-server-nogroup.jsonplus.json")
    assert fio["tool_bw_bytes_s"].notna().any()  # fio's 'All clients', within 1 B/s
    assert "Tool's own totals" not in methodology_of(fio)


# --- 7. coarse percentiles are said where they are shown ---------------------------------


def test_coarse_percentiles_get_a_note(vdbench_raw, tmp_path_factory):
    summary = stats.summarize(vdbench_raw)
    read = summary[(summary["run_id"] == "randread_bs4k_qd2") & (summary["op"] == "read")]
    # vdbench: mean 2 µs, p50 = p99 = 20 µs, the upper bound of its first bucket
    assert read["p50_ns"].iloc[0] == read["p99_ns"].iloc[0] == 20_000
    assert read["lat_mean_ns"].iloc[0] < 3_000
    notes = " ".join(report_tables.latency_table(summary).notes)
    assert "vdbench's percentiles are the upper bounds of its response-time buckets" in notes
    _, caption = report.latency_figure(summary)
    plt.close("all")
    assert "Percentile resolution: vdbench's" in caption
    fio = stats.summarize(
        imported(tmp_path_factory, "fio", "standalone-nogroup.jsonplus.json")
    )  # fine bins: no note
    assert "Percentile resolution" not in " ".join(report_tables.latency_table(fio).notes)


# --- 8. a report of rows without a series file --------------------------------------------


def test_report_without_a_series_file_says_so(tmp_path, capsys):
    rows = tmp_path / "gosbench.parquet"
    lines = importing.import_outputs(
        [FIXTURES / "gosbench" / "run"], ["gosbench"], experiment="g", output=rows,
        series_output=None,
    )  # fmt: skip
    series = tmp_path / "gosbench.timeseries.parquet"
    assert not series.exists() and not any("interval rows" in line for line in lines)
    written = report.build_report(
        rows, tmp_path / "rep", title="g", meta={}, timeseries_source=series, workers=1
    )
    assert "index.html" in written
    assert f"no series file {series}" in capsys.readouterr().err
    page = written["index.html"].read_text(encoding="utf-8")
    assert "Per-interval series" not in page  # no empty figure on the page
