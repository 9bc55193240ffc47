"""Paper-style report of a campaign: summary table, figures and an offline HTML document.

``build_report`` reads an experiment's result rows, summarises them with
``stats.summarize``, and writes index.html, summary.csv, summary.md and three figures
as PNG and SVG. Multi-host campaigns add a scale-out section (``storbench.analysis.scaling``):
scaling per client step with the data path's theoretical maximum, slow hosts, start skew,
target sets, and a hosts appendix from telemetry. ``build_network_report`` writes the
network check's report. Output is byte-for-byte reproducible: fixed figure sizes and dpi,
no dates in image metadata, a fixed SVG hash salt, and no timestamps in the HTML unless
``meta`` carries them.

Units: bandwidth in the unit system ``meta['units']`` names (report.units: decimal by default,
or binary; storbench.core.report_units): MB/s (MiB/s) in table columns, GB/s or MB/s (GiB/s or
MiB/s) by magnitude in figures and the scale-out tables; link rates in the network report in
Gbit/s. Latency in µs; IOPS as is. Spread is the sample sd across iterations (ddof=1).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display; the same renderer everywhere keeps bytes identical

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402

from storbench.analysis import scaling, stats
from storbench.config import datapath
from storbench.core import histogram, report_units, results
from storbench.core.numbers import NO_VALUE, NS_PER_US, format_number, is_missing, scaled  # noqa: E402
from storbench.core.specs import Manifest  # noqa: E402
from storbench.core.units import size_label  # noqa: E402
from storbench.report import paper_tables as report_tables
from storbench.report import selection, tables
from storbench.report.drawing import FigureJob, FiguresBeingDrawn
from storbench.report.job_files import HOST_PLACEHOLDER
from storbench.report.job_files import sections as job_file_sections
from storbench.report.toolkit import (
    COLORS,
    COV_MARK,
    FIGURE_WIDTH_IN,
    FLAG_MARK,
    MARKERS,
    OUTLIER_MARK,
    PER_HOST_TABLE,
    PERCENTILE_TEXT,
    _text,
    as_base64,
    basis_text,
    bs_label,
    category_axis,
    count_label,
    empty_figure,
    figure_files,
    figure_legend,
    format_percent,
    frame_csv,
    grid,
    hosts_appendix,
    int_label,
    join_nonempty,
    list_text,
    log_scale,
    mapping_text,
    new_figure,
    no_depth_or_rate,
    panel_width_in,
    paper_table_context,
    read_results,
    readable_counts,
    recorded_versions,
    render_figure,
    runtime_text,
    rw_label,
    series_bars,
    spaced_labels,
    statistics_text,
    style,  # noqa: E402
    template_environment,
    write_file,
)

TEMPLATE_NAME = "index.html.j2"


LATENCY_PERCENTILES = (("p50_ns", "p50", "o"), ("p99_ns", "p99", "s"), ("p99_9_ns", "p99.9", "^"))

LATENCY_CDF_FIGURE = "latency_cdf"
FIGURES = ("bandwidth", "iops_vs_iodepth", "latency_percentiles", LATENCY_CDF_FIGURE)
SCALING_FIGURE = "scaling"
# Beyond these a figure draws a selection of the runs (storbench.report.selection)
MAX_CDF_LINES = 16
MAX_PERCENTILE_RUNS = 48
DEFAULT_SLOW_HOST_PERCENT = 10.0
DEFAULT_MAX_START_SKEW_S = 1.0


# ---------------------------------------------------------------------------------------
# Entry point


def build_report(
    results_source,
    out_dir,
    *,
    title: str,
    meta: dict,
    telemetry: dict | None = None,
    timeseries_source=None,
    manifests: list[Manifest] | None = None,
    figure_cache=None,
    workers: int | None = None,
) -> dict[str, Path]:
    """Write the report into ``out_dir`` and return {file name: path}.

    ``results_source``: result rows in the result schema (a Parquet path, a list of paths, or
    a table). ``meta``: provenance for methodology and appendix (experiment, tool,
    tool_version, hosts, target, iterations, job, sweep, run_ids, job_files, config_yaml,
    storbench_version, generated_by) and the scale-out settings (steps: {mode, size, hosts:
    {step label: [{name, group}]}}, data_path, slow_host_percent, max_start_skew_s); every
    key is optional. ``telemetry``: facts by host (storbench.run.telemetry) for the hosts appendix.
    ``timeseries_source``: per-interval rows (a Parquet path or a table) for the time-series
    figure. ``manifests``: the iterations' run manifests; those recording fault commands
    give the fault-injection section (storbench.report.faults). ``meta['soak']`` adds the
    soak section (storbench.report.soak). ``figure_cache``: a folder keeping the figures
    drawn, so a rebuild draws only those whose data changed (storbench.report.drawing; None:
    draw all); ``workers``: processes drawing the figures (default: the cores available).

    Beyond index.html, summary.csv, summary.md and FIGURES: scaling.png/.svg/.csv when
    ``meta['steps']`` is set or rows carry a step; slow_hosts.csv for constant stepping;
    start_skew.csv when a run had several hosts and a known start skew; targets.csv when
    rows name more than one target; per_run.csv (every host's value of every iteration) when
    an iteration ran on more than MAX_LISTED_HOSTS hosts, which the page lists in part.
    """
    out_dir = Path(out_dir)
    units = report_units.units_of(meta)
    raw = read_results(results_source)
    summary = stats.summarize(raw)
    written: dict[str, Path] = {}

    from storbench.report import environment  # report_figures builds on this module

    # lazy: loads jinja2, matplotlib, numpy, pandas, pyarrow
    from storbench.report import figures as report_figures

    series = _read_timeseries(timeseries_source)
    figures = []

    def add_figure(name: str, png: bytes, svg: bytes, caption: str, shown: bool = True) -> None:
        written[f"{name}.png"] = write_file(out_dir / f"{name}.png", png)
        written[f"{name}.svg"] = write_file(out_dir / f"{name}.svg", svg)
        if shown:
            figures.append({"name": name, "caption": caption, "png_base64": as_base64(png)})

    # merged once, for the runs the CDF draws: the CDF and the histogram share them
    cdf_runs = selection.select_runs(summary, MAX_CDF_LINES)
    cells = cell_histograms(raw, cdf_runs.rows)
    jobs = [figure_job(name, summary, cells, units, cdf_runs.note) for name in FIGURES]
    jobs += [
        report_figures.figure_job(n, summary, raw, series, units) for n in report_figures.FIGURES
    ]
    from storbench.report import extra_figures  # drawn only when the runs call for them

    labels = _cdf_labels([row for row, _, _ in cells]) if cells else []
    jobs += extra_figures.optional_figures(summary, cells, labels)
    # the time-series file exists for the rule; the page shows no empty figure
    hidden = set() if report_figures.has_series(series) else {report_figures.TIMESERIES_FIGURE}
    with FiguresBeingDrawn(jobs, figure_cache, workers) as being_drawn:
        # the tables are made while the workers draw
        sections = _sections_beside_figures(raw, summary, series, meta, manifests, units, out_dir)
        for name, (png, svg, caption) in being_drawn.result().items():
            add_figure(name, png, svg, caption, shown=name not in hidden)
    written.update(sections.written)
    scale = sections.scale
    if scale["figure"] is not None:
        png, svg, caption = scale["figure"]  # shown in the scale-out section
        add_figure(SCALING_FIGURE, png, svg, caption, shown=False)
    host_figures = [f for f in figures if f["name"] == report_figures.PER_HOST_FIGURE]
    figures = [f for f in figures if f not in host_figures]
    html = render_html(
        title=title,
        meta=meta,
        summary=summary,
        table=sections.table,
        figures=figures,
        raw=raw,
        scale_out=scale["sections"],
        hosts=hosts_appendix(telemetry),
        paper_tables=sections.paper_tables,
        host_figures=host_figures,
        environment=environment.controller_environment(),
        extra_sections=sections.extra,
        per_run=sections.per_run,
    )
    written["index.html"] = write_file(out_dir / "index.html", html.encode())
    return written


@dataclass
class _Sections:
    """What a report's page shows beside its figures, made while they are drawn."""

    written: dict[str, Path]
    extra: list
    scale: dict
    paper_tables: dict  # what report_tables.report_tables returns
    table: dict  # summary_table's
    per_run: dict


def _sections_beside_figures(raw, summary, series, meta, manifests, units, out_dir) -> _Sections:
    written: dict[str, Path] = {}
    extra_sections = []
    from storbench.report import faults as fault_report  # only reports of such experiments use them

    # lazy: loads jinja2, matplotlib, numpy, pandas, pyarrow
    from storbench.report import soak as soak_report

    for section, files in (
        fault_report.build_section(series, manifests or [], meta, out_dir),
        soak_report.build_section(raw, series, meta, out_dir),
    ):
        if section is not None:
            extra_sections.append(section)
            written.update(files)

    scale = scale_out(raw, meta)
    for name, frame in scale["csv"].items():
        written[name] = write_file(out_dir / name, frame_csv(frame).encode())
    if "scaling.csv" in scale["csv"]:
        scaling = scaling_paper_table(
            scale["csv"]["scaling.csv"], bool(meta.get("data_path")), units
        )
        table_dir = out_dir / report_tables.TABLE_DIR
        for path in tables.write_all(scaling, table_dir, "scaling").values():
            written[f"{report_tables.TABLE_DIR}/{path.name}"] = path

    paper_tables = report_tables.report_tables(raw, summary, units)
    written.update(report_tables.write_tables(paper_tables, out_dir))

    table = summary_table(summary, units)
    written["summary.csv"] = write_file(out_dir / "summary.csv", summary_csv(summary).encode())
    written["summary.md"] = write_file(out_dir / "summary.md", markdown_table(table).encode())
    values = per_run_values(raw)
    per_run = per_run_table(values, units)
    if per_run["condensed"]:
        written[PER_RUN_CSV] = write_file(out_dir / PER_RUN_CSV, per_run_csv(values).encode())
    return _Sections(written, extra_sections, scale, paper_tables, table, per_run)


def _read_timeseries(source) -> pd.DataFrame | None:
    if source is None:
        return None
    if isinstance(source, (pa.Table, pd.DataFrame)):
        return stats.as_frame(source)
    return results.read_parquet(source, results.TIMESERIES_SCHEMA).to_pandas()


# ---------------------------------------------------------------------------------------
# Number formatting: one place, so table, Markdown and HTML agree


def format_mean_sd(mean, sd, decimals: int) -> str:
    """'110.0 ± 10.0'; just the mean when sd is undefined (one iteration)."""
    if is_missing(mean):
        return NO_VALUE
    if is_missing(sd):
        return format_number(mean, decimals)
    return f"{format_number(mean, decimals)} ± {format_number(sd, decimals)}"


def format_cov(cov) -> str:
    """0.0909 -> '9.1 % †' (flagged above stats.COV_LIMIT); missing -> '–'."""
    if is_missing(cov):
        return NO_VALUE
    text = f"{100 * float(cov):.1f} %"
    return f"{text} {COV_MARK}" if cov > stats.COV_LIMIT else text


def format_interval(low, high, decimals: int) -> str:
    """'3,120.5 – 3,279.5'; '–' when the interval is undefined (fewer than two iterations).
    Its quantities (bandwidth, IOPS) are never negative: a lower bound under 0 shows as 0."""
    if is_missing(low) or is_missing(high):
        return NO_VALUE
    return f"{format_number(max(low, 0.0), decimals)} – {format_number(high, decimals)}"


def _outlier_marked(text: str, outliers) -> str:
    """The text with OUTLIER_MARK appended when the cell has at least one outlier iteration."""
    return f"{text} {OUTLIER_MARK}" if not is_missing(outliers) and outliers > 0 else text


def _ns_to_us(value):
    return None if is_missing(value) else float(value) / NS_PER_US


# ---------------------------------------------------------------------------------------
# Tables


def summary_table(summary: pd.DataFrame, units: str = report_units.DEFAULT_UNITS) -> dict:
    """The human table: {'header': [...], 'rows': [{'cells': [...], 'flagged': bool}]}."""
    unit, divisor = report_units.table_bandwidth_unit(units)
    show_experiment = summary["experiment"].nunique() > 1
    show_job = _jobs_matter(summary, "run_id")
    show = {
        "target": _varies(summary, "target"),
        "hosts": _varies(summary, "hosts_in_run"),
        "state": "prep_state" in summary and summary["prep_state"].notna().any(),
    }
    header = [
        *(["Experiment"] if show_experiment else []),
        "Run",
        *(["Target"] if show["target"] else []),
        *(["Hosts"] if show["hosts"] else []),
        *(["State"] if show["state"] else []),
        *(["Job"] if show_job else []),
        "rw",
        "bs",
        "iodepth",
        "numjobs",
        "op",
        "n",
        f"BW {unit} (mean ± sd)",
        f"BW {unit} 95 % CI",
        "BW CoV",
        "IOPS (mean ± sd)",
        "IOPS 95 % CI",
        "IOPS CoV",
        "Mean lat µs",
        "p99 µs",
    ]
    rows = [
        {
            "cells": _summary_cells(row, show_experiment, show_job, show, divisor),
            "flagged": bool(row["cov_flag"]),
        }
        for _, row in summary.iterrows()
    ]
    return {"header": header, "rows": rows}


def _jobs_matter(frame: pd.DataFrame, run_column: str) -> bool:
    """Several job names, not all just the run's own name (fio names a run's job after it)."""
    named_after_run = (frame["job"].astype(str) == frame[run_column].astype(str)).all()
    return frame["job"].nunique() > 1 and not named_after_run


def _varies(frame: pd.DataFrame, column: str) -> bool:
    """True when a column takes more than one value (a missing value counts as one)."""
    return column in frame and frame[column].nunique(dropna=False) > 1


def _summary_cells(
    row, show_experiment: bool, show_job: bool, show: dict, bw_divisor: float
) -> list[str]:
    return [
        *([str(row["experiment"])] if show_experiment else []),
        str(row["run_id"]),
        *([_text(row.get("target"))] if show["target"] else []),
        *([int_label(row.get("hosts_in_run"))] if show["hosts"] else []),
        *([_text(row.get("prep_state"))] if show["state"] else []),
        *([str(row["job"])] if show_job else []),
        *_workload_cells(row),
        report_tables.small_n_text(row["n"]) or NO_VALUE,
        _outlier_marked(
            format_mean_sd(
                scaled(row["bw_bytes_s_mean"], bw_divisor),
                scaled(row["bw_bytes_s_sd"], bw_divisor),
                1,
            ),
            row["bw_bytes_s_outliers"],
        ),
        format_interval(
            scaled(row["bw_bytes_s_ci_low"], bw_divisor),
            scaled(row["bw_bytes_s_ci_high"], bw_divisor),
            1,
        ),
        format_cov(row["bw_bytes_s_cov"]),
        _outlier_marked(format_mean_sd(row["iops_mean"], row["iops_sd"], 0), row["iops_outliers"]),
        format_interval(row["iops_ci_low"], row["iops_ci_high"], 0),
        format_cov(row["iops_cov"]),
        format_number(_ns_to_us(row["lat_mean_ns"]), 1),
        format_number(_ns_to_us(row["p99_ns"]), 1),
    ]


def _workload_cells(row) -> list[str]:
    """rw, bs, iodepth, numjobs and op: the columns every results table starts with."""
    return [
        rw_label(row),
        bs_label(row["bs"]),
        int_label(row["iodepth"]),
        int_label(row["numjobs"]),
        str(row["op"]),
    ]


def summary_csv(summary: pd.DataFrame) -> str:
    """Every summary column at full precision (floats round-trip), one row per cell."""
    return frame_csv(summary)


def markdown_table(table: dict) -> str:
    """A GitHub-flavoured Markdown table with the CoV footnote."""
    rows = [row["cells"] for row in table["rows"]]
    return tables.pipe_table(table["header"], rows) + "\n\n" + COV_FOOTNOTE + "\n"


COV_FOOTNOTE = (
    f"Mean ± sample sd over n iterations; 95 % CI: {report_tables.INTERVAL_NAME}, "
    f"{report_tables.INTERVAL_METHOD}. {report_tables.INTERVAL_FALLBACK} "
    f"{report_tables.SMALL_N_NOTE} CoV = sd / mean; "
    f"{COV_MARK} marks CoV > {100 * stats.COV_LIMIT:g} %; {OUTLIER_MARK} marks a mean whose "
    f"iterations include an outlier (more than {stats.OUTLIER_MADS:g} MAD from the median; "
    "kept, not dropped). "
    f"Latency percentiles from merged histograms; {NO_VALUE} = not available."
)


# Above this many hosts in one iteration, the per-run table lists its slowest and fastest
# host (by bandwidth) beside the aggregate; every host's values go to PER_RUN_CSV.
MAX_LISTED_HOSTS = report_tables.MAX_LISTED_HOSTS
PER_RUN_CSV = "per_run.csv"
FASTEST = report_tables.FASTEST


def per_run_table(
    frame: pd.DataFrame,
    units: str = report_units.DEFAULT_UNITS,
    max_hosts: int = MAX_LISTED_HOSTS,
) -> dict:
    """Raw value of every iteration of ``per_run_values``: run_id, iteration, host, op,
    bandwidth, IOPS, p99; an iteration on more than ``max_hosts`` hosts lists its slowest and
    fastest host only ('condensed': True)."""
    unit, divisor = report_units.table_bandwidth_unit(units)
    listed = _listed_hosts(frame, max_hosts)
    show_target = _varies(frame, "target")
    # A rerun's raw output sits beside the old one: say which attempt the numbers come from.
    show_attempt = "attempt" in frame and bool((frame["attempt"].fillna(1) > 1).any())
    header = [
        "Run",
        *(["Target"] if show_target else []),
        "Iteration",
        *(["Attempt"] if show_attempt else []),
        "Host",
        "op",
        f"BW {unit}",
        "IOPS",
        "p99 µs",
    ]
    rows = [
        [
            str(row["run_id"]),
            *([_text(row.get("target"))] if show_target else []),
            int_label(row["iteration"]),
            *([f"a{int_label(row['attempt'])}"] if show_attempt else []),
            str(row["_host_label"]),
            str(row["op"]),
            _outlier_marked(
                format_number(scaled(row["bw_bytes_s"], divisor), 1), row["bw_outlier"]
            ),
            _outlier_marked(format_number(row["iops"], 0), row["iops_outlier"]),
            format_number(_ns_to_us(row["p99_ns"]), 1),
        ]
        for _, row in listed.iterrows()
    ]
    return {"header": header, "rows": rows, "condensed": len(listed) < len(frame)}


def per_run_values(raw: pd.DataFrame) -> pd.DataFrame:
    """Every iteration's rows (its latest attempt), the aggregate ('all') after the hosts it
    aggregates, with bw_outlier / iops_outlier."""
    frame = _with_outlier_flags(stats.latest_attempts(raw), raw)
    frame = frame.assign(_aggregate=frame["host"] == results.ALL_HOSTS)
    frame = frame.sort_values(
        ["run_id", "iteration", "_aggregate", "host", "job", "op"], kind="stable"
    )
    return frame.drop(columns="_aggregate").reset_index(drop=True)


def _listed_hosts(frame: pd.DataFrame, max_hosts: int) -> pd.DataFrame:
    """The rows the per-run table shows, with _host_label: all of an iteration on at most
    max_hosts hosts; of a larger one, the slowest and the fastest host of each job and op
    (by bandwidth, else IOPS) and the aggregate."""
    hosts = frame[frame["host"] != results.ALL_HOSTS]
    crowded, picked = report_tables.slowest_and_fastest(
        hosts, ["run_id", "iteration", "job", "op"], "bw_bytes_s", "iops", max_hosts
    )
    labels = [
        f"{host} ({picked[index][0]} of {picked[index][1]})" if index in picked else str(host)
        for index, host in zip(frame.index, frame["host"], strict=True)
    ]
    shown = frame.assign(_host_label=labels)
    if not crowded:
        return shown
    shown = shown[~shown.index.isin(crowded - set(picked))]
    # the slowest first, then the fastest, then the aggregate; otherwise the order stays
    rank = [
        2 if host == results.ALL_HOSTS else int(picked.get(index, ("",))[0] == FASTEST)
        for index, host in zip(shown.index, shown["host"], strict=True)
    ]
    shown = shown.assign(_rank=rank, _position=range(len(shown)))
    shown = shown.sort_values(["run_id", "iteration", "_rank", "_position"], kind="stable")
    return shown.drop(columns=["_rank", "_position"])


def per_run_csv(frame: pd.DataFrame) -> str:
    """Every host's value of every iteration of ``per_run_values``, at full precision."""
    columns = ["run_id", "target", "iteration", "attempt", "host", "job", "op",
               "bw_bytes_s", "iops", "p99_ns", "bw_outlier", "iops_outlier"]  # fmt: skip
    return frame_csv(frame[[c for c in columns if c in frame]])


PER_RUN_CONDENSED_NOTE = (
    f"An iteration on more than {MAX_LISTED_HOSTS} hosts lists its slowest and its fastest "
    "host (by bandwidth, for each job and operation) above the aggregate of all of them; "
    "the hosts' spread is in the per-host breakdown, every host's value at full precision in"
)
PER_RUN_NOTE = (
    f"{OUTLIER_MARK} marks an iteration whose aggregate bandwidth or IOPS is more than "
    f"{stats.OUTLIER_MADS:g} MAD from the median of its run's iterations; it is kept in every "
    "statistic."
)


def _with_outlier_flags(frame: pd.DataFrame, raw: pd.DataFrame) -> pd.DataFrame:
    """bw_outlier / iops_outlier per row: stats.iteration_outliers for host 'all', else False."""
    flags = stats.iteration_outliers(raw).assign(host=results.ALL_HOSTS)
    if flags.empty:
        return frame.assign(bw_outlier=False, iops_outlier=False)
    keys = [*stats.CELL_KEYS, "iteration", "host"]
    flags = flags.astype({"iteration": frame["iteration"].dtype})
    merged = frame.merge(flags, on=keys, how="left", validate="many_to_one")
    return merged.assign(
        bw_outlier=merged["bw_outlier"].fillna(False).astype(bool),
        iops_outlier=merged["iops_outlier"].fillna(False).astype(bool),
    )


# ---------------------------------------------------------------------------------------
# Figures


def make_figure(
    name: str,
    summary: pd.DataFrame,
    raw: pd.DataFrame | None = None,
    cells: list | None = None,
    units: str = report_units.DEFAULT_UNITS,
    cells_note: str = "",
) -> tuple[bytes, bytes, str]:
    """(PNG bytes, SVG bytes, caption) of one of FIGURES; the latency CDF needs ``raw`` (or
    its ``cells``, the merged histograms of ``cell_histograms``, and the note of their
    selection)."""
    if name == LATENCY_CDF_FIGURE and cells is None:
        chosen = selection.select_runs(summary, MAX_CDF_LINES)
        cells, cells_note = cell_histograms(raw, chosen.rows), chosen.note
    job = figure_job(name, summary, cells or [], units, cells_note)
    return figure_files(lambda: job.build(*job.args))


def figure_job(
    name: str,
    summary: pd.DataFrame,
    cells: list,
    units: str = report_units.DEFAULT_UNITS,
    cells_note: str = "",
) -> FigureJob:
    """The drawing of one of FIGURES with the data it draws (drawing.draw_figures); the
    latency CDF draws ``cells``, the merged histograms of ``cell_histograms``."""
    if name == LATENCY_CDF_FIGURE:
        # what the CDF reads: the cell keys, latency basis and bins, not the rest of the rows
        keys = list(stats.CELL_KEYS)
        bins = [(row[keys], values, counts) for row, values, counts in cells]
        bases = summary[["lat_basis"]]
        return FigureJob(name, latency_cdf_figure, (bases, None, bins, cells_note))
    if name == BANDWIDTH_FIGURE:
        return FigureJob(name, bandwidth_figure, (summary, units))
    return FigureJob(name, FIGURE_BUILDERS[name], (summary,))


def series_labels(summary: pd.DataFrame) -> pd.Series:
    """Legend label of each cell: rw, plus op for runs with several ops, job when several."""
    ops_per_run = summary.groupby("run_id")["op"].transform("nunique")
    # A run's job is named after the run; only a multi-job file needs the job in the label.
    jobs_per_run = summary.groupby("run_id")["job"].transform("nunique")
    labels = []
    for (_, row), n_ops, n_jobs in zip(summary.iterrows(), ops_per_run, jobs_per_run, strict=True):
        label = rw_label(row)
        if n_ops > 1 and row["op"] != row["rw"]:  # not 'read read'
            label += f" {row['op']}"
        if n_jobs > 1:
            label = f"{row['job']}: {label}"
        labels.append(label)
    return pd.Series(labels, index=summary.index, dtype=object)


def bandwidth_unit(
    summary: pd.DataFrame, units: str = report_units.DEFAULT_UNITS
) -> tuple[str, float]:
    """GB/s when the largest mean reaches 1 GB/s, MB/s otherwise (GiB/s, MiB/s for binary)."""
    return report_units.bandwidth_unit(summary["bw_bytes_s_mean"].max(), units)


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
    return ", ".join(f"{key}={int_label(v)}" for key, v in zip(keys, values, strict=True))


def bandwidth_figure(summary: pd.DataFrame, units: str = report_units.DEFAULT_UNITS):
    """Grouped bars: x = block size, one bar per rw (and op); a panel per iodepth/numjobs."""
    data = summary.dropna(subset=["bw_bytes_s_mean"])
    if data.empty:
        return empty_figure("no bandwidth data"), "Bandwidth: no data."
    data = data.assign(series=series_labels(data))
    unit, scale = bandwidth_unit(data, units)
    all_series = list(dict.fromkeys(data["series"]))
    shown = selection.select(data, ["iodepth", "numjobs"], selection.MAX_PANELS, "panels")
    panels = _panels(shown.rows, ["iodepth", "numjobs"])
    fig, axes = grid(len(panels), 2.4)
    for ax, (panel_title, panel) in zip(axes, panels, strict=True):
        _grouped_bars(ax, panel, all_series, scale)
        ax.set_title(panel_title)
        ax.set_xlabel("block size")
        ax.set_ylabel(f"bandwidth ({unit})")
    figure_legend(fig, axes)
    caption = (
        f"Bandwidth by block size and access pattern ({unit}). Bars: mean over iterations; "
        "error bars: sample sd across iterations (none for a single iteration); "
        f"{report_units.units_note(units)}."
    )
    return fig, join_nonempty(caption, shown.note)


def _grouped_bars(ax, panel: pd.DataFrame, all_series: list[str], scale: float) -> None:
    sizes = sorted(panel["bs"].dropna().unique())
    positions = {bs: i for i, bs in enumerate(sizes)}
    for index, series in enumerate(all_series):
        rows = panel[panel["series"] == series].dropna(subset=["bs"])
        if rows.empty:
            continue
        series_bars(
            ax, index, len(all_series), [positions[bs] for bs in rows["bs"]],
            rows["bw_bytes_s_mean"] / scale, rows["bw_bytes_s_sd"].fillna(0) / scale, series,
        )  # fmt: skip
    category_axis(ax, [size_label(int(bs)) for bs in sizes])


def iops_figure(summary: pd.DataFrame):
    """IOPS vs iodepth (log2 axis), one line per rw + bs (and op); a panel per numjobs."""
    data = summary.dropna(subset=["iops_mean", "iodepth"])
    if data.empty:
        return no_depth_or_rate(summary, "IOPS vs iodepth")
    labels = series_labels(data) + " " + data["bs"].map(bs_label)
    data = data.assign(series=labels)
    all_series = list(dict.fromkeys(data["series"]))
    shown = selection.select(data, ["numjobs"], selection.MAX_PANELS, "panels")
    panels = _panels(shown.rows, ["numjobs"])
    fig, axes = grid(len(panels), 2.8)
    log_y = _spans_decades(data["iops_mean"])
    axis_width = panel_width_in(min(len(panels), 3))
    for ax, (panel_title, panel) in zip(axes, panels, strict=True):
        _iops_lines(ax, panel, all_series)
        _log2_depth_axis(ax, sorted(data["iodepth"].unique()), axis_width)
        if log_y:
            log_scale(ax.yaxis, count_label)
        else:
            ax.set_ylim(bottom=0)
            readable_counts(ax.yaxis)
        ax.set_title(panel_title)
        ax.set_xlabel("iodepth")
        ax.set_ylabel("IOPS")
    figure_legend(fig, axes)
    scale_note = "log" if log_y else "linear"
    caption = (
        f"IOPS vs queue depth (log2 x axis, {scale_note} y axis), one line per access pattern "
        "and block size. Points: mean over iterations; error bars: sample sd."
    )
    return fig, join_nonempty(caption, shown.note)


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


def _log2_depth_axis(ax, depths: list, axis_width_in: float) -> None:
    ax.set_xscale("log", base=2)
    labels = spaced_labels([str(int(d)) for d in depths], axis_width_in)
    ax.set_xticks([float(d) for d in depths], labels)
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
        return empty_figure("no latency data"), "Latency percentiles: no data."
    shown = selection.select_runs(summary, MAX_PERCENTILE_RUNS)
    summary = shown.rows
    labels = list(_latency_labels(summary))
    width = min(max(FIGURE_WIDTH_IN, 0.3 * len(labels) + 2.0), 16.0)
    fig, (ax,) = new_figure(height_in=3.6)
    fig.set_figwidth(width)
    values = {column: summary[column].map(_ns_to_us) for column, _, _ in LATENCY_PERCENTILES}
    present = [
        not any(is_missing(values[c].iloc[i]) for c, _, _ in LATENCY_PERCENTILES)
        for i in range(len(summary))
    ]
    _latency_ranges(ax, values, present)
    _latency_markers(ax, values, present)
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right")
    ax.set_xlim(-0.6, len(labels) - 0.4)
    _latency_missing(ax, present)
    ax.set_ylabel("latency (µs)")
    figure_legend(fig, [ax])
    basis = basis_text(summary)
    caption = (
        f"Latency percentiles p50, p99 and p99.9 per run ({basis}; µs, log scale), computed "
        "from the latency histograms of all iterations merged into one; n/a marks "
        "runs where some iteration had no histogram."
    )
    return fig, join_nonempty(caption, shown.note)


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
        log_scale(ax.yaxis)


def _latency_missing(ax, present: list[bool]) -> None:
    if not any(present):
        ax.set_yticks([])
    for x, ok in enumerate(present):
        if not ok:
            ax.text(x, 0.02, "n/a", ha="center", va="bottom", transform=ax.get_xaxis_transform())


def cell_histograms(
    raw: pd.DataFrame | None, summary: pd.DataFrame
) -> list[tuple[pd.Series, list[int], list[int]]]:
    """(first row, bin values ns, counts) per cell of host 'all', bins merged over iterations.

    The cells of ``summary`` in its order; a cell where any iteration lacks bins is left out.
    """
    if raw is None or raw.empty:
        return []
    keys = list(stats.CELL_KEYS)
    order = {tuple(row): i for i, row in enumerate(summary[keys].itertuples(index=False))}
    groups = sorted(
        (rows for rows in stats.cells(raw) if tuple(rows.iloc[0][keys]) in order),
        key=lambda rows: order[tuple(rows.iloc[0][keys])],
    )
    merged = []
    for rows in groups:
        bins = list(zip(rows["hist_ns"], rows["hist_count"], strict=True))
        if any(values is None or counts is None or len(values) == 0 for values, counts in bins):
            continue
        values, counts = histogram.merge(bins)
        if sum(counts) > 0:
            merged.append((rows.iloc[0], values, counts))
    return merged


LINESTYLES = ("-", "--", "-.", ":")


def latency_cdf_figure(
    summary: pd.DataFrame, raw: pd.DataFrame | None, cells=None, cells_note: str = ""
):
    """Cumulative share of I/Os against latency (µs, log x), one step line per cell (of at
    most MAX_CDF_LINES runs)."""
    if cells is None:
        chosen = selection.select_runs(summary, MAX_CDF_LINES)
        cells, cells_note = cell_histograms(raw, chosen.rows), chosen.note
    if not cells:
        return empty_figure("no latency histograms"), "Latency CDF: no histograms."
    labels = _cdf_labels([row for row, _, _ in cells])
    legend_rows = math.ceil(len(cells) / 4)
    fig, (ax,) = new_figure(height_in=3.2 + 0.16 * legend_rows)
    for index, ((_, values, counts), label) in enumerate(zip(cells, labels, strict=True)):
        total = float(sum(counts))
        shares = np.cumsum(np.asarray(counts, dtype=float)) / total
        ax.step(
            np.asarray(values, dtype=float) / NS_PER_US,
            shares,
            where="post",
            label=label,
            color=COLORS[index % len(COLORS)],
            linestyle=LINESTYLES[(index // len(COLORS)) % len(LINESTYLES)],
            linewidth=1,
        )
    log_scale(ax.xaxis)
    ax.set_ylim(0, 1.01)
    ax.set_xlabel("latency (µs, log scale)")
    ax.set_ylabel("share of I/Os ≤ latency")
    figure_legend(fig, [ax])
    caption = (
        f"Latency CDF per run and operation ({basis_text(summary)}): the share of I/Os "
        "completing within each latency, from the histograms of all iterations merged by "
        "summing bin counts (aggregate over all hosts); log x axis in µs. Runs where some "
        "iteration had no histogram are left out."
    )
    return fig, join_nonempty(caption, cells_note)


def _cdf_labels(rows: list) -> list[str]:
    """Run id, plus the op when a run has several ops, plus the job when it has several."""
    frame = pd.DataFrame.from_records([{key: row[key] for key in stats.CELL_KEYS} for row in rows])
    return list(_latency_labels(frame))


BANDWIDTH_FIGURE = "bandwidth"
FIGURE_BUILDERS = {
    BANDWIDTH_FIGURE: bandwidth_figure,
    "iops_vs_iodepth": iops_figure,
    "latency_percentiles": latency_figure,
}


# ---------------------------------------------------------------------------------------
# Scale-out: client steps, slow hosts, start skew, target sets


def scale_out(raw: pd.DataFrame, meta: dict) -> dict:
    """The scale-out section of a report: {'sections', 'csv', 'figure'}.

    ``sections``: subsections for the template (title, text, table, optional figure);
    ``csv``: {file name: DataFrame}; ``figure``: (PNG, SVG, caption) of the scaling figure or
    None. Each part appears only when the rows (or meta) have what it needs.
    """
    steps_meta = meta.get("steps") or {}
    data_path = meta.get("data_path") or None
    units = report_units.units_of(meta)
    mode = scaling.stepping_mode(raw, steps_meta)
    sections: list[dict] = []
    csv: dict[str, pd.DataFrame] = {}
    figure = None
    if steps_meta or _has_values(raw, "step"):
        table = scaling.scaling_table(raw, data_path, steps_meta.get("hosts") or {})
        figure = make_scaling_figure(table, mode, bool(data_path), units)
        csv["scaling.csv"] = table
        sections.append(_scaling_section(table, mode, data_path, figure, units))
    if mode == "constant":
        percent = float(meta.get("slow_host_percent") or DEFAULT_SLOW_HOST_PERCENT)
        table = scaling.slow_hosts(raw, percent)
        csv["slow_hosts.csv"] = table
        sections.append(_slow_hosts_section(table, percent, units))
    max_skew = meta.get("max_start_skew_s")
    max_skew = DEFAULT_MAX_START_SKEW_S if max_skew is None else float(max_skew)
    skew = scaling.start_skew(raw, max_skew)
    if skew["start_skew_s"].notna().any():
        csv["start_skew.csv"] = skew
        sections.append(_start_skew_section(skew, max_skew))
    if _has_values(raw, "target") and raw["target"].nunique() > 1:
        table = scaling.target_table(raw)
        csv["targets.csv"] = table
        sections.append(_target_section(table, units))
    return {"sections": sections, "csv": csv, "figure": figure}


def _has_values(frame: pd.DataFrame, column: str) -> bool:
    return column in frame and bool(frame[column].notna().any())


def _point_cells(row, show_target: bool, show_job: bool) -> list[str]:
    return [
        *([_text(row["target"])] if show_target else []),
        str(row["point"]),
        *([str(row["job"])] if show_job else []),
        *_workload_cells(row),
    ]


def _point_header(show_target: bool, show_job: bool) -> list[str]:
    return [
        *(["Target"] if show_target else []),
        "Run",
        *(["Job"] if show_job else []),
        "rw",
        "bs",
        "iodepth",
        "numjobs",
        "op",
    ]


def scaling_display(
    table: pd.DataFrame, with_data_path: bool, units: str = report_units.DEFAULT_UNITS
) -> dict:
    """The scaling table for humans: hosts, bandwidth, IOPS, theoretical and efficiency."""
    unit, scale = bandwidth_unit(table, units)
    show_target, show_job = _varies(table, "target"), _jobs_matter(table, "point")
    show_op_hosts = bool((table["op_hosts"] != table["hosts"]).fillna(False).any())
    header = [
        *_point_header(show_target, show_job),
        "Step",
        "Hosts",
        *(["Op hosts"] if show_op_hosts else []),
        "n",
        f"BW {unit} (mean ± sd)",
        f"BW per host {unit}",
        "IOPS (mean ± sd)",
        *([f"Theoretical {unit}", "Bottleneck", "Efficiency"] if with_data_path else []),
    ]
    rows = []
    for _, row in table.iterrows():
        per_host = _ratio(row["bw_bytes_s_mean"], row["op_hosts"])
        cells = [
            *_point_cells(row, show_target, show_job),
            _text(row["step"]),
            int_label(row["hosts"]),
            *([int_label(row["op_hosts"])] if show_op_hosts else []),
            int_label(row["n"]),
            format_mean_sd(
                scaled(row["bw_bytes_s_mean"], scale), scaled(row["bw_bytes_s_sd"], scale), 2
            ),
            format_number(scaled(per_host, scale), 3),
            format_mean_sd(row["iops_mean"], row["iops_sd"], 0),
        ]
        if with_data_path:
            cells += [
                format_number(scaled(row["theoretical_bytes_s"], scale), 2),
                _text(row["bottleneck"]),
                format_percent(row["efficiency"]),
            ]
        rows.append({"cells": cells, "flagged": False})
    return {"header": header, "rows": rows}


def scaling_paper_table(
    table: pd.DataFrame, with_data_path: bool, units: str = report_units.DEFAULT_UNITS
) -> tables.Table:
    """The scaling display as a paper table (CSV, Markdown, LaTeX, HTML)."""
    display = scaling_display(table, with_data_path, units)
    return tables.Table(
        columns=display["header"],
        rows=[row["cells"] for row in display["rows"]],
        caption="Scaling by number of client hosts: aggregate throughput per workload and "
        "client step"
        + (
            ", with the data path's theoretical maximum and the efficiency"
            if with_data_path
            else ""
        )
        + ".",
        label="tab:scaling",
        notes=(f"Mean ± sample sd over iterations; {report_units.units_note(units)}.",),
    )


def _ratio(numerator, denominator):
    if is_missing(numerator) or is_missing(denominator) or not denominator:
        return None
    return float(numerator) / float(denominator)


def _scaling_section(table, mode, data_path, figure, units: str) -> dict:
    steps = ", ".join(dict.fromkeys(str(s) for s in table["step"] if not is_missing(s)))
    text = (
        f"Client stepping ({mode or 'steps'}): the same workloads on {steps or 'one step'}. "
        "Bandwidth and IOPS are the aggregate over the step's hosts (host 'all'), mean ± "
        f"sample sd over iterations; {report_units.units_note(units)}."
    )
    if data_path:
        text += (
            " Theoretical: the data path's maximum for the hosts that carried the op, the "
            "smallest of the sum of their client links and each shared limit; "
            "efficiency = measured / theoretical."
        )
    if (table["op"].astype(str).str.contains("+", regex=False)).any():
        text += " Op 'read+write' is the sum of the ops of a mixed or host-split run."
    section = {
        "id": "scaling",
        "title": "Scaling with client hosts",
        "text": text,
        "caption": "Aggregate throughput per workload and client step.",
        "table": scaling_display(table, bool(data_path), units),
        "figure": None,
    }
    if figure is not None:
        png, _, caption = figure
        section["figure"] = {
            "name": SCALING_FIGURE,
            "caption": caption,
            "png_base64": as_base64(png),
        }
    return section


def slow_hosts_display(table: pd.DataFrame, units: str = report_units.DEFAULT_UNITS) -> dict:
    unit, scale = bandwidth_unit(table, units)
    show_target, show_job = _varies(table, "target"), _jobs_matter(table, "point")
    header = [
        *_point_header(show_target, show_job),
        "Host",
        "Step",
        "n",
        f"BW {unit}",
        f"Median {unit}",
        "vs median",
        "IOPS",
        "Slow",
    ]
    rows = []
    for _, row in table.iterrows():
        below = row["below_median_percent"]
        versus = None if is_missing(below) else -float(below) / 100
        rows.append(
            {
                "cells": [
                    *_point_cells(row, show_target, show_job),
                    str(row["host"]),
                    _text(row["step"]),
                    int_label(row["n"]),
                    format_number(scaled(row["bw_bytes_s_mean"], scale), 3),
                    format_number(scaled(row["median_bw_bytes_s"], scale), 3),
                    format_percent(versus, signed=True),
                    format_number(row["iops_mean"], 0),
                    FLAG_MARK if row["flagged"] else "",
                ],
                "flagged": bool(row["flagged"]),
            }
        )
    return {"header": header, "rows": rows}


def _slow_hosts_section(table: pd.DataFrame, percent: float, units: str) -> dict:
    flagged = list(dict.fromkeys(table.loc[table["flagged"], "host"]))
    verdict = (
        f"Flagged ({FLAG_MARK}): {', '.join(map(str, flagged))}."
        if flagged
        else "No host is flagged."
    )
    return {
        "id": "slow-hosts",
        "title": "Slow hosts",
        "text": (
            "Constant stepping: each host group ran the workloads alone. Each host's "
            "bandwidth (mean over iterations) against the median of all hosts for the same "
            f"workload and op; hosts more than {percent:g} % below the median are flagged. "
            + verdict
        ),
        "caption": "Per-host bandwidth against the median of all hosts.",
        "table": slow_hosts_display(table, units),
        "figure": None,
    }


def start_skew_display(table: pd.DataFrame) -> dict:
    show_target = _varies(table, "target")
    show_step = _has_values(table, "step")
    header = [
        *(["Target"] if show_target else []),
        "Run",
        *(["Step"] if show_step else []),
        "Iteration",
        "Hosts",
        "Start skew s",
        "Last to start",
        "Late",
    ]
    rows = [
        {
            "cells": [
                *([_text(row["target"])] if show_target else []),
                str(row["run_id"]),
                *([_text(row["step"])] if show_step else []),
                int_label(row["iteration"]),
                int_label(row["hosts"]),
                format_number(row["start_skew_s"], 3),
                _text(row["last_host"]),
                FLAG_MARK if row["flagged"] else "",
            ],
            "flagged": bool(row["flagged"]),
        }
        for _, row in table.iterrows()
    ]
    return {"header": header, "rows": rows}


def _start_skew_section(table: pd.DataFrame, max_skew: float) -> dict:
    flagged = int(table["flagged"].sum())
    largest = table["start_skew_s"].max()
    return {
        "id": "start-skew",
        "title": "Start skew",
        "text": (
            "Start skew of an iteration: the latest minus the earliest start time of its "
            f"hosts. Iterations above {max_skew:g} s are flagged ({FLAG_MARK}): {flagged} of "
            f"{len(table)}; the largest skew is {format_number(largest, 3)} s."
        ),
        "caption": "Start skew of every multi-host iteration.",
        "table": start_skew_display(table),
        "figure": None,
    }


def target_display(table: pd.DataFrame, units: str = report_units.DEFAULT_UNITS) -> dict:
    unit, scale = bandwidth_unit(table, units)
    show_job = _jobs_matter(table, "point")
    show_step = _has_values(table, "step")
    header = [
        *_point_header(False, show_job),
        *(["Step", "Hosts"] if show_step else []),
        "Target",
        "n",
        f"BW {unit} (mean ± sd)",
        "IOPS (mean ± sd)",
        f"Sum alone {unit}",
        "Together / sum",
    ]
    rows = []
    for _, row in table.iterrows():
        rows.append(
            {
                "cells": [
                    *_point_cells(row, False, show_job),
                    *([_text(row["step"]), int_label(row["hosts"])] if show_step else []),
                    _text(row["target"]),
                    int_label(row["n"]),
                    format_mean_sd(
                        scaled(row["bw_bytes_s_mean"], scale),
                        scaled(row["bw_bytes_s_sd"], scale),
                        2,
                    ),
                    format_mean_sd(row["iops_mean"], row["iops_sd"], 0),
                    format_number(scaled(row["sum_alone_bytes_s"], scale), 2),
                    format_percent(row["together_vs_sum"]),
                ],
                "flagged": False,
            }
        )
    return {"header": header, "rows": rows}


def _target_section(table: pd.DataFrame, units: str) -> dict:
    return {
        "id": "targets",
        "title": "Target sets",
        "text": (
            "Each workload on every target alone and on a set of targets together (target "
            "'a+b'). For a set: the sum of its members' bandwidth when run alone, and the "
            "bandwidth together as a share of that sum."
        ),
        "caption": "Workloads per target, and target sets against the sum of their members.",
        "table": target_display(table, units),
        "figure": None,
    }


# Scaling figure


def make_scaling_figure(
    table: pd.DataFrame,
    mode: str | None,
    with_data_path: bool,
    units: str = report_units.DEFAULT_UNITS,
):
    """(PNG, SVG, caption): bandwidth and IOPS against hosts, theoretical line, efficiency."""
    with style():
        fig, caption = scaling_figure(table, mode, with_data_path, units)
        try:
            png, svg = render_figure(fig)
        finally:
            plt.close(fig)
    return png, svg, caption


def scaling_figure(
    table: pd.DataFrame,
    mode: str | None,
    with_data_path: bool,
    units: str = report_units.DEFAULT_UNITS,
):
    data = table.dropna(subset=["bw_bytes_s_mean"])
    if data.empty:
        return empty_figure("no scaling data"), "Scaling: no data."
    unit, scale = bandwidth_unit(data, units)
    data = data.assign(series=_scaling_series(data), x=_scaling_x(data, mode))
    panels = ["bandwidth", "iops", *(["efficiency"] if with_data_path else [])]
    fig, axes = new_figure(nrows=len(panels), height_in=2.0 * len(panels) + 0.8)
    series_names = list(dict.fromkeys(data["series"]))
    for index, name in enumerate(series_names):
        rows = data[data["series"] == name].sort_values("x", kind="stable")
        style = {
            "color": COLORS[index % len(COLORS)],
            "marker": MARKERS[index % len(MARKERS)],
            "markersize": 4,
            "linewidth": 1,
            "label": name,
        }
        axes[0].errorbar(
            rows["x"],
            rows["bw_bytes_s_mean"] / scale,
            yerr=rows["bw_bytes_s_sd"].fillna(0) / scale,
            capsize=2,
            **style,
        )
        axes[1].errorbar(
            rows["x"], rows["iops_mean"], yerr=rows["iops_sd"].fillna(0), capsize=2, **style
        )
        if with_data_path:
            axes[2].plot(rows["x"], 100 * rows["efficiency"], **style)
    bottlenecks = _theoretical_lines(axes[0], data, scale) if with_data_path else ""
    axes[0].set_ylabel(f"bandwidth ({unit})")
    axes[1].set_ylabel("IOPS")
    readable_counts(axes[1].yaxis)
    if with_data_path:
        axes[2].axhline(100, color="black", linewidth=0.8, linestyle=":")
        efficiency = data["efficiency"].dropna()
        top = max(110.0, 105 * float(efficiency.max())) if not efficiency.empty else 110.0
        axes[2].set_ylim(0, top)
        axes[2].set_ylabel("efficiency (%)")
    for ax in axes:
        ax.set_ylim(bottom=0)
        _scaling_x_axis(ax, data, mode)
    axes[-1].set_xlabel("client hosts" if _numeric_x(data, mode) else "client step")
    figure_legend(fig, axes)
    caption = (
        f"Scaling with client hosts: aggregate bandwidth ({unit}, {units}) and IOPS per "
        "workload, mean over iterations with sample sd as error bars."
    )
    if with_data_path:
        caption += (
            " Dashed: theoretical maximum of the data path (the smallest limit along it; "
            f"{bottlenecks}). Bottom: efficiency = measured / theoretical."
        )
    return fig, caption


def _scaling_series(data: pd.DataFrame) -> list[str]:
    """Legend label per row: run (point), op when the point has several, target when several."""
    ops = data.groupby(["target", "point", "job"], dropna=False)["op"].transform("nunique")
    show_target, show_job = _varies(data, "target"), _jobs_matter(data, "point")
    labels = []
    for (_, row), n_ops in zip(data.iterrows(), ops, strict=True):
        label = str(row["point"])
        if show_job:
            label += f" {row['job']}"
        if n_ops > 1:
            label += f" {row['op']}"
        if show_target:
            label = f"{_text(row['target'])}: {label}"
        labels.append(label)
    return labels


def _numeric_x(data: pd.DataFrame, mode: str | None) -> bool:
    """Hosts on x unless steps share a host count (constant stepping: one x per group)."""
    if mode == "constant" or data["hosts"].isna().any():
        return False
    return bool((data.groupby("hosts")["step"].nunique(dropna=False) <= 1).all())


def _step_order(data: pd.DataFrame) -> list[str]:
    steps = {_text(s) for s in data["step"]}
    return sorted(steps, key=scaling.natural_key)


def _scaling_x(data: pd.DataFrame, mode: str | None) -> list[float]:
    if _numeric_x(data, mode):
        return [float(h) for h in data["hosts"]]
    positions = {step: index for index, step in enumerate(_step_order(data))}
    return [float(positions[_text(s)]) for s in data["step"]]


def _scaling_x_axis(ax, data: pd.DataFrame, mode: str | None) -> None:
    if _numeric_x(data, mode):
        hosts = sorted({int(h) for h in data["hosts"]})
        ax.set_xticks([float(h) for h in hosts], [str(h) for h in hosts])
        ax.set_xlim(0, max(hosts) * 1.05 + 0.5)
    else:
        steps = _step_order(data)
        ax.set_xticks(range(len(steps)), steps, rotation=45 if len(steps) > 6 else 0)
        ax.set_xlim(-0.6, len(steps) - 0.4)


THEORY_LINESTYLES = ("--", "-.", (0, (1, 1)))


def _theoretical_lines(ax, data: pd.DataFrame, scale: float) -> str:
    """Draw each distinct theoretical curve once; return the bottlenecks for the caption.

    The caption names the bottlenecks of the curve for all hosts of a step (not one op's).
    """
    curves: dict[tuple, list[str]] = {}
    names: dict[tuple, list[tuple[float, str]]] = {}
    whole_steps: list[tuple] = []
    for _, rows in data.groupby("series", sort=False):
        rows = rows.dropna(subset=["theoretical_bytes_s"]).sort_values("x", kind="stable")
        if rows.empty:
            continue
        curve = tuple(zip(rows["x"], rows["theoretical_bytes_s"], strict=True))
        curves.setdefault(curve, []).extend(str(op) for op in rows["op"].unique())
        names.setdefault(curve, list(zip(rows["hosts"], rows["bottleneck"], strict=True)))
        if (rows["op_hosts"] == rows["hosts"]).all():
            whole_steps.append(curve)
    for index, (curve, ops) in enumerate(curves.items()):
        label = "theoretical maximum"
        if len(curves) > 1:
            label += f" ({', '.join(dict.fromkeys(ops))})"
        xs, ys = zip(*curve, strict=True)
        ax.plot(
            xs,
            [y / scale for y in ys],
            color="black",
            linestyle=THEORY_LINESTYLES[index % len(THEORY_LINESTYLES)],
            linewidth=1,
            marker="_",  # a step on its own still shows its maximum
            markersize=10,
            label=label,
        )
    chosen = whole_steps[0] if whole_steps else next(iter(names), None)
    return _bottleneck_text(names.get(chosen, []) if chosen is not None else [])


def _bottleneck_text(hosts_and_names: list[tuple]) -> str:
    """'client links (2 x 10 Gbit/s) at 2 hosts, cluster from 4 hosts'."""
    runs: list[list] = []
    for hosts, name in hosts_and_names:
        if runs and runs[-1][0] == name:
            runs[-1][2] = hosts
        else:
            runs.append([name, hosts, hosts])
    parts = []
    for name, low, high in runs:
        hosts = int_label(low) if low == high else f"{int_label(low)}–{int_label(high)}"
        parts.append(f"{name} at {hosts} hosts")
    return "; ".join(parts) or "no theoretical maximum"


# Hosts appendix


# Methodology of the scale-out settings


def scale_out_methodology(meta: dict) -> list[tuple[str, str | None]]:
    steps = meta.get("steps") or {}
    data_path = meta.get("data_path")
    return [
        ("Client stepping", _steps_text(steps)),
        ("Data path", datapath.describe(data_path) if data_path else None),
        ("Slow hosts", _slow_hosts_text(meta) if steps.get("mode") == "constant" else None),
        (
            "Start skew bound",
            f"{float(meta['max_start_skew_s']):g} s"
            if meta.get("max_start_skew_s") is not None
            else None,
        ),
    ]


def _slow_hosts_text(meta: dict) -> str:
    percent = float(meta.get("slow_host_percent") or DEFAULT_SLOW_HOST_PERCENT)
    return f"flagged more than {percent:g} % below the median of all hosts"


def _steps_text(steps: dict) -> str | None:
    if not steps:
        return None
    hosts = steps.get("hosts") or {}
    listed = ", ".join(f"{label} ({len(members)} hosts)" for label, members in hosts.items())
    size = f", size {steps['size']}" if steps.get("size") else ""
    return f"{steps.get('mode')}{size}" + (f": {listed}" if listed else "")


# ---------------------------------------------------------------------------------------
# HTML


BASIS_MEANING = {
    "clat": "completion latency (clat): from submission of an I/O until its completion",
    "lat": "total latency (lat = slat + clat): from creation of an I/O until its completion",
}


def methodology(meta: dict, summary: pd.DataFrame, raw: pd.DataFrame) -> list[tuple[str, str]]:
    """(label, text) pairs describing how the numbers were made; absent keys are skipped."""
    job = meta.get("job") or {}
    version = meta.get("tool_version") or recorded_versions(raw)
    items = [
        ("Experiment", meta.get("experiment")),
        ("Tool", join_nonempty(meta.get("tool"), version)),
        ("Hosts", list_text(meta.get("hosts"))),
        ("Target", mapping_text(meta.get("target"))),
        ("Iterations", meta.get("iterations")),
        ("Runtime / ramp", runtime_text(job)),
        ("Job parameters", mapping_text(job)),
        ("Sweep", mapping_text(meta.get("sweep"))),
        ("Runs", _runs_text(meta.get("run_ids"))),
        ("Preparation", _preparation_text(meta.get("preparation"))),
        *scale_out_methodology(meta),
        ("Statistics", statistics_text(report_units.units_of(meta))),
        ("Latency percentiles", PERCENTILE_TEXT),
        ("Latency basis", _basis_meaning(summary)),
        ("storbench", meta.get("storbench_version")),
        ("Generated by", meta.get("generated_by")),
    ]
    return [(label, str(text)) for label, text in items if text not in (None, "", [], {})]


def _preparation_text(preparation: dict | None) -> str | None:
    """The dataset and recipe the runs used, and where the preconditioning evidence is."""
    if not preparation:
        return None
    parts = []
    if preparation.get("dataset"):
        parts.append(
            f"dataset {preparation['dataset']} (prepared once, checked by a state "
            "token on every host before each run)"
        )
    if preparation.get("precondition"):
        phase = preparation.get("flush")
        parts.append(
            f"preconditioning recipe {preparation['precondition']}"
            + (f", measured {phase} the cache flush" if phase else "")
            + f"; passes, steady-state rounds and verdict: {preparation['page']}"
        )
    return "; ".join(parts)


def _runs_text(run_ids) -> str | None:
    return list_text(run_ids)


def _basis_meaning(summary: pd.DataFrame) -> str | None:
    bases = sorted({str(b) for b in summary["lat_basis"].dropna()})
    return "; ".join(BASIS_MEANING.get(b, b) for b in bases) or None


def render_html(
    *,
    title: str,
    meta: dict,
    summary: pd.DataFrame,
    table: dict,
    figures: list[dict],
    raw: pd.DataFrame,
    scale_out: list[dict] | None = None,
    hosts: dict | None = None,
    paper_tables: dict | None = None,
    host_figures: list[dict] | None = None,
    environment: list[tuple[str, str]] | None = None,
    extra_sections: list[dict] | None = None,
    per_run: dict | None = None,
) -> str:
    job_files = meta.get("job_files") or {}
    context = {
        "title": title,
        "table": table,
        "footnote": COV_FOOTNOTE,
        "errors": int(summary["errors"].fillna(0).sum()) if "errors" in summary else 0,
        "figures": figures,
        "scale_out": scale_out or [],
        "methodology": methodology(meta, summary, raw),
        "per_run": per_run or per_run_table(per_run_values(raw), report_units.units_of(meta)),
        "per_run_note": PER_RUN_NOTE,
        "per_run_condensed_note": PER_RUN_CONDENSED_NOTE,
        "per_run_csv": PER_RUN_CSV,
        "paper_tables": paper_table_context(
            {k: v for k, v in (paper_tables or {}).items() if k != PER_HOST_TABLE}
        ),
        "per_host": paper_table_context(
            {k: v for k, v in (paper_tables or {}).items() if k == PER_HOST_TABLE}
        ),
        "host_figures": host_figures or [],
        "environment": environment or [],
        "extra_sections": extra_sections or [],
        "job_files": job_file_sections(job_files),
        "host_placeholder": HOST_PLACEHOLDER,
        "config_yaml": meta.get("config_yaml") or "",
        "hosts": hosts,
    }
    return template_environment().get_template(TEMPLATE_NAME).render(context)


# ---------------------------------------------------------------------------------------
# Network check report
