"""Bandwidth units of every report: one system per campaign (``report.units``).

Decimal (GB/s, MB/s: 10^9 and 10^6 bytes/s, the units storage and network vendors quote) is
the default; binary (GiB/s, MiB/s: 2^30 and 2^20 bytes/s, fio's own units) on request. Figures
and sentences pick the unit by magnitude; a table column keeps one fixed unit.
"""

from __future__ import annotations

from storbench.core.numbers import GIB, MIB, is_missing

DECIMAL = "decimal"
BINARY = "binary"
UNIT_SYSTEMS = (DECIMAL, BINARY)
DEFAULT_UNITS = DECIMAL

GB = 1e9
MB = 1e6

_LARGE_AND_SMALL = {
    DECIMAL: (("GB/s", GB), ("MB/s", MB)),
    BINARY: (("GiB/s", float(GIB)), ("MiB/s", float(MIB))),
}

_NOTES = {
    DECIMAL: "decimal units (1 GB/s = 10^9 bytes/s, 1 MB/s = 10^6 bytes/s)",
    BINARY: "binary units (1 GiB/s = 2^30 bytes/s, 1 MiB/s = 2^20 bytes/s)",
}


class UnknownUnitsError(ValueError):
    pass


def checked(units: str | None) -> str:
    """The unit system, DEFAULT_UNITS when unset; an unknown name raises UnknownUnitsError."""
    if units is None:
        return DEFAULT_UNITS
    if units not in UNIT_SYSTEMS:
        raise UnknownUnitsError(f"unknown unit system {units!r} (expected decimal or binary)")
    return units


def bandwidth_unit(largest, units: str | None = DEFAULT_UNITS) -> tuple[str, float]:
    """(label, bytes/s per unit): the large unit from 1 of it up, else the small one.

    decimal: 2.5e9 -> ('GB/s', 1e9), 4e8 -> ('MB/s', 1e6); binary: ('GiB/s', 2^30) or
    ('MiB/s', 2^20). A missing largest value gives the small unit.
    """
    large, small = _LARGE_AND_SMALL[checked(units)]
    return large if not is_missing(largest) and largest >= large[1] else small


def table_bandwidth_unit(units: str | None = DEFAULT_UNITS) -> tuple[str, float]:
    """The one unit of a table's bandwidth column: ('MB/s', 1e6) or ('MiB/s', 2^20)."""
    return _LARGE_AND_SMALL[checked(units)][1]


def large_bandwidth_unit(units: str | None = DEFAULT_UNITS) -> tuple[str, float]:
    """The unit of the paper tables' bandwidth columns: ('GB/s', 1e9) or ('GiB/s', 2^30)."""
    return _LARGE_AND_SMALL[checked(units)][0]


def other_system(units: str | None = DEFAULT_UNITS) -> str:
    """binary for decimal and decimal for binary: the second unit of a table showing both."""
    return BINARY if checked(units) == DECIMAL else DECIMAL


def units_note(units: str | None = DEFAULT_UNITS) -> str:
    """'decimal units (1 GB/s = 10^9 bytes/s, ...)' or the binary one, for notes and captions."""
    return _NOTES[checked(units)]


def units_of(settings: dict | None) -> str:
    """The unit system a report's meta (or the report: settings) names; the default if none."""
    return checked((settings or {}).get("units"))
