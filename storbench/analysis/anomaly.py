"""Soak runs: outliers against a trailing rolling median, sustained drift, and chunk merging.

Series are lists of ``(t_s, value)`` pairs as in ``fault_analysis`` (t_s strictly
increasing, each an interval's end); points whose value is None are left out here.

- ``rolling_anomalies``: point i is compared with the ``window`` points just before it
  (trailing, so it can run online as intervals arrive; the point itself is not in its
  window, and the first ``window`` points are never scored). ``median`` and ``MAD`` are
  the window's median and median absolute deviation; ``robust_sd = max(1.4826 * MAD,
  sd_floor * |median|)``: the floor (default 1 % of the median) keeps a flat window
  (MAD = 0) from making any wobble infinitely unlikely. ``score = (value - median) /
  robust_sd``; an anomaly has ``|score| > k``. When robust_sd is 0 (a window of zeros)
  any other value scores +-inf.
- ``drift``: the least-squares slope of value on t_s over the whole series; ``change =
  slope * (last t_s - first t_s)``; ``flagged`` when ``|change| > min_fraction * |mean|``.
  The medians of the first and last tenth (``max(1, n // 10)`` points each) are compared
  too, as a fraction of the mean; ``sustained`` when flagged and the tenths moved the
  same way by more than min_fraction (a slope from one late dip is not sustained).
- ``merge_chunks``: one list of time-series rows from the chunks of a resumable run, in
  the order given; chunk k's t_s are shifted by the durations of the chunks before it
  (its ``duration_s``, or the last t_s of its rows when None). Time between chunks (the
  restart) does not count. A chunk id given twice, a row ending after its chunk's
  duration (it would overlap the next chunk) or a chunk with neither rows nor duration
  is an error naming the chunk.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from storbench.analysis.fault_analysis import Series, check_series, optional_float, records

MAD_TO_SD = 1.4826  # a normal distribution's standard deviation per MAD
_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Anomaly:
    t_s: float
    value: float
    median: float
    robust_sd: float
    score: float


@dataclass(frozen=True)
class Drift:
    slope_per_s: float
    change: float  # slope times the series' time span
    mean: float
    change_fraction: float | None  # change / mean; None when the mean is 0
    first_tenth_median: float
    last_tenth_median: float
    tenth_change_fraction: float | None  # (last - first tenth median) / mean
    flagged: bool
    sustained: bool


class Chunk(NamedTuple):
    chunk_id: Any
    duration_s: float | None  # None: the last t_s of its rows
    rows: Any  # time-series rows: list of dicts or a DataFrame


def rolling_anomalies(
    series: Series, *, window: int = 31, k: float = 5.0, sd_floor: float = 0.01
) -> list[Anomaly]:
    """Points more than ``k`` robust standard deviations from their trailing window's median."""
    if window < 3 or k <= 0 or sd_floor < 0:
        raise ValueError(f"need window >= 3, k > 0, sd_floor >= 0; got {window}, {k}, {sd_floor}")
    points = [(t, v) for t, v in check_series(series) if v is not None]
    if len(points) <= window:
        return []
    times = np.array([t for t, _ in points])
    values = np.array([v for _, v in points], dtype=float)
    history = sliding_window_view(values[:-1], window)  # row j precedes point j + window
    medians = np.median(history, axis=1)
    mads = np.median(np.abs(history - medians[:, None]), axis=1)
    sds = np.maximum(MAD_TO_SD * mads, sd_floor * np.abs(medians))
    deviations = values[window:] - medians
    with np.errstate(divide="ignore", invalid="ignore"):
        scores = np.where(sds > 0, deviations / sds, np.sign(deviations) * np.inf)
    scores = np.nan_to_num(scores, nan=0.0, posinf=np.inf, neginf=-np.inf)
    return [
        Anomaly(
            float(times[window + j]),
            float(values[window + j]),
            float(medians[j]),
            float(sds[j]),
            float(scores[j]),
        )
        for j in np.flatnonzero(np.abs(scores) > k)
    ]


def drift(series: Series, *, min_fraction: float = 0.05) -> Drift:
    """Least-squares drift over the whole series, checked against the first and last tenth."""
    if min_fraction < 0:
        raise ValueError(f"min_fraction must be >= 0, got {min_fraction}")
    points = [(t, v) for t, v in check_series(series) if v is not None]
    if len(points) < 2:
        raise ValueError(f"drift needs at least 2 values, got {len(points)}")
    times = [t for t, _ in points]
    values = [v for _, v in points]
    mean_t, mean = statistics.fmean(times), statistics.fmean(values)
    slope = math.fsum((t - mean_t) * (v - mean) for t, v in points) / math.fsum(
        (t - mean_t) ** 2 for t in times
    )
    change = slope * (times[-1] - times[0])
    tenth = max(1, len(values) // 10)
    first, last = statistics.median(values[:tenth]), statistics.median(values[-tenth:])
    change_fraction = None if mean == 0 else change / mean
    tenth_fraction = None if mean == 0 else (last - first) / mean
    flagged = change_fraction is not None and abs(change_fraction) > min_fraction
    sustained = (
        flagged
        and change_fraction is not None
        and tenth_fraction is not None
        and abs(tenth_fraction) > min_fraction
        and math.copysign(1, tenth_fraction) == math.copysign(1, change_fraction)
    )
    return Drift(
        slope, change, mean, change_fraction, first, last, tenth_fraction, flagged, sustained
    )


def merge_chunks(chunks: Sequence[Chunk | tuple]) -> list[dict]:
    """The rows of every chunk on one time axis, chunk k shifted by the chunks before it."""
    seen = set()
    merged: list[dict] = []
    offset = 0.0
    for chunk_id, duration_s, rows in chunks:
        if chunk_id in seen:
            raise ValueError(f"chunk {chunk_id!r} is given twice: its intervals would repeat")
        seen.add(chunk_id)
        chunk_rows = records(rows)
        ends = [_end(row, chunk_id) for row in chunk_rows]
        duration = _duration(chunk_id, duration_s, ends)
        merged += [{**row, "t_s": offset + end} for row, end in zip(chunk_rows, ends, strict=True)]
        offset += duration
    return merged


def _end(row: dict, chunk_id) -> float:
    t_s = optional_float(row.get("t_s"))
    if t_s is None:
        raise ValueError(f"chunk {chunk_id!r}: row without t_s: {row}")
    return t_s


def _duration(chunk_id, duration_s: float | None, ends: list[float]) -> float:
    if duration_s is None:
        if not ends:
            raise ValueError(f"chunk {chunk_id!r}: no rows and no duration_s to shift by")
        return max(ends)
    if not duration_s > 0:
        raise ValueError(f"chunk {chunk_id!r}: duration_s must be positive, got {duration_s}")
    late = [end for end in ends if end > duration_s + _TOLERANCE]
    if late:
        raise ValueError(
            f"chunk {chunk_id!r}: an interval ends at t_s={max(late)}, after the chunk's "
            f"duration_s {duration_s}; pass duration_s=None to use its last t_s"
        )
    return float(duration_s)
