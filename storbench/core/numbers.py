"""Missing values and plain number formats, shown the same way by every page and message."""

from __future__ import annotations

import math

MIB = 1024**2


GIB = 1024**3


NS_PER_US = 1000.0


NO_VALUE = "–"  # shown where a value is missing (e.g. no histogram for a percentile)


def format_number(value, decimals: int) -> str:
    """1234.5 -> '1,234.5' (decimals=1); missing -> '–'."""
    if is_missing(value):
        return NO_VALUE
    return f"{float(value):,.{decimals}f}"


def is_missing(value) -> bool:
    return (
        value is None
        or type(value).__name__ == "NAType"  # pandas.NA, without importing pandas
        or (isinstance(value, float) and math.isnan(value))
    )


def scaled(value, unit: float) -> float | None:
    """value / unit as a float; a missing value (None, NaN, pandas.NA) stays missing."""
    return None if is_missing(value) else float(value) / unit
