"""The comparison page: B against A per matched cell, its tables, figure and thresholds."""

from __future__ import annotations

import io
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display; the same renderer everywhere keeps bytes identical

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from storbench.analysis.compare import (  # noqa: E402
    DISPLAY,
    HIGHER_IS_BETTER,
    MEAN_OF_ITERATION_P99,
    METRICS,
    compare,
    display,
    is_significant,
    load_side,
    parse_thresholds,
    read_side,
    threshold_violations,
)
from storbench.core import (
    atomic,  # noqa: E402
    report_units,
)
from storbench.core.numbers import NO_VALUE, format_number, is_missing, scaled  # noqa: E402
from storbench.report import tables, toolkit

TEMPLATE_NAME = "compare.html.j2"


FIGURE_NAME = "change"


def build_comparison(
    a_source,
    b_source,
    out_dir,
    *,
    a_label: str,
    b_label: str,
    thresholds: dict | None = None,
    units: str = report_units.DEFAULT_UNITS,
) -> dict:
    """Compare B with A and write the comparison files into ``out_dir``; bandwidth in the
    unit system ``units`` (storbench.core.report_units).

    Returns {"cells": matched cells, "significant": significant (cell, metric) changes,
    "unmatched": unmatched cells, "regressions": threshold violation messages}.
    """
    limits = parse_thresholds(thresholds or {})  # a config mistake fails before any reading
    units = report_units.checked(units)
    a_rows, b_rows = read_side(a_source), read_side(b_source)
    comparison = compare(load_side(a_source, a_rows), load_side(b_source, b_rows))
    warnings = toolkit.sides_version_warnings([(a_label, a_rows), (b_label, b_rows)])
    violations = threshold_violations(comparison.changes, limits, units)
    regressions = [message for _, message in violations]
    out_dir = Path(out_dir)
    atomic.write_text(out_dir / "comparison.csv", toolkit.frame_csv(comparison.changes))
    atomic.write_text(out_dir / "unmatched.csv", toolkit.frame_csv(comparison.unmatched))
    atomic.write_json(
        out_dir / "regressions.json",
        {
            "a": a_label,
            "b": b_label,
            "thresholds": thresholds or {},
            "regressions": regressions,
            "warnings": warnings,
        },
    )
    sides = {"a_label": a_label, "b_label": b_label, "a_source": a_source, "b_source": b_source}
    context = {**_context(comparison, violations, limits, units, **sides), "warnings": warnings}
    atomic.write_text(out_dir / "comparison.md", markdown(context))
    html = toolkit.template_environment().get_template(TEMPLATE_NAME).render(context)
    atomic.write_text(out_dir / "index.html", html)
    significant = comparison.changes["significant"].fillna(False).astype(bool)
    return {
        "cells": int(comparison.changes["cell"].nunique()),
        "significant": int(significant.sum()),
        "unmatched": len(comparison.unmatched),
        "regressions": regressions,
        "warnings": warnings,
    }


NOT_AVAILABLE = "n/a"


SIGNIFICANT_MARK = "✱"


TABLE_HEADER = ("Cell", "Metric", "n A", "n B", "A", "B", "Change", "95 % CI", "Significant")


UNMATCHED_HEADER = ("Cell", "Side", "Experiment", "Run", "Target", "Reason")


def display_table(
    changes: pd.DataFrame, flagged: set, units: str = report_units.DEFAULT_UNITS
) -> dict:
    """{'header', 'rows': [{'cells', 'significant', 'flagged'}]} of the changes, for people."""
    rows = []
    for index, row in changes.iterrows():
        rows.append(
            {
                "cells": _display_cells(row, units),
                "significant": is_significant(row["significant"]),
                "flagged": index in flagged,
            }
        )
    return {"header": list(TABLE_HEADER), "rows": rows}


def _display_cells(row, units: str) -> list[str]:
    name, unit, scale, decimals = display(row["metric"], units)
    significant = row["significant"]
    has_interval = not is_missing(row["ci_low_pct"])
    if row.get("statistic") == MEAN_OF_ITERATION_P99:
        name = "p99 latency, mean of per-iteration p99s"  # no bins: not the report's p99
    return [
        str(row["cell"]),
        name if unit == name else f"{name} ({unit})",
        str(row["n_a"]),
        str(row["n_b"]),
        format_number(scaled(row["mean_a"], scale), decimals),
        format_number(scaled(row["mean_b"], scale), decimals),
        toolkit.format_percent(_fraction(row["change_pct"]), signed=True),
        _interval_text(row) if has_interval else NOT_AVAILABLE,
        _significance_text(significant),
    ]


def _significance_text(significant) -> str:
    if is_missing(significant):
        return NOT_AVAILABLE
    return SIGNIFICANT_MARK if significant else "no"


def _interval_text(row) -> str:
    low = toolkit.format_percent(_fraction(row["ci_low_pct"]), signed=True)
    high = toolkit.format_percent(_fraction(row["ci_high_pct"]), signed=True)
    return f"{low} to {high}"


def _fraction(percent):
    return None if is_missing(percent) else float(percent) / 100


def unmatched_table(unmatched: pd.DataFrame) -> dict:
    rows = [
        [str(row["cell"]), row["side"], str(row["experiment"]), str(row["run_id"])]
        + [NO_VALUE if is_missing(row["target"]) else str(row["target"])]
        + [row["reason"]]
        for _, row in unmatched.iterrows()
    ]
    return {"header": list(UNMATCHED_HEADER), "rows": rows}


def change_figure(changes: pd.DataFrame, limits: dict[str, float]):
    """A panel per metric: change (%) of every cell as a bar, its 95 % CI as error bar."""
    labels = list(dict.fromkeys(changes["cell"]))
    if not labels:
        fig, (ax,) = toolkit.new_figure(height_in=1.5)
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no matched cells", ha="center", va="center", transform=ax.transAxes)
        return fig, "Change per cell: no matched cells."
    fig, axes = toolkit.new_figure(1, len(METRICS), height_in=0.22 * len(labels) + 1.4)
    fig.set_figwidth(max(toolkit.FIGURE_WIDTH_IN, 10.0))
    for ax, metric in zip(axes, METRICS, strict=True):
        rows = changes[changes["metric"] == metric].set_index("cell").reindex(labels)
        _change_panel(ax, rows, metric, limits.get(metric))
    axes[0].set_yticks(range(len(labels)), labels)
    for ax in axes[1:]:
        ax.set_yticks(range(len(labels)), [""] * len(labels))
    for ax in axes:
        ax.set_ylim(len(labels) - 0.5, -0.5)  # first cell on top, like the table
    toolkit.figure_legend(fig, axes)
    caption = (
        "Change of B over A per cell and metric, (mean B − mean A) / mean A in percent. "
        "Error bars: 95 % confidence interval (Welch); none where a side has one iteration "
        "(n/a). Coloured: significant (interval excludes 0), green better, red worse; grey "
        "hatched: not significant or no interval. Dashed: regression threshold."
    )
    return fig, caption


_BAR_STYLES = {
    "better": {"color": toolkit.COLORS[2], "hatch": "", "label": "significant, better"},
    "worse": {"color": toolkit.COLORS[3], "hatch": "", "label": "significant, worse"},
    "unclear": {"color": "#BBBBBB", "hatch": "//", "label": "not significant or n/a"},
}


def _change_panel(ax, rows: pd.DataFrame, metric: str, limit: float | None) -> None:
    change = rows["change_pct"].astype(float)
    kinds = [_bar_kind(row, metric) for _, row in rows.iterrows()]
    for kind, style in _BAR_STYLES.items():
        ys = [y for y, k in enumerate(kinds) if k == kind]
        if ys:
            values = change.iloc[ys].fillna(0)
            ax.barh(ys, values, 0.7, edgecolor="black", linewidth=0.5, **style)
    with_interval = [y for y in range(len(rows)) if not math.isnan(rows["ci_low_pct"].iloc[y])]
    if with_interval:
        low = rows["ci_low_pct"].astype(float).iloc[with_interval]
        high = rows["ci_high_pct"].astype(float).iloc[with_interval]
        middle = change.iloc[with_interval]
        ax.errorbar(
            middle,
            with_interval,
            xerr=[middle - low, high - middle],
            fmt="none",
            ecolor="black",
            elinewidth=0.8,
            capsize=2,
        )
    ax.axvline(0, color="black", linewidth=0.8)
    if limit is not None:
        ax.axvline(limit, color="black", linewidth=1, linestyle="--", label="threshold")
    name, _, _, _ = DISPLAY[metric]
    ax.set_title(name)
    ax.set_xlabel("change (%)")


def _bar_kind(row, metric: str) -> str:
    if not is_significant(row["significant"]):
        return "unclear"
    better = (row["change_pct"] > 0) == HIGHER_IS_BETTER[metric]
    return "better" if better else "worse"


def render_change_figure(changes: pd.DataFrame, limits: dict[str, float]) -> tuple[bytes, str]:
    """(PNG bytes, caption) of the change figure, without dates or version stamps."""
    with toolkit.style():
        fig, caption = change_figure(changes, limits)
        try:
            buffer = io.BytesIO()
            fig.savefig(buffer, format="png", dpi=toolkit.FIGURE_DPI, metadata=toolkit.PNG_METADATA)
        finally:
            plt.close(fig)
    return buffer.getvalue(), caption


MATCHING_TEXT = (
    "Cells are matched by workload, not by experiment name or target: tool, rw, bs, iodepth, "
    "numjobs, rwmixread, hosts in the run, job and op. A job named after its run (fio's "
    "default) counts as the run's job. Where a side has several cells with the same workload "
    "(another swept option, several targets or equal-sized client steps), those cells are "
    "matched by run id too. Only the aggregate over all hosts (host 'all') is compared, the "
    "last attempt of each iteration. Cells without exactly one partner are listed as unmatched."
)


STATISTICS_TEXT = (
    "Per cell and metric, each side's value is the experiment report's: bandwidth and IOPS "
    "the mean over iterations, mean latency weighted by I/O count, p99 from the latency "
    "histograms of all hosts and iterations merged into one (percentiles are never "
    "averaged). Where an iteration has no histogram, p99 is the mean of the iterations' own "
    "p99s and its row says so. Change = (B − A) / A. 95 % confidence interval: Welch's t "
    "interval on the per-iteration values (unequal variances, Welch–Satterthwaite degrees "
    "of freedom) around B − A, divided by A, "
    "which is taken as exact, so the interval is slightly narrow when A itself is noisy. "
    f"With one iteration on a side there is no interval ({NOT_AVAILABLE}). Significant "
    f"({SIGNIFICANT_MARK}): the interval excludes 0."
)


THRESHOLD_TEXT = (
    "A change is a regression when it is significant and beyond its threshold: below a "
    "negative threshold (bandwidth, IOPS) or above a positive one (latency). Changes without "
    "an interval (one iteration on a side) never count; use two or more iterations."
)


def _context(
    comparison, violations, limits, units, *, a_label, b_label, a_source, b_source
) -> dict:
    png, caption = render_change_figure(comparison.changes, limits)
    changes = comparison.changes
    significant = changes["significant"].fillna(False).astype(bool)
    thresholds = ", ".join(f"{metric} {limit:+g} %" for metric, limit in limits.items())
    return {
        "title": f"Comparison: {a_label} vs {b_label}",
        "a_label": a_label,
        "b_label": b_label,
        "a_source": str(a_source),
        "b_source": str(b_source),
        "cells": int(changes["cell"].nunique()),
        "significant": int(significant.sum()),
        "regressions": [message for _, message in violations],
        "thresholds": thresholds,
        "table": display_table(changes, {index for index, _ in violations}, units),
        "unmatched": unmatched_table(comparison.unmatched),
        "figure": {"name": FIGURE_NAME, "caption": caption, "png_base64": toolkit.as_base64(png)},
        "methodology": [
            ("A", f"{a_label}: {a_source}"),
            ("B", f"{b_label}: {b_source}"),
            ("Matching", MATCHING_TEXT),
            ("Statistics", f"{STATISTICS_TEXT} Bandwidth in {report_units.units_note(units)}."),
            ("Thresholds", f"{thresholds or 'none'}. {THRESHOLD_TEXT}"),
        ],
    }


def markdown(context: dict) -> str:
    """comparison.md: counts, regressions, the change table, unmatched cells, methodology."""
    lines = [f"# {context['title']}", ""]
    lines += [f"- A: {context['a_label']} ({context['a_source']})"]
    lines += [f"- B: {context['b_label']} ({context['b_source']})"]
    lines += [
        f"- {context['cells']} matched cells, {context['significant']} significant changes, "
        f"{len(context['unmatched']['rows'])} unmatched cells",
        f"- thresholds: {context['thresholds'] or 'none'}",
        "",
        "## Regressions",
        "",
    ]
    lines += [f"- {message}" for message in context["regressions"]] or ["None."]
    if context.get("warnings"):
        lines += ["", "## Tool versions", ""]
        lines += [f"- {message}" for message in context["warnings"]]
    changes = [row["cells"] for row in context["table"]["rows"]]
    lines += ["", "## Changes", "", tables.pipe_table(context["table"]["header"], changes)]
    lines += ["", "## Unmatched cells", ""]
    if context["unmatched"]["rows"]:
        unmatched = context["unmatched"]
        lines.append(tables.pipe_table(unmatched["header"], unmatched["rows"]))
    else:
        lines.append("None.")
    lines += ["", "## Methodology", ""]
    lines += [f"- {label}: {text}" for label, text in context["methodology"]]
    return "\n".join(lines) + "\n"
