"""The scale-out section of an experiment's report: scaling with client hosts (table and
figure, with the data path's theoretical maximum), slow hosts, start skew and target sets,
each present only when the rows (or the report's meta) have what it needs; and the
scale-out settings for the page's methodology.
"""

from __future__ import annotations

import pandas as pd

from storbench.analysis import scaling
from storbench.config import datapath
from storbench.core import report_units
from storbench.core.numbers import format_number, is_missing, scaled
from storbench.report import tables
from storbench.report.cells import (
    format_mean_sd,
    jobs_matter,
    varies,
    workload_cells,
)
from storbench.report.toolkit import (
    COLORS,
    FLAG_MARK,
    MARKERS,
    _text,
    as_base64,
    bandwidth_unit,
    empty_figure,
    figure_files,
    figure_legend,
    format_percent,
    int_label,
    new_figure,
    readable_counts,
)

SCALING_FIGURE = "scaling"
DEFAULT_SLOW_HOST_PERCENT = 10.0
DEFAULT_MAX_START_SKEW_S = 1.0


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
    if steps_meta or has_values(raw, "step"):
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
    if has_values(raw, "target") and raw["target"].nunique() > 1:
        table = scaling.target_table(raw)
        csv["targets.csv"] = table
        sections.append(_target_section(table, units))
    return {"sections": sections, "csv": csv, "figure": figure}


def has_values(frame: pd.DataFrame, column: str) -> bool:
    return column in frame and bool(frame[column].notna().any())


def _point_cells(row, show_target: bool, show_job: bool) -> list[str]:
    return [
        *([_text(row["target"])] if show_target else []),
        str(row["point"]),
        *([str(row["job"])] if show_job else []),
        *workload_cells(row),
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
    unit, scale = bandwidth_unit(table["bw_bytes_s_mean"], units)
    show_target, show_job = varies(table, "target"), jobs_matter(table, "point")
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
    unit, scale = bandwidth_unit(table["bw_bytes_s_mean"], units)
    show_target, show_job = varies(table, "target"), jobs_matter(table, "point")
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
    show_target = varies(table, "target")
    show_step = has_values(table, "step")
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
    unit, scale = bandwidth_unit(table["bw_bytes_s_mean"], units)
    show_job = jobs_matter(table, "point")
    show_step = has_values(table, "step")
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
    return figure_files(lambda: scaling_figure(table, mode, with_data_path, units))


def scaling_figure(
    table: pd.DataFrame,
    mode: str | None,
    with_data_path: bool,
    units: str = report_units.DEFAULT_UNITS,
):
    data = table.dropna(subset=["bw_bytes_s_mean"])
    if data.empty:
        return empty_figure("no scaling data"), "Scaling: no data."
    unit, scale = bandwidth_unit(data["bw_bytes_s_mean"], units)
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
    show_target, show_job = varies(data, "target"), jobs_matter(data, "point")
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
    listed = ", ".join(
        f"{label} ({len(members)} host{'s' * (len(members) != 1)})"
        for label, members in hosts.items()
    )
    size = f", size {steps['size']}" if steps.get("size") else ""
    if steps.get("counts"):
        size = f", counts {', '.join(str(count) for count in steps['counts'])}"
    return f"{steps.get('mode')}{size}" + (f": {listed}" if listed else "")
