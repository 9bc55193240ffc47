"""Statistics across iterations: one summary row per cell (experiment, run_id, job, op).

Throughput (bandwidth, IOPS) is summarised by mean, median, sample standard deviation,
coefficient of variation, minimum and maximum over the iterations. Latency is never
averaged as percentiles: the mean is weighted by I/O count and percentiles come from the
histograms of all iterations merged into one (see ``storbench.histogram``).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa

from storbench import histogram
from storbench.results import ALL_HOSTS, PERCENTILE_COLUMNS, PERCENTILES

CELL_KEYS = ("experiment", "run_id", "job", "op")
# Targets and client steps of one sweep point sort together, steps by host count.
SORT_KEYS = ("rw", "bs", "iodepth", "numjobs", "target", "hosts_in_run", "run_id", "job", "op")
PARAMETER_COLUMNS = ("tool", "rw", "bs", "iodepth", "numjobs", "rwmixread")
# Where the cell ran (schema v2) and the preparation state of its target (v3).
PLACEMENT_COLUMNS = ("target", "step", "hosts_in_run", "prep_state")
THROUGHPUT_METRICS = ("bw_bytes_s", "iops")
STATISTICS = ("mean", "median", "sd", "cov", "min", "max")
COV_LIMIT = 0.05  # a cell whose bandwidth or IOPS varies more than 5 % is flagged

SUMMARY_COLUMNS = (
    *CELL_KEYS,
    *PARAMETER_COLUMNS,
    *PLACEMENT_COLUMNS,
    "n",
    *[f"{metric}_{stat}" for metric in THROUGHPUT_METRICS for stat in STATISTICS],
    "lat_mean_ns",
    *PERCENTILE_COLUMNS,
    "lat_basis",
    "errors",
    "cov_flag",
)
# Nullable integers so a missing parameter (e.g. rwmixread of a pure read) stays empty.
_INTEGER_COLUMNS = ("bs", "iodepth", "numjobs", "rwmixread", "hosts_in_run", "n", "errors")
_FLOAT_COLUMNS = (
    *[f"{metric}_{stat}" for metric in THROUGHPUT_METRICS for stat in STATISTICS],
    "lat_mean_ns",
    *PERCENTILE_COLUMNS,
)


def as_frame(table) -> pd.DataFrame:
    """A result table (pyarrow or pandas) as a pandas DataFrame."""
    if isinstance(table, pa.Table):
        return table.to_pandas()
    return table


def latest_attempts(frame: pd.DataFrame) -> pd.DataFrame:
    """Keep only the last attempt of each (experiment, run_id, iteration, host, job, op)."""
    # A retried iteration must count once, with the result of the attempt that succeeded.
    keys = ["experiment", "run_id", "iteration", "host", "job", "op"]
    attempt = frame["attempt"].fillna(0)
    ordered = frame.assign(_attempt=attempt).sort_values("_attempt", kind="stable")
    return ordered.drop_duplicates(keys, keep="last").drop(columns="_attempt")


def summarize(table, *, host: str = ALL_HOSTS) -> pd.DataFrame:
    """One row per cell = (experiment, run_id, job, op) over the iterations of rows with ``host``.

    Columns are SUMMARY_COLUMNS: the cell keys, its parameters and placement (target, client
    step, hosts in the run); ``n`` iterations;
    for bw_bytes_s and iops the mean, median, sample sd (ddof=1, NaN for n=1), CoV (sd/mean),
    min and max; ``lat_mean_ns`` weighted by I/O count; p50_ns..p99_99_ns from the merged
    histograms of all iterations (NaN if any iteration lacks bins); ``lat_basis``; total
    ``errors``; ``cov_flag`` (bandwidth or IOPS CoV above 5 %).
    Sorted by rw, bs, iodepth, numjobs, target, hosts_in_run, run_id, job, op.
    """
    frame = as_frame(table)
    # Rows from before schema v2/v3 (or built by hand) may lack the placement columns.
    frame = frame.assign(**{c: None for c in PLACEMENT_COLUMNS if c not in frame})
    frame = latest_attempts(frame[frame["host"] == host])
    records = [
        summarize_cell(group.sort_values("iteration", kind="stable"))
        for _, group in frame.groupby(list(CELL_KEYS), sort=False, dropna=False)
    ]
    summary = pd.DataFrame.from_records(records, columns=list(SUMMARY_COLUMNS))
    summary = _with_dtypes(summary)
    summary = summary.sort_values(list(SORT_KEYS), kind="stable", na_position="last")
    return summary.reset_index(drop=True)


def summarize_cell(rows: pd.DataFrame) -> dict:
    """The summary record of the iterations (rows) of one cell."""
    first = rows.iloc[0]
    record = {key: first[key] for key in (*CELL_KEYS, *PARAMETER_COLUMNS)}
    record.update({key: first.get(key) for key in PLACEMENT_COLUMNS})
    record["n"] = len(rows)
    for metric in THROUGHPUT_METRICS:
        for stat, value in spread(rows[metric]).items():
            record[f"{metric}_{stat}"] = value
    record["lat_mean_ns"] = weighted_latency_mean(rows)
    record.update(zip(PERCENTILE_COLUMNS, merged_percentiles(rows), strict=True))
    record["lat_basis"] = _joined_unique(rows["lat_basis"])
    record["errors"] = int(rows["errors"].fillna(0).sum())
    record["cov_flag"] = any(
        _exceeds(record[f"{metric}_cov"], COV_LIMIT) for metric in THROUGHPUT_METRICS
    )
    return record


def spread(values: pd.Series) -> dict[str, float]:
    """mean, median, sample sd (ddof=1), CoV = sd/mean, min, max of the non-missing values."""
    data = values.dropna().to_numpy(dtype=float)
    if data.size == 0:
        return dict.fromkeys(STATISTICS, math.nan)
    mean = float(np.mean(data))
    sd = float(np.std(data, ddof=1)) if data.size > 1 else math.nan
    cov = sd / mean if mean else math.nan
    return {
        "mean": mean,
        "median": float(np.median(data)),
        "sd": sd,
        "cov": cov,
        "min": float(np.min(data)),
        "max": float(np.max(data)),
    }


def weighted_latency_mean(rows: pd.DataFrame) -> float:
    """Mean latency over iterations weighted by I/O count; NaN if any iteration lacks it."""
    means = rows["lat_mean_ns"]
    ios = rows["ios"]
    if means.isna().any() or ios.isna().any():
        return math.nan
    total = float(ios.sum())
    if total <= 0:
        return math.nan
    return float((means.astype(float) * ios.astype(float)).sum() / total)


def merged_percentiles(rows: pd.DataFrame) -> list[float]:
    """PERCENTILES of the summed histograms of all rows; NaN if any row lacks bins."""
    bins = list(zip(rows["hist_ns"], rows["hist_count"], strict=True))
    if not all(_has_bins(values, counts) for values, counts in bins):
        return [math.nan] * len(PERCENTILES)
    values, counts = histogram.merge(bins)
    result = histogram.percentiles(values, counts, PERCENTILES)
    return [math.nan if value is None else value for value in result]


def _has_bins(values, counts) -> bool:
    return values is not None and counts is not None and len(values) > 0


def _exceeds(value: float, limit: float) -> bool:
    return not math.isnan(value) and value > limit


def _joined_unique(values: pd.Series) -> str | None:
    # Mixed bases in one cell should not happen; if they do the label shows both.
    unique = sorted({str(v) for v in values.dropna()})
    return "/".join(unique) if unique else None


def _with_dtypes(summary: pd.DataFrame) -> pd.DataFrame:
    types = {column: "Int64" for column in _INTEGER_COLUMNS}
    types.update({column: "float64" for column in _FLOAT_COLUMNS})
    types["cov_flag"] = "bool"
    return summary.astype(types)
