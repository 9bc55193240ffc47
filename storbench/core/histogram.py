"""Latency histograms: merge bin counts, then compute percentiles from the merged bins.

Percentiles across jobs, hosts or iterations always come from summed bins, never from
averaging percentiles. The percentile rule is fio's (stat.c, calc_clat_percentiles): the
value of the first bin whose cumulative count reaches p/100 of all samples.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from collections.abc import Iterable, Sequence

Histogram = tuple[list[int], list[int]]  # (bin values ascending, counts)


class BinValues:
    """{bin key: int(key)} of one document's histograms: its jobs share the tool's bins, so
    each distinct key is converted once. known: keys converted beforehand (str(v): v)."""

    def __init__(self, known: dict[str, int] | None = None):
        self.by_key: dict = dict(known or {})
        self.seen: set[int] | None = None  # the values so far, once a key is added
        self.distinct = True  # no two keys of the same value ('1' and '01')

    def of(self, bins: dict) -> list[int]:
        """The keys' values, in the keys' order."""
        try:
            return self._looked_up(bins)
        except KeyError:  # a key not seen before in this document
            for key in bins:
                if key not in self.by_key:
                    self._add(key)
            return self._looked_up(bins)

    def _looked_up(self, bins: dict) -> list[int]:
        if len(bins) < 2:  # itemgetter of one key gives the value, not a tuple
            return [self.by_key[key] for key in bins]
        return list(operator.itemgetter(*bins)(self.by_key))

    def _add(self, key) -> None:
        if self.seen is None:
            self.seen = set(self.by_key.values())
        value = self.by_key[key] = int(key)
        self.distinct = self.distinct and value not in self.seen
        self.seen.add(value)


class IntKeys(BinValues):
    """The bin values of histograms whose keys are their values already (distinct ints)."""

    def of(self, bins: dict) -> list[int]:
        return list(bins)


INT_KEYS = IntKeys()


def from_mapping(bins: dict, bin_values: BinValues | None = None) -> Histogram:
    """fio json+ ``bins`` ({"19584": 1, ...}) -> sorted (values, counts)."""
    if bin_values is None:
        bin_values = BinValues()
    values = bin_values.of(bins)
    counts = whole_numbers(list(bins.values()))
    # fio prints the bins in order: nothing to sort
    if bin_values.distinct and values == sorted(values):
        return values, counts
    pairs = sorted(zip(values, counts))  # noqa: B905  (one dict's keys and values)
    return [v for v, _ in pairs], [c for _, c in pairs]


def whole_numbers(numbers: list) -> list[int]:
    """int() of each, skipped when they are all ints already (fio's counts)."""
    if set(map(type, numbers)) <= {int}:
        return numbers
    return list(map(int, numbers))


def merge(histograms: Iterable[tuple[Sequence[int], Sequence[int]]]) -> Histogram:
    totals: dict[int, int] = {}
    get = totals.get
    for values, counts in histograms:
        if len(values) != len(counts):
            raise ValueError(f"a histogram of {len(values)} values and {len(counts)} counts")
        for value, count in zip(values, counts):  # noqa: B905  (lengths checked above)
            totals[value] = get(value, 0) + count
    values = sorted(totals)  # the keys are distinct: the order of sorted(totals.items())
    return whole_numbers(values), whole_numbers(list(map(totals.__getitem__, values)))


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
