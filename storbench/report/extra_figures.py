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

import math

import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter

from storbench.core.numbers import NS_PER_US
from storbench.report import selection, tool_wording
from storbench.report.drawing import FigureJob
from storbench.report.toolkit import (
    COLORS,
    count_label,
    figure_legend,
    join_nonempty,
    log_scale,
    new_figure,
    panel_width_in,
    short_count,
    spaced_labels,
)
from storbench.tools.base import ToolAdapter

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
            FigureJob(
                HISTOGRAM_FIGURE,
                histogram_figure,
                (shown, shown_labels, len(cells), histogram_bins_text(summary)),
            )
        )
    maps = heatmap_panels(summary)
    if maps:
        figures.append(FigureJob(HEATMAP_FIGURE, heatmap_figure, (maps[:MAX_MAPS], len(maps))))
    return figures


def histogram_bins_text(summary: pd.DataFrame) -> str:
    """The bins of the runs' tools, as their adapters name them."""
    return tool_wording.joined(summary, "histogram_bins_text", ToolAdapter.histogram_bins_text)


def histogram_figure(
    cells: list,
    labels: list[str],
    total_cells: int | None = None,
    bins_text: str = ToolAdapter.histogram_bins_text,
):
    """Share of I/Os per latency bin, one step line per run and operation (log x), of the
    first MAX_HISTOGRAMS of ``cells`` (of ``total_cells``, default all); ``bins_text`` names
    the tool's bins."""
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
        f"bins merged over all iterations and hosts by summing counts ({bins_text}; "
        "the x axis in µs, log scale)."
        + (f" The first {len(shown)} of {total_cells} shown." if left_out else "")
    )
    return fig, caption


def heatmap_panels(summary: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(title, cells) per combination of the other parameters where iodepth and numjobs both
    vary, every one; [] when no sweep varies both."""
    frame = summary.dropna(subset=["iodepth", "numjobs", "iops_mean"])
    if frame["iodepth"].nunique() < 2 or frame["numjobs"].nunique() < 2:
        return []
    keys = [key for key in PANEL_KEYS if key in frame and frame[key].nunique(dropna=False) > 1]
    groups = frame.groupby(keys, sort=False, dropna=False) if keys else [((), frame)]
    panels = []
    for values, cells in groups:
        values = values if isinstance(values, tuple) else (values,)
        if cells["iodepth"].nunique() >= 2 and cells["numjobs"].nunique() >= 2:
            title = ", ".join(_key_text(k, v) for k, v in zip(keys, values, strict=True))
            panels.append((title or "all runs", cells))
    return panels


def _key_text(key: str, value) -> str:
    return str(value) if key in ("rw", "op") else f"{key} {selection.value_label(key, value)}"


MAP_COLUMNS = 2  # maps a row: a third would leave each too narrow for its labels
CELL_TEXT_CHAR_IN = 0.06  # a character of a cell's value (6 pt), in inches


def heatmap_figure(panels: list[tuple[str, pd.DataFrame]], total_maps: int | None = None):
    """Mean IOPS over queue depth (x) × numjobs (y), each cell annotated with its value where
    the cells are wide enough for it; the first MAX_MAPS of ``total_maps`` maps."""
    columns = min(len(panels), MAP_COLUMNS)
    rows = math.ceil(len(panels) / columns)
    fig, axes = new_figure(rows, columns, height_in=2.4 * rows + 0.3)
    for ax in axes[len(panels) :]:
        ax.set_axis_off()
    # the colour bar takes about a fifth of each panel's width
    axis_width = panel_width_in(columns) * 0.8
    annotated = True
    for ax, (title, cells) in zip(axes, panels, strict=True):
        grid = cells.pivot_table(index="numjobs", columns="iodepth", values="iops_mean",
                                 aggfunc="sum")  # fmt: skip
        values = grid.to_numpy(dtype=float)
        image = ax.imshow(values, origin="lower", aspect="auto", cmap="viridis")
        ax.grid(False)  # the report style's grid lines would cross the cells
        depths = [str(int(c)) for c in grid.columns]
        ax.set_xticks(range(len(depths)), spaced_labels(depths, axis_width))
        ax.set_yticks(range(len(grid.index)), [str(int(i)) for i in grid.index])
        ax.set_xlabel("iodepth")
        ax.set_ylabel("numjobs")
        ax.set_title(title)
        texts = {cell: short_count(value) for cell, value in np.ndenumerate(values)
                 if not np.isnan(value)}  # fmt: skip
        widest = max((len(text) for text in texts.values()), default=0)
        if widest * CELL_TEXT_CHAR_IN + 0.06 <= axis_width / len(depths):
            peak = np.nanmax(values)
            for (row, column), text in texts.items():
                ax.text(column, row, text, ha="center", va="center", fontsize=6,
                        color="white" if values[row, column] < 0.6 * peak else "black")  # fmt: skip
        else:
            annotated = False
        colour_bar = fig.colorbar(image, ax=ax, label="IOPS (mean)")
        colour_bar.ax.yaxis.set_major_formatter(FuncFormatter(count_label))
    total_maps = len(panels) if total_maps is None else total_maps
    caption = join_nonempty(
        "Mean IOPS over queue depth × numjobs (aggregate over all hosts, mean over iterations; "
        "the operations of a mixed run summed), one map per combination of the other swept "
        "parameters; "
        + (
            "each cell shows its value."
            if annotated
            else "too many cells to write each value in its cell: the values are in the tables."
        ),
        f"The first {len(panels)} of {total_maps} maps shown; every run is in the tables."
        if total_maps > len(panels)
        else "",
    )
    return fig, caption
