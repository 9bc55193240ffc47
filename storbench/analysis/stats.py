"""Statistics across iterations: one summary row per cell (experiment, run_id, job, op).

Throughput (bandwidth, IOPS) is summarised by mean, median, sample standard deviation,
coefficient of variation, minimum, maximum and a 95 % interval over the iterations: on the log
scale (``positive_interval``), so it stays above 0 and is an interval for the geometric mean;
iterations more than 3 raw MADs from the median are counted as outliers (and listed by
``iteration_outliers``), never dropped. Latency is never averaged
as percentiles: the mean is weighted by I/O count and percentiles come from the histograms
of all iterations merged into one (see ``storbench.core.histogram``). A cell of one row (one
iteration) without bins keeps the percentiles the tool printed for it (``pct_source``
'tool': warp, elbencho, fio's plain json), which are exact for that row; several such rows
get none, since percentiles cannot be averaged. The mean is on the percentiles' basis: fio's
completion latency (``clat_mean_ns``) where the basis is ``clat``.
"""

from __future__ import annotations

import functools
import math
import statistics

import numpy as np
import pandas as pd
import pyarrow as pa

from storbench.core import histogram
from storbench.core.results import ALL_HOSTS, PERCENTILE_COLUMNS, PERCENTILES
from storbench.core.schema_names import CPU_COLUMNS

CELL_KEYS = ("experiment", "run_id", "job", "op")
# Targets and client steps of one sweep point sort together, steps by host count.
SORT_KEYS = ("rw", "bs", "iodepth", "numjobs", "target", "hosts_in_run", "run_id", "job", "op")
PARAMETER_COLUMNS = ("tool", "rw", "bs", "iodepth", "numjobs", "rwmixread")
# Where the cell ran (schema v2) and the preparation state of its target (v3).
# ... and whether it ran closed loop or at an offered rate (v4).
PLACEMENT_COLUMNS = ("target", "step", "hosts_in_run", "prep_state", "loop", "offered_iops")
THROUGHPUT_METRICS = ("bw_bytes_s", "iops")
STATISTICS = ("mean", "median", "sd", "cov", "min", "max", "ci_low", "ci_high")
COV_LIMIT = 0.05  # a cell whose bandwidth or IOPS varies more than 5 % is flagged
CI_LEVEL = 0.95  # two-sided Student-t interval, on the log scale for positive values
OUTLIER_MADS = 3.0  # an iteration further than this many raw MADs from the median is an outlier

SUMMARY_COLUMNS = (
    *CELL_KEYS,
    *PARAMETER_COLUMNS,
    *PLACEMENT_COLUMNS,
    "n",
    *[f"{metric}_{stat}" for metric in THROUGHPUT_METRICS for stat in (*STATISTICS, "outliers")],
    "lat_mean_ns",
    *PERCENTILE_COLUMNS,
    "lat_basis",
    "pct_source",
    "errors",
    "cov_flag",
    *CPU_COLUMNS,
)
# Nullable integers so a missing parameter (e.g. rwmixread of a pure read) stays empty.
_INTEGER_COLUMNS = (
    *("bs", "iodepth", "numjobs", "rwmixread", "hosts_in_run", "n", "errors"),
    *[f"{metric}_outliers" for metric in THROUGHPUT_METRICS],
)
_FLOAT_COLUMNS = (
    "offered_iops",
    *[f"{metric}_{stat}" for metric in THROUGHPUT_METRICS for stat in STATISTICS],
    "lat_mean_ns",
    *PERCENTILE_COLUMNS,
    "cpu_pct",
    "cpu_sys_pct",
)


def as_frame(table) -> pd.DataFrame:
    """A result table (pyarrow or pandas) as a pandas DataFrame."""
    if isinstance(table, pa.Table):
        return table.to_pandas()
    return table


def latest_attempts(frame: pd.DataFrame) -> pd.DataFrame:
    """Keep only the last attempt of each (experiment, run_id, iteration, host, job, op, target)."""
    # A retried iteration must count once, with the result of the attempt that succeeded.
    keys = ["experiment", "run_id", "iteration", "host", "job", "op"]
    keys += ["target"] if "target" in frame else []  # a network mesh: one row per link
    attempt = frame["attempt"].fillna(0)
    ordered = frame.assign(_attempt=attempt).sort_values("_attempt", kind="stable")
    return ordered.drop_duplicates(keys, keep="last").drop(columns="_attempt")


def summarize(table, *, host: str = ALL_HOSTS) -> pd.DataFrame:
    """One row per cell = (experiment, run_id, job, op) over the iterations of rows with ``host``.

    Columns are SUMMARY_COLUMNS: the cell keys, its parameters and placement (target, client
    step, hosts in the run); ``n`` iterations;
    for bw_bytes_s and iops the mean, median, sample sd (ddof=1, NaN for n=1), CoV (sd/mean),
    min, max, ci_low/ci_high (95 % interval on the log scale, ``positive_interval``; NaN for
    n < 2) and ``outliers``
    (count of iterations marked by ``outlier_mask``; no row is dropped);
    ``lat_mean_ns`` weighted by I/O count; p50_ns..p99_99_ns from the merged
    histograms of all iterations (NaN if any iteration lacks bins); ``lat_basis``; total
    ``errors``; ``cov_flag`` (bandwidth or IOPS CoV above 5 %).
    Sorted by rw, bs, iodepth, numjobs, target, hosts_in_run, run_id, job, op.
    """
    summary = _summary(_cell_frame(table, host))
    summary = summary.sort_values(list(SORT_KEYS), kind="stable", na_position="last")
    return summary.reset_index(drop=True)


def summarize_each_host(table, hosts: list[str]) -> pd.DataFrame:
    """``summarize(table, host=h)`` of each of ``hosts`` in that order, with a ``host``
    column, in one pass: a call per host read every row and built a frame each (128 hosts:
    2 s of an experiment report)."""
    summary = _summary(_cell_frame(table, hosts), carried=("host",))
    position = {host: index for index, host in enumerate(hosts)}
    summary = summary.assign(_host=summary["host"].map(position))
    summary = summary.sort_values(["_host", *SORT_KEYS], kind="stable", na_position="last")
    return summary.drop(columns="_host").reset_index(drop=True)


def _summary(frame: pd.DataFrame, carried: tuple[str, ...] = ()) -> pd.DataFrame:
    """A typed summary record per cell of a frame from ``_cell_frame``, in cell order, with
    the ``carried`` columns of each cell's first row."""
    columns = _record_columns(frame)
    bounds = _cell_bounds(frame)
    records = [_cell_record(columns, start, stop) for start, stop in bounds]
    summary = _with_dtypes(pd.DataFrame.from_records(records, columns=list(SUMMARY_COLUMNS)))
    firsts = [start for start, _ in bounds]
    return summary.assign(**{name: frame[name].to_numpy()[firsts] for name in carried})


def cells(table, *, host: str = ALL_HOSTS) -> list[pd.DataFrame]:
    """The rows of each cell for ``host`` (last attempts only), each sorted by iteration."""
    frame = _cell_frame(table, host)
    rows = frame.drop(columns="_cell")
    return [rows.iloc[start:stop] for start, stop in _cell_bounds(frame)]


def _cell_frame(table, host: str | list[str]) -> pd.DataFrame:
    """The rows of ``host`` (last attempts), cell after cell in order of first appearance,
    each cell's rows by iteration: one sort instead of one per cell (1,000 cells: seconds).
    Several hosts: a cell per host and cell."""
    frame = as_frame(table)
    # Rows from before schema v2/v3 (or built by hand) may lack the placement columns,
    # rows before v5 the completion latency mean.
    # ... and rows before v6 the CPU columns.
    optional = (*PLACEMENT_COLUMNS, *PERCENTILE_COLUMNS, "pct_source", "clat_mean_ns", *CPU_COLUMNS)
    frame = frame.assign(**{c: None for c in optional if c not in frame})
    if isinstance(host, str):
        frame, keys = frame[frame["host"] == host], list(CELL_KEYS)
    else:
        frame, keys = frame[frame["host"].isin(host)], ["host", *CELL_KEYS]
    frame = latest_attempts(frame)
    cell = frame.groupby(keys, sort=False, dropna=False).ngroup()
    return frame.assign(_cell=cell).sort_values(["_cell", "iteration"], kind="stable")


def _cell_bounds(frame: pd.DataFrame) -> list[tuple[int, int]]:
    """(start, stop) positions of each cell's rows in a frame from ``_cell_frame``."""
    if frame.empty:
        return []
    cell = frame["_cell"].to_numpy()
    starts = [0, *(np.flatnonzero(cell[1:] != cell[:-1]) + 1).tolist()]
    return list(zip(starts, [*starts[1:], len(cell)], strict=True))


ITERATION_OUTLIER_COLUMNS = (*CELL_KEYS, "iteration", "bw_outlier", "iops_outlier")


def iteration_outliers(table, *, host: str = ALL_HOSTS) -> pd.DataFrame:
    """Per iteration of each cell: is its bandwidth / IOPS an outlier (``outlier_mask``)?

    Columns ITERATION_OUTLIER_COLUMNS: experiment, run_id, job, op, iteration, bw_outlier,
    iops_outlier (bool). Same rows as ``summarize`` uses (``host``, last attempts), in the
    summary's cell order, iterations ascending. Nothing is dropped: every iteration is listed.
    """
    frame = _cell_frame(table, host)
    bounds = _cell_bounds(frame)
    if not bounds:
        return pd.DataFrame({column: [] for column in ITERATION_OUTLIER_COLUMNS}).astype(
            {"bw_outlier": bool, "iops_outlier": bool}
        )
    bw, iops = frame["bw_bytes_s"].to_numpy(), frame["iops"].to_numpy()
    bw_flags = [flag for start, stop in bounds for flag in outlier_mask(bw[start:stop])]
    iops_flags = [flag for start, stop in bounds for flag in outlier_mask(iops[start:stop])]
    flagged = frame[[*CELL_KEYS, "iteration"]].assign(bw_outlier=bw_flags, iops_outlier=iops_flags)
    positions = [
        position for index in _summary_order(frame, bounds) for position in range(*bounds[index])
    ]
    return flagged.iloc[positions].reset_index(drop=True)[list(ITERATION_OUTLIER_COLUMNS)]


def _summary_order(frame: pd.DataFrame, bounds: list[tuple[int, int]]) -> list[int]:
    """Indices of the cells in the order ``summarize`` sorts its rows (by their first row)."""
    firsts = [start for start, _ in bounds]
    keys = pd.DataFrame.from_records(
        frame[list(SORT_KEYS)].iloc[firsts].to_dict("records")
    ).infer_objects()
    keys = keys.sort_values(list(SORT_KEYS), kind="stable", na_position="last")
    return keys.index.tolist()


_RECORD_INPUTS = (
    *CELL_KEYS,
    *PARAMETER_COLUMNS,
    *PLACEMENT_COLUMNS,
    *THROUGHPUT_METRICS,
    "lat_mean_ns",
    "ios",
    "hist_ns",
    "hist_count",
    "lat_basis",
    *PERCENTILE_COLUMNS,
    "pct_source",
    "clat_mean_ns",
    "errors",
    *CPU_COLUMNS,
)


def _record_columns(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """The columns a summary record reads, as arrays: slicing them is cheap, a frame's is not."""
    return {name: frame[name].to_numpy() for name in _RECORD_INPUTS}


def _cell_record(columns: dict[str, np.ndarray], start: int, stop: int) -> dict:
    """The summary record of the rows start:stop (one cell's iterations) of ``columns``."""
    rows = {name: values[start:stop] for name, values in columns.items()}
    record = {key: rows[key][0] for key in (*CELL_KEYS, *PARAMETER_COLUMNS, *PLACEMENT_COLUMNS)}
    record["n"] = stop - start
    for metric in THROUGHPUT_METRICS:
        for stat, value in spread(rows[metric]).items():
            record[f"{metric}_{stat}"] = value
        record[f"{metric}_outliers"] = sum(outlier_mask(rows[metric]))
    record["lat_basis"] = _joined_unique(rows["lat_basis"])
    record["lat_mean_ns"] = weighted_latency_mean(rows, basis=record["lat_basis"])
    percentiles, source = cell_percentiles(rows)
    record.update(zip(PERCENTILE_COLUMNS, percentiles, strict=True))
    record["pct_source"] = source
    record["errors"] = int(np.nansum(_floats(rows["errors"])))
    record["cov_flag"] = any(
        _exceeds(record[f"{metric}_cov"], COV_LIMIT) for metric in THROUGHPUT_METRICS
    )
    record.update(cell_cpu(rows))
    return record


def cell_cpu(rows: dict) -> dict:
    """cpu_pct / cpu_sys_pct: the mean over the iterations that measured it, on their one
    basis (iterations on different bases, which no tool gives, leave them empty)."""
    bases = {str(v) for v in rows["cpu_basis"] if not pd.isna(v)}
    if len(bases) != 1:
        return {"cpu_pct": math.nan, "cpu_sys_pct": math.nan, "cpu_basis": None}
    return {
        "cpu_pct": _mean_present(rows["cpu_pct"]),
        "cpu_sys_pct": _mean_present(rows["cpu_sys_pct"]),
        "cpu_basis": bases.pop(),
    }


def _mean_present(values) -> float:
    data = _floats(values)
    data = data[~np.isnan(data)]
    return float(np.mean(data)) if data.size else math.nan


def spread(values: pd.Series) -> dict[str, float]:
    """STATISTICS of the non-missing values.

    mean, median, sample sd (ddof=1), CoV = sd/mean, min, max, and ci_low/ci_high: the 95 %
    interval of ``positive_interval`` (for the geometric mean; NaN for n < 2).
    """
    data = _floats(values)
    data = data[~np.isnan(data)]
    if data.size == 0:
        return dict.fromkeys(STATISTICS, math.nan)
    mean = float(np.mean(data))
    sd = float(np.std(data, ddof=1)) if data.size > 1 else math.nan
    cov = sd / mean if mean else math.nan
    ci_low, ci_high = positive_interval(data)
    return {
        "mean": mean,
        "median": float(np.median(data)),
        "sd": sd,
        "cov": cov,
        "min": float(np.min(data)),
        "max": float(np.max(data)),
        "ci_low": ci_low,
        "ci_high": ci_high,
    }


def positive_interval(values, level: float = CI_LEVEL) -> tuple[float, float]:
    """A two-sided interval of a quantity that is never negative; (NaN, NaN) for n < 2.

    With every value above 0: the Student-t interval on the log scale, exp(m ± t((1+level)/2,
    n-1)·s/√n) with m, s the mean and sample sd of the logs. It is an interval for the
    geometric mean, always above 0 and wider above the mean than below. Otherwise (a value
    <= 0 or NaN) the plain interval of the arithmetic mean, ``mean_confidence_interval``.
    """
    data = np.asarray(values, dtype=float)
    if data.size < 2:
        return math.nan, math.nan
    if np.all(data == data[0]):
        return float(data[0]), float(data[0])  # exp(log(x)) would be off by a rounding step
    if np.all(data > 0) and np.all(np.isfinite(data)):
        return log_scale_interval(data, level)
    sd = float(np.std(data, ddof=1))
    return mean_confidence_interval(float(np.mean(data)), sd, data.size, level)


def log_scale_interval(values, level: float = CI_LEVEL) -> tuple[float, float]:
    """exp of the Student-t interval of the mean of log(values): values must all be > 0."""
    logs = np.log(np.asarray(values, dtype=float))
    sd = float(np.std(logs, ddof=1)) if logs.size > 1 else math.nan
    low, high = mean_confidence_interval(float(np.mean(logs)), sd, logs.size, level)
    return math.exp(low), math.exp(high)


def mean_confidence_interval(
    mean: float, sd: float, n: int, level: float = CI_LEVEL
) -> tuple[float, float]:
    """Two-sided Student-t interval mean ± t((1+level)/2, n-1)·sd/√n; (NaN, NaN) for n < 2."""
    if n < 2 or math.isnan(sd):
        return math.nan, math.nan
    half_width = t_quantile((1 + level) / 2, n - 1) * sd / math.sqrt(n)
    return mean - half_width, mean + half_width


def outlier_mask(values) -> list[bool]:
    """True for each value further than OUTLIER_MADS (3) raw MADs from the median.

    MAD is the raw median absolute deviation, median(|x - median(x)|), not scaled by 1.4826
    (3 raw MADs ≈ 2 sd for normal data). When MAD is 0 (at least half the values equal the
    median) the threshold is 0, so exactly the values that differ from the median are
    outliers. Missing values (None/NaN) are ignored for median and MAD and never marked.
    """
    data = _floats(values)
    present = data[~np.isnan(data)]
    if present.size == 0:
        return [False] * data.size
    median = float(np.median(present))
    mad = float(np.median(np.abs(present - median)))
    limit = OUTLIER_MADS * mad
    return [bool(not math.isnan(value) and abs(value - median) > limit) for value in data]


@functools.lru_cache(maxsize=256)  # every cell of a sweep asks for the same few quantiles
def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t distribution with ``df`` degrees of freedom.

    Inverts the exact CDF (regularized incomplete beta function by continued fraction) by
    bisection, relative error below 1e-11; above df = 1e5 Fisher's expansion in 1/df (exact
    to float precision there); df = inf gives the standard normal quantile.
    """
    if not 0 < p < 1:
        raise ValueError(f"t_quantile: p must be in (0, 1), got {p!r}")
    if not df > 0:
        raise ValueError(f"t_quantile: df must be > 0, got {df!r}")
    if df > _LARGE_DF:
        return _t_quantile_large_df(p, df)
    if p == 0.5:
        return 0.0
    sign = 1.0 if p > 0.5 else -1.0
    tail = 1 - p if p > 0.5 else p  # 1 - p is exact in floating point for p >= 0.5
    if tail >= 0.25:
        # Near the centre P(|T| < t) keeps the relative precision of a small t.
        return sign * _solve_increasing(lambda t: _t_central(t, df), 1 - 2 * tail)
    return sign * _solve_increasing(lambda t: -_t_upper_tail(t, df), -tail)


_LARGE_DF = 1e5  # above it a·log(x) in the beta function loses digits; the series does not


def _t_quantile_large_df(p: float, df: float) -> float:
    """Fisher's expansion of the t quantile in powers of 1/df (Abramowitz & Stegun 26.7.5)."""
    z = statistics.NormalDist().inv_cdf(p)
    if math.isinf(df):
        return z
    terms = (
        (z**3 + z) / 4,
        (5 * z**5 + 16 * z**3 + 3 * z) / 96,
        (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
        (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160,
    )
    return z + sum(term / df**power for power, term in enumerate(terms, start=1))


_LARGEST_T = 1e150  # t² must stay finite


def _solve_increasing(function, target: float) -> float:
    """The t >= 0 with function(t) = target, by bisection; function increases with t."""
    low, high = 0.0, 1.0
    while function(high) < target:
        if high > _LARGEST_T:
            raise OverflowError(f"t_quantile: the quantile exceeds {_LARGEST_T:g}")
        low, high = high, 2 * high
    for _ in range(1100):  # halving [0, 1] down to the smallest subnormal takes 1075 steps
        middle = (low + high) / 2
        if middle in (low, high):
            break
        if function(middle) < target:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def _t_central(t: float, df: float) -> float:
    """P(|T| < t) for t >= 0: I_y(1/2, df/2) with y = t² / (df + t²)."""
    return regularized_beta(t * t / (df + t * t), 0.5, df / 2)


def _t_upper_tail(t: float, df: float) -> float:
    """P(T > t) for t >= 0: I_x(df/2, 1/2) / 2 with x = df / (df + t²)."""
    return 0.5 * regularized_beta(df / (df + t * t), df / 2, 0.5)


def regularized_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function I_x(a, b) for 0 <= x <= 1, a, b > 0."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    log_front = a * math.log(x) + b * math.log1p(-x) - _log_beta(a, b)
    # The continued fraction converges fast below the mean of the beta distribution.
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _beta_fraction(x, a, b) / a
    return 1 - math.exp(log_front) * _beta_fraction(1 - x, b, a) / b


def _log_beta(a: float, b: float) -> float:
    """log B(a, b) = lgamma(a) + lgamma(b) - lgamma(a + b), without cancellation for large a."""
    small, large = sorted((a, b))
    if large < 100:
        return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    # Stirling's series for lgamma(large + small) - lgamma(large), differenced analytically.
    log_ratio = (
        (large - 0.5) * math.log1p(small / large)
        + small * math.log(large + small)
        - small
        + _stirling_correction(large + small)
        - _stirling_correction(large)
    )
    return math.lgamma(small) - log_ratio


def _stirling_correction(x: float) -> float:
    """lgamma(x) - ((x - 1/2) log x - x + log(2π)/2), to 1e-17 for x >= 100."""
    return 1 / (12 * x) - 1 / (360 * x**3) + 1 / (1260 * x**5)


_TINY = 1e-300


def _beta_fraction(x: float, a: float, b: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz's method)."""
    c = 1.0
    d = 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > _TINY else _TINY)
    result = d
    for m in range(1, 100_000):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > _TINY else _TINY)
            c = 1 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            result *= c * d
        if abs(c * d - 1) < 1e-15:
            return result
    raise ArithmeticError(f"incomplete beta fraction did not converge (x={x}, a={a}, b={b})")


def weighted_latency_mean(rows, basis: str | None = None) -> float:
    """Mean latency over iterations weighted by I/O count; NaN if any iteration lacks it.

    ``rows``: a frame, or a mapping of column name to values. With ``basis`` 'clat' (fio
    outputs without lat_percentiles: their percentiles are completion latency) the mean of
    ``clat_mean_ns`` where every row has it, so the mean and the percentiles of a table
    measure the same thing; otherwise ``lat_mean_ns`` (submission to completion)."""
    column = "lat_mean_ns"
    clat = _floats(rows["clat_mean_ns"]) if "clat_mean_ns" in rows else None
    if basis == "clat" and clat is not None and not np.isnan(clat).any():
        column = "clat_mean_ns"
    means, ios = _floats(rows[column]), _floats(rows["ios"])
    if np.isnan(means).any() or np.isnan(ios).any():
        return math.nan
    total = float(ios.sum())
    if total <= 0:
        return math.nan
    return float((means * ios).sum() / total)


def cell_percentiles(rows) -> tuple[list[float], str | None]:
    """(PERCENTILES, their source) of a cell's rows: 'histogram' from the merged bins; 'tool'
    for a single row without bins that carries the tool's own (exact for that row); else
    NaN and None: several rows' printed percentiles are never averaged."""
    merged = merged_percentiles(rows)
    if not all(math.isnan(value) for value in merged):
        return merged, "histogram"
    sources = [source for source in rows["pct_source"] if not pd.isna(source)]
    if len(rows["pct_source"]) == 1 and sources == ["tool"]:
        own = _floats([rows[column][0] for column in PERCENTILE_COLUMNS]).tolist()
        if not all(math.isnan(value) for value in own):
            return own, "tool"
    return merged, None


def merged_percentiles(rows) -> list[float]:
    """PERCENTILES of the summed histograms of all rows; NaN if any row lacks bins."""
    bins = list(zip(rows["hist_ns"], rows["hist_count"], strict=True))
    if not all(_has_bins(values, counts) for values, counts in bins):
        return [math.nan] * len(PERCENTILES)
    values, counts = histogram.merge(bins)
    result = histogram.percentiles(values, counts, PERCENTILES)
    return [math.nan if value is None else value for value in result]


def _floats(values) -> np.ndarray:
    """values as a float array, missing ones (None, NaN, pd.NA) as NaN."""
    try:
        return np.asarray(values, dtype=float)
    except TypeError:  # pd.NA in a nullable column
        return pd.Series(values, dtype="Float64").to_numpy(dtype=float, na_value=np.nan)


def _has_bins(values, counts) -> bool:
    return values is not None and counts is not None and len(values) > 0


def _exceeds(value: float, limit: float) -> bool:
    return not math.isnan(value) and value > limit


def _joined_unique(values) -> str | None:
    # Mixed bases in one cell should not happen; if they do the label shows both.
    unique = sorted({str(v) for v in values if not pd.isna(v)})
    return "/".join(unique) if unique else None


def _with_dtypes(summary: pd.DataFrame) -> pd.DataFrame:
    types = {column: "Int64" for column in _INTEGER_COLUMNS}
    types.update({column: "float64" for column in _FLOAT_COLUMNS})
    types["cov_flag"] = "bool"
    return summary.astype(types)
