"""Figures of a large sweep draw a stated selection of its runs, never 50 tiny panels."""

from __future__ import annotations

import pandas as pd
import pytest

from storbench.analysis import stats
from storbench.core import results
from storbench.report import experiment as report
from storbench.report import figures as report_figures
from storbench.report import selection
from tests.report.test_report import MIB, result_row

DEPTHS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
NUMJOBS = (1, 2, 4, 8, 16)


def grid() -> pd.DataFrame:
    return pd.DataFrame(
        [{"iodepth": d, "numjobs": n, "run_id": f"qd{d}_nj{n}"} for d in DEPTHS for n in NUMJOBS]
    )


def test_a_grid_within_the_limit_is_kept_whole():
    chosen = selection.select(grid()[grid()["numjobs"] == 1], ["iodepth", "numjobs"], 12)
    assert len(chosen.rows) == 10 and chosen.note == ""


def test_the_largest_key_gives_way_first_and_both_ends_stay():
    chosen = selection.select(grid(), ["iodepth", "numjobs"], 12, "panels")
    assert sorted(chosen.rows["iodepth"].unique()) == [1, 16, 512]
    assert sorted(chosen.rows["numjobs"].unique()) == [1, 2, 8, 16]
    assert len(chosen.rows) == 12
    assert chosen.note.startswith(
        "A selection: 12 of 50 panels (iodepth 1, 16, 512; numjobs 1, 2, 8, 16), evenly spaced"
    )


def test_runs_without_swept_keys_are_taken_evenly_in_plan_order():
    frame = pd.DataFrame({"run_id": [f"r{i}" for i in range(100)], "host": "h1"})
    chosen = selection.select_runs(frame, 5)
    assert list(chosen.rows["run_id"]) == ["r0", "r25", "r50", "r74", "r99"]
    assert "5 of 100 runs" in chosen.note


def sweep_rows() -> pd.DataFrame:
    """read and write × 10 queue depths × 5 numjobs, 2 iterations, two hosts and 'all'."""
    rows = []
    for rw in ("randread", "randwrite"):
        for depth in DEPTHS:
            for numjobs in NUMJOBS:
                for iteration in (1, 2):
                    for host in ("h1", "h2", "all"):
                        row = result_row(rw, 4096, depth, iteration, host, 10.0 * numjobs)
                        row["numjobs"] = numjobs
                        row["run_id"] = f"{rw}_qd{depth}_nj{numjobs}"
                        rows.append(row)
    return results.table_from_rows(rows).to_pandas()


def test_the_figures_of_a_100_run_sweep_stay_within_their_limits():
    raw = sweep_rows()
    summary = stats.summarize(raw)
    figure, caption = report.bandwidth_figure(summary)
    assert sum(ax.get_visible() and ax.axison for ax in figure.axes) == selection.MAX_PANELS
    assert "A selection: 12 of 50 panels" in caption

    figure, caption = report.latency_cdf_figure(summary, raw)
    (axes,) = figure.axes
    # rw 2 × iodepth 2 × numjobs 3: the largest key gives way until at most 16 remain
    assert len(axes.get_lines()) == 12 and "12 of 100 runs" in caption

    figure, caption = report.latency_figure(summary)
    labels = [label.get_text() for label in figure.axes[0].get_xticklabels()]
    assert 0 < len(labels) <= report.MAX_PERCENTILE_RUNS and "A selection" in caption
    assert labels[0] == "randread_qd1_nj1" and labels[-1] == "randwrite_qd512_nj16"

    # a line per block size over queue depth only: numjobs values get their own panels
    figure, caption = report_figures.latency_vs_iops_figure(summary)
    titles = [ax.get_title() for ax in figure.axes if ax.axison]
    assert titles[:2] == ["randread, numjobs=1", "randread, numjobs=2"]
    assert len(titles) == 10 and "A selection" not in caption  # 2 patterns × 5 numjobs fit
    assert [len(ax.texts) for ax in figure.axes if ax.axison] == [len(DEPTHS)] * 10


def test_crowded_latency_lines_label_only_their_first_and_last_depth():
    rows = sweep_rows()
    rows = pd.concat([rows.assign(bs=bs) for bs in (4096, 8192, 16384, 65536)], ignore_index=True)
    rows["run_id"] = rows["run_id"] + "_bs" + rows["bs"].astype(str)
    figure, caption = report_figures.latency_vs_iops_figure(stats.summarize(rows))
    panel = next(ax for ax in figure.axes if ax.axison)
    assert sorted(text.get_text() for text in panel.texts) == ["1", "1", "1", "1"] + ["512"] * 4
    assert "at the first and last point of each line" in caption


def test_a_run_id_may_wrap_after_its_underscores_and_stays_escaped():
    from storbench.report.toolkit import breakable

    assert str(breakable("randread_bs4k_qd1")) == "randread_<wbr>bs4k_<wbr>qd1"
    assert str(breakable("<b>a_b</b>")) == "&lt;b&gt;a_<wbr>b&lt;/<wbr>b&gt;"


def test_the_per_host_figure_of_128_hosts_shows_their_spread_and_names_the_slowest():
    hosts = [f"client{i}" for i in range(1, 129)]
    rows = [
        result_row("randread", 4096, depth, iteration, host, 100 + index + iteration)
        for depth in (1, 16)
        for iteration in (1, 2)
        for index, host in enumerate(hosts)
    ]
    raw = pd.DataFrame(rows)
    raw["bw_bytes_s"] = raw["bw_bytes_s"].astype(float)
    raw.loc[(raw["host"] == "client77") & (raw["iodepth"] == 16), "bw_bytes_s"] /= 100
    figure, caption = report_figures.per_host_figure(raw)
    (ax,) = figure.axes
    assert not figure.legends  # no legend entry per host
    dots = [collection.get_offsets() for collection in ax.collections]
    assert [len(points) for points in dots] == [128, 128]
    # a dot per host at its mean over iterations (MiB/s here: decimal units, 1e6 bytes/s)
    assert sorted(dots[0][:, 1]) == pytest.approx([(100 + i + 1.5) * MIB / 1e6 for i in range(128)])
    assert [text.get_text() for text in ax.texts] == ["client1", "client77"]
    assert "each of the 128 client hosts" in caption and "slowest host" in caption
