"""The fault-injection section of an experiment report: dip and recovery of every event.

For every run and iteration whose manifest records fault commands (``storbench.run.faults``),
the per-interval rows of that iteration become one series per metric
(``fault_analysis.aggregate_series``) and every injected event is analysed at the offset
where its command actually started (``fault_analysis.analyze_events``). Written:
``tables/faults.{csv,md,tex,html}`` and ``faults.png/.svg`` (IOPS and mean latency over time,
fault commands as red lines, recoveries as green lines, the fault window shaded).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from storbench.analysis import fault_analysis
from storbench.config import fault_config
from storbench.core import report_units
from storbench.core.numbers import NO_VALUE, scaled  # noqa: E402
from storbench.core.specs import Manifest
from storbench.report import paper_tables as report_tables
from storbench.report import tables, toolkit

FIGURE = "faults"
TABLE = "faults"
NS_PER_MS = 1e6
PANEL_HEIGHT_IN = 2.2
CAPTION = (
    "IOPS (left axis) and I/O-weighted mean latency (right axis, ms) per interval of each "
    "run with injected faults; red dashed lines: fault commands started, green dotted: "
    "recovery commands started, shaded: between them."
)


def settings_from(meta: dict) -> fault_analysis.FaultSettings:
    """The experiment's fault_analysis settings (config.fault_config.fault_settings fills in
    defaults)."""
    return fault_analysis.FaultSettings(
        **{**fault_config.FAULT_ANALYSIS_DEFAULTS, **(meta.get("fault_analysis") or {})}
    )


def injected_events(records: Sequence[dict]) -> list[fault_analysis.Event]:
    """Events at the offsets their commands started; faults that never ran are left out."""
    faults = {r["event"]: r for r in records if r["kind"] == "fault" and r.get("started_at_s")}
    recoveries = {r["event"]: r for r in records if r["kind"] == "recover"}
    events = []
    for name, fault in faults.items():
        recovery = recoveries.get(name) or {}
        recover_at = recovery.get("started_at_s")
        events.append(fault_analysis.Event(name, float(fault["started_at_s"]), recover_at))
    return sorted(events, key=lambda event: event.at_s)


def analyse(timeseries: pd.DataFrame, manifests: list[Manifest], settings) -> list[dict]:
    """One row per (run, iteration, event, metric)."""
    rows = []
    for manifest in manifests:
        events = injected_events(manifest.faults)
        if not events:
            continue
        series = iteration_series(timeseries, manifest.run_id, manifest.iteration)
        for row in fault_analysis.analyze_events(series, events, settings):
            rows.append({"run_id": manifest.run_id, "iteration": manifest.iteration, **row})
    return rows


def iteration_series(timeseries: pd.DataFrame, run_id: str, iteration: int) -> dict:
    selected = timeseries[(timeseries["run_id"] == run_id) & (timeseries["iteration"] == iteration)]
    series = fault_analysis.aggregate_series(selected)
    return {name: points for name, points in series.items() if points}


def build_section(
    timeseries: pd.DataFrame | None, manifests: list[Manifest], meta: dict, out_dir: Path
) -> tuple[dict | None, dict[str, Path]]:
    """(template section or None, written files)."""
    with_faults = [m for m in manifests if injected_events(m.faults)]
    if not with_faults or timeseries is None or timeseries.empty:
        return None, {}
    settings = settings_from(meta)
    rows = analyse(timeseries, with_faults, settings)
    table = faults_table(rows, settings, report_units.units_of(meta))
    written = {
        f"{report_tables.TABLE_DIR}/{path.name}": path
        for path in tables.write_all(table, out_dir / report_tables.TABLE_DIR, TABLE).values()
    }
    png, svg, caption = figure(timeseries, with_faults)
    written[f"{FIGURE}.png"] = toolkit.write_file(out_dir / f"{FIGURE}.png", png)
    written[f"{FIGURE}.svg"] = toolkit.write_file(out_dir / f"{FIGURE}.svg", svg)
    section = {
        "id": "faults",
        "title": "Fault injection",
        "text": method_text(settings),
        "commands": command_rows(with_faults),
        "command_header": COMMAND_HEADER,
        "table": toolkit.paper_table_context({TABLE: table})[0],
        "figure": {"name": FIGURE, "caption": caption, "png_base64": toolkit.as_base64(png)},
    }
    return section, written


def method_text(settings) -> str:
    side = "either side" if settings.two_sided else "the worse side (a catch-up burst is not a dip)"
    return (
        f"Baseline: median of the intervals in the {settings.baseline_s:g} s before each fault "
        "command started. Dip: the worst interval until the next event (or the end). "
        f"Recovered: back within ±{100 * settings.band:g} % of the baseline on {side} for "
        f"{settings.hold_intervals} consecutive intervals; recovery time from the fault "
        "command's start (and from the recovery command's). Impact: time outside the band. "
        "Survived: the workload still completed I/O in its last interval. Throughput is summed "
        "over hosts, jobs and operations per interval; latency is the I/O-weighted mean."
    )


COMMAND_HEADER = (
    "Run",
    "It.",
    "Event",
    "Kind",
    "Host",
    "Command",
    "Planned s",
    "Started s",
    "Result",
)


def command_rows(manifests: list[Manifest]) -> list[list[str]]:
    """What ran, when, where and how it ended: one row per command of every iteration."""
    rows = []
    for manifest in manifests:
        for record in manifest.faults:
            status = record.get("skipped") or (
                "exit 0" if record.get("exit_code") == 0 else f"exit {record.get('exit_code')}"
            )
            rows.append(
                [
                    str(manifest.run_id),
                    str(manifest.iteration),
                    record["event"],
                    record["kind"],
                    record["host"],
                    record["command"],
                    _seconds(record.get("planned_at_s")),
                    _seconds(record.get("started_at_s")),
                    status,
                ]
            )
    return rows


def _seconds(value) -> str:
    return NO_VALUE if value is None else f"{float(value):.2f}"


METRIC_LABELS = {"iops": "IOPS", "lat_mean": "mean latency ms"}
METRIC_SCALES = {"iops": 1.0, "lat_mean": NS_PER_MS}


def _metric_units(units: str) -> tuple[dict, dict]:
    """(labels, scales) by metric, bandwidth in the table unit of ``units``."""
    bw_label, bw_scale = report_units.table_bandwidth_unit(units)
    return {**METRIC_LABELS, "bw": bw_label}, {**METRIC_SCALES, "bw": bw_scale}


def faults_table(
    rows: list[dict], settings, units: str = report_units.DEFAULT_UNITS
) -> tables.Table:
    labels, scales = _metric_units(units)
    body = []
    for row in rows:
        scale = scales.get(row["metric"], 1.0)
        body.append(
            [
                str(row["run_id"]),
                str(row["iteration"]),
                row["event"],
                labels.get(row["metric"], row["metric"]),
                _fixed(row["baseline"] / scale),
                _fixed(scaled(row["dip"], scale)),
                _fixed(row["depth_pct"], 1),
                _fixed(row["recovery_s"], 2),
                _fixed(row["recovery_after_restore_s"], 2),
                _fixed(row["impact_s"], 2),
                _yes_no(row["survived"]),
                NO_VALUE if row["errors"] is None else str(row["errors"]),
            ]
        )
    return tables.Table(
        columns=[
            "Run",
            "Iteration",
            "Event",
            "Metric",
            "Baseline",
            "Dip",
            "Depth %",
            "Recovery s",
            "After restore s",
            "Impact s",
            "Survived",
            "Errors",
        ],
        rows=body,
        caption="Effect of each injected fault: baseline before it, the worst interval, the "
        f"depth of the dip, and the time until the metric was back within "
        f"±{100 * settings.band:g} % of the baseline.",
        label="tab:faults",
        align="llll" + "r" * 6 + "lr",
        notes=(
            "Recovery s: from the fault command's start; After restore s: from the "
            "recovery command's start (negative: recovered before it). – : never / none.",
        ),
    )


def _fixed(value, decimals: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NO_VALUE
    return f"{float(value):,.{decimals}f}"


def _yes_no(value) -> str:
    return NO_VALUE if value is None else ("yes" if value else "no")


def figure(timeseries: pd.DataFrame, manifests: list[Manifest]) -> tuple[bytes, bytes, str]:
    def build():
        fig, axes = toolkit.new_figure(
            len(manifests), 1, height_in=PANEL_HEIGHT_IN * len(manifests) + 0.5
        )
        for ax, manifest in zip(axes, manifests, strict=True):
            _panel(ax, timeseries, manifest)
        toolkit.figure_legend(fig, axes)
        return fig, CAPTION

    return toolkit.figure_files(build)


def _panel(ax, timeseries: pd.DataFrame, manifest: Manifest) -> None:
    series = iteration_series(timeseries, manifest.run_id, manifest.iteration)
    iops = [(t, v) for t, v in series.get("iops", []) if v is not None]
    latency = [(t, v / NS_PER_MS) for t, v in series.get("lat_mean", []) if v is not None]
    if iops:
        ax.plot(
            *zip(*iops, strict=True),
            color=toolkit.COLORS[0],
            marker=".",
            markersize=3,
            linewidth=1,
            label="IOPS",
        )
    ax.set_ylim(bottom=0)
    ax.set_ylabel("IOPS")
    toolkit.readable_counts(ax.yaxis)
    ax.set_xlabel("time since the workload started (s)")
    ax.set_title(f"{manifest.run_id}, iteration {manifest.iteration}")
    if latency:
        right = ax.twinx()
        right.plot(
            *zip(*latency, strict=True),
            color=toolkit.COLORS[1],
            linewidth=0.8,
            linestyle="-",
            label="mean latency (ms)",
        )
        right.set_ylabel("mean latency (ms)")
        right.set_ylim(bottom=0)
        right.grid(False)
        ax.plot([], [], color=toolkit.COLORS[1], linewidth=0.8, label="mean latency (ms)")
    for event in injected_events(manifest.faults):
        ax.axvline(event.at_s, color="#D55E00", linestyle="--", linewidth=1, label="fault")
        if event.recover_at_s is not None:
            ax.axvline(
                event.recover_at_s, color="#009E73", linestyle=":", linewidth=1.2, label="recovery"
            )
            ax.axvspan(event.at_s, event.recover_at_s, color="#D55E00", alpha=0.08)
        ax.annotate(
            event.name,
            (event.at_s, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(2, -8),
            textcoords="offset points",
            fontsize=6,
        )
