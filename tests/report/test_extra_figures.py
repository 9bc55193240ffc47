"""The figures drawn only when the runs call for them: latency histogram, iodepth × numjobs."""

from __future__ import annotations

import statistics

import pytest

from storbench.analysis import stats
from storbench.core import results
from storbench.report import experiment as report
from storbench.report import extra_figures
from tests.report.test_report import META

MIB = 1 << 20


def rows_2d() -> list[dict]:
    rows = []
    for depth in (1, 4, 16):
        for jobs in (1, 2):
            for iteration in (1, 2):
                iops = 1000.0 * depth * jobs + iteration  # each cell's own mean, by hand below
                rows.append({
                    "experiment": "grid", "run_id": f"qd{depth}_nj{jobs}", "iteration": iteration,
                    "attempt": 1, "tool": "fio", "host": "all", "job": "j", "op": "read",
                    "rw": "randread", "bs": 4096, "iodepth": depth, "numjobs": jobs,
                    "iops": iops, "bw_bytes_s": iops * 4096, "ios": int(iops),
                    "lat_mean_ns": 1e5, "hist_ns": [50_000, 100_000 * depth],
                    "hist_count": [900, 100], "lat_basis": "lat",
                })  # fmt: skip
    return rows


def test_the_heat_map_cells_are_the_mean_iops_of_each_depth_and_jobs_pair():
    summary = stats.summarize(results.table_from_rows(rows_2d()).to_pandas())
    ((title, cells),) = extra_figures.heatmap_panels(summary)
    assert title == "all runs"
    grid = cells.pivot_table(index="numjobs", columns="iodepth", values="iops_mean")
    for depth in (1, 4, 16):
        for jobs in (1, 2):
            expected = statistics.fmean(1000.0 * depth * jobs + it for it in (1, 2))
            assert grid.loc[jobs, depth] == pytest.approx(expected)


def test_one_dimensional_sweeps_get_no_heat_map():
    rows = [row for row in rows_2d() if row["numjobs"] == 1]
    assert (
        extra_figures.heatmap_panels(stats.summarize(results.table_from_rows(rows).to_pandas()))
        == []
    )


def test_the_report_embeds_both_figures_when_they_apply(tmp_path):
    path = tmp_path / "rows.parquet"
    results.write_rows(rows_2d(), path)
    written = report.build_report(path, tmp_path / "out", title="grid", meta=META)
    for name in (extra_figures.HISTOGRAM_FIGURE, extra_figures.HEATMAP_FIGURE):
        assert written[f"{name}.png"].read_bytes().startswith(b"\x89PNG")
        assert written[f"{name}.svg"].stat().st_size > 0
    html = written["index.html"].read_text()
    assert "Latency histogram per run and operation" in html
    assert "Mean IOPS over queue depth × numjobs" in html


@pytest.mark.parametrize(
    ("value", "label"),
    [(250, "250"), (20000, "20k"), (1500000, "1.5M"), (2.5e9, "2.5G"), (0, "0")],
)
def test_count_axes_have_short_labels(value, label):
    from storbench.report.toolkit import count_label

    assert count_label(value) == label


def test_an_iops_axis_never_has_more_than_a_few_labels():
    """'20000400006000080000100000': long labels ran together on a narrow panel."""
    import matplotlib.pyplot as plt

    from storbench.report.toolkit import COUNT_TICKS, readable_counts

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 100000], [1, 2])
    readable_counts(ax.xaxis)
    fig.canvas.draw()
    shown = [t for t, label in zip(ax.get_xticks(), ax.get_xticklabels(), strict=True)
             if 0 <= t <= 100000 and label.get_text()]  # fmt: skip
    labels = [label.get_text() for label in ax.get_xticklabels() if label.get_text()]
    plt.close(fig)
    assert len(shown) <= COUNT_TICKS + 1
    assert "100k" in labels and all(len(label) <= 4 for label in labels)


@pytest.mark.parametrize(
    ("value", "label"), [(40, "40"), (1000, "1,000"), (250000, "250,000"), (0.5, "0.5")]
)
def test_log_axes_are_labelled_in_plain_numbers(value, label):
    from storbench.report.toolkit import plain_number

    assert plain_number(value) == label


def _tick_labels(low: float, high: float) -> list[str]:
    import matplotlib.pyplot as plt

    from storbench.report.toolkit import log_scale

    fig, ax = plt.subplots(figsize=(3, 3))
    ax.plot([0, 1], [low, high])
    log_scale(ax.yaxis)
    fig.canvas.draw()
    ticks = [*ax.yaxis.get_majorticklabels(), *ax.yaxis.get_minorticklabels()]
    shown = sorted(
        (label.get_position()[1], label.get_text()) for label in ticks if label.get_text()
    )
    plt.close(fig)
    return [text for position, text in shown if low <= position <= high]


def test_a_log_axis_of_decades_labels_the_decades():
    """Was '10^{2}' and '10^{3}' in mathtext."""
    assert _tick_labels(10, 200000) == ["10", "100", "1,000", "10,000", "100,000"]


def test_a_log_axis_of_about_a_decade_labels_ticks_between_them_plainly():
    """Was '4×10^{1}', '6×10^{1}', '2×10^{2}': the latency-vs-IOPS panels of a 16-run sweep."""
    labels = _tick_labels(40, 700)
    assert "100" in labels and "200" in labels and "40" in labels
    assert all(label.replace(",", "").isdigit() for label in labels)


def test_the_latency_percentile_figure_labels_its_axis_plainly():
    import matplotlib.pyplot as plt

    summary = stats.summarize(results.table_from_rows(rows_2d()).to_pandas())
    fig, _caption = report.latency_figure(summary)
    fig.canvas.draw()
    (ax,) = [ax for ax in fig.axes if ax.get_yscale() == "log"]
    labels = [label.get_text() for label in ax.get_yticklabels() if label.get_text()]
    plt.close(fig)
    assert "100" in labels and not any("10^" in label or "$" in label for label in labels)


def test_tick_labels_are_spaced_to_fit_their_axis():
    depths = ["1", "2", "4", "8", "16", "32", "64", "128", "256", "512"]
    from storbench.report.toolkit import panel_width_in, spaced_labels

    # three panels a row: ten depths ran together as '64128256512'
    assert [label for label in spaced_labels(depths, panel_width_in(3)) if label] == [
        "1", "4", "16", "64", "256"
    ]  # fmt: skip
    assert spaced_labels(depths, panel_width_in(1)) == depths
    assert spaced_labels(["1", "16"], panel_width_in(3)) == ["1", "16"]


def _large_sweep_summary():
    from tests.report import synthetic_sweep

    sweep = {**synthetic_sweep.SWEEP, "rw": ["randread", "write"]}
    rows = synthetic_sweep.synthetic_rows(sweep)
    return stats.summarize(results.table_from_rows(rows).to_pandas())


def _overlapping_tick_labels(fig) -> list[tuple[str, str]]:
    """Pairs of shown x tick labels of one axes whose boxes overlap, once drawn."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    overlaps = []
    for ax in fig.axes:
        shown = [label for label in ax.get_xticklabels() if label.get_text()]
        boxes = [label.get_window_extent(renderer) for label in shown]
        for (left, box), (right, other) in zip(
            zip(shown, boxes, strict=True), list(zip(shown, boxes, strict=True))[1:], strict=False
        ):
            if box.overlaps(other):
                overlaps.append((left.get_text(), right.get_text()))
    return overlaps


def test_a_large_sweeps_iops_panels_label_their_depths_apart():
    import matplotlib.pyplot as plt

    fig, _caption = report.iops_figure(_large_sweep_summary())
    try:
        assert _overlapping_tick_labels(fig) == []
        first = [label.get_text() for label in fig.axes[0].get_xticklabels() if label.get_text()]
        assert first == ["1", "4", "16", "64", "256"]
    finally:
        plt.close(fig)


def test_a_large_sweeps_depth_labels_neither_overlap_nor_leave_their_panel():
    """Were drawn at every line's first and last point whatever lay there: five block sizes'
    '512' written over each other near the y axis, the last point's cut at the figure's edge."""
    import matplotlib.pyplot as plt

    from storbench.report import figures

    fig, caption = figures.latency_vs_iops_figure(_large_sweep_summary())
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for ax in (ax for ax in fig.axes if ax.axison):
            shown = [text for text in ax.texts if text.get_visible()]
            boxes = [text.get_window_extent(renderer) for text in shown]
            assert not [
                (first.get_text(), second.get_text())
                for index, (first, box) in enumerate(zip(shown, boxes, strict=True))
                for second, other in list(zip(shown, boxes, strict=True))[index + 1 :]
                if box.overlaps(other)
            ], ax.get_title()
            assert all(ax.bbox.x0 <= box.x0 and box.x1 <= ax.bbox.x1 for box in boxes)
            # 5 block sizes, their first and last depth each; the 4k line's both kept
            assert len(ax.texts) == 10 and 2 < len(shown) < 10
            assert [text.get_text() for text in shown[:2]] == ["1", "512"]
        assert "at the first and last point of each line, where they do not overlap" in caption
    finally:
        plt.close(fig)


def test_a_large_sweeps_heat_maps_are_readable_and_say_which_are_shown():
    """Was four maps in a row: titles running into each other, iodepth labels run together,
    every cell's value written over its neighbours', the 20 combinations cut to 4 unsaid."""
    import matplotlib.pyplot as plt

    maps = extra_figures.heatmap_panels(_large_sweep_summary())
    assert len(maps) == 2 * 5  # rw x bs
    fig, caption = extra_figures.heatmap_figure(maps[: extra_figures.MAX_MAPS], len(maps))
    try:
        assert _overlapping_tick_labels(fig) == []
        maps_drawn = [ax for ax in fig.axes if ax.get_title()]
        assert [ax.get_title() for ax in maps_drawn] == [
            f"randread, bs {bs}, read" for bs in ("4k", "16k", "64k", "256k")
        ]
        assert all(not ax.texts for ax in maps_drawn)  # 50 cells: no room for their values
        assert "The first 4 of 10 maps shown" in caption and "values are in the tables" in caption
    finally:
        plt.close(fig)


def test_a_small_heat_map_writes_each_cells_value():
    import matplotlib.pyplot as plt

    summary = stats.summarize(results.table_from_rows(rows_2d()).to_pandas())
    (panel,) = extra_figures.heatmap_panels(summary)
    fig, caption = extra_figures.heatmap_figure([panel])
    try:
        (ax,) = [ax for ax in fig.axes if ax.get_title()]
        # each cell's mean of 1000 * depth * jobs + iteration (1 and 2), three digits
        assert sorted(text.get_text() for text in ax.texts) == sorted(
            ["1k", "4k", "16k", "2k", "8k", "32k"]
        )
        assert "each cell shows its value" in caption and "first" not in caption
    finally:
        plt.close(fig)


def test_figures_over_queue_depth_say_why_an_s3_tools_runs_are_not_drawn():
    """warp and GOSBench set no iodepth: 'no IOPS data' beside a table full of IOPS."""
    import matplotlib.pyplot as plt

    from storbench.report import figures

    rows = [{**row, "tool": "warp", "iodepth": None} for row in rows_2d()]
    summary = stats.summarize(results.table_from_rows(rows).to_pandas())
    assert summary["iops_mean"].notna().all()
    for draw in (report.iops_figure, figures.latency_vs_iops_figure):
        fig, caption = draw(summary)
        plt.close(fig)
        assert caption.endswith("no run sets an iodepth: the IOPS of each run are in the tables.")


def test_a_legend_of_long_labels_stays_on_the_figure():
    """The scaling figure of an imported elbencho folder: four columns of labels like
    'scratch: write_bs1m_nj2 write+delete+mkdir+rmdir' ran off both sides of the page."""
    import matplotlib.pyplot as plt

    from storbench.report.toolkit import figure_legend, legend_columns, new_figure, style

    labels = [f"scratch: write_bs1m_nj{n} write+delete+mkdir+rmdir" for n in range(6)]
    assert legend_columns(labels, 7.0) == 2
    assert legend_columns(["4k", "64k", "1m", "4k p99", "1m p99"], 7.0) == 4
    with style():  # the report's fonts, as every figure is drawn
        fig, (ax,) = new_figure()
        for index, label in enumerate(labels):
            ax.plot([0, 1], [index, index], label=label)
        figure_legend(fig, [ax])
        fig.canvas.draw()
        legend = fig.legends[0].get_window_extent(fig.canvas.get_renderer())
    page = fig.bbox
    plt.close(fig)
    assert page.x0 <= legend.x0 and legend.x1 <= page.x1


@pytest.mark.parametrize(
    ("tool", "caption"),
    [
        ("fio", "Per-interval series: no per-interval data (fio: set status_interval in the "
                "job, e.g. 1s)."),
        ("gosbench", "Per-interval series: no per-interval data."),  # was fio's advice
    ],
)  # fmt: skip
def test_a_report_without_a_series_gives_its_own_tools_advice(tool, caption):
    import matplotlib.pyplot as plt

    from storbench.report import figures

    rows = [{**row, "tool": tool} for row in rows_2d()]
    summary = stats.summarize(results.table_from_rows(rows).to_pandas())
    job = figures.figure_job(figures.TIMESERIES_FIGURE, summary, summary, None)
    fig, got = job.build(*job.args)
    plt.close(fig)
    assert got == caption
