"""Bandwidth units of the reports (report.units): decimal by default, binary on request."""

from __future__ import annotations

import pytest

from storbench.core import report_units

GIB, MIB = 1024**3, 1024**2


def test_decimal_is_the_default_and_picks_gb_from_one_gb_up():
    assert report_units.bandwidth_unit(2.5e9) == ("GB/s", 1e9)
    assert report_units.bandwidth_unit(1e9) == ("GB/s", 1e9)
    assert report_units.bandwidth_unit(4e8) == ("MB/s", 1e6)
    assert report_units.bandwidth_unit(None) == ("MB/s", 1e6)
    assert report_units.bandwidth_unit(float("nan")) == ("MB/s", 1e6)
    label, divisor = report_units.bandwidth_unit(2.5e9, "decimal")
    assert f"{2.5e9 / divisor:.2f} {label}" == "2.50 GB/s"


def test_binary_picks_gib_from_one_gib_up():
    assert report_units.bandwidth_unit(2 * GIB, "binary") == ("GiB/s", GIB)
    assert report_units.bandwidth_unit(1e9, "binary") == ("MiB/s", MIB)  # under 1 GiB/s
    label, divisor = report_units.bandwidth_unit(2.5e9, "binary")
    assert f"{2.5e9 / divisor:.2f} {label}" == "2.33 GiB/s"


def test_tables_keep_one_unit_per_column():
    assert report_units.table_bandwidth_unit() == ("MB/s", 1e6)
    assert report_units.table_bandwidth_unit("binary") == ("MiB/s", MIB)
    assert report_units.large_bandwidth_unit() == ("GB/s", 1e9)
    assert report_units.large_bandwidth_unit("binary") == ("GiB/s", GIB)


def test_notes_name_the_system_and_meta_without_units_is_decimal():
    assert (
        report_units.units_note() == "decimal units (1 GB/s = 10^9 bytes/s, 1 MB/s = 10^6 bytes/s)"
    )
    assert report_units.units_note("binary").startswith("binary units (1 GiB/s = 2^30 bytes/s")
    assert report_units.units_of({}) == report_units.units_of(None) == "decimal"
    assert report_units.units_of({"units": "binary"}) == "binary"
    assert report_units.other_system("decimal") == "binary"


def test_an_unknown_system_is_refused():
    with pytest.raises(report_units.UnknownUnitsError, match="'SI'"):
        report_units.bandwidth_unit(1e9, "SI")
