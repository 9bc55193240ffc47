"""Fault injection: the baseline, dip and recovery of each metric around each injected event.

A series is a list of ``(t_s, value)`` pairs with t_s strictly increasing; t_s is the *end*
of an interval in seconds since the workload started (``results.TIMESERIES_SCHEMA``) and
point i stands for the time (t_{i-1}, t_i]. A value of None means the interval has no
measurement (e.g. no I/O completed, so no latency); it never counts as within the band.

``aggregate_series(rows)`` makes one series per metric (``iops``, ``bw`` in bytes/s,
``lat_mean`` in ns, ``errors``) from the time-series rows of one run (list of dicts or a
DataFrame). The bin width is the median ``interval_s``; a row belongs to bin
``round(t_s / width)`` (at least 1), whose t_s is ``bin * width``, so hosts whose intervals
are not aligned meet in the same bins. Within a bin, each (host, job, op) gets the
time-weighted mean of its rows' rates (a short final interval adds to its bin instead of
doubling it) and the rates are summed over keys; latency is the mean weighted by I/O count
(``ios``, else ``iops * interval_s``; unweighted when no row of the bin has a count; None
when the bin completed no I/O); errors are summed. Rows of host ``all`` are skipped unless
they are the only rows (service mode). Every bin with a row gives a point in every series.

For one event at ``at_s`` (times compared with a 1e-9 s tolerance):

- baseline: the median of the values of the intervals ending in (at_s - baseline_s, at_s],
  i.e. the intervals inside [at_s - baseline_s, at_s] on an aligned grid; ``baseline_n``
  of them. No value there is a ValueError naming the event.
- window: the intervals ending in (at_s, end_s]; ``end_s`` is the end of the series, or in
  ``analyze_events`` the next event's at_s (last event: ``expected_end_s`` when given).
- within the band: ``|v - baseline| <= band * |baseline|`` (the boundary is inside); the
  band is symmetric, so a catch-up burst above it is still outside. With
  ``two_sided=False`` only the worse side counts: ``baseline - v`` (latency: ``v -
  baseline``) ``<= band * |baseline|`` (fio's ``rate_iops`` catches up after a stall).
- dip: the worst value of the window (min when higher is better, max for latency), the
  first on ties, at ``dip_t_s``; ``depth = (baseline - dip) / baseline`` (latency:
  ``(dip - baseline) / baseline``), negative when the window never got worse.
- recovery: the first run of ``hold_intervals`` consecutive in-band intervals after the
  window's first out-of-band interval (so an effect that starts late is waited for; a run
  cut off by the window's end does not count); ``recovered_at_s`` is the start of its first
  interval (the end of the one before, at least at_s), ``recovery_s = recovered_at_s - at_s`` and
  ``recovery_after_restore_s = recovered_at_s - recover_at_s`` (negative: recovered before
  the restore command). None when never; a window that never leaves the band recovered at
  at_s (recovery_s 0); an empty window (no interval after the event) did not recover.
- impact_s: the total length of the window's out-of-band intervals (the first one counted
  from at_s).
- errors: the sum of the errors series over the window (None when it has no count there).
- survived (``analyze_events``): the last interval of the window, which must end within
  one interval of the window's end, has iops (else bw) above zero.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass

from storbench.core.schema_names import ALL_HOSTS

Series = list[tuple[float, float | None]]
AGGREGATE_METRICS = ("iops", "bw", "lat_mean", "errors")
HIGHER_IS_BETTER = {"iops": True, "bw": True, "lat_mean": False, "p99": False}
_RATE_COLUMNS = {"iops": "iops", "bw": "bw_bytes_s"}
_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Event:
    name: str
    at_s: float  # offset from the workload start
    recover_at_s: float | None = None  # offset of the recovery command, when there is one

    def __post_init__(self):
        if not self.at_s >= 0:
            raise ValueError(f"event {self.name!r}: at_s must be >= 0, got {self.at_s}")
        if self.recover_at_s is not None and not self.recover_at_s >= self.at_s:
            raise ValueError(
                f"event {self.name!r}: recover_at_s {self.recover_at_s} is before at_s {self.at_s}"
            )


@dataclass(frozen=True)
class FaultSettings:
    baseline_s: float = 10.0
    band: float = 0.10
    hold_intervals: int = 3
    two_sided: bool = True
    expected_end_s: float | None = None  # the workload's planned end: a run stopping early died


@dataclass(frozen=True)
class EventResult:
    event: str
    at_s: float
    end_s: float
    baseline: float
    baseline_n: int
    dip: float | None
    dip_t_s: float | None
    depth: float | None  # fraction of the baseline
    recovered: bool
    recovered_at_s: float | None
    recovery_s: float | None
    recovery_after_restore_s: float | None
    impact_s: float
    errors: int | None


def records(rows) -> list[dict]:
    """Rows as a list of dicts; a pandas DataFrame is converted."""
    return rows.to_dict("records") if hasattr(rows, "to_dict") else list(rows)


def aggregate_series(rows, *, ops: Iterable[str] | None = None) -> dict[str, Series]:
    """One series per metric (``AGGREGATE_METRICS``) summed over hosts, jobs and ``ops``."""
    wanted = None if ops is None else set(ops)
    selected = [row for row in records(rows) if wanted is None or row.get("op") in wanted]
    for row in selected:
        if optional_float(row.get("t_s")) is None:
            raise ValueError(f"time-series row without t_s: {row}")
    series: dict[str, Series] = {name: [] for name in AGGREGATE_METRICS}
    if not selected:
        return series
    hosts = [row for row in selected if row.get("host") != ALL_HOSTS]
    totals = [row for row in selected if row.get("host") == ALL_HOSTS]
    # the hosts' rows, summed; a metric only the all-hosts rows carry (elbencho's services
    # give bytes, not IOPS) from those
    from_totals = {
        column: bool(totals) and not any(optional_float(r.get(column)) is not None for r in hosts)
        for column in (*_RATE_COLUMNS.values(), "lat_mean_ns", "errors")
    }
    width = _bin_width(hosts or totals)
    bins: dict[int, list[dict]] = defaultdict(list)
    for row in selected:
        bins[max(1, math.floor(row["t_s"] / width + 0.5))].append(row)
    for index in sorted(bins):
        t_s = round(index * width, 9)
        of = {
            column: [r for r in bins[index] if (r.get("host") == ALL_HOSTS) == totals_only]
            for column, totals_only in from_totals.items()
        }
        for name, column in _RATE_COLUMNS.items():
            series[name].append((t_s, _summed_rate(of[column], column, width)))
        series["lat_mean"].append((t_s, _weighted_latency(of["lat_mean_ns"], width)))
        errors = [optional_float(row.get("errors")) for row in of["errors"]]
        known = [count for count in errors if count is not None]
        series["errors"].append((t_s, int(sum(known)) if known else None))
    return series


def analyze_event(
    series: Series,
    event: Event,
    *,
    baseline_s: float = 10.0,
    band: float = 0.10,
    higher_is_better: bool = True,
    hold_intervals: int = 3,
    two_sided: bool = True,
    errors: Series | None = None,
    end_s: float | None = None,
) -> EventResult:
    """Baseline, dip, recovery and impact of one metric's ``series`` around ``event``."""
    if baseline_s <= 0 or band < 0 or hold_intervals < 1:
        raise ValueError(
            f"need baseline_s > 0, band >= 0, hold_intervals >= 1; got {baseline_s}, {band}, "
            f"{hold_intervals}"
        )
    points = check_series(series)
    start = event.at_s - baseline_s
    before = [
        v for t, v in points if start + _TOLERANCE < t <= event.at_s + _TOLERANCE and v is not None
    ]
    if not before:
        raise ValueError(
            f"event {event.name!r}: no values in its baseline window "
            f"(intervals ending in ({start:g}, {event.at_s:g}] s)"
        )
    baseline = statistics.median(before)
    end = points[-1][0] if end_s is None else end_s
    first = next((i for i, (t, _) in enumerate(points) if t > event.at_s + _TOLERANCE), None)
    window = [] if first is None else [p for p in points[first:] if p[0] <= end + _TOLERANCE]
    starts = [max(event.at_s, points[(first or 0) + i - 1][0]) for i in range(len(window))]
    in_band = [_within(v, baseline, band, higher_is_better, two_sided) for _, v in window]
    dip_t, dip = _worst(window, higher_is_better)
    recovered_at = _recovered_at(in_band, starts, hold_intervals)
    restore = event.recover_at_s
    return EventResult(
        event=event.name,
        at_s=event.at_s,
        end_s=end,
        baseline=baseline,
        baseline_n=len(before),
        dip=dip,
        dip_t_s=dip_t,
        depth=_depth(baseline, dip, higher_is_better),
        recovered=recovered_at is not None,
        recovered_at_s=recovered_at,
        recovery_s=None if recovered_at is None else recovered_at - event.at_s,
        recovery_after_restore_s=(
            None if recovered_at is None or restore is None else recovered_at - restore
        ),
        impact_s=math.fsum(
            t - s for (t, _), s, ok in zip(window, starts, in_band, strict=True) if not ok
        ),
        errors=_errors_between(errors, event.at_s, end),
    )


def analyze_events(
    series_by_metric: Mapping[str, Series],
    events: Sequence[Event],
    settings: FaultSettings | None = None,
) -> list[dict]:
    """One table row per (event, metric with values), events in time order.

    Row keys: ``metric``, the ``EventResult`` fields with ``depth_pct`` (100 x depth) for
    ``depth``, and ``survived`` (None without an iops or bw series).
    """
    settings = settings or FaultSettings()
    unknown = set(series_by_metric) - set(HIGHER_IS_BETTER) - {"errors"}
    if unknown:
        raise ValueError(f"unknown metrics {sorted(unknown)}; known: {sorted(HIGHER_IS_BETTER)}")
    names = [event.name for event in events]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"event names must be unique, repeated: {repeated}")
    metrics = [
        name
        for name in HIGHER_IS_BETTER
        if any(v is not None for _, v in series_by_metric.get(name) or [])
    ]
    throughput = series_by_metric.get("iops") or series_by_metric.get("bw")
    ordered = sorted(events, key=lambda event: event.at_s)
    rows = []
    for index, event in enumerate(ordered):
        later = ordered[index + 1 :]
        end_s = later[0].at_s if later else settings.expected_end_s
        survived = None if throughput is None else _survived(check_series(throughput), end_s)
        for metric in metrics:
            result = analyze_event(
                series_by_metric[metric],
                event,
                baseline_s=settings.baseline_s,
                band=settings.band,
                higher_is_better=HIGHER_IS_BETTER[metric],
                hold_intervals=settings.hold_intervals,
                two_sided=settings.two_sided,
                errors=series_by_metric.get("errors"),
                end_s=end_s,
            )
            row = {"metric": metric, **asdict(result), "survived": survived}
            depth = row.pop("depth")
            row["depth_pct"] = None if depth is None else 100 * depth
            rows.append(row)
    return rows


def check_series(series: Series) -> Series:
    """``series`` as a list, after checking that its times increase strictly."""
    points = [(float(t), v) for t, v in series]
    for (earlier, _), (later, _) in itertools.pairwise(points):
        if not later > earlier:
            raise ValueError(f"series times must increase strictly: t={later} after t={earlier}")
    return points


def _within(
    value: float | None, baseline: float, band: float, higher_is_better: bool, two_sided: bool
) -> bool:
    if value is None:
        return False
    worse_by = (baseline - value) if higher_is_better else (value - baseline)
    off_by = abs(value - baseline) if two_sided else worse_by
    return off_by <= band * abs(baseline) * (1 + _TOLERANCE)


def _worst(window: Series, higher_is_better: bool) -> tuple[float | None, float | None]:
    measured = [(t, v) for t, v in window if v is not None]
    if not measured:
        return None, None
    pick = min if higher_is_better else max
    return pick(measured, key=lambda point: point[1])


def _depth(baseline: float, dip: float | None, higher_is_better: bool) -> float | None:
    if dip is None or baseline == 0:
        return None
    return (baseline - dip) / baseline if higher_is_better else (dip - baseline) / baseline


def _recovered_at(in_band: list[bool], starts: list[float], hold: int) -> float | None:
    if all(in_band):
        return starts[0] if in_band else None
    run = 0
    for index in range(in_band.index(False), len(in_band)):
        run = run + 1 if in_band[index] else 0
        if run == hold:
            return starts[index - hold + 1]
    return None


def _errors_between(errors: Series | None, after_s: float, end_s: float) -> int | None:
    if errors is None:
        return None
    window = [v for t, v in errors if after_s + _TOLERANCE < t <= end_s + _TOLERANCE]
    counted = [v for v in window if v is not None]
    return int(sum(counted)) if counted else None


def _survived(throughput: Series, end_s: float | None) -> bool:
    if end_s is None:
        end_s = throughput[-1][0]
    reached = [(t, v) for t, v in throughput if t <= end_s + _TOLERANCE]
    if not reached:
        return False
    times = [t for t, _ in throughput]
    step = statistics.median(b - a for a, b in itertools.pairwise(times)) if len(times) > 1 else 0
    last_t, last_value = reached[-1]
    return last_t >= end_s - step - _TOLERANCE and last_value is not None and last_value > 0


def optional_float(value) -> float | None:
    """A float, or None for a missing value (None, NaN, pandas' NA)."""
    if value is None:
        return None
    try:
        number = float(value)
    except TypeError:
        return None
    return None if math.isnan(number) else number


def _bin_width(rows: list[dict]) -> float:
    intervals = [interval for row in rows if (interval := optional_float(row.get("interval_s")))]
    if not intervals:  # no interval column: the spacing of the distinct interval ends
        ends = sorted({row["t_s"] for row in rows})
        intervals = [later - earlier for earlier, later in itertools.pairwise(ends)] or ends
    width = statistics.median(intervals)
    if not width > 0:
        raise ValueError(f"time-series rows give no positive interval (median {width})")
    return width


def _summed_rate(rows: list[dict], column: str, width: float) -> float | None:
    weighted: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for row in rows:
        rate = optional_float(row.get(column))
        if rate is not None:
            duration = optional_float(row.get("interval_s")) or width
            key = weighted[(row.get("host"), row.get("job"), row.get("op"))]
            key[0] += rate * duration
            key[1] += duration
    if not weighted:
        return None
    return math.fsum(area / duration for area, duration in weighted.values())


def _weighted_latency(rows: list[dict], width: float) -> float | None:
    pairs = []
    for row in rows:
        latency = optional_float(row.get("lat_mean_ns"))
        if latency is not None:
            pairs.append((latency, _io_count(row, width)))
    counted = [(latency, count) for latency, count in pairs if count is not None]
    if not counted:
        return statistics.fmean(latency for latency, _ in pairs) if pairs else None
    total = math.fsum(count for _, count in counted)
    if total <= 0:
        return None
    return math.fsum(latency * count for latency, count in counted) / total


def _io_count(row: dict, width: float) -> float | None:
    ios = optional_float(row.get("ios"))
    if ios is not None:
        return ios
    iops = optional_float(row.get("iops"))
    return None if iops is None else iops * (optional_float(row.get("interval_s")) or width)
