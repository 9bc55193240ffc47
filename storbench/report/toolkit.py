"""The report toolkit every page shares: style, figures, number formats, tables, HTML."""

from __future__ import annotations

import base64
import io
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display; the same renderer everywhere keeps bytes identical

import jinja2  # noqa: E402
import markupsafe  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402
from matplotlib.artist import Artist  # noqa: E402
from matplotlib.ticker import (  # noqa: E402
    FuncFormatter,
    LogFormatterSciNotation,
    MaxNLocator,
)

from storbench.analysis import stats
from storbench.core import atomic, paths, report_units, results, versions
from storbench.core.numbers import (  # noqa: E402
    NO_VALUE,
    is_missing,
)
from storbench.core.units import size_label  # noqa: E402
from storbench.report import paper_tables as report_tables
from storbench.report import tables
from storbench.tools import get_tool, known_tools

TEMPLATE_DIR = paths.REPORT_TEMPLATES_DIR


COV_MARK = "†"  # marks a cell whose bandwidth or IOPS CoV exceeds stats.COV_LIMIT


OUTLIER_MARK = "‡"  # marks a value whose iterations include an outlier (stats.outlier_mask)


FIGURE_WIDTH_IN = 7.0  # two-column paper width


FIGURE_DPI = 150


PNG_METADATA = {"Software": None}  # drop the matplotlib version string from PNGs


SVG_METADATA = {"Date": None}  # no timestamp in SVGs


RC = {
    "svg.hashsalt": "storbench",  # stable ids inside SVG files
    "svg.fonttype": "path",  # glyphs as paths: no font needed to view the SVG
    "figure.autolayout": False,  # a user's matplotlibrc: set_layout_engine(None) means none
    "figure.constrained_layout.use": False,
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "legend.fontsize": 7,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.axisbelow": True,
}


COLORS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")


HATCHES = ("", "//", "..", "xx", "\\\\", "oo", "--", "++")  # readable in greyscale print


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


PER_HOST_TABLE = "per_host"  # shown in the per-host section with the per-host figure


def write_file(path: Path, data: bytes) -> Path:
    atomic.write_bytes(path, data)
    return path


def as_base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def bs_label(value) -> str:
    return NO_VALUE if is_missing(value) else size_label(int(value))


def int_label(value) -> str:
    return NO_VALUE if is_missing(value) else str(int(value))


def _text(value) -> str:
    return NO_VALUE if is_missing(value) else str(value)


def frame_csv(frame: pd.DataFrame) -> str:
    """A table as CSV at full precision (floats round-trip)."""
    return frame.to_csv(index=False, lineterminator="\n")


def figure_files(build) -> tuple[bytes, bytes, str]:
    """(PNG bytes, SVG bytes, caption) of the (figure, caption) ``build()`` makes."""
    # Styles are read while artists are created and saved, so both happen under RC.
    with style():
        fig, caption = build()
        try:
            png, svg = render_figure(fig)
        finally:
            plt.close(fig)
    return png, svg, caption


def style():
    """The report style (RC) for the figures drawn inside the with-block."""
    return matplotlib.rc_context(RC)


def render_figure(fig) -> tuple[bytes, bytes]:
    """(PNG bytes, SVG bytes) of a figure, without dates or version stamps."""
    png, svg = io.BytesIO(), io.BytesIO()
    fig.savefig(png, format="png", dpi=FIGURE_DPI, metadata=PNG_METADATA)
    # the layout the PNG was drawn with, kept: with no layout engine at all (not "none", a
    # placeholder engine) savefig also skips its layout pass, 40 % of an SVG's time
    fig.set_layout_engine(None)
    fig.savefig(svg, format="svg", metadata=SVG_METADATA)
    return png.getvalue(), svg.getvalue()


def new_figure(nrows: int = 1, ncols: int = 1, height_in: float = 3.0):
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(FIGURE_WIDTH_IN, height_in),
        dpi=FIGURE_DPI,
        layout="constrained",
        squeeze=False,
    )
    return fig, list(axes.flat)


COUNT_TICKS = 5  # at most this many labelled ticks on an IOPS axis: labels never run together


def count_label(value: float, _position=None) -> str:
    """20000 -> '20k', 1500000 -> '1.5M', 250 -> '250': short labels for counts per second."""
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:g}{suffix}"
    return f"{value:g}"


def plain_number(value: float, _position=None) -> str:
    """40, 100, 2,000, 0.5: a tick label an engineer reads at a glance (not 4×10^1)."""
    return f"{value:,.0f}" if abs(value) >= 1 else f"{value:g}"


class _PlainLogLabels(LogFormatterSciNotation):
    """matplotlib's choice of which log ticks to label, each labelled as ``label`` says."""

    def __init__(self, label, *, minor: bool):
        super().__init__(labelOnlyBase=not minor)
        self._label = label

    def __call__(self, x, pos=None) -> str:
        return self._label(x) if super().__call__(x, pos) else ""


def log_scale(axis, label=plain_number) -> None:
    """A base-10 log axis (``ax.xaxis`` or ``ax.yaxis``) labelled in plain numbers: the
    decades, and on an axis of less than about a decade the ticks between them."""
    getattr(axis.axes, f"set_{axis.axis_name}scale")("log")
    axis.set_major_formatter(_PlainLogLabels(label, minor=False))
    axis.set_minor_formatter(_PlainLogLabels(label, minor=True))


def readable_counts(axis) -> None:
    """A linear axis of counts (IOPS): few ticks, short labels (20k, 1.5M)."""
    axis.set_major_locator(MaxNLocator(nbins=COUNT_TICKS, steps=[1, 2, 2.5, 5, 10]))
    axis.set_major_formatter(FuncFormatter(count_label))


TICK_CHAR_IN = 0.07  # a tick label digit's width at the report's 8 pt, in inches


def spaced_labels(
    labels: list[str], axis_width_in: float, label_width_in: float | None = None
) -> list[str]:
    """``labels`` with every k-th kept (the first always) so that none runs into the next on an
    axis this wide where the ticks are evenly spaced; the others blank, their ticks kept.
    ``label_width_in``: the room a label takes (a slanted one's, whatever its length), else
    the widest label's."""
    if not labels:
        return []
    widest = label_width_in or (max(len(label) for label in labels) + 1) * TICK_CHAR_IN
    step = max(1, math.ceil(widest * len(labels) / max(axis_width_in, 0.1)))
    return [label if index % step == 0 else "" for index, label in enumerate(labels)]


def panel_width_in(columns: int) -> float:
    """The width of one panel's axes in a figure of ``columns`` panels a row (less its y
    axis's labels)."""
    return FIGURE_WIDTH_IN / max(columns, 1) - 0.6


def short_count(value: float) -> str:
    """452345 -> '452k', 7612 -> '7.61k', 123 -> '123': three significant digits, at most five
    characters, for values written inside a figure's cells."""
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}"


def drop_overlapping_labels(fig, labels: list) -> None:
    """When the figure is drawn, hide each of ``labels`` (annotations at points, most wanted
    first) whose box overlaps one kept before it; a label that would run past the right of
    its axes goes to the left of its point. The labels take no part in the layout, so hiding
    some moves nothing."""
    if labels:
        for label in labels:
            label.set_in_layout(False)
        fig.add_artist(_LabelSpacer(labels))


class _LabelSpacer(Artist):
    """Drawn first, after the layout (a figure lays out before drawing any artist): places
    its labels as they will be drawn, with no drawing of its own."""

    zorder = -100

    def __init__(self, labels: list):
        super().__init__()
        self.labels = labels
        self.placements = [(label.xyann, label.get_horizontalalignment()) for label in labels]

    def draw(self, renderer) -> None:
        kept: list = []
        for label, ((x_offset, y_offset), align) in zip(self.labels, self.placements, strict=True):
            label.xyann = (x_offset, y_offset)
            label.set_horizontalalignment(align)
            label.set_visible(True)
            box = label.get_window_extent(renderer)
            if align == "left" and label.axes is not None and box.x1 > label.axes.bbox.x1:
                label.xyann = (-x_offset, y_offset)
                label.set_horizontalalignment("right")
                box = label.get_window_extent(renderer)
            if any(box.overlaps(other) for other in kept):
                label.set_visible(False)
            else:
                kept.append(box)


def no_depth_or_rate(summary: pd.DataFrame, figure: str):
    """The placeholder (figure, caption) of a figure over queue depth that has nothing to
    draw: no IOPS at all, or IOPS from runs that set no iodepth (an S3 tool's)."""
    if summary["iops_mean"].notna().any() and summary["iodepth"].isna().all():
        message = "no run sets an iodepth: the IOPS of each run are in the tables"
    else:
        message = "no IOPS data"
    return empty_figure(message), f"{figure}: {message}."


def empty_figure(message: str):
    fig, (ax,) = new_figure(height_in=1.5)
    ax.set_axis_off()
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes)
    return fig


def bandwidth_unit(values, units: str = report_units.DEFAULT_UNITS) -> tuple[str, float]:
    """(label, bytes/s per unit) for bandwidths in bytes/s: GB/s or MB/s by the largest value
    (GiB/s or MiB/s with ``units`` binary); storbench.core.report_units."""
    largest = pd.Series(values, dtype=float).max()
    return report_units.bandwidth_unit(largest, units)


def grid(n_panels: int, panel_height_in: float):
    ncols = min(n_panels, 3)
    nrows = math.ceil(n_panels / ncols)
    fig, axes = new_figure(nrows, ncols, height_in=panel_height_in * nrows + 0.6)
    for ax in axes[n_panels:]:
        ax.set_axis_off()
    return fig, axes[:n_panels]


def series_bars(ax, index: int, series_count: int, positions, heights, errors, label) -> None:
    """Series ``index`` of a grouped bar chart: its bar in slot ``index`` at each position."""
    width = 0.8 / series_count
    ax.bar(
        [position - 0.4 + width * (index + 0.5) for position in positions],
        heights,
        width,
        yerr=errors,
        capsize=2,
        label=label,
        color=COLORS[index % len(COLORS)],
        hatch=HATCHES[index % len(HATCHES)],
        edgecolor="black",
        linewidth=0.5,
        error_kw={"elinewidth": 0.8},
    )


def category_axis(ax, labels: list[str], **tick_options) -> None:
    """Categories 0..n-1 on x with these labels; bars start at 0."""
    ax.set_xticks(range(len(labels)), labels, **tick_options)
    ax.set_xlim(-0.6, len(labels) - 0.4)
    ax.set_ylim(bottom=0)


def figure_legend(fig, axes) -> None:
    """One legend for all panels, below them, without duplicate entries."""
    handles: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    if handles:
        fig.legend(
            handles.values(),
            handles.keys(),
            loc="outside lower center",
            ncols=legend_columns(list(handles), fig.get_figwidth()),
            frameon=False,
        )


LEGEND_CHAR_IN = 0.055  # a character of a legend entry at the report's 7 pt, in inches
LEGEND_ENTRY_IN = 0.5  # an entry's line sample and the spaces around it, in inches


def legend_columns(labels: list[str], width_in: float, most: int = 4) -> int:
    """As many columns (at most ``most``) as the longest label leaves room for in the
    figure's width: four columns of long labels ran off both sides of the page."""
    widest = max((len(label) for label in labels), default=0) * LEGEND_CHAR_IN
    fitting = int(width_in // (widest + LEGEND_ENTRY_IN))
    return max(1, min(len(labels), most, fitting))


def basis_text(summary: pd.DataFrame) -> str:
    bases = sorted({str(b) for b in summary["lat_basis"].dropna()})
    return "latency basis: " + ", ".join(bases) if bases else "latency basis unknown"


def format_percent(fraction, decimals: int = 1, signed: bool = False) -> str:
    """0.84 -> '84.0 %'; signed: -0.111 -> '−11.1 %', 0.05 -> '+5.0 %'; missing -> '–'."""
    if is_missing(fraction):
        return NO_VALUE
    value = 100 * float(fraction)
    if signed:
        sign = "+" if value > 0 else "−" if value < 0 else ""
        return f"{sign}{abs(value):.{decimals}f} %"
    return f"{value:.{decimals}f} %"


HOST_COLUMN_NAMES = {
    "host": "Host",
    "group": "Group",
    "kernel": "Kernel",
    "os": "OS",
    "cpu": "CPU",
    "sockets": "Sockets",
    "cores": "Cores",
    "memory_gib": "Memory GiB",
    "nics": "NICs",
    "mount": "Target mount",
    "tools": "Tools",
}


def hosts_appendix(telemetry: dict | None) -> dict | None:
    """The hosts table (telemetry.hosts_table) with cells that differ from the majority marked."""
    if not telemetry:
        return None
    from storbench.run import telemetry as host_telemetry  # lazy: only reports with telemetry

    rows = host_telemetry.hosts_table(telemetry)
    columns = [key for key in rows[0] if key != "differs"] if rows else []
    body = [
        {
            "cells": [
                {"text": _text(row.get(column)), "differs": column in row.get("differs", [])}
                for column in columns
            ],
            "flagged": bool(row.get("differs")),
        }
        for row in rows
    ]
    split = host_telemetry.no_majority(telemetry)
    notes = [
        f"{fact}: " + "; ".join(f"{value} on {', '.join(hosts)}" for value, hosts in values.items())
        for fact, values in split.items()
    ]
    return {
        "header": [HOST_COLUMN_NAMES.get(column, column) for column in columns],
        "rows": body,
        "differing": sum(1 for row in body if row["flagged"]),
        "no_majority": notes,
    }


STATISTICS_BASE_TEXT = (
    "Each cell is one run (sweep point) and op, summarised over its iterations from the "
    "aggregate over all hosts: mean ± sample standard deviation (n − 1), coefficient of "
    f"variation CoV = sd / mean, {COV_MARK} marks CoV > {100 * stats.COV_LIMIT:g} %. "
    f"The {report_tables.INTERVAL_NAME} is {report_tables.INTERVAL_METHOD}; none for a single "
    f"iteration, and {report_tables.SMALL_N_MARK} marks n below {report_tables.SMALL_N}, where "
    f"it is only indicative. {report_tables.INTERVAL_FALLBACK} An iteration is an outlier "
    f"when its bandwidth or IOPS is more than {stats.OUTLIER_MADS:g} raw median absolute "
    "deviations (MAD) from the median of the cell's iterations; outliers are marked "
    f"({OUTLIER_MARK}) and never dropped. "
    "Mean latency is weighted by the I/O count of each iteration."
)


def statistics_text(units: str = report_units.DEFAULT_UNITS) -> str:
    """The statistics methodology, ending with the bandwidth unit system."""
    return f"{STATISTICS_BASE_TEXT} Bandwidth in {report_units.units_note(units)}."


PERCENTILE_TEXT = (
    "Percentiles are never averaged: the latency histograms of all hosts of an iteration, "
    "and then of all iterations, are merged by summing the count of every bin; a percentile "
    "is the first bin whose cumulative count reaches it (fio's rule). Where any iteration "
    f"lacks a histogram the percentile is shown as {NO_VALUE}."
)


def mapping_text(mapping) -> str | None:
    if not mapping:
        return None
    return "; ".join(f"{key} = {_value_text(value)}" for key, value in mapping.items())


def _value_text(value) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    if isinstance(value, dict):
        return "{" + (mapping_text(value) or "") + "}" if value else "{}"
    return str(value)


def runtime_text(job: dict) -> str | None:
    runtime, ramp = job.get("runtime"), job.get("ramp_time")
    if runtime is None and ramp is None:
        return None
    return f"runtime {runtime if runtime is not None else NO_VALUE}, ramp {ramp or 0}"


def paper_table_context(paper_tables: dict) -> list[dict]:
    """The exported tables for the template: id, files, header, alignment, rows and notes."""
    return [
        {
            "id": f"table-{stem.replace('_', '-')}",
            "files": [f"{report_tables.TABLE_DIR}/{stem}.{suffix}" for suffix in tables.SUFFIXES],
            "caption": table.caption,
            "header": [str(column) for column in table.columns],
            "align": [{"l": "left", "c": "center", "r": "right"}[a] for a in table.alignment],
            "rows": [[cell or NO_VALUE for cell in row] for row in _shown_rows(table)],
            "notes": [*([table.shown_note] if table.shown is not None else []), *table.notes],
        }
        for stem, table in paper_tables.items()
    ]


def _shown_rows(table: tables.Table) -> list[list[str]]:
    rows = table.text_rows()
    return rows if table.shown is None else [rows[index] for index in table.shown]


def template_environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
        autoescape=True,  # job files and configs are user text: never raw HTML
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["breakable"] = breakable
    return environment


def breakable(text) -> markupsafe.Markup:
    """Escaped text that may wrap after '_' and '/' (run ids, paths) in a narrow table cell."""
    if hasattr(text, "__html__"):  # already HTML (a link): left as it is
        return markupsafe.Markup(text.__html__())
    escaped = str(markupsafe.escape(str(text)))  # a str: Markup.replace would escape <wbr>
    return markupsafe.Markup(escaped.replace("_", "_<wbr>").replace("/", "/<wbr>"))


FLAG_MARK = "⚑"  # marks a slow host, a late start or a slow network client


def read_results(source) -> pd.DataFrame:
    if isinstance(source, (pa.Table, pd.DataFrame)):
        return stats.as_frame(source)
    return results.read_parquet(source).to_pandas()


def recorded_versions(raw: pd.DataFrame) -> str | None:
    """Tool versions as recorded in the result rows, when meta does not say."""
    if "tool_version" not in raw:
        return None
    return ", ".join(sorted({str(v) for v in raw["tool_version"].dropna()})) or None


def version_warnings(raw: pd.DataFrame) -> list[str]:
    """Per tool whose hosts' rows record more than one version: 'fio versions differ across
    hosts: fio-3.36 on 126 hosts (…); fio-3.28 on host-a, host-b'. The tools that print no
    version (their adapter says) and the 'all' rows (one per run) are left out."""
    if raw.empty or not {"tool", "tool_version", "host"} <= set(raw.columns):
        return []
    hosts = raw[raw["host"] != results.ALL_HOSTS]
    found = []
    for tool, rows in hosts.groupby("tool", sort=True):
        if tool not in known_tools() or not get_tool(str(tool)).capabilities.version:
            continue
        by_version = versions.hosts_by_version(zip(rows["host"], rows["tool_version"], strict=True))
        if warning := versions.differ_across_hosts(str(tool), by_version):
            found.append(warning)
    return found


def sides_version_warnings(
    sides: list[tuple[str, pd.DataFrame]], between: str = "the sides"
) -> list[str]:
    """A side (a comparison's, a campaign's experiment) whose hosts ran different versions of
    its tool, and a tool whose versions differ between the sides ('fio versions differ between
    the sides: fio-3.36 in a; …')."""
    found = [f"{label}: {text}" for label, rows in sides for text in version_warnings(rows)]
    for tool in sorted({str(tool) for _, rows in sides for tool in rows["tool"].dropna()}):
        if tool not in known_tools() or not get_tool(tool).capabilities.version:
            continue
        by_side = [
            (label, _versions(rows[rows["tool"] == tool]))
            for label, rows in sides
            if (rows["tool"] == tool).any()
        ]
        if (
            len(by_side) > 1
            and all(recorded for _, recorded in by_side)
            and (text := versions.differ_between(tool, by_side, between))
        ):
            found.append(text)
    return found


def _versions(rows: pd.DataFrame) -> list[str]:
    """The versions of the hosts' own rows; of the 'all' rows where a side has no other."""
    hosts = rows[rows["host"] != results.ALL_HOSTS]
    return sorted({str(v) for v in (hosts if not hosts.empty else rows)["tool_version"].dropna()})


def join_nonempty(*parts) -> str:
    return " ".join(str(p) for p in parts if p not in (None, ""))


def list_text(values) -> str | None:
    if not values:
        return None
    return f"{len(values)}: " + ", ".join(str(v) for v in values)
