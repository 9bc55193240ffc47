"""Latency histograms: merge bin counts, then compute percentiles from the merged bins.

Percentiles across jobs, hosts or iterations always come from summed bins, never from
averaging percentiles. The percentile rule is fio's (stat.c, calc_clat_percentiles): the
value of the first bin whose cumulative count reaches p/100 of all samples.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

Histogram = tuple[list[int], list[int]]  # (bin values ascending, counts)


def from_mapping(bins: dict) -> Histogram:
    """fio json+ ``bins`` ({"19584": 1, ...}) -> sorted (values, counts)."""
    pairs = sorted((int(value), int(count)) for value, count in bins.items())
    return [v for v, _ in pairs], [c for _, c in pairs]


def merge(histograms: Iterable[tuple[Sequence[int], Sequence[int]]]) -> Histogram:
    totals: dict[int, int] = {}
    for values, counts in histograms:
        for value, count in zip(values, counts, strict=True):
            totals[int(value)] = totals.get(int(value), 0) + int(count)
    ordered = sorted(totals.items())
    return [v for v, _ in ordered], [c for _, c in ordered]


def percentiles(values: Sequence[int], counts: Sequence[int], ps: Sequence[float]) -> list:
    """Percentile values for ``ps`` (ascending or not); None for an empty histogram."""
    total = sum(counts)
    if total == 0:
        return [None] * len(ps)
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    result: list = [None] * len(ps)
    cumulative = 0
    k = 0
    for value, count in zip(values, counts, strict=True):
        cumulative += count
        while k < len(order) and cumulative >= ps[order[k]] / 100.0 * total:
            result[order[k]] = float(value)
            k += 1
        if k == len(order):
            break
    for i in order[k:]:  # float rounding can leave p=100 just past the last bin
        result[i] = float(values[-1])
    return result


def mean(values: Sequence[int], counts: Sequence[int]) -> float | None:
    total = sum(counts)
    if total == 0:
        return None
    return sum(v * c for v, c in zip(values, counts, strict=True)) / total
