"""Figures drawn only when the runs call for them (fio-plot has both):

- ``latency_histogram``: the merged latency histogram of each run and operation (share of
  I/Os per bin, log x axis), when the runs kept histogram bins;
- ``iodepth_numjobs``: a heat map of the mean IOPS (and one of bandwidth) over queue depth
  × numjobs, when a sweep varies both (one map per other parameter combination, at most a
  few, named in the panel title).

``optional_figures(summary, cells, labels)`` returns the ``drawing.FigureJob`` of each that
applies; ``cells`` are the merged histograms of the report's cells and ``labels`` their
names.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from storbench.core.numbers import NS_PER_US
from storbench.report.drawing import FigureJob
from storbench.report.toolkit import COLORS, figure_legend, log_scale, new_figure

HISTOGRAM_FIGURE = "latency_histogram"
HEATMAP_FIGURE = "iodepth_numjobs"
MAX_HISTOGRAMS = 8  # more lines than this stop being readable on one axis
MAX_MAPS = 4
PANEL_KEYS = ("rw", "bs", "op", "target", "step")


def optional_figures(summary: pd.DataFrame, cells: list, labels: list[str]) -> list[FigureJob]:
    figures = []
    if cells:
        shown = [(None, values, counts) for _, values, counts in cells[:MAX_HISTOGRAMS]]
        shown_labels = labels[:MAX_HISTOGRAMS]
        figures.append(
            FigureJob(HISTOGRAM_FIGURE, histogram_figure, (shown, shown_labels, len(cells)))
        )
    maps = heatmap_panels(summary)
    if maps:
        figures.append(FigureJob(HEATMAP_FIGURE, heatmap_figure, (maps,)))
    return figures


def histogram_figure(cells: list, labels: list[str], total_cells: int | None = None):
    """Share of I/Os per latency bin, one step line per run and operation (log x), of the
    first MAX_HISTOGRAMS of ``cells`` (of ``total_cells``, default all)."""
    shown = cells[:MAX_HISTOGRAMS]
    total_cells = len(cells) if total_cells is None else total_cells
    fig, (ax,) = new_figure(height_in=3.4)
    for index, ((_, values, counts), label) in enumerate(zip(shown, labels, strict=False)):
        total = float(sum(counts))
        x = np.asarray(values, dtype=float) / NS_PER_US
        ax.step(x, np.asarray(counts, dtype=float) / total, where="mid", linewidth=1,
                color=COLORS[index % len(COLORS)], label=label)  # fmt: skip
    log_scale(ax.xaxis)
    ax.set_xlabel("latency (µs, log scale)")
    ax.set_ylabel("share of I/Os in the bin")
    figure_legend(fig, [ax])
    left_out = total_cells - len(shown)
    caption = (
        "Latency histogram per run and operation: the share of I/Os in each histogram bin, "
        "bins merged over all iterations and hosts by summing counts (fio's log-linear bins; "
        "the x axis in µs, log scale)."
        + (f" The first {len(shown)} of {total_cells} shown." if left_out else "")
    )
    return fig, caption


def heatmap_panels(summary: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(title, cells) per combination of the other parameters where iodepth and numjobs both
    vary; [] when no sweep varies both."""
    frame = summary.dropna(subset=["iodepth", "numjobs", "iops_mean"])
    if frame["iodepth"].nunique() < 2 or frame["numjobs"].nunique() < 2:
        return []
    keys = [key for key in PANEL_KEYS if key in frame and frame[key].nunique(dropna=False) > 1]
    groups = frame.groupby(keys, sort=False, dropna=False) if keys else [((), frame)]
    panels = []
    for values, cells in groups:
        values = values if isinstance(values, tuple) else (values,)
        if cells["iodepth"].nunique() >= 2 and cells["numjobs"].nunique() >= 2:
            title = ", ".join(f"{k} {v}" for k, v in zip(keys, values, strict=True)) or "all runs"
            panels.append((title, cells))
    return panels[:MAX_MAPS]


def heatmap_figure(panels: list[tuple[str, pd.DataFrame]]):
    """Mean IOPS over queue depth (x) × numjobs (y), each cell annotated with its value."""
    fig, axes = new_figure(ncols=len(panels), height_in=3.4)
    for ax, (title, cells) in zip(axes, panels, strict=True):
        grid = cells.pivot_table(index="numjobs", columns="iodepth", values="iops_mean",
                                 aggfunc="sum")  # fmt: skip
        image = ax.imshow(grid.to_numpy(dtype=float), origin="lower", aspect="auto", cmap="viridis")
        ax.set_xticks(range(len(grid.columns)), [str(int(c)) for c in grid.columns])
        ax.set_yticks(range(len(grid.index)), [str(int(i)) for i in grid.index])
        ax.set_xlabel("iodepth")
        ax.set_ylabel("numjobs")
        ax.set_title(title, fontsize=8)
        peak = np.nanmax(grid.to_numpy(dtype=float))
        for (row, column), value in np.ndenumerate(grid.to_numpy(dtype=float)):
            if not np.isnan(value):
                ax.text(column, row, f"{value:,.0f}", ha="center", va="center", fontsize=6,
                        color="white" if value < 0.6 * peak else "black")  # fmt: skip
        fig.colorbar(image, ax=ax, label="IOPS (mean)")
    caption = (
        "Mean IOPS over queue depth × numjobs (aggregate over all hosts, mean over iterations; "
        "the operations of a mixed run summed), one map per combination of the other swept "
        "parameters; each cell shows its value."
    )
    return fig, caption
