"""The experiment report's further figures: latency vs IOPS, per-interval series, per-host bars.

Each builder returns (matplotlib figure, caption) like those in
``storbench.report.experiment`` and uses
its style (``toolkit.RC``, colours, fixed sizes), so ``toolkit.render_figure`` makes
deterministic PNG and SVG bytes of it.

- ``latency_vs_iops``: mean and p99 latency against achieved IOPS, one line per block size
  whose points are the queue depths in order (a panel per access pattern and operation);
  p99 comes from the merged histograms of the iterations (``stats.summarize``).
- ``timeseries``: IOPS per interval against time since the workload started, summed over
  hosts, jobs and operations, one panel per run and one line per iteration.
- ``per_host``: mean bandwidth of each client host per run, with the sd across iterations.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from storbench.analysis import fault_analysis, scaling
from storbench.core import report_units
from storbench.core.numbers import NS_PER_US  # noqa: E402
from storbench.core.results import ALL_HOSTS
from storbench.report import paper_tables as report_tables
from storbench.report import selection, toolkit
from storbench.report.drawing import FigureJob
from storbench.tools import UnknownToolError, get_tool

LATENCY_VS_IOPS_FIGURE = "latency_vs_iops"
TIMESERIES_FIGURE = "timeseries"
PER_HOST_FIGURE = "per_host"
FIGURES = (LATENCY_VS_IOPS_FIGURE, TIMESERIES_FIGURE, PER_HOST_FIGURE)
MAX_PER_HOST_RUNS = 24
# More hosts than this: their spread per run (a dot each), not a bar and a legend entry each
MAX_HOST_BARS = report_tables.MAX_LISTED_HOSTS
MAX_FULLY_LABELLED_LINES = 3  # more block sizes per panel: labels at each line's ends only
MAX_TIMESERIES_PANELS = 36  # beyond this a panel is too small to read; the caption says so
PANEL_COLUMNS = 4


def make_figure(
    name: str,
    summary: pd.DataFrame,
    raw: pd.DataFrame,
    timeseries: pd.DataFrame | None,
    units: str = report_units.DEFAULT_UNITS,
) -> tuple[bytes, bytes, str]:
    """(PNG bytes, SVG bytes, caption) of one of FIGURES; bandwidth in ``units``."""
    job = figure_job(name, summary, raw, timeseries, units)
    return toolkit.figure_files(lambda: job.build(*job.args))


# all host_means reads
PER_HOST_COLUMNS = ["run_id", "host", "iteration", "job", "op", "rw", "bw_bytes_s"]


def figure_job(
    name: str,
    summary: pd.DataFrame,
    raw: pd.DataFrame,
    timeseries: pd.DataFrame | None,
    units: str = report_units.DEFAULT_UNITS,
) -> FigureJob:
    """The drawing of one of FIGURES with the data it draws (drawing.draw_figures)."""
    if name == LATENCY_VS_IOPS_FIGURE:
        return FigureJob(name, latency_vs_iops_figure, (summary,))
    if name == TIMESERIES_FIGURE:
        return FigureJob(name, timeseries_figure, (timeseries, _series_hints(summary)))
    if name == PER_HOST_FIGURE:
        columns = [column for column in PER_HOST_COLUMNS if column in raw]
        host_rows = raw.loc[raw["host"] != ALL_HOSTS, columns]
        return FigureJob(name, per_host_figure, (host_rows, units))
    raise KeyError(name)


# ---------------------------------------------------------------------------------------
# Latency vs IOPS over queue depth


def latency_vs_iops_figure(summary: pd.DataFrame):
    data = summary.dropna(subset=["iops_mean", "iodepth"])
    data = data[data["iops_mean"] > 0]
    if data.empty:
        return toolkit.no_depth_or_rate(summary, "Latency vs IOPS")
    data = data.assign(
        pattern=[_pattern_label(row) for _, row in data.iterrows()],
        size=data["bs"].map(toolkit.bs_label),
    )
    sizes = list(dict.fromkeys(data.sort_values("bs")["size"]))
    patterns = list(dict.fromkeys(data["pattern"]))
    # a line runs over queue depth only: runs with other numjobs get their own panel
    per_pattern = max(1, selection.MAX_PANELS // len(patterns))
    shown = selection.select(data, ["numjobs"], per_pattern, "numjobs values")
    data = shown.rows
    split = "numjobs" in data and data["numjobs"].nunique() > 1
    panels = [
        (f"{pattern}, numjobs={toolkit.int_label(jobs)}" if split else pattern, rows)
        for pattern in patterns
        for jobs, rows in (
            data[data["pattern"] == pattern].groupby("numjobs", sort=True, dropna=False)
            if split
            else [(None, data[data["pattern"] == pattern])]
        )
    ]
    fig, axes = toolkit.grid(len(panels), 2.6)
    every_depth = len(sizes) <= MAX_FULLY_LABELLED_LINES
    depth_labels = []
    for ax, (title, panel) in zip(axes, panels, strict=True):
        for index, size in enumerate(sizes):
            rows = panel[panel["size"] == size].sort_values("iodepth")
            depth_labels += _latency_line(ax, rows, size, index, every_depth)
        ax.set_title(title)
        ax.set_xlabel("IOPS")
        ax.set_ylabel("latency (µs)")
        toolkit.log_scale(ax.yaxis)
        ax.set_xlim(left=0)
        toolkit.readable_counts(ax.xaxis)
    toolkit.figure_legend(fig, axes)
    toolkit.drop_overlapping_labels(fig, depth_labels)
    caption = (
        "Latency against achieved IOPS as the queue depth grows (labels at the points: "
        f"iodepth{'' if every_depth else ', at the first and last point of each line'}, "
        "where they do not overlap), "
        "one line per block size and a panel per access pattern. Solid: mean "
        "latency weighted by I/O count; dashed: p99 from the merged histograms of all "
        f"iterations ({toolkit.basis_text(summary)}; µs, log scale). X: mean IOPS over "
        "iterations."
    )
    return fig, toolkit.join_nonempty(caption, shown.note)


def _pattern_label(row) -> str:
    """The access pattern, plus the operation for a mixed workload (its reads and writes)."""
    label = report_tables.rw_label(row)
    return f"{label} {row['op']}" if row["rw"] in report_tables.MIXED_RW else label


def _latency_line(ax, rows: pd.DataFrame, size: str, index: int, every_depth: bool) -> list:
    """One block size's mean and p99 lines in a panel; its iodepth labels."""
    if rows.empty:
        return []
    color = toolkit.COLORS[index % len(toolkit.COLORS)]
    iops = rows["iops_mean"].astype(float)
    mean_us = rows["lat_mean_ns"].astype(float) / NS_PER_US
    p99_us = rows["p99_ns"].astype(float) / NS_PER_US
    marker = toolkit.MARKERS[index % len(toolkit.MARKERS)]
    ax.plot(iops, mean_us, color=color, marker=marker, markersize=3, linewidth=1, label=size)
    if p99_us.notna().any():
        ax.plot(
            iops,
            p99_us,
            color=color,
            marker=marker,
            markersize=3,
            linewidth=1,
            linestyle="--",
            label=f"{size} p99",
        )
    last = len(rows) - 1
    return [
        ax.annotate(
            toolkit.int_label(depth),
            (x, y),
            textcoords="offset points",
            xytext=(2, 3),
            fontsize=5,
            color=color,
        )
        for position, (x, y, depth) in enumerate(zip(iops, mean_us, rows["iodepth"], strict=True))
        if not math.isnan(y) and (every_depth or position in (0, last))
    ]


# ---------------------------------------------------------------------------------------
# Per-interval time series


def interval_series(timeseries: pd.DataFrame) -> pd.DataFrame:
    """IOPS and bandwidth per (run_id, iteration, interval) summed over hosts, jobs and ops.

    Each run and iteration is summed by ``fault_analysis.aggregate_series``, which puts
    hosts whose intervals end at slightly different times on one grid.
    """
    frames = []
    for (run_id, iteration), rows in timeseries.groupby(["run_id", "iteration"], sort=True):
        series = fault_analysis.aggregate_series(rows.dropna(subset=["t_s"]))
        if series["iops"]:
            times, iops = zip(*series["iops"], strict=True)
            frames.append(
                pd.DataFrame(
                    {
                        "run_id": run_id,
                        "iteration": iteration,
                        "t_s": times,
                        "iops": iops,
                        "bw_bytes_s": [v for _, v in series["bw"]],
                    }
                )
            )
    if not frames:
        return pd.DataFrame(columns=["run_id", "iteration", "t_s", "iops", "bw_bytes_s"])
    return pd.concat(frames, ignore_index=True)


def has_series(timeseries: pd.DataFrame | None) -> bool:
    """Whether the runs left a per-interval series to draw."""
    return timeseries is not None and not interval_series(timeseries).empty


def _series_hints(summary: pd.DataFrame) -> list[str]:
    """How each tool of the runs is made to report per interval ('fio: set ...')."""
    hints = []
    for tool in sorted(summary["tool"].dropna().unique()) if "tool" in summary else []:
        try:
            hint = get_tool(str(tool)).interval_series_hint
        except UnknownToolError:
            continue
        if hint:
            hints.append(f"{tool}: {hint}")
    return hints


def timeseries_figure(timeseries: pd.DataFrame | None, hints: list[str] | None = None):
    series = interval_series(timeseries) if timeseries is not None else None
    if series is None or series.empty:
        message = "no per-interval data" + (f" ({'; '.join(hints)})" if hints else "")
        return toolkit.empty_figure(message), f"Per-interval series: {message}."
    runs = list(dict.fromkeys(series["run_id"]))
    shown = runs[:MAX_TIMESERIES_PANELS]
    ncols = min(len(shown), PANEL_COLUMNS)
    nrows = math.ceil(len(shown) / ncols)
    fig, axes = toolkit.new_figure(nrows, ncols, height_in=1.5 * nrows + 0.6)
    for ax in axes[len(shown) :]:
        ax.set_axis_off()
    iterations = sorted(series["iteration"].unique())
    for ax, run_id in zip(axes, shown, strict=False):
        run = series[series["run_id"] == run_id]
        for index, iteration in enumerate(iterations):
            points = run[run["iteration"] == iteration]
            if not points.empty:
                ax.plot(
                    points["t_s"],
                    points["iops"],
                    color=toolkit.COLORS[index % len(toolkit.COLORS)],
                    linewidth=0.8,
                    marker=".",
                    markersize=2,
                    label=f"iteration {iteration}",
                )
        ax.set_title(str(run_id), fontsize=6)
        ax.set_ylim(bottom=0)
        toolkit.readable_counts(ax.yaxis)
        ax.tick_params(labelsize=5)
    for ax in axes[(nrows - 1) * ncols : len(shown)]:
        ax.set_xlabel("time (s)")
    for ax in axes[: len(shown) : ncols]:
        ax.set_ylabel("IOPS")
    toolkit.figure_legend(fig, axes[: len(shown)])
    left_out = len(runs) - len(shown)
    caption = (
        "IOPS per reporting interval against the time since the workload started (end of "
        "each interval), summed over hosts, jobs and operations; one panel per run, one line "
        "per iteration."
        + (
            f" The first {len(shown)} of {len(runs)} runs; all are in timeseries.parquet."
            if left_out
            else ""
        )
    )
    return fig, caption


# ---------------------------------------------------------------------------------------
# Per-host bars


def host_means(raw: pd.DataFrame) -> pd.DataFrame:
    """Mean and sd over iterations of each client host's bandwidth per run, summed over the
    jobs and operations that ran at the same time (``scaling.concurrent_parts``).

    A run whose hosts ran parts one after another (elbencho's write then read phase, fio's
    stonewalled sections) gets a bar group per part, ``run_id`` then '<run> · <part>': their
    sum is a rate no host reached. A run of one part per host keeps its run id.
    """
    rows = raw[raw["host"] != ALL_HOSTS]
    # Rows without bandwidth (elbencho's mkdir, delete) would only add empty bar groups.
    measured = rows[rows["bw_bytes_s"].notna()]
    rows = measured if not measured.empty else rows
    if rows.empty:
        return pd.DataFrame(columns=["run_id", "host", "bw_mean", "bw_sd", "n"])
    rows = rows.assign(**{column: None for column in ("job", "op") if column not in rows})
    rows = rows.assign(_part=scaling.concurrent_parts(rows))
    counts = rows.groupby(["run_id", "host", "iteration"], sort=False)["_part"].nunique()
    several = set(counts[counts > 1].index.get_level_values("run_id"))
    labels = [
        f"{run} · {part.removeprefix(f'{run} ')}" if run in several else run
        for run, part in zip(rows["run_id"], rows["_part"], strict=True)
    ]
    rows = rows.assign(run_id=labels)
    per_iteration = rows.groupby(["run_id", "host", "iteration"], sort=False)["bw_bytes_s"].sum(
        min_count=1
    )
    grouped = per_iteration.groupby(level=["run_id", "host"], sort=False)
    frame = grouped.agg(bw_mean="mean", bw_sd="std", n="count").reset_index()
    return frame


def per_host_figure(raw: pd.DataFrame, units: str = report_units.DEFAULT_UNITS):
    frame = host_means(raw)
    if frame.empty:
        return toolkit.empty_figure("no per-host rows"), "Per-host bandwidth: no data."
    shown = selection.select_runs(frame, MAX_PER_HOST_RUNS)
    frame = shown.rows
    hosts = sorted(frame["host"].unique(), key=scaling.natural_key)
    runs = list(dict.fromkeys(frame["run_id"]))
    unit, scale = toolkit.bandwidth_unit(frame["bw_mean"], units)
    if len(hosts) > MAX_HOST_BARS:
        fig = _host_spread_figure(frame, hosts, runs, unit, scale)
        caption = (
            f"Bandwidth of each of the {len(hosts)} client hosts per run ({unit}, summed over "
            "the host's jobs and operations that ran at the same time, mean over iterations; "
            "a run's parts that ran one after another, such as elbencho's phases or fio's "
            "stonewalled sections, are shown apart as 'run · part'): a dot per host, in host "
            "order from left to right, over a box of the middle half of the hosts with a line "
            "at the median and whiskers to the lowest and the highest; the slowest host of "
            "each run is named. Hosts far below their "
            "peers in the same run point at a client or path problem (the per-host table's "
            f"files list every value); {report_units.units_note(units)}."
        )
        return fig, toolkit.join_nonempty(caption, shown.note)
    width_in = min(max(toolkit.FIGURE_WIDTH_IN, 0.25 * len(runs) * max(len(hosts), 2)), 16.0)
    ticks = [wrapped_tick(run) for run in runs]
    fig, (ax,) = toolkit.new_figure(height_in=PER_HOST_PLOT_IN + rotated_ticks_height_in(ticks))
    fig.set_figwidth(width_in)
    for index, host in enumerate(hosts):
        rows = frame[frame["host"] == host].set_index("run_id").reindex(runs)
        means, sds = rows["bw_mean"] / scale, rows["bw_sd"].fillna(0) / scale
        toolkit.series_bars(ax, index, len(hosts), range(len(runs)), means, sds, host)
    toolkit.category_axis(
        ax, ticks, rotation=45, ha="right", rotation_mode="anchor", multialignment="right"
    )
    ax.set_ylabel(f"bandwidth per host ({unit})")
    toolkit.figure_legend(fig, [ax])
    caption = (
        f"Bandwidth of each client host per run ({unit}, summed over the host's jobs and "
        "operations that ran at the same time; a run's parts that ran one after another, "
        "such as elbencho's phases or fio's stonewalled sections, are shown apart as "
        "'run · part'): bars are the mean over iterations, error bars the sample sd. Hosts "
        "far below their peers in the same run point at a client or path problem; "
        f"{report_units.units_note(units)}."
    )
    return fig, toolkit.join_nonempty(caption, shown.note)


PER_HOST_PLOT_IN = 3.0  # the plot, its y label and the legend, above the run ids
TICK_LINE_CHARS = 24  # a run id's tick label wraps after this many characters
TICK_CHAR_IN = 0.055  # a character of a 7 pt tick label, in inches
TICK_LINE_IN = 0.12  # a line of a 7 pt tick label, in inches
_TICK_BREAK = re.compile(r"(?<=[ ·_.+-])")  # a run id breaks after these


def wrapped_tick(label: str, width: int = TICK_LINE_CHARS) -> str:
    """A long run id over lines of at most ``width`` characters, broken after ' ', '·',
    '_', '.', '+' or '-' (a word longer than a line keeps a line of its own): rotated long
    ids took the figure's height from the plot and cut its y label off."""
    lines = [""]
    for word in _TICK_BREAK.split(label):
        if lines[-1] and len(lines[-1]) + len(word.rstrip()) > width:
            lines.append("")
        lines[-1] += word
    return "\n".join(line.strip() for line in lines if line.strip())


def rotated_ticks_height_in(ticks: list[str]) -> float:
    """The height tick labels rotated by 45° take below the axis (their widest line and their
    lines, each at sin 45°)."""
    lines = [line for tick in ticks for line in tick.split("\n")]
    widest = max((len(line) for line in lines), default=0) * TICK_CHAR_IN
    deepest = max((tick.count("\n") + 1 for tick in ticks), default=1) * TICK_LINE_IN
    return (widest + deepest) * math.sin(math.radians(45))


def _host_spread_figure(frame: pd.DataFrame, hosts: list[str], runs: list[str], unit, scale):
    fig, (ax,) = toolkit.new_figure(height_in=3.2)
    fig.set_figwidth(min(max(toolkit.FIGURE_WIDTH_IN, 0.7 * len(runs)), 16.0))
    offsets = dict(zip(hosts, np.linspace(-0.3, 0.3, len(hosts)), strict=True))
    for x, run in enumerate(runs):
        rows = frame[(frame["run_id"] == run) & frame["bw_mean"].notna()]
        if rows.empty:
            continue
        values = rows["bw_mean"].to_numpy() / scale
        ax.boxplot(
            values, positions=[x], widths=0.75, whis=(0, 100), showfliers=False,
            manage_ticks=False, medianprops={"color": toolkit.COLORS[1]},
        )  # fmt: skip
        xs = [x + offsets[host] for host in rows["host"]]
        ax.scatter(xs, values, s=7, color=toolkit.COLORS[0], zorder=3, linewidths=0)
        slowest = int(values.argmin())
        ax.annotate(
            str(rows["host"].iloc[slowest]), (xs[slowest], values[slowest]),
            xytext=(5, 0), textcoords="offset points", ha="left", va="center",
            fontsize="x-small",
        )  # fmt: skip
    toolkit.category_axis(ax, runs, rotation=45, ha="right")
    ax.set_ylabel(f"bandwidth per host ({unit})")
    return fig
