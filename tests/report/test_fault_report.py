"""The fault table: bandwidth rows in the campaign's table unit (report.units)."""

from __future__ import annotations

from storbench.report import faults as fault_report

ROW = {
    "run_id": "r",
    "iteration": 1,
    "event": "pause-io",
    "metric": "bw",
    "baseline": 2.5e9,
    "dip": 5e8,
    "depth_pct": 80.0,
    "recovery_s": 2.0,
    "recovery_after_restore_s": 0.5,
    "impact_s": 3.0,
    "survived": True,
    "errors": 0,
}


def metric_baseline_dip(units: str | None = None) -> list[str]:
    settings = fault_report.settings_from({})
    table = fault_report.faults_table([ROW], settings, *([units] if units else []))
    (row,) = table.rows
    return [row[table.columns.index(name)] for name in ("Metric", "Baseline", "Dip")]


def test_bandwidth_is_mb_per_second_by_default_and_mib_when_binary():
    assert metric_baseline_dip() == ["MB/s", "2,500.0", "500.0"]
    assert metric_baseline_dip("binary") == ["MiB/s", "2,384.2", "476.8"]  # / 2^20
