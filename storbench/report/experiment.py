"""Paper-style report of a campaign: summary table, figures and an offline HTML document.

``build_report`` reads an experiment's result rows, summarises them with
``stats.summarize``, and writes index.html, summary.csv, summary.md and the figures as
PNG and SVG. Multi-host campaigns add a scale-out section (storbench.report.scale_out:
scaling per client step with the data path's theoretical maximum, slow hosts, start skew,
target sets) and a hosts appendix from telemetry. Output is byte-for-byte reproducible:
fixed figure sizes and dpi, no dates in image metadata, a fixed SVG hash salt, and no
timestamps in the HTML unless ``meta`` carries them.

Units: bandwidth in the unit system ``meta['units']`` names (report.units: decimal by default,
or binary; storbench.core.report_units): MB/s (MiB/s) in table columns, GB/s or MB/s (GiB/s or
MiB/s) by magnitude in figures and the scale-out tables. Latency in µs; IOPS as is. Spread
is the sample sd across iterations (ddof=1).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display; the same renderer everywhere keeps bytes identical

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402

from storbench.analysis import stats
from storbench.core import histogram, report_units, results
from storbench.core.numbers import NO_VALUE, NS_PER_US, format_number, is_missing, scaled  # noqa: E402
from storbench.core.specs import Manifest  # noqa: E402
from storbench.core.units import size_label  # noqa: E402
from storbench.report import environment, selection, tables, tool_wording
from storbench.report import figures as report_figures
from storbench.report import paper_tables as report_tables
from storbench.report.cells import (
    format_cov,
    format_interval,
    format_mean_sd,
    jobs_matter,
    ns_to_us,
    outlier_marked,
    varies,
    workload_cells,
)
from storbench.report.drawing import FigureJob, FiguresBeingDrawn
from storbench.report.job_files import HOST_PLACEHOLDER
from storbench.report.job_files import sections as job_file_sections
from storbench.report.scale_out import (
    SCALING_FIGURE,
    scale_out,
    scale_out_methodology,
    scaling_paper_table,
)
from storbench.report.toolkit import (
    COLORS,
    COV_MARK,
    FIGURE_WIDTH_IN,
    MARKERS,
    OUTLIER_MARK,
    PER_HOST_TABLE,
    PERCENTILE_TEXT,
    _text,
    as_base64,
    bandwidth_unit,
    basis_text,
    bs_label,
    category_axis,
    count_label,
    empty_figure,
    figure_files,
    figure_legend,
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
    runtime_text,
    series_bars,
    spaced_labels,
    statistics_text,
    template_environment,
    version_warnings,
    write_file,
)

TEMPLATE_NAME = "index.html.j2"


LATENCY_PERCENTILES = (("p50_ns", "p50", "o"), ("p99_ns", "p99", "s"), ("p99_9_ns", "p99.9", "^"))

LATENCY_CDF_FIGURE = "latency_cdf"
FIGURES = ("bandwidth", "iops_vs_iodepth", "latency_percentiles", LATENCY_CDF_FIGURE)
# Beyond these a figure draws a selection of the runs (storbench.report.selection)
MAX_CDF_LINES = 16
MAX_PERCENTILE_RUNS = 48


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
    """The per-interval rows; None without a source, or for a series file that does not
    exist (`storbench import` writes none for outputs without intervals): said on stderr."""
    if source is None:
        return None
    if isinstance(source, (pa.Table, pd.DataFrame)):
        return stats.as_frame(source)
    if not Path(source).exists():
        print(
            f"report: no series file {source} (the runs have no per-interval rows): "
            "the report has no per-interval figure",
            file=sys.stderr,
        )
        return None
    return results.read_parquet(source, results.TIMESERIES_SCHEMA).to_pandas()


# ---------------------------------------------------------------------------------------
# Tables


def summary_table(summary: pd.DataFrame, units: str = report_units.DEFAULT_UNITS) -> dict:
    """The human table: {'header': [...], 'rows': [{'cells': [...], 'flagged': bool}]}."""
    unit, divisor = report_units.table_bandwidth_unit(units)
    show_experiment = summary["experiment"].nunique() > 1
    show_job = jobs_matter(summary, "run_id")
    show = {
        "target": varies(summary, "target"),
        "hosts": varies(summary, "hosts_in_run"),
        "state": "prep_state" in summary and summary["prep_state"].notna().any(),
        "cpu": report_tables.has_cpu(summary),
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
        *([report_tables.CPU_HEADER] if show["cpu"] else []),
    ]
    rows = [
        {
            "cells": _summary_cells(row, show_experiment, show_job, show, divisor),
            "flagged": bool(row["cov_flag"]),
        }
        for _, row in summary.iterrows()
    ]
    footnote = COV_FOOTNOTE + (f" {report_tables.CPU_NOTE}" if show["cpu"] else "")
    return {"header": header, "rows": rows, "footnote": footnote}


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
        *workload_cells(row),
        report_tables.small_n_text(row["n"]) or NO_VALUE,
        outlier_marked(
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
        outlier_marked(format_mean_sd(row["iops_mean"], row["iops_sd"], 0), row["iops_outliers"]),
        format_interval(row["iops_ci_low"], row["iops_ci_high"], 0),
        format_cov(row["iops_cov"]),
        format_number(ns_to_us(row["lat_mean_ns"]), 1),
        format_number(ns_to_us(row["p99_ns"]), 1),
        *(
            [report_tables.cpu_text(row.get("cpu_pct"), row.get("cpu_basis")) or NO_VALUE]
            if show["cpu"]
            else []
        ),
    ]


def summary_csv(summary: pd.DataFrame) -> str:
    """Every summary column at full precision (floats round-trip), one row per cell."""
    return frame_csv(summary)


def markdown_table(table: dict) -> str:
    """A GitHub-flavoured Markdown table with the CoV footnote."""
    rows = [row["cells"] for row in table["rows"]]
    footnote = table.get("footnote", COV_FOOTNOTE)
    return tables.pipe_table(table["header"], rows) + "\n\n" + footnote + "\n"


COV_FOOTNOTE = (
    f"Mean ± sample sd over n iterations; 95 % CI: {report_tables.INTERVAL_NAME}, "
    f"{report_tables.INTERVAL_METHOD}. {report_tables.INTERVAL_FALLBACK} "
    f"{report_tables.SMALL_N_NOTE} CoV = sd / mean; "
    f"{COV_MARK} marks CoV > {100 * stats.COV_LIMIT:g} %; {OUTLIER_MARK} marks a mean whose "
    f"iterations include an outlier (more than {stats.OUTLIER_MADS:g} MAD from the median; "
    "kept, not dropped). "
    "Latency percentiles from merged histograms; a run of one iteration without histograms "
    "shows the percentiles the tool printed for it (exact for that iteration); "
    f"{NO_VALUE} = not available (several iterations without histograms: percentiles are "
    "never averaged)."
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
    show_target = varies(frame, "target")
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
            outlier_marked(format_number(scaled(row["bw_bytes_s"], divisor), 1), row["bw_outlier"]),
            outlier_marked(format_number(row["iops"], 0), row["iops_outlier"]),
            format_number(ns_to_us(row["p99_ns"]), 1),
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
        label = report_tables.rw_label(row)
        if n_ops > 1 and row["op"] != row["rw"]:  # not 'read read'
            label += f" {row['op']}"
        if n_jobs > 1:
            label = f"{row['job']}: {label}"
        labels.append(label)
    return pd.Series(labels, index=summary.index, dtype=object)


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
    unit, scale = bandwidth_unit(data["bw_bytes_s_mean"], units)
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
    values = {column: summary[column].map(ns_to_us) for column, _, _ in LATENCY_PERCENTILES}
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
        "from the latency histograms of all iterations merged into one (a run of one "
        "iteration without histograms: the tool's own percentiles); n/a marks runs of "
        "several iterations where some iteration had no histogram."
    )
    return fig, join_nonempty(caption, tool_wording.resolution_note(summary), shown.note)


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
# HTML


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
        ("Bandwidth basis", tool_wording.joined(summary, "bandwidth_basis_text") or None),
        ("Tool's own totals", tool_wording.own_total_note(raw, report_units.units_of(meta))),
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
    """What each latency basis measures, in the words of each tool's adapter."""
    bases = sorted({str(b) for b in summary["lat_basis"].dropna()})
    return tool_wording.basis_texts(summary, bases)


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
        "footnote": table.get("footnote", COV_FOOTNOTE),
        "errors": int(summary["errors"].fillna(0).sum()) if "errors" in summary else 0,
        "version_warnings": version_warnings(raw),
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
