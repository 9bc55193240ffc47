"""Paper-style report of a campaign: summary table, figures and an offline HTML document.

``build_report`` reads an experiment's result rows, summarises them with
``stats.summarize``, and writes index.html, summary.csv, summary.md and three figures
as PNG and SVG. Output is byte-for-byte reproducible: fixed figure sizes and dpi, no dates
in image metadata, a fixed SVG hash salt, and no timestamps in the HTML unless ``meta``
carries them.

Units: bandwidth in MiB/s in tables (binary, like fio), MiB/s or GiB/s in figures by
magnitude; latency in µs; IOPS as is. Spread is the sample sd across iterations (ddof=1).
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Iterable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display; the same renderer everywhere keeps bytes identical

import jinja2  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402

from storbench import atomic, results, stats  # noqa: E402
from storbench.units import size_label  # noqa: E402

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "templates" / "report"
TEMPLATE_NAME = "index.html.j2"

MIB = 1024**2
GIB = 1024**3
NS_PER_US = 1000.0
NO_VALUE = "–"  # shown where a value is missing (e.g. no histogram for a percentile)
COV_MARK = "†"  # marks a cell whose bandwidth or IOPS CoV exceeds stats.COV_LIMIT

FIGURE_WIDTH_IN = 7.0  # two-column paper width
FIGURE_DPI = 150
PNG_METADATA = {"Software": None}  # drop the matplotlib version string from PNGs
SVG_METADATA = {"Date": None}  # no timestamp in SVGs
RC = {
    "svg.hashsalt": "storbench",  # stable ids inside SVG files
    "svg.fonttype": "path",  # glyphs as paths: no font needed to view the SVG
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
LATENCY_PERCENTILES = (("p50_ns", "p50", "o"), ("p99_ns", "p99", "s"), ("p99_9_ns", "p99.9", "^"))

FIGURES = ("bandwidth", "iops_vs_iodepth", "latency_percentiles")
MIXED_RW = {"rw", "readwrite", "randrw"}


# ---------------------------------------------------------------------------------------
# Entry point


def build_report(results_source, out_dir, *, title: str, meta: dict) -> dict[str, Path]:
    """Write the report into ``out_dir`` and return {file name: path}.

    ``results_source``: result rows in the result schema (a Parquet path, a list of paths, or
    a table). ``meta``: provenance for methodology and appendix (experiment, tool,
    tool_version, hosts, target, iterations, job, sweep, run_ids, job_files, config_yaml,
    storbench_version, generated_by); every key is optional.
    """
    out_dir = Path(out_dir)
    raw = _read_results(results_source)
    summary = stats.summarize(raw)
    written: dict[str, Path] = {}

    figures = []
    for name in FIGURES:
        png, svg, caption = make_figure(name, summary)
        written[f"{name}.png"] = _write(out_dir / f"{name}.png", png)
        written[f"{name}.svg"] = _write(out_dir / f"{name}.svg", svg)
        figures.append({"name": name, "caption": caption, "png_base64": _base64(png)})

    table = summary_table(summary)
    written["summary.csv"] = _write(out_dir / "summary.csv", summary_csv(summary).encode())
    written["summary.md"] = _write(out_dir / "summary.md", markdown_table(table).encode())
    html = render_html(
        title=title, meta=meta, summary=summary, table=table, figures=figures, raw=raw
    )
    written["index.html"] = _write(out_dir / "index.html", html.encode())
    return written


def _read_results(source) -> pd.DataFrame:
    if isinstance(source, (pa.Table, pd.DataFrame)):
        return stats.as_frame(source)
    return results.read_parquet(source).to_pandas()


def _write(path: Path, data: bytes) -> Path:
    atomic.write_bytes(path, data)
    return path


def _base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# ---------------------------------------------------------------------------------------
# Number formatting: one place, so table, Markdown and HTML agree


def format_number(value, decimals: int) -> str:
    """1234.5 -> '1,234.5' (decimals=1); missing -> '–'."""
    if _missing(value):
        return NO_VALUE
    return f"{float(value):,.{decimals}f}"


def format_mean_sd(mean, sd, decimals: int) -> str:
    """'110.0 ± 10.0'; just the mean when sd is undefined (one iteration)."""
    if _missing(mean):
        return NO_VALUE
    if _missing(sd):
        return format_number(mean, decimals)
    return f"{format_number(mean, decimals)} ± {format_number(sd, decimals)}"


def format_cov(cov) -> str:
    """0.0909 -> '9.1 % †' (flagged above stats.COV_LIMIT); missing -> '–'."""
    if _missing(cov):
        return NO_VALUE
    text = f"{100 * float(cov):.1f} %"
    return f"{text} {COV_MARK}" if cov > stats.COV_LIMIT else text


def _missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _ns_to_us(value):
    return None if _missing(value) else float(value) / NS_PER_US


def _rw_label(row) -> str:
    """'randrw (70 % read)' for mixed workloads, the rw name otherwise."""
    if row["rw"] in MIXED_RW and not _missing(row["rwmixread"]):
        return f"{row['rw']} ({int(row['rwmixread'])} % read)"
    return str(row["rw"])


def _bs_label(value) -> str:
    return NO_VALUE if _missing(value) else size_label(int(value))


def _int_label(value) -> str:
    return NO_VALUE if _missing(value) else str(int(value))


# ---------------------------------------------------------------------------------------
# Tables


def summary_table(summary: pd.DataFrame) -> dict:
    """The human table: {'header': [...], 'rows': [{'cells': [...], 'flagged': bool}]}."""
    show_experiment = summary["experiment"].nunique() > 1
    show_job = summary["job"].nunique() > 1
    header = [
        *(["Experiment"] if show_experiment else []),
        "Run",
        *(["Job"] if show_job else []),
        "rw",
        "bs",
        "iodepth",
        "numjobs",
        "op",
        "n",
        "BW MiB/s (mean ± sd)",
        "BW CoV",
        "IOPS (mean ± sd)",
        "IOPS CoV",
        "Mean lat µs",
        "p99 µs",
    ]
    rows = [
        {"cells": _summary_cells(row, show_experiment, show_job), "flagged": bool(row["cov_flag"])}
        for _, row in summary.iterrows()
    ]
    return {"header": header, "rows": rows}


def _summary_cells(row, show_experiment: bool, show_job: bool) -> list[str]:
    return [
        *([str(row["experiment"])] if show_experiment else []),
        str(row["run_id"]),
        *([str(row["job"])] if show_job else []),
        _rw_label(row),
        _bs_label(row["bs"]),
        _int_label(row["iodepth"]),
        _int_label(row["numjobs"]),
        str(row["op"]),
        _int_label(row["n"]),
        format_mean_sd(_scaled(row["bw_bytes_s_mean"], MIB), _scaled(row["bw_bytes_s_sd"], MIB), 1),
        format_cov(row["bw_bytes_s_cov"]),
        format_mean_sd(row["iops_mean"], row["iops_sd"], 0),
        format_cov(row["iops_cov"]),
        format_number(_ns_to_us(row["lat_mean_ns"]), 1),
        format_number(_ns_to_us(row["p99_ns"]), 1),
    ]


def _scaled(value, unit: float):
    return None if _missing(value) else float(value) / unit


def summary_csv(summary: pd.DataFrame) -> str:
    """Every summary column at full precision (floats round-trip), one row per cell."""
    return summary.to_csv(index=False, lineterminator="\n")


def markdown_table(table: dict) -> str:
    """A GitHub-flavoured Markdown table with the CoV footnote."""
    lines = [_markdown_row(table["header"]), _markdown_row(["---"] * len(table["header"]))]
    lines += [_markdown_row(row["cells"]) for row in table["rows"]]
    lines += ["", COV_FOOTNOTE]
    return "\n".join(lines) + "\n"


def _markdown_row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"


COV_FOOTNOTE = (
    f"Mean ± sample sd over n iterations; CoV = sd / mean; {COV_MARK} marks CoV > "
    f"{100 * stats.COV_LIMIT:g} %. Latency percentiles from merged histograms; "
    f"{NO_VALUE} = not available."
)


def per_run_table(raw: pd.DataFrame) -> dict:
    """Raw value of every iteration: run_id, iteration, host, op, bandwidth, IOPS, p99."""
    frame = stats.latest_attempts(raw)
    # The aggregate row ('all') goes after the hosts it aggregates.
    frame = frame.assign(_aggregate=frame["host"] == results.ALL_HOSTS)
    frame = frame.sort_values(
        ["run_id", "iteration", "_aggregate", "host", "job", "op"], kind="stable"
    )
    header = ["Run", "Iteration", "Host", "op", "BW MiB/s", "IOPS", "p99 µs"]
    rows = [
        [
            str(row["run_id"]),
            _int_label(row["iteration"]),
            str(row["host"]),
            str(row["op"]),
            format_number(_scaled(row["bw_bytes_s"], MIB), 1),
            format_number(row["iops"], 0),
            format_number(_ns_to_us(row["p99_ns"]), 1),
        ]
        for _, row in frame.iterrows()
    ]
    return {"header": header, "rows": rows}


# ---------------------------------------------------------------------------------------
# Figures


def make_figure(name: str, summary: pd.DataFrame) -> tuple[bytes, bytes, str]:
    """(PNG bytes, SVG bytes, caption) of one of FIGURES."""
    # Styles are read while artists are created and saved, so both happen under RC.
    with matplotlib.rc_context(RC):
        fig, caption = FIGURE_BUILDERS[name](summary)
        try:
            png, svg = render_figure(fig)
        finally:
            plt.close(fig)
    return png, svg, caption


def render_figure(fig) -> tuple[bytes, bytes]:
    """(PNG bytes, SVG bytes) of a figure, without dates or version stamps."""
    png, svg = io.BytesIO(), io.BytesIO()
    fig.savefig(png, format="png", dpi=FIGURE_DPI, metadata=PNG_METADATA)
    fig.savefig(svg, format="svg", metadata=SVG_METADATA)
    return png.getvalue(), svg.getvalue()


def _new_figure(nrows: int = 1, ncols: int = 1, height_in: float = 3.0):
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(FIGURE_WIDTH_IN, height_in),
        dpi=FIGURE_DPI,
        layout="constrained",
        squeeze=False,
    )
    return fig, list(axes.flat)


def _empty_figure(message: str):
    fig, (ax,) = _new_figure(height_in=1.5)
    ax.set_axis_off()
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes)
    return fig


def series_labels(summary: pd.DataFrame) -> pd.Series:
    """Legend label of each cell: rw, plus op for runs with several ops, job when several."""
    ops_per_run = summary.groupby("run_id")["op"].transform("nunique")
    # A run's job is named after the run; only a multi-job file needs the job in the label.
    jobs_per_run = summary.groupby("run_id")["job"].transform("nunique")
    labels = []
    for (_, row), n_ops, n_jobs in zip(summary.iterrows(), ops_per_run, jobs_per_run, strict=True):
        label = _rw_label(row)
        if n_ops > 1:
            label += f" {row['op']}"
        if n_jobs > 1:
            label = f"{row['job']}: {label}"
        labels.append(label)
    return pd.Series(labels, index=summary.index, dtype=object)


def bandwidth_unit(summary: pd.DataFrame) -> tuple[str, float]:
    """GiB/s when the largest mean reaches 1 GiB/s, MiB/s otherwise."""
    largest = summary["bw_bytes_s_mean"].max()
    if not _missing(largest) and largest >= GIB:
        return "GiB/s", GIB
    return "MiB/s", MIB


def _panels(summary: pd.DataFrame, keys: list[str]) -> list[tuple[str, pd.DataFrame]]:
    """Split into small multiples by the keys that take more than one value."""
    varying = [key for key in keys if summary[key].nunique(dropna=False) > 1]
    if not varying:
        return [("", summary)]
    groups = summary.groupby(varying, sort=True, dropna=False)
    return [(_panel_title(varying, values), group) for values, group in groups]


def _panel_title(keys: list[str], values) -> str:
    """'iodepth=4, numjobs=2' for the group keys that vary."""
    values = values if isinstance(values, tuple) else (values,)
    return ", ".join(f"{key}={_int_label(v)}" for key, v in zip(keys, values, strict=True))


def _grid(n_panels: int, panel_height_in: float):
    ncols = min(n_panels, 3)
    nrows = math.ceil(n_panels / ncols)
    fig, axes = _new_figure(nrows, ncols, height_in=panel_height_in * nrows + 0.6)
    for ax in axes[n_panels:]:
        ax.set_axis_off()
    return fig, axes[:n_panels]


def bandwidth_figure(summary: pd.DataFrame):
    """Grouped bars: x = block size, one bar per rw (and op); a panel per iodepth/numjobs."""
    data = summary.dropna(subset=["bw_bytes_s_mean"])
    if data.empty:
        return _empty_figure("no bandwidth data"), "Bandwidth: no data."
    data = data.assign(series=series_labels(data))
    unit, scale = bandwidth_unit(data)
    all_series = list(dict.fromkeys(data["series"]))
    panels = _panels(data, ["iodepth", "numjobs"])
    fig, axes = _grid(len(panels), 2.4)
    for ax, (panel_title, panel) in zip(axes, panels, strict=True):
        _grouped_bars(ax, panel, all_series, scale)
        ax.set_title(panel_title)
        ax.set_xlabel("block size")
        ax.set_ylabel(f"bandwidth ({unit})")
    _figure_legend(fig, axes)
    caption = (
        f"Bandwidth by block size and access pattern ({unit}). Bars: mean over iterations; "
        "error bars: sample sd across iterations (none for a single iteration)."
    )
    return fig, caption


def _grouped_bars(ax, panel: pd.DataFrame, all_series: list[str], scale: float) -> None:
    sizes = sorted(panel["bs"].dropna().unique())
    positions = {bs: i for i, bs in enumerate(sizes)}
    width = 0.8 / len(all_series)
    for index, series in enumerate(all_series):
        rows = panel[panel["series"] == series].dropna(subset=["bs"])
        if rows.empty:
            continue
        x = [positions[bs] - 0.4 + width * (index + 0.5) for bs in rows["bs"]]
        ax.bar(
            x,
            rows["bw_bytes_s_mean"] / scale,
            width,
            yerr=rows["bw_bytes_s_sd"].fillna(0) / scale,
            capsize=2,
            label=series,
            color=COLORS[index % len(COLORS)],
            hatch=HATCHES[index % len(HATCHES)],
            edgecolor="black",
            linewidth=0.5,
            error_kw={"elinewidth": 0.8},
        )
    ax.set_xticks(range(len(sizes)), [size_label(int(bs)) for bs in sizes])
    ax.set_xlim(-0.6, len(sizes) - 0.4)
    ax.set_ylim(bottom=0)


def _figure_legend(fig, axes) -> None:
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
            ncols=min(len(handles), 4),
            frameon=False,
        )


def iops_figure(summary: pd.DataFrame):
    """IOPS vs iodepth (log2 axis), one line per rw + bs (and op); a panel per numjobs."""
    data = summary.dropna(subset=["iops_mean", "iodepth"])
    if data.empty:
        return _empty_figure("no IOPS data"), "IOPS vs iodepth: no data."
    labels = series_labels(data) + " " + data["bs"].map(_bs_label)
    data = data.assign(series=labels)
    all_series = list(dict.fromkeys(data["series"]))
    panels = _panels(data, ["numjobs"])
    fig, axes = _grid(len(panels), 2.8)
    log_y = _spans_decades(data["iops_mean"])
    for ax, (panel_title, panel) in zip(axes, panels, strict=True):
        _iops_lines(ax, panel, all_series)
        _log2_depth_axis(ax, sorted(data["iodepth"].unique()))
        if log_y:
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        ax.set_title(panel_title)
        ax.set_xlabel("iodepth")
        ax.set_ylabel("IOPS")
    _figure_legend(fig, axes)
    scale_note = "log" if log_y else "linear"
    caption = (
        f"IOPS vs queue depth (log2 x axis, {scale_note} y axis), one line per access pattern "
        "and block size. Points: mean over iterations; error bars: sample sd."
    )
    return fig, caption


def _iops_lines(ax, panel: pd.DataFrame, all_series: list[str]) -> None:
    for index, series in enumerate(all_series):
        rows = panel[panel["series"] == series].sort_values("iodepth")
        if rows.empty:
            continue
        ax.errorbar(
            rows["iodepth"].astype(float),
            rows["iops_mean"],
            yerr=rows["iops_sd"].fillna(0),
            label=series,
            color=COLORS[index % len(COLORS)],
            marker=MARKERS[index % len(MARKERS)],
            markersize=4,
            linewidth=1,
            capsize=2,
        )


def _log2_depth_axis(ax, depths: list) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks([float(d) for d in depths], [str(int(d)) for d in depths])
    ax.minorticks_off()
    # A single depth would give a zero-width axis; pad by half an octave either side.
    ax.set_xlim(float(min(depths)) / 2**0.5, float(max(depths)) * 2**0.5)


def _spans_decades(values: pd.Series) -> bool:
    """True when positive values span more than 30x: a linear axis would flatten the small."""
    positive = values[values > 0]
    return not positive.empty and positive.max() / positive.min() > 30


def latency_figure(summary: pd.DataFrame):
    """p50, p99 and p99.9 latency (µs, log y) of every cell, from merged histograms."""
    if summary.empty:
        return _empty_figure("no latency data"), "Latency percentiles: no data."
    labels = list(_latency_labels(summary))
    width = min(max(FIGURE_WIDTH_IN, 0.3 * len(labels) + 2.0), 16.0)
    fig, (ax,) = _new_figure(height_in=3.6)
    fig.set_figwidth(width)
    values = {column: summary[column].map(_ns_to_us) for column, _, _ in LATENCY_PERCENTILES}
    present = [
        not any(_missing(values[c].iloc[i]) for c, _, _ in LATENCY_PERCENTILES)
        for i in range(len(summary))
    ]
    _latency_ranges(ax, values, present)
    _latency_markers(ax, values, present)
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right")
    ax.set_xlim(-0.6, len(labels) - 0.4)
    _latency_missing(ax, present)
    ax.set_ylabel("latency (µs)")
    _figure_legend(fig, [ax])
    basis = _basis_text(summary)
    caption = (
        f"Latency percentiles p50, p99 and p99.9 per run ({basis}; µs, log scale), computed "
        "from the latency histograms of all iterations merged into one; n/a marks "
        "runs where some iteration had no histogram."
    )
    return fig, caption


def _latency_labels(summary: pd.DataFrame) -> Iterable[str]:
    ops_per_run = summary.groupby("run_id")["op"].transform("nunique")
    jobs_per_run = summary.groupby("run_id")["job"].transform("nunique")
    for (_, row), n_ops, n_jobs in zip(summary.iterrows(), ops_per_run, jobs_per_run, strict=True):
        label = str(row["run_id"])
        if n_jobs > 1:
            label += f" {row['job']}"
        yield f"{label} {row['op']}" if n_ops > 1 else label


def _latency_ranges(ax, values: dict, present: list[bool]) -> None:
    low, high = values["p50_ns"], values["p99_9_ns"]
    for x, ok in enumerate(present):
        if ok:
            ax.plot([x, x], [low.iloc[x], high.iloc[x]], color="grey", linewidth=0.8, zorder=1)


def _latency_markers(ax, values: dict, present: list[bool]) -> None:
    xs = [x for x, ok in enumerate(present) if ok]
    for index, (column, name, marker) in enumerate(LATENCY_PERCENTILES):
        ys = [values[column].iloc[x] for x in xs]
        ax.scatter(xs, ys, marker=marker, s=18, label=name, color=COLORS[index], zorder=2)
    if xs:
        ax.set_yscale("log")


def _latency_missing(ax, present: list[bool]) -> None:
    if not any(present):
        ax.set_yticks([])
    for x, ok in enumerate(present):
        if not ok:
            ax.text(x, 0.02, "n/a", ha="center", va="bottom", transform=ax.get_xaxis_transform())


def _basis_text(summary: pd.DataFrame) -> str:
    bases = sorted({str(b) for b in summary["lat_basis"].dropna()})
    return "latency basis: " + ", ".join(bases) if bases else "latency basis unknown"


FIGURE_BUILDERS = {
    "bandwidth": bandwidth_figure,
    "iops_vs_iodepth": iops_figure,
    "latency_percentiles": latency_figure,
}


# ---------------------------------------------------------------------------------------
# HTML


BASIS_MEANING = {
    "clat": "completion latency (clat): from submission of an I/O until its completion",
    "lat": "total latency (lat = slat + clat): from creation of an I/O until its completion",
}


def methodology(meta: dict, summary: pd.DataFrame, raw: pd.DataFrame) -> list[tuple[str, str]]:
    """(label, text) pairs describing how the numbers were made; absent keys are skipped."""
    job = meta.get("job") or {}
    version = meta.get("tool_version") or _recorded_versions(raw)
    items = [
        ("Experiment", meta.get("experiment")),
        ("Tool", _join_nonempty(meta.get("tool"), version)),
        ("Hosts", _list_text(meta.get("hosts"))),
        ("Target", _mapping_text(meta.get("target"))),
        ("Iterations", meta.get("iterations")),
        ("Runtime / ramp", _runtime_text(job)),
        ("Job parameters", _mapping_text(job)),
        ("Sweep", _mapping_text(meta.get("sweep"))),
        ("Runs", _runs_text(meta.get("run_ids"))),
        ("Statistics", STATISTICS_TEXT),
        ("Latency percentiles", PERCENTILE_TEXT),
        ("Latency basis", _basis_meaning(summary)),
        ("storbench", meta.get("storbench_version")),
        ("Generated by", meta.get("generated_by")),
    ]
    return [(label, str(text)) for label, text in items if text not in (None, "", [], {})]


STATISTICS_TEXT = (
    "Each cell is one run (sweep point) and op, summarised over its iterations from the "
    "aggregate over all hosts: mean ± sample standard deviation (n − 1), coefficient of "
    f"variation CoV = sd / mean, {COV_MARK} marks CoV > {100 * stats.COV_LIMIT:g} %. "
    "Mean latency is weighted by the I/O count of each iteration. Bandwidth in MiB/s "
    "(1 MiB = 2^20 bytes)."
)
PERCENTILE_TEXT = (
    "Percentiles are never averaged: the latency histograms of all hosts of an iteration, "
    "and then of all iterations, are merged by summing the count of every bin; a percentile "
    "is the first bin whose cumulative count reaches it (fio's rule). Where any iteration "
    f"lacks a histogram the percentile is shown as {NO_VALUE}."
)


def _recorded_versions(raw: pd.DataFrame) -> str | None:
    """Tool versions as recorded in the result rows, when meta does not say."""
    if "tool_version" not in raw:
        return None
    return ", ".join(sorted({str(v) for v in raw["tool_version"].dropna()})) or None


def _join_nonempty(*parts) -> str:
    return " ".join(str(p) for p in parts if p not in (None, ""))


def _list_text(values) -> str | None:
    if not values:
        return None
    return f"{len(values)}: " + ", ".join(str(v) for v in values)


def _mapping_text(mapping) -> str | None:
    if not mapping:
        return None
    return "; ".join(f"{key} = {_value_text(value)}" for key, value in mapping.items())


def _value_text(value) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    if isinstance(value, dict):
        return "{" + _mapping_text(value) + "}" if value else "{}"
    return str(value)


def _runtime_text(job: dict) -> str | None:
    runtime, ramp = job.get("runtime"), job.get("ramp_time")
    if runtime is None and ramp is None:
        return None
    return f"runtime {runtime if runtime is not None else NO_VALUE}, ramp {ramp or 0}"


def _runs_text(run_ids) -> str | None:
    return _list_text(run_ids)


def _basis_meaning(summary: pd.DataFrame) -> str | None:
    bases = sorted({str(b) for b in summary["lat_basis"].dropna()})
    return "; ".join(BASIS_MEANING.get(b, b) for b in bases) or None


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
        autoescape=True,  # job files and configs are user text: never raw HTML
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_html(
    *,
    title: str,
    meta: dict,
    summary: pd.DataFrame,
    table: dict,
    figures: list[dict],
    raw: pd.DataFrame,
) -> str:
    job_files = meta.get("job_files") or {}
    context = {
        "title": title,
        "table": table,
        "footnote": COV_FOOTNOTE,
        "errors": int(summary["errors"].fillna(0).sum()) if "errors" in summary else 0,
        "figures": figures,
        "methodology": methodology(meta, summary, raw),
        "per_run": per_run_table(raw),
        "job_files": [(str(run_id), str(job_files[run_id])) for run_id in sorted(job_files)],
        "config_yaml": meta.get("config_yaml") or "",
    }
    return _environment().get_template(TEMPLATE_NAME).render(context)
