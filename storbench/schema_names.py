"""Names shared by the result schema and the tool adapters, importable without pyarrow."""

from __future__ import annotations

ALL_HOSTS = "all"

PERCENTILES = (50.0, 90.0, 99.0, 99.9, 99.99)


def percentile_column(p: float) -> str:
    """50.0 -> 'p50_ns', 99.9 -> 'p99_9_ns', 99.99 -> 'p99_99_ns'."""
    text = f"{p:g}".replace(".", "_")
    return f"p{text}_ns"


PERCENTILE_COLUMNS = tuple(percentile_column(p) for p in PERCENTILES)
