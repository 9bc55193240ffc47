"""Which runs a figure draws when a sweep is too large to draw every one readably.

A 1,000-run sweep drawn whole gives 50 panels of bars, a CDF with 1,000 lines and a legend
longer than the page. A figure instead draws at most a fixed number of panels or lines:
evenly spaced values of each swept key, both ends kept (iodepth 1, 8, 64, 512 of ten), and
its caption names the selection. Every run stays in the tables and summary.csv.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from storbench.core.units import size_label
from storbench.report.toolkit import int_label

SWEEP_KEYS = ("rw", "bs", "iodepth", "numjobs")  # what lines and panels range over
MAX_PANELS = 12  # small multiples per figure; more are too small to read


@dataclass(frozen=True)
class Selection:
    rows: pd.DataFrame
    note: str  # '' when every row is kept


def select(frame: pd.DataFrame, keys, limit: int, what: str = "combinations") -> Selection:
    """The rows of at most ``limit`` combinations of the varying ``keys``' values."""
    values = {
        key: _ordered_values(frame[key])
        for key in keys
        if key in frame and frame[key].nunique(dropna=False) > 1
    }
    counts = {key: len(found) for key, found in values.items()}
    total = math.prod(counts.values())
    if total <= limit:
        return Selection(frame, "")
    while math.prod(counts.values()) > limit:
        largest = max(counts, key=lambda key: counts[key])
        counts[largest] -= 1
    kept = {key: _evenly_spaced(values[key], counts[key]) for key in values}
    mask = pd.Series(True, index=frame.index)
    for key, chosen in kept.items():
        mask &= frame[key].isin(chosen)
    shown = math.prod(counts.values())
    listing = "; ".join(
        f"{key} {', '.join(value_label(key, v) for v in chosen)}"
        for key, chosen in kept.items()
        if len(chosen) < len(values[key])
    )
    note = (
        f"A selection: {shown} of {total} {what} ({listing}), evenly spaced with both ends "
        "kept, so that the figure stays readable; every run is in the tables and summary.csv."
    )
    return Selection(frame[mask], note)


def select_runs(frame: pd.DataFrame, limit: int) -> Selection:
    """At most ``limit`` runs, by their swept keys when the rows have them, else every k-th."""
    keys = [key for key in SWEEP_KEYS if key in frame]
    if keys:
        chosen = select(frame, keys, limit, "runs")
        if chosen.rows["run_id"].nunique() <= limit:
            return chosen
    runs = list(dict.fromkeys(frame["run_id"]))
    if len(runs) <= limit:
        return Selection(frame, "")
    kept = _evenly_spaced(runs, limit)
    note = (
        f"A selection: {limit} of {len(runs)} runs, evenly spaced in plan order with the first "
        "and last kept, so that the figure stays readable; every run is in the tables and "
        "summary.csv."
    )
    return Selection(frame[frame["run_id"].isin(kept)], note)


def _ordered_values(column: pd.Series) -> list:
    numeric = pd.api.types.is_numeric_dtype(column)
    found = column.drop_duplicates()
    return list(found.sort_values(na_position="last") if numeric else found)


def _evenly_spaced(values: list, count: int) -> list:
    if count >= len(values):
        return list(values)
    if count == 1:
        return [values[0]]
    step = (len(values) - 1) / (count - 1)
    return [values[round(index * step)] for index in range(count)]


def value_label(key: str, value) -> str:
    """A swept key's value as a caption or title says it: bs 4096 as '4k'."""
    if key == "bs" and isinstance(value, (int, float)) and not pd.isna(value):
        return size_label(int(value))
    return int_label(value) if isinstance(value, (int, float)) else str(value)
