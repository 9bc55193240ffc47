"""Comparison of two experiments or result folders (e.g. before/after a firmware change).

``compare`` takes the per-iteration rows of two sides A and B (``load_side``: an
experiment's ``results/<experiment>/summary.parquet``, or the folder holding it), matches
their cells by workload and computes the changes; ``storbench.report.compare.build_comparison``
writes them into ``reports/compare/<A>_vs_<B>/``: comparison.csv (one row per matched cell and
metric, full precision), unmatched.csv, comparison.md, index.html (self-contained: one figure
as a base64 PNG) and regressions.json.

Matching. Only rows of the aggregate over all hosts (host 'all') count, the last attempt of
each iteration. A cell of one side is (experiment, run_id, job, op) as in ``stats``; cells are
matched across sides by MATCH_COLUMNS (tool, rw, bs, iodepth, numjobs, rwmixread,
hosts_in_run, job, op), not by experiment name and not by target, so an experiment on a new
target or under a new experiment name still pairs with the old one; a parameter a job left
unset counts as the tool's own default (fio's numjobs=1 pairs with a run that never set
numjobs: the adapter's ``parameter_defaults``). A job named after its run (fio's default),
or a run's only job, counts as the run's job '*'. Where one side has several cells with the
same workload (another swept option, several targets or equal-sized client steps), the cells
of that workload are matched by run id as well. Cells without exactly one partner are listed
as unmatched with the reason, never dropped silently.

Statistics, per matched cell and metric (METRICS), each side's value is the experiment
report's (``statistic`` names it): bandwidth and IOPS the mean over iterations, mean latency
weighted by I/O count, p99 from the histograms of all iterations merged (``stats``; the
same number as the experiment report's). Only where an iteration has no bins is p99 the mean
of the iterations' p99s, named so ('mean of per-iteration p99'): percentiles are not
averaged where bins exist. Change = (B - A) / A in percent; a 95 % confidence interval from
Welch's t interval on the per-iteration values (Welch-Satterthwaite degrees of freedom) put
around B - A and divided by A, which is treated as exact. With one iteration on a side
there is no interval ('n/a'); significant = the interval excludes 0.

Thresholds: {metric: '-5%'} for bandwidth and IOPS (a drop beyond it is a regression),
{metric: '+10%'} for latency (a rise beyond it). Only significant changes count, so a cell
with one iteration on a side never fails a threshold.

The t quantile is ``stats.t_quantile`` (exact CDF inverted by bisection, no scipy).
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from storbench.analysis import stats
from storbench.core import (
    report_units,
    results,
)
from storbench.core.numbers import NS_PER_US, format_number, is_missing
from storbench.core.suggest import did_you_mean
from storbench.core.units import size_label
from storbench.tools import UnknownToolError, get_tool

SUMMARY_FILE = "summary.parquet"
# What a side's value of a metric is (CHANGE_COLUMNS 'statistic').
MEAN_OF_ITERATIONS = "mean of iterations"
WEIGHTED_MEAN = "mean weighted by I/O count"
MERGED_HISTOGRAMS = "merged histograms"
MEAN_OF_ITERATION_P99 = "mean of per-iteration p99"
CONFIDENCE = 0.95

METRICS = ("bw_bytes_s", "iops", "lat_mean_ns", "p99_ns")
HIGHER_IS_BETTER = {"bw_bytes_s": True, "iops": True, "lat_mean_ns": False, "p99_ns": False}
# name, unit, divisor, decimals: the units of the experiment report (bandwidth: see display)
DISPLAY = {
    "bw_bytes_s": ("bandwidth", *report_units.table_bandwidth_unit(), 1),
    "iops": ("IOPS", "IOPS", 1.0, 0),
    "lat_mean_ns": ("mean latency", "µs", NS_PER_US, 1),
    "p99_ns": ("p99 latency", "µs", NS_PER_US, 1),
}


def display(metric: str, units: str = report_units.DEFAULT_UNITS) -> tuple[str, str, float, int]:
    """(name, unit, divisor, decimals) of a metric, bandwidth in the table unit of ``units``."""
    if metric == "bw_bytes_s":
        return ("bandwidth", *report_units.table_bandwidth_unit(units), 1)
    return DISPLAY[metric]


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
RUN_JOB = "*"  # a run's only job, or one named after its run (fio's default)
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
    "statistic",
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


def side_path(source) -> Path:
    """summary.parquet of a side given as the file or its folder."""
    path = Path(source)
    if path.is_dir():
        path = path / SUMMARY_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"comparison source {str(source)!r}: no such file; expected "
            f"results/<experiment>/{SUMMARY_FILE} or the folder holding it"
        )
    return path


def read_side(source) -> pd.DataFrame:
    """Every row of a side, the hosts' own among them (their tool versions)."""
    return results.read_parquet(side_path(source)).to_pandas()


def load_side(source, frame: pd.DataFrame | None = None) -> pd.DataFrame:
    """The all-hosts rows (last attempt per iteration) of summary.parquet or its folder
    (``frame``: its rows, already read)."""
    path = side_path(source)
    frame = read_side(source) if frame is None else frame
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
    jobs_per_run = rows.groupby(["experiment", "run_id"], dropna=False)["job"].nunique()
    groups = rows.groupby(list(stats.CELL_KEYS), sort=True, dropna=False)
    for (experiment, run_id, job, op), group in groups:
        only_job = jobs_per_run[(experiment, run_id)] == 1
        first = group.iloc[0]
        defaults = _parameter_defaults(_plain(first["tool"]))
        parameters = tuple(
            _or_default(_plain(first[column]), defaults.get(column))
            for column in MATCH_COLUMNS[:-2]
        )
        cells.append(
            {
                "workload": (*parameters, RUN_JOB if only_job else job_role(job, run_id), op),
                "experiment": experiment,
                "run_id": run_id,
                "target": _plain(first["target"]),
                "rows": group.sort_values("iteration", kind="stable"),
            }
        )
    return cells


def _parameter_defaults(tool) -> dict:
    """The values a tool runs with where a job sets none; none for a tool not installed here."""
    try:
        return get_tool(str(tool)).parameter_defaults
    except UnknownToolError:
        return {}


def _or_default(value, default):
    return default if value is None else value


def job_role(job: str, run_id: str) -> str:
    """'*' for a job named after its run ('*#2' for its second phase), else the job name."""
    job, run_id = str(job), str(run_id)
    if job == run_id or job.startswith(f"{run_id}#"):
        return RUN_JOB + job[len(run_id) :]
    return job


def _plain(value):
    """None for a missing value, int for a whole number (Parquet nulls turn ints into floats)."""
    if is_missing(value):
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
    changes = []
    for metric in METRICS:
        statistic, estimates = side_estimates(metric, cell_a["rows"], cell_b["rows"])
        values = (cell_a["rows"][metric], cell_b["rows"][metric])
        changes.append(
            {
                **identity,
                "metric": metric,
                "statistic": statistic,
                **welch_change(*values, estimates=estimates),
            }
        )
    return changes


_P99 = results.PERCENTILE_COLUMNS.index("p99_ns")


def _basis(rows: pd.DataFrame) -> str | None:
    """The cell's latency basis when its rows share one (the mean is then on it, as in the
    experiment report: fio's clat mean where the percentiles are clat)."""
    bases = set(rows["lat_basis"].dropna()) if "lat_basis" in rows else set()
    return str(bases.pop()) if len(bases) == 1 else None


def side_estimates(
    metric: str, a_rows: pd.DataFrame, b_rows: pd.DataFrame
) -> tuple[str, tuple[float, float] | None]:
    """(statistic, (A, B)) of a metric: the values the experiment reports show. None for
    the plain mean of the iterations (bandwidth, IOPS, p99 where an iteration lacks bins)."""
    if metric == "lat_mean_ns":
        means = tuple(stats.weighted_latency_mean(rows, _basis(rows)) for rows in (a_rows, b_rows))
        if not any(math.isnan(value) for value in means):
            return WEIGHTED_MEAN, (means[0], means[1])
    if metric == "p99_ns":
        merged = tuple(
            stats.merged_percentiles(rows)[_P99] if "hist_ns" in rows else math.nan
            for rows in (a_rows, b_rows)
        )
        if not any(math.isnan(value) for value in merged):
            return MERGED_HISTOGRAMS, (merged[0], merged[1])
        return MEAN_OF_ITERATION_P99, None
    return MEAN_OF_ITERATIONS, None


def welch_change(
    a_values,
    b_values,
    confidence: float = CONFIDENCE,
    estimates: tuple[float, float] | None = None,
) -> dict:
    """Change of mean B over mean A in percent, with Welch's t interval divided by mean A.

    Returns n_a, n_b, mean_a, mean_b, change_pct, ci_low_pct, ci_high_pct, df and significant
    (interval excludes 0). Missing values are skipped; without two values on each side the
    interval, df and significant are NaN/None; without a positive mean A the change is NaN.
    ``estimates``: each side's value where it is not the plain mean of its values (the
    I/O-weighted mean latency, the p99 of merged histograms); the interval's half width
    still comes from the per-iteration values, around estimate B - estimate A.
    """
    a = [float(v) for v in a_values if not is_missing(v)]
    b = [float(v) for v in b_values if not is_missing(v)]
    mean_a = statistics.fmean(a) if a else math.nan
    mean_b = statistics.fmean(b) if b else math.nan
    if estimates is not None:
        mean_a, mean_b = estimates
    result: dict = {
        "n_a": len(a),
        "n_b": len(b),
        "mean_a": mean_a,
        "mean_b": mean_b,
        "change_pct": math.nan,
        "ci_low_pct": math.nan,
        "ci_high_pct": math.nan,
        "df": math.nan,
        "significant": None,
    }
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

THRESHOLD_SYNONYMS = {"bw": "bw_bytes_s", "bandwidth": "bw_bytes_s", "p99": "p99_ns",
                      "lat_mean": "lat_mean_ns", "latency": "lat_mean_ns"}  # fmt: skip
_THRESHOLD = re.compile(r"^\s*([+-])\s*(\d+(?:\.\d+)?)\s*%\s*$")


def parse_thresholds(thresholds: dict) -> dict[str, float]:
    """{'iops': '-5%', 'p99_ns': '+10%'} -> {'iops': -5.0, 'p99_ns': 10.0} (percent)."""
    limits = {}
    for metric, text in thresholds.items():
        if metric not in METRICS:
            meant = did_you_mean(str(metric), METRICS, synonyms=THRESHOLD_SYNONYMS)
            raise ValueError(
                f"thresholds.{metric}: unknown metric{meant}; known: {', '.join(METRICS)}"
            )
        match = _THRESHOLD.match(text) if isinstance(text, str) else None
        if match is None:
            unsigned = isinstance(text, str) and _THRESHOLD.match(f"+{text}")
            sign = "-" if HIGHER_IS_BETTER[metric] else "+"
            meant = f" (did you mean '{sign}{text.strip()}'?)" if unsigned else ""
            raise ValueError(
                f"thresholds.{metric}: expected a signed percentage such as '-5%' or '+10%', "
                f"got {text!r}{meant}"
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
    return [message for _, message in threshold_violations(changes, parse_thresholds(thresholds))]


def threshold_violations(
    changes: pd.DataFrame, limits: dict[str, float], units: str = report_units.DEFAULT_UNITS
) -> list[tuple[int, str]]:
    """(row index, message) of each violation, in table order; bandwidth in ``units``."""
    found = []
    significant = changes["significant"].fillna(False).astype(bool)
    for index, row in changes[significant].iterrows():
        limit = limits.get(row["metric"])
        if limit is None:
            continue
        change = row["change_pct"]
        if change < limit if limit < 0 else change > limit:
            found.append((index, violation_message(row, limit, units)))
    return found


def violation_message(row, limit: float, units: str = report_units.DEFAULT_UNITS) -> str:
    name, unit, scale, decimals = display(row["metric"], units)
    before = format_number(row["mean_a"] / scale, decimals)
    after = format_number(row["mean_b"] / scale, decimals)
    return (
        f"{row['cell']}: {row['metric']} ({name}) {before} -> {after} {unit} "
        f"({row['change_pct']:+.1f} %, 95 % CI {row['ci_low_pct']:+.1f} % to "
        f"{row['ci_high_pct']:+.1f} %) crosses the threshold {limit:+g} %"
    )


# ---------------------------------------------------------------------------------------
# Tables, figure, documents


def is_significant(value) -> bool:
    """True for a significant change; False for not significant or no interval (NA)."""
    return not is_missing(value) and bool(value)
