"""Write cliff: where per-interval throughput drops for good below its initial plateau.

Input rows are time-series rows (``results.TIMESERIES_COLUMNS``: host, job, op, t_s at the
interval's end, interval_s, bytes, bw_bytes_s), e.g. from ``tools.fio_timeseries``.

- ``aggregate`` sums one op over hosts and jobs per time bin. The bin width is the median
  interval; a row belongs to bin ``round(t_s / width)`` (at least 1) and the bin's t_s is
  ``bin * width``. The bin's interval is the longest time any one (host, job) spent in it
  (a short final interval that rounds into the previous bin adds to it); bw = bytes /
  interval. Rows without bytes (fio bw logs) count ``bw_bytes_s * interval_s``; a row
  without interval_s counts as one bin width. Rows of host ``all`` are skipped.
- ``concatenate`` joins consecutive chunks (e.g. the rounds of a preconditioning pass) into
  one series, shifting each chunk by the end time of the chunks before it.
- ``detect``: the initial plateau is the median bw of the intervals ending within the first
  ``plateau_s`` seconds (default: the first 10 % of the duration, at least 3 intervals);
  the cliff is the first interval starting ``sustain`` consecutive intervals with bw below
  ``fraction * plateau`` (a shorter dip is not a cliff).

Durations are sums of interval_s, so gaps between bins do not count. Standard library only:
this runs on the run path.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass

from storbench.core.schema_names import ALL_HOSTS

DEFAULT_PLATEAU_SHARE = 0.10
MIN_PLATEAU_INTERVALS = 3
# Interval sums carry binary rounding (0.893 + 1.0 + ...); a plateau edge must not lose one.
_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Interval:
    t_s: float  # end of the interval, seconds since the series started
    interval_s: float
    bytes: int
    bw_bytes_s: float


@dataclass(frozen=True)
class Cliff:
    t_s: float  # start of the first low interval
    bytes_written: int  # before that interval
    plateau_bw_bytes_s: float
    after_bw_bytes_s: float  # median bw from the cliff to the end
    fraction: float
    interval_index: int

    def to_dict(self) -> dict:
        return {
            "t_s": self.t_s,
            "bytes_written": self.bytes_written,
            "plateau_bw_bytes_s": self.plateau_bw_bytes_s,
            "after_bw_bytes_s": self.after_bw_bytes_s,
            "fraction": self.fraction,
            "interval_index": self.interval_index,
        }


def aggregate(rows: list[dict], op: str = "write") -> list[Interval]:
    """One interval per time bin: bytes summed over every host and job of ``op``."""
    selected = [row for row in rows if row.get("op") == op and row.get("host") != ALL_HOSTS]
    if not selected:
        return []
    for row in selected:
        if row.get("t_s") is None:
            raise ValueError(f"time-series row without t_s: {row}")
    width = _bin_width(selected)
    bin_bytes: dict[int, float] = defaultdict(float)
    bin_time: dict[int, dict[tuple, float]] = defaultdict(lambda: defaultdict(float))
    for row in selected:
        interval = row.get("interval_s") or width
        # an interval ends after the workload started: never in bin 0
        index = max(1, math.floor(row["t_s"] / width + 0.5))
        bin_bytes[index] += _row_bytes(row, interval)
        bin_time[index][(row.get("host"), row.get("job"))] += interval
    series = []
    for index in sorted(bin_bytes):
        interval = max(bin_time[index].values())
        total = round(bin_bytes[index])
        series.append(Interval(round(index * width, 9), interval, total, total / interval))
    return series


def concatenate(chunks: list[list[Interval]]) -> list[Interval]:
    """One series from consecutive chunks, each shifted by the end time of the one before."""
    series: list[Interval] = []
    offset = 0.0
    for chunk in chunks:
        series += [
            Interval(offset + part.t_s, part.interval_s, part.bytes, part.bw_bytes_s)
            for part in chunk
        ]
        if chunk:
            offset += chunk[-1].t_s
    return series


def detect(
    series: list[Interval],
    *,
    fraction: float = 0.5,
    plateau_s: float | None = None,
    sustain: int = 3,
) -> Cliff | None:
    """The write cliff of ``series``, or None when throughput never drops for good."""
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be between 0 and 1 (exclusive), got {fraction}")
    if sustain < 1:
        raise ValueError(f"sustain must be at least 1 interval, got {sustain}")
    if plateau_s is not None and plateau_s <= 0:
        raise ValueError(f"plateau_s must be positive, got {plateau_s}")
    if len(series) < sustain:
        return None
    plateau = plateau_bw(series, plateau_s)
    limit = fraction * plateau
    low_run = 0
    for index, part in enumerate(series):
        low_run = low_run + 1 if part.bw_bytes_s < limit else 0
        if low_run == sustain:
            start = index - sustain + 1
            first_low = series[start]
            return Cliff(
                t_s=first_low.t_s - first_low.interval_s,
                bytes_written=sum(part.bytes for part in series[:start]),
                plateau_bw_bytes_s=plateau,
                after_bw_bytes_s=statistics.median(part.bw_bytes_s for part in series[start:]),
                fraction=fraction,
                interval_index=start,
            )
    return None


def plateau_bw(series: list[Interval], plateau_s: float | None = None) -> float:
    """Median bw of the intervals ending within the first ``plateau_s`` seconds."""
    if not series:
        raise ValueError("an empty series has no plateau")
    if plateau_s is None:
        span = DEFAULT_PLATEAU_SHARE * _duration(series)
        minimum = MIN_PLATEAU_INTERVALS
    else:
        span, minimum = plateau_s, 1
    elapsed = 0.0
    count = 0
    for part in series:
        elapsed += part.interval_s
        if elapsed > span * (1 + _TOLERANCE):
            break
        count += 1
    count = min(len(series), max(count, minimum))
    return statistics.median(part.bw_bytes_s for part in series[:count])


def summary(series: list[Interval]) -> dict:
    duration = _duration(series)
    total = sum(part.bytes for part in series)
    return {
        "duration_s": duration,
        "bytes": total,
        "mean_bw_bytes_s": total / duration if duration > 0 else None,
    }


def _duration(series: list[Interval]) -> float:
    return math.fsum(part.interval_s for part in series)


def _bin_width(rows: list[dict]) -> float:
    intervals = [row["interval_s"] for row in rows if row.get("interval_s")]
    if not intervals:  # no interval column: the spacing of the distinct interval ends
        ends = sorted({row["t_s"] for row in rows})
        intervals = [later - earlier for earlier, later in itertools.pairwise(ends)] or ends
    width = statistics.median(intervals)
    if width <= 0:
        raise ValueError(f"time-series rows give no positive interval (median {width})")
    return width


def _row_bytes(row: dict, interval: float) -> float:
    if row.get("bytes") is not None:
        return row["bytes"]
    if row.get("bw_bytes_s") is None:
        raise ValueError(f"time-series row with neither bytes nor bw_bytes_s: {row}")
    return row["bw_bytes_s"] * interval
