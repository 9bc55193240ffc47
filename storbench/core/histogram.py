"""Latency histograms: merge bin counts, then compute percentiles from the merged bins.

Percentiles across jobs, hosts or iterations always come from summed bins, never from
averaging percentiles. The percentile rule is fio's (stat.c, calc_clat_percentiles): the
value of the first bin whose cumulative count reaches p/100 of all samples.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Sequence

Histogram = tuple[list[int], list[int]]  # (bin values ascending, counts)


def from_mapping(bins: dict) -> Histogram:
    """fio json+ ``bins`` ({"19584": 1, ...}) -> sorted (values, counts)."""
    pairs = sorted(zip(map(int, bins), map(int, bins.values()), strict=True))
    return [v for v, _ in pairs], [c for _, c in pairs]


def merge(histograms: Iterable[tuple[Sequence[int], Sequence[int]]]) -> Histogram:
    totals: dict[int, int] = {}
    get = totals.get
    for values, counts in histograms:
        if len(values) != len(counts):
            raise ValueError(f"a histogram of {len(values)} values and {len(counts)} counts")
        for value, count in zip(values, counts):  # noqa: B905  (lengths checked above)
            totals[value] = get(value, 0) + count
    ordered = sorted(totals.items())
    return [int(v) for v, _ in ordered], [int(c) for _, c in ordered]


def percentiles(values: Sequence[int], counts: Sequence[int], ps: Sequence[float]) -> list:
    """Percentile values for ``ps`` (ascending or not); None for an empty histogram."""
    total = sum(counts)
    if total == 0:
        return [None] * len(ps)
    if len(values) != len(counts):
        raise ValueError(f"a histogram of {len(values)} values and {len(counts)} counts")
    cumulative = list(itertools.accumulate(counts))
    last = len(values) - 1
    # the first bin whose cumulative count reaches p/100 of the samples; float rounding can
    # leave p=100 just past the last bin
    return [float(values[min(bisect.bisect_left(cumulative, p / 100.0 * total), last)]) for p in ps]


def mean(values: Sequence[int], counts: Sequence[int]) -> float | None:
    total = sum(counts)
    if total == 0:
        return None
    return sum(v * c for v, c in zip(values, counts, strict=True)) / total
