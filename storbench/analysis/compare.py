"""Comparison of two experiments or result folders (e.g. before/after a firmware change).

``build_comparison`` reads the per-iteration rows of two sides A and B (an experiment's
``results/<experiment>/summary.parquet``, or the folder holding it), matches their cells by
workload, and writes into ``reports/compare/<A>_vs_<B>/``: comparison.csv (one row per
matched cell and metric, full precision), unmatched.csv, comparison.md, index.html
(self-contained: one figure as a base64 PNG) and regressions.json.

Matching. Only rows of the aggregate over all hosts (host 'all') count, the last attempt of
each iteration. A cell of one side is (experiment, run_id, job, op) as in ``stats``; cells are
matched across sides by MATCH_COLUMNS (tool, rw, bs, iodepth, numjobs, rwmixread,
hosts_in_run, job, op), not by experiment name and not by target, so an experiment on a new
target or under a new experiment name still pairs with the old one. A job named after its
run (fio's default) counts as the run's job '*'. Where one side has several cells with the
same workload (another swept option, several targets or equal-sized client steps), the cells
of that workload are matched by run id as well. Cells without exactly one partner are listed
as unmatched with the reason, never dropped silently.

Statistics, per matched cell and metric (METRICS): the per-iteration values of each side
(p99 from each iteration's all-hosts row, itself from merged histograms); plain means over
iterations; change = (mean B - mean A) / mean A in percent; a 95 % confidence interval from
Welch's t interval of mean B - mean A (Welch-Satterthwaite degrees of freedom) divided by
mean A, which is treated as exact. With one iteration on a side there is no interval
('n/a'); significant = the interval excludes 0.

Thresholds: {metric: '-5%'} for bandwidth and IOPS (a drop beyond it is a regression),
{metric: '+10%'} for latency (a rise beyond it). Only significant changes count, so a cell
with one iteration on a side never fails a threshold.

The t quantile is ``stats.t_quantile`` (exact CDF inverted by bisection, no scipy).
"""

from __future__ import annotations

import io
import math
import re
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display; the same renderer everywhere keeps bytes identical

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from storbench.analysis import stats
from storbench.core import (
    atomic,  # noqa: E402
    results,
)
from storbench.core.units import size_label  # noqa: E402
from storbench.report import experiment as report

SUMMARY_FILE = "summary.parquet"
TEMPLATE_NAME = "compare.html.j2"
FIGURE_NAME = "change"
CONFIDENCE = 0.95

METRICS = ("bw_bytes_s", "iops", "lat_mean_ns", "p99_ns")
HIGHER_IS_BETTER = {"bw_bytes_s": True, "iops": True, "lat_mean_ns": False, "p99_ns": False}
# name, unit, divisor, decimals: the units of the experiment report
DISPLAY = {
    "bw_bytes_s": ("bandwidth", "MiB/s", report.MIB, 1),
    "iops": ("IOPS", "IOPS", 1.0, 0),
    "lat_mean_ns": ("mean latency", "µs", report.NS_PER_US, 1),
    "p99_ns": ("p99 latency", "µs", report.NS_PER_US, 1),
}
MATCH_COLUMNS = (
    "tool",
    "rw",
    "bs",
    "iodepth",
    "numjobs",
    "rwmixread",
    "hosts_in_run",
    "job",
    "op",
)
RUN_JOB = "*"  # the job of a run that names its job after itself (fio's default)
SIDES = ("A", "B")

CHANGE_COLUMNS = (
    "cell",
    *MATCH_COLUMNS,
    "experiment_a",
    "run_id_a",
    "target_a",
    "experiment_b",
    "run_id_b",
    "target_b",
    "metric",
    "n_a",
    "n_b",
    "mean_a",
    "mean_b",
    "change_pct",
    "ci_low_pct",
    "ci_high_pct",
    "df",
    "significant",
)
UNMATCHED_COLUMNS = ("cell", "side", "experiment", "run_id", "target", "reason")
_INTEGER_COLUMNS = ("bs", "iodepth", "numjobs", "rwmixread", "hosts_in_run", "n_a", "n_b")
_FLOAT_COLUMNS = ("mean_a", "mean_b", "change_pct", "ci_low_pct", "ci_high_pct", "df")


@dataclass(frozen=True)
class Comparison:
    changes: pd.DataFrame  # CHANGE_COLUMNS: one row per matched cell and metric
    unmatched: pd.DataFrame  # UNMATCHED_COLUMNS: one row per cell without a partner


# ---------------------------------------------------------------------------------------
# Entry point


def build_comparison(
    a_source, b_source, out_dir, *, a_label: str, b_label: str, thresholds: dict | None = None
) -> dict:
    """Compare B with A and write the comparison files into ``out_dir``.

    Returns {"cells": matched cells, "significant": significant (cell, metric) changes,
    "unmatched": unmatched cells, "regressions": threshold violation messages}.
    """
    limits = parse_thresholds(thresholds or {})  # a config mistake fails before any reading
    comparison = compare(load_side(a_source), load_side(b_source))
    violations = _violations(comparison.changes, limits)
    regressions = [message for _, message in violations]
    out_dir = Path(out_dir)
    atomic.write_text(out_dir / "comparison.csv", report.frame_csv(comparison.changes))
    atomic.write_text(out_dir / "unmatched.csv", report.frame_csv(comparison.unmatched))
    atomic.write_json(
        out_dir / "regressions.json",
        {"a": a_label, "b": b_label, "thresholds": thresholds or {}, "regressions": regressions},
    )
    context = _context(comparison, violations, limits, a_label, b_label, a_source, b_source)
    atomic.write_text(out_dir / "comparison.md", markdown(context))
    html = report.template_environment().get_template(TEMPLATE_NAME).render(context)
    atomic.write_text(out_dir / "index.html", html)
    significant = comparison.changes["significant"].fillna(False).astype(bool)
    return {
        "cells": int(comparison.changes["cell"].nunique()),
        "significant": int(significant.sum()),
        "unmatched": len(comparison.unmatched),
        "regressions": regressions,
    }


def load_side(source) -> pd.DataFrame:
    """The all-hosts rows (last attempt per iteration) of summary.parquet or its folder."""
    path = Path(source)
    if path.is_dir():
        path = path / SUMMARY_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"comparison source {str(source)!r}: no such file; expected "
            f"results/<experiment>/{SUMMARY_FILE} or the folder holding it"
        )
    frame = results.read_parquet(path).to_pandas()
    rows = stats.latest_attempts(frame[frame["host"] == results.ALL_HOSTS])
    if rows.empty:
        raise ValueError(
            f"comparison source {str(path)!r}: no rows with host {results.ALL_HOSTS!r}"
        )
    return rows.reset_index(drop=True)


# ---------------------------------------------------------------------------------------
# Matching


def compare(a_rows: pd.DataFrame, b_rows: pd.DataFrame) -> Comparison:
    """Match the cells of two sides' all-hosts rows and compute every metric's change."""
    cells_a, cells_b = side_cells(a_rows), side_cells(b_rows)
    ambiguous = _ambiguous_workloads(cells_a) | _ambiguous_workloads(cells_b)
    keyed = [_by_key(cells, ambiguous) for cells in (cells_a, cells_b)]
    changes, unmatched = [], []
    for key in sorted(set(keyed[0]) | set(keyed[1]), key=_sort_key):
        found = [side.get(key, []) for side in keyed]
        if all(len(cells) == 1 for cells in found):
            changes += _cell_changes(key, found[0][0], found[1][0])
        else:
            unmatched += _unmatched_records(key, found)
    return Comparison(
        changes=_typed(pd.DataFrame.from_records(changes, columns=list(CHANGE_COLUMNS))),
        unmatched=pd.DataFrame.from_records(unmatched, columns=list(UNMATCHED_COLUMNS)),
    )


def side_cells(rows: pd.DataFrame) -> list[dict]:
    """One entry per (experiment, run_id, job, op): its workload and its iterations' rows."""
    rows = rows.assign(**{c: None for c in ("target", "hosts_in_run") if c not in rows})
    cells = []
    groups = rows.groupby(list(stats.CELL_KEYS), sort=True, dropna=False)
    for (experiment, run_id, job, op), group in groups:
        first = group.iloc[0]
        parameters = tuple(_plain(first[column]) for column in MATCH_COLUMNS[:-2])
        cells.append(
            {
                "workload": (*parameters, job_role(job, run_id), op),
                "experiment": experiment,
                "run_id": run_id,
                "target": _plain(first["target"]),
                "rows": group.sort_values("iteration", kind="stable"),
            }
        )
    return cells


def job_role(job: str, run_id: str) -> str:
    """'*' for a job named after its run ('*#2' for its second phase), else the job name."""
    job, run_id = str(job), str(run_id)
    if job == run_id or job.startswith(f"{run_id}#"):
        return RUN_JOB + job[len(run_id) :]
    return job


def _plain(value):
    """None for a missing value, int for a whole number (Parquet nulls turn ints into floats)."""
    if report.is_missing(value):
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _ambiguous_workloads(cells: list[dict]) -> set[tuple]:
    counts = Counter(cell["workload"] for cell in cells)
    return {workload for workload, count in counts.items() if count > 1}


def _by_key(cells: list[dict], ambiguous: set[tuple]) -> dict[tuple, list[dict]]:
    """Cells by match key (workload, run id if the workload is ambiguous on a side, else None)."""
    keyed: dict[tuple, list[dict]] = {}
    for cell in cells:
        run_id = cell["run_id"] if cell["workload"] in ambiguous else None
        keyed.setdefault((cell["workload"], run_id), []).append(cell)
    return keyed


def _sort_key(key: tuple) -> tuple:
    workload, run_id = key
    return tuple(
        (value is None, value if value is not None else 0) for value in (*workload, run_id)
    )


def cell_label(key: tuple) -> str:
    """'fio randread bs=4k qd=16 nj=1 read', plus hosts, job and run id where they matter."""
    workload, run_id = key
    values = dict(zip(MATCH_COLUMNS, workload, strict=True))
    parts = [values["tool"], values["rw"]]
    if values["rwmixread"] is not None:
        parts.append(f"rwmixread={values['rwmixread']}")
    if values["bs"] is not None:
        parts.append(f"bs={size_label(values['bs'])}")
    for column, short in (("iodepth", "qd"), ("numjobs", "nj"), ("hosts_in_run", "hosts")):
        if values[column] is not None:
            parts.append(f"{short}={values[column]}")
    if values["job"] != RUN_JOB:
        parts.append(f"job={values['job']}")
    parts.append(values["op"])
    if run_id is not None:
        parts.append(f"[{run_id}]")
    return " ".join(str(part) for part in parts if part is not None)


def _unmatched_records(key: tuple, found: list[list[dict]]) -> list[dict]:
    records = []
    for side, cells, other in zip(SIDES, found, reversed(found), strict=True):
        if len(cells) > 1:
            reason = f"{len(cells)} cells on side {side} with this workload and run id"
        elif not other:
            reason = f"no matching cell on side {'B' if side == 'A' else 'A'}"
        else:
            reason = "the matching cell on the other side is ambiguous"
        records += [
            {
                "cell": cell_label(key),
                "side": side,
                "experiment": cell["experiment"],
                "run_id": cell["run_id"],
                "target": cell["target"],
                "reason": reason,
            }
            for cell in cells
        ]
    return records


# ---------------------------------------------------------------------------------------
# Statistics


def _cell_changes(key: tuple, cell_a: dict, cell_b: dict) -> list[dict]:
    identity = {"cell": cell_label(key), **dict(zip(MATCH_COLUMNS, key[0], strict=True))}
    for suffix, cell in (("a", cell_a), ("b", cell_b)):
        identity.update(
            {
                f"experiment_{suffix}": cell["experiment"],
                f"run_id_{suffix}": cell["run_id"],
                f"target_{suffix}": cell["target"],
            }
        )
    return [
        {
            **identity,
            "metric": metric,
            **welch_change(cell_a["rows"][metric], cell_b["rows"][metric]),
        }
        for metric in METRICS
    ]


def welch_change(a_values, b_values, confidence: float = CONFIDENCE) -> dict:
    """Change of mean B over mean A in percent, with Welch's t interval divided by mean A.

    Returns n_a, n_b, mean_a, mean_b, change_pct, ci_low_pct, ci_high_pct, df and significant
    (interval excludes 0). Missing values are skipped; without two values on each side the
    interval, df and significant are NaN/None; without a positive mean A the change is NaN.
    """
    a = [float(v) for v in a_values if not report.is_missing(v)]
    b = [float(v) for v in b_values if not report.is_missing(v)]
    result = {
        "n_a": len(a),
        "n_b": len(b),
        "mean_a": statistics.fmean(a) if a else math.nan,
        "mean_b": statistics.fmean(b) if b else math.nan,
        "change_pct": math.nan,
        "ci_low_pct": math.nan,
        "ci_high_pct": math.nan,
        "df": math.nan,
        "significant": None,
    }
    mean_a, mean_b = result["mean_a"], result["mean_b"]
    if not (a and b and mean_a > 0):
        return result
    result["change_pct"] = 100 * (mean_b - mean_a) / mean_a
    if len(a) < 2 or len(b) < 2:
        return result
    half_width, df = welch_half_width(a, b, confidence)
    low = 100 * (mean_b - mean_a - half_width) / mean_a
    high = 100 * (mean_b - mean_a + half_width) / mean_a
    result.update(ci_low_pct=low, ci_high_pct=high, df=df, significant=low > 0 or high < 0)
    return result


def welch_half_width(a: list[float], b: list[float], confidence: float) -> tuple[float, float]:
    """(t * standard error, Welch-Satterthwaite df) of mean(b) - mean(a); df inf if no spread."""
    share_a = statistics.variance(a) / len(a)
    share_b = statistics.variance(b) / len(b)
    squared_error = share_a + share_b
    if squared_error == 0:
        return 0.0, math.inf
    df = squared_error**2 / (share_a**2 / (len(a) - 1) + share_b**2 / (len(b) - 1))
    return stats.t_quantile(0.5 + confidence / 2, df) * math.sqrt(squared_error), df


def _typed(changes: pd.DataFrame) -> pd.DataFrame:
    types = {column: "Int64" for column in _INTEGER_COLUMNS}
    types.update({column: "float64" for column in _FLOAT_COLUMNS})
    types["significant"] = "boolean"
    return changes.astype(types)


# ---------------------------------------------------------------------------------------
# Thresholds

_THRESHOLD = re.compile(r"^\s*([+-])\s*(\d+(?:\.\d+)?)\s*%\s*$")


def parse_thresholds(thresholds: dict) -> dict[str, float]:
    """{'iops': '-5%', 'p99_ns': '+10%'} -> {'iops': -5.0, 'p99_ns': 10.0} (percent)."""
    limits = {}
    for metric, text in thresholds.items():
        if metric not in METRICS:
            raise ValueError(f"thresholds.{metric}: unknown metric; known: {', '.join(METRICS)}")
        match = _THRESHOLD.match(text) if isinstance(text, str) else None
        if match is None:
            raise ValueError(
                f"thresholds.{metric}: expected a signed percentage such as '-5%' or '+10%', "
                f"got {text!r}"
            )
        sign, number = match.groups()
        if (sign == "-") != HIGHER_IS_BETTER[metric]:
            wanted = "a drop: '-5%'" if HIGHER_IS_BETTER[metric] else "a rise: '+10%'"
            raise ValueError(f"thresholds.{metric}: a regression of {metric} is {wanted}")
        limits[metric] = float(number) if sign == "+" else -float(number)
    return limits


def check_thresholds(comparison, thresholds: dict) -> list[str]:
    """Messages for the significant changes beyond their threshold (see parse_thresholds).

    ``comparison``: a Comparison or its ``changes`` frame. A change crosses a negative
    threshold when it is below it, a positive one when above it; a change without a
    confidence interval (one iteration on a side) or whose interval includes 0 never does.
    """
    changes = comparison.changes if isinstance(comparison, Comparison) else comparison
    return [message for _, message in _violations(changes, parse_thresholds(thresholds))]


def _violations(changes: pd.DataFrame, limits: dict[str, float]) -> list[tuple[int, str]]:
    """(row index, message) of each violation, in table order."""
    found = []
    significant = changes["significant"].fillna(False).astype(bool)
    for index, row in changes[significant].iterrows():
        limit = limits.get(row["metric"])
        if limit is None:
            continue
        change = row["change_pct"]
        if change < limit if limit < 0 else change > limit:
            found.append((index, violation_message(row, limit)))
    return found


def violation_message(row, limit: float) -> str:
    name, unit, scale, decimals = DISPLAY[row["metric"]]
    before = report.format_number(row["mean_a"] / scale, decimals)
    after = report.format_number(row["mean_b"] / scale, decimals)
    return (
        f"{row['cell']}: {row['metric']} ({name}) {before} -> {after} {unit} "
        f"({row['change_pct']:+.1f} %, 95 % CI {row['ci_low_pct']:+.1f} % to "
        f"{row['ci_high_pct']:+.1f} %) crosses the threshold {limit:+g} %"
    )


# ---------------------------------------------------------------------------------------
# Tables, figure, documents

NOT_AVAILABLE = "n/a"
SIGNIFICANT_MARK = "✱"
TABLE_HEADER = ("Cell", "Metric", "n A", "n B", "A", "B", "Change", "95 % CI", "Significant")
UNMATCHED_HEADER = ("Cell", "Side", "Experiment", "Run", "Target", "Reason")


def display_table(changes: pd.DataFrame, flagged: set) -> dict:
    """{'header', 'rows': [{'cells', 'significant', 'flagged'}]} of the changes, for people."""
    rows = []
    for index, row in changes.iterrows():
        rows.append(
            {
                "cells": _display_cells(row),
                "significant": is_significant(row["significant"]),
                "flagged": index in flagged,
            }
        )
    return {"header": list(TABLE_HEADER), "rows": rows}


def is_significant(value) -> bool:
    """True for a significant change; False for not significant or no interval (NA)."""
    return not report.is_missing(value) and bool(value)


def _display_cells(row) -> list[str]:
    name, unit, scale, decimals = DISPLAY[row["metric"]]
    significant = row["significant"]
    has_interval = not report.is_missing(row["ci_low_pct"])
    return [
        str(row["cell"]),
        name if unit == name else f"{name} ({unit})",
        str(row["n_a"]),
        str(row["n_b"]),
        report.format_number(_scaled(row["mean_a"], scale), decimals),
        report.format_number(_scaled(row["mean_b"], scale), decimals),
        report.format_percent(_fraction(row["change_pct"]), signed=True),
        _interval_text(row) if has_interval else NOT_AVAILABLE,
        _significance_text(significant),
    ]


def _significance_text(significant) -> str:
    if report.is_missing(significant):
        return NOT_AVAILABLE
    return SIGNIFICANT_MARK if significant else "no"


def _interval_text(row) -> str:
    low = report.format_percent(_fraction(row["ci_low_pct"]), signed=True)
    high = report.format_percent(_fraction(row["ci_high_pct"]), signed=True)
    return f"{low} to {high}"


def _scaled(value, scale: float):
    return None if report.is_missing(value) else float(value) / scale


def _fraction(percent):
    return None if report.is_missing(percent) else float(percent) / 100


def unmatched_table(unmatched: pd.DataFrame) -> dict:
    rows = [
        [str(row["cell"]), row["side"], str(row["experiment"]), str(row["run_id"])]
        + [report.NO_VALUE if report.is_missing(row["target"]) else str(row["target"])]
        + [row["reason"]]
        for _, row in unmatched.iterrows()
    ]
    return {"header": list(UNMATCHED_HEADER), "rows": rows}


def change_figure(changes: pd.DataFrame, limits: dict[str, float]):
    """A panel per metric: change (%) of every cell as a bar, its 95 % CI as error bar."""
    labels = list(dict.fromkeys(changes["cell"]))
    if not labels:
        fig, (ax,) = report.new_figure(height_in=1.5)
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no matched cells", ha="center", va="center", transform=ax.transAxes)
        return fig, "Change per cell: no matched cells."
    fig, axes = report.new_figure(1, len(METRICS), height_in=0.22 * len(labels) + 1.4)
    fig.set_figwidth(max(report.FIGURE_WIDTH_IN, 10.0))
    for ax, metric in zip(axes, METRICS, strict=True):
        rows = changes[changes["metric"] == metric].set_index("cell").reindex(labels)
        _change_panel(ax, rows, metric, limits.get(metric))
    axes[0].set_yticks(range(len(labels)), labels)
    for ax in axes[1:]:
        ax.set_yticks(range(len(labels)), [""] * len(labels))
    for ax in axes:
        ax.set_ylim(len(labels) - 0.5, -0.5)  # first cell on top, like the table
    report.figure_legend(fig, axes)
    caption = (
        "Change of B over A per cell and metric, (mean B − mean A) / mean A in percent. "
        "Error bars: 95 % confidence interval (Welch); none where a side has one iteration "
        "(n/a). Coloured: significant (interval excludes 0), green better, red worse; grey "
        "hatched: not significant or no interval. Dashed: regression threshold."
    )
    return fig, caption


_BAR_STYLES = {
    "better": {"color": report.COLORS[2], "hatch": "", "label": "significant, better"},
    "worse": {"color": report.COLORS[3], "hatch": "", "label": "significant, worse"},
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
    with matplotlib.rc_context(report.RC):
        fig, caption = change_figure(changes, limits)
        try:
            buffer = io.BytesIO()
            fig.savefig(buffer, format="png", dpi=report.FIGURE_DPI, metadata=report.PNG_METADATA)
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
    "Per cell and metric, the per-iteration values of each side: means are plain means over "
    "iterations (the experiment report's mean latency is weighted by I/O count and can differ "
    "slightly); p99 is each iteration's p99 over all hosts, from merged histograms. Change = "
    "(mean B − mean A) / mean A. 95 % confidence interval: Welch's t interval of mean B − "
    "mean A (unequal variances, Welch–Satterthwaite degrees of freedom) divided by mean A, "
    "which is taken as exact, so the interval is slightly narrow when A itself is noisy. "
    f"With one iteration on a side there is no interval ({NOT_AVAILABLE}). Significant "
    f"({SIGNIFICANT_MARK}): the interval excludes 0."
)
THRESHOLD_TEXT = (
    "A change is a regression when it is significant and beyond its threshold: below a "
    "negative threshold (bandwidth, IOPS) or above a positive one (latency). Changes without "
    "an interval (one iteration on a side) never count; use two or more iterations."
)


def _context(comparison, violations, limits, a_label, b_label, a_source, b_source) -> dict:
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
        "table": display_table(changes, {index for index, _ in violations}),
        "unmatched": unmatched_table(comparison.unmatched),
        "figure": {"name": FIGURE_NAME, "caption": caption, "png_base64": report.as_base64(png)},
        "methodology": [
            ("A", f"{a_label}: {a_source}"),
            ("B", f"{b_label}: {b_source}"),
            ("Matching", MATCHING_TEXT),
            ("Statistics", STATISTICS_TEXT),
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
    lines += ["", "## Changes", "", *_markdown_table(context["table"]["header"])]
    lines += [report.markdown_row(row["cells"]) for row in context["table"]["rows"]]
    lines += ["", "## Unmatched cells", ""]
    if context["unmatched"]["rows"]:
        lines += _markdown_table(context["unmatched"]["header"])
        lines += [report.markdown_row(row) for row in context["unmatched"]["rows"]]
    else:
        lines.append("None.")
    lines += ["", "## Methodology", ""]
    lines += [f"- {label}: {text}" for label, text in context["methodology"]]
    return "\n".join(lines) + "\n"


def _markdown_table(header: list[str]) -> list[str]:
    return [report.markdown_row(header), report.markdown_row(["---"] * len(header))]
