"""Fault analysis: synthetic step series worked out by hand, and aggregation of real fio 3.33
intervals (tests/fixtures/fio/README.md: status-interval.json.txt is a 5 s randread
job with --status-interval=1)."""

from __future__ import annotations

import pandas as pd
import pytest

from storbench.analysis.fault_analysis import (
    Event,
    FaultSettings,
    aggregate_series,
    analyze_event,
    analyze_events,
)
from storbench.tools.fio_timeseries import rows_from_status_interval
from tests.paths import FIXTURES as SHARED_FIXTURES

FIXTURES = SHARED_FIXTURES / "fio"


def step_series(last_t: int = 25, **overrides: float) -> list[tuple[float, float]]:
    """1 s intervals ending at 1..last_t: 1000, except 200 for the five ending at 11..15."""
    values = {t: 200.0 if 11 <= t <= 15 else 1000.0 for t in range(1, last_t + 1)}
    values.update({int(t[1:]): v for t, v in overrides.items()})  # t16=... sets t=16
    return [(float(t), v) for t, v in sorted(values.items())]


FAIL = Event("fail-path", at_s=10.0)


# --- one event -------------------------------------------------------------------------


def test_step_dip_depth_and_recovery():
    result = analyze_event(step_series(), FAIL)
    assert (result.baseline, result.baseline_n) == (1000.0, 10)  # intervals ending at 1..10
    assert (result.dip, result.dip_t_s) == (200.0, 11.0)
    assert result.depth == pytest.approx(0.8)
    # the first in-band interval (16) starts at 15: 5 s after the event, the injected window
    assert (result.recovered, result.recovered_at_s, result.recovery_s) == (True, 15.0, 5.0)
    assert result.impact_s == 5.0
    assert result.recovery_after_restore_s is None
    assert result.errors is None


def test_recovery_needs_hold_intervals_in_band_in_a_row():
    # back for 16 and 17, out again at 18, back from 19 on
    series = step_series(t18=200.0)
    held = analyze_event(series, FAIL, hold_intervals=3)
    assert (held.recovered_at_s, held.recovery_s) == (18.0, 8.0)
    assert held.impact_s == 6.0
    assert analyze_event(series, FAIL, hold_intervals=2).recovery_s == 5.0
    assert analyze_event(series, FAIL, hold_intervals=1).recovery_s == 5.0


def test_recovery_waits_for_an_effect_that_starts_late():
    # I/O goes on for 3 s (e.g. until path timeouts), then 200 for 14..18
    series = step_series(t11=1000.0, t12=1000.0, t13=1000.0, t16=200.0, t17=200.0, t18=200.0)
    late = analyze_event(series, FAIL, hold_intervals=3)
    assert (late.recovered_at_s, late.recovery_s, late.impact_s) == (18.0, 8.0, 5.0)
    assert late.dip_t_s == 14.0


def test_a_metric_that_never_leaves_the_band_recovered_at_once():
    calm = step_series(t11=950.0, t12=1050.0, t13=1000.0, t14=1000.0, t15=1000.0)
    result = analyze_event(calm, FAIL)
    assert (result.recovered, result.recovery_s, result.impact_s) == (True, 0.0, 0.0)
    assert result.depth == pytest.approx(0.05)
    at_the_end = analyze_event(step_series(), Event("late", at_s=25.0))
    assert (at_the_end.recovered, at_the_end.dip, at_the_end.impact_s) == (False, None, 0.0)


def test_a_run_cut_off_by_the_end_of_the_series_is_not_a_recovery():
    series = step_series(last_t=17)  # two in-band intervals after the dip
    assert analyze_event(series, FAIL, hold_intervals=3).recovered is False
    assert analyze_event(series, FAIL, hold_intervals=2).recovery_s == 5.0


def test_recovery_is_also_measured_from_the_restore_command():
    result = analyze_event(step_series(), Event("pull-ctrl", at_s=10.0, recover_at_s=13.0))
    assert (result.recovery_s, result.recovery_after_restore_s) == (5.0, 2.0)
    early = analyze_event(step_series(), Event("pull-ctrl", at_s=10.0, recover_at_s=18.0))
    assert early.recovery_after_restore_s == -3.0  # failed over before the restore


def test_latency_dip_is_the_maximum():
    latency = [(t, 900_000.0 if v == 200.0 else 100_000.0) for t, v in step_series()]
    result = analyze_event(latency, FAIL, higher_is_better=False)
    assert (result.baseline, result.dip, result.dip_t_s) == (100_000.0, 900_000.0, 11.0)
    assert result.depth == pytest.approx(8.0)  # 800 % above the baseline
    assert (result.recovery_s, result.impact_s) == (5.0, 5.0)
    assert analyze_event(latency, FAIL, higher_is_better=True).dip == 100_000.0


def test_never_recovering():
    series = [(t, 200.0 if t > 10 else 1000.0) for t, _ in step_series()]
    result = analyze_event(series, FAIL)
    assert result.recovered is False
    assert result.recovered_at_s is None and result.recovery_s is None
    assert result.impact_s == 15.0  # intervals ending at 11..25
    assert result.depth == pytest.approx(0.8)


def test_intervals_without_a_value_are_outside_the_band():
    # no latency while the workload was stopped: 11..15 have no value
    latency = [(t, None if 11 <= t <= 15 else 100_000.0) for t, _ in step_series()]
    result = analyze_event(latency, FAIL, higher_is_better=False)
    assert (result.recovery_s, result.impact_s) == (5.0, 5.0)
    assert (result.dip, result.depth) == (100_000.0, 0.0)


def test_gap_in_the_series_counts_as_the_next_intervals_time():
    # a stopped fio reports one long interval: nothing ends at 11..14, 200 ends at 15
    series = [(t, v) for t, v in step_series() if not 11 <= t <= 14]
    result = analyze_event(series, FAIL)
    assert (result.recovery_s, result.impact_s, result.dip_t_s) == (5.0, 5.0, 15.0)


def test_empty_baseline_names_the_event():
    with pytest.raises(ValueError, match=r"event 'early'.*\(-9.5, 0.5\]"):
        analyze_event(step_series(), Event("early", at_s=0.5))
    unmeasured = [(t, None if t <= 10 else v) for t, v in step_series()]
    with pytest.raises(ValueError, match="event 'fail-path': no values in its baseline"):
        analyze_event(unmeasured, FAIL)


def test_baseline_is_the_median_of_the_window_before_the_event():
    series = step_series(t1=5000.0, t8=950.0, t9=960.0, t10=970.0)
    result = analyze_event(series, FAIL, baseline_s=4.0)  # intervals ending at 7..10
    assert (result.baseline, result.baseline_n) == (965.0, 4)  # median of 950 960 970 1000


@pytest.mark.parametrize(
    ("value", "recovered"), [(900.0, True), (1100.0, True), (899.9, False), (1100.1, False)]
)
def test_band_boundary_is_inside(value, recovered):
    series = [(t, value if t > 15 else v) for t, v in step_series()]
    result = analyze_event(series, FAIL, band=0.10)
    assert result.recovered is recovered
    assert result.recovery_s == (5.0 if recovered else None)


def test_one_sided_band_ignores_a_catch_up_burst():
    burst = step_series(t16=1500.0, t17=1500.0)  # rate_iops catching up after the stall
    assert analyze_event(burst, FAIL).recovery_s == 7.0
    assert analyze_event(burst, FAIL, two_sided=False).recovery_s == 5.0
    latency = [(t, {16.0: 10.0, 17.0: 10.0}.get(t, 1e6 / v)) for t, v in step_series()]
    assert analyze_event(latency, FAIL, higher_is_better=False).recovery_s == 7.0
    one_sided = analyze_event(latency, FAIL, higher_is_better=False, two_sided=False)
    assert (one_sided.recovery_s, one_sided.dip) == (5.0, 5000.0)


def test_errors_are_counted_from_the_event_to_the_window_end():
    errors = [(t, {9.0: 1, 12.0: 3, 22.0: 4}.get(t, 0)) for t, _ in step_series()]
    assert analyze_event(step_series(), FAIL, errors=errors).errors == 7
    assert analyze_event(step_series(), FAIL, errors=errors, end_s=20.0).errors == 3
    uncounted = [(t, None) for t, _ in errors]  # fio's status intervals carry no error count
    assert analyze_event(step_series(), FAIL, errors=uncounted).errors is None


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="increase strictly: t=2.0 after t=2.0"):
        analyze_event([(1.0, 1.0), (2.0, 1.0), (2.0, 1.0)], FAIL)
    with pytest.raises(ValueError, match="event 'x': recover_at_s 5 is before at_s 10"):
        Event("x", at_s=10, recover_at_s=5)
    with pytest.raises(ValueError, match="hold_intervals >= 1"):
        analyze_event(step_series(), FAIL, hold_intervals=0)


# --- a table over events and metrics -----------------------------------------------------


def two_event_run(last_t: int = 40) -> dict[str, list]:
    """Path failure at 10 (iops 200 for 11..15), controller pull at 20 (500 for 21..23)."""
    times = range(1, last_t + 1)
    iops = [
        (float(t), 200.0 if 11 <= t <= 15 else 500.0 if 21 <= t <= 23 else 1000.0) for t in times
    ]
    return {
        "iops": iops,
        "bw": [(t, 4096 * v) for t, v in iops],
        "lat_mean": [(t, 100_000_000 / v) for t, v in iops],  # 100 us at 1000 IOPS
        "errors": [(float(t), {12: 2, 22: 1}.get(t, 0)) for t in times],
    }


def test_one_row_per_event_and_metric_each_event_until_the_next():
    events = [Event("ctrl-pull", 20.0, recover_at_s=25.0), Event("path-fail", 10.0)]
    rows = analyze_events(two_event_run(), events, FaultSettings(baseline_s=5.0))
    assert [(row["event"], row["metric"]) for row in rows] == [
        ("path-fail", "iops"), ("path-fail", "bw"), ("path-fail", "lat_mean"),
        ("ctrl-pull", "iops"), ("ctrl-pull", "bw"), ("ctrl-pull", "lat_mean"),
    ]  # fmt: skip
    path_iops, _, path_lat, ctrl_iops, ctrl_bw, ctrl_lat = rows
    assert path_iops["end_s"] == 20.0  # the controller pull starts the next window
    assert (path_iops["baseline"], path_iops["dip"]) == (1000.0, 200.0)
    assert path_iops["depth_pct"] == pytest.approx(80.0)
    assert (path_iops["recovery_s"], path_iops["errors"], path_iops["survived"]) == (5.0, 2, True)
    assert (path_lat["baseline"], path_lat["dip"]) == (100_000.0, 500_000.0)
    assert path_lat["depth_pct"] == pytest.approx(400.0)
    assert (ctrl_iops["end_s"], ctrl_iops["baseline"], ctrl_iops["dip"]) == (40.0, 1000.0, 500.0)
    assert ctrl_bw["baseline"] == 4096_000.0 and ctrl_bw["depth_pct"] == pytest.approx(50.0)
    assert (ctrl_lat["recovery_s"], ctrl_lat["recovery_after_restore_s"]) == (3.0, -2.0)
    assert (ctrl_iops["impact_s"], ctrl_iops["errors"], ctrl_iops["survived"]) == (3.0, 1, True)


def test_workload_that_stopped_early_or_went_idle_did_not_survive():
    run = two_event_run()
    events = [Event("path-fail", 10.0)]
    assert analyze_events(run, events, FaultSettings(expected_end_s=40.0))[0]["survived"]
    stopped = analyze_events(run, events, FaultSettings(expected_end_s=45.0))
    assert stopped[0]["survived"] is False  # the series ends at 40, one interval is 1 s
    idle = {**run, "iops": [(t, 0.0 if t > 30 else v) for t, v in run["iops"]]}
    assert analyze_events(idle, events)[0]["survived"] is False


def test_p99_when_given_unknown_metrics_and_repeated_names_refused():
    run = two_event_run()
    run["p99"] = [(t, 4 * v) for t, v in run["lat_mean"]]
    rows = analyze_events(run, [Event("path-fail", 10.0)])
    assert [row["metric"] for row in rows] == ["iops", "bw", "lat_mean", "p99"]
    assert rows[-1]["dip"] == 2_000_000.0
    with pytest.raises(ValueError, match=r"unknown metrics \['p95'\]"):
        analyze_events({**run, "p95": run["p99"]}, [Event("path-fail", 10.0)])
    with pytest.raises(ValueError, match=r"repeated: \['a'\]"):
        analyze_events(run, [Event("a", 10.0), Event("a", 20.0)])


# --- rows to series -----------------------------------------------------------------------


def row(host, t_s, op="read", interval_s=1.0, **metrics) -> dict:
    return {"host": host, "job": "j", "op": op, "t_s": t_s, "interval_s": interval_s, **metrics}


def test_unaligned_hosts_meet_in_one_bin_with_io_weighted_latency():
    rows = [
        row("a", 0.98, iops=100.0, bw_bytes_s=409600.0, ios=100, lat_mean_ns=1000.0, errors=1),
        row("b", 1.03, iops=300.0, bw_bytes_s=1228800.0, ios=300, lat_mean_ns=2000.0, errors=2),
        row("a", 2.02, iops=50.0, bw_bytes_s=204800.0, ios=50, lat_mean_ns=3000.0, errors=0),
        row("b", 1.97, op="write", iops=10.0, bw_bytes_s=40960.0, ios=10, lat_mean_ns=9000.0),
        row("all", 1.0, iops=400.0, bw_bytes_s=1638400.0, ios=400, lat_mean_ns=1750.0),
    ]
    series = aggregate_series(rows)
    assert series["iops"] == [(1.0, 400.0), (2.0, 60.0)]  # the host 'all' row is not added
    assert series["bw"] == [(1.0, 1638400.0), (2.0, 245760.0)]
    assert series["lat_mean"] == [(1.0, 1750.0), (2.0, (50 * 3000 + 10 * 9000) / 60)]
    assert series["errors"] == [(1.0, 3), (2.0, 0)]
    assert aggregate_series(pd.DataFrame(rows)) == series
    assert aggregate_series(rows, ops=["write"])["iops"] == [(2.0, 10.0)]
    assert aggregate_series([rows[-1]])["iops"] == [(1.0, 400.0)]  # service mode: only 'all'


def test_elbencho_services_give_bytes_and_the_total_row_the_iops():
    """elbencho's live CSV in service mode: per-service rows carry bytes but no IOPS, the
    'Total' row (host 'all') both; the IOPS series was all None, its figure panels empty."""
    from storbench.tools import get_tool
    from tests.tools.test_elbencho import BASE, as_manifest, manifest

    rows = get_tool("elbencho").parse_timeseries(
        as_manifest(manifest("service-2hosts", hosts=("a", "b"))),
        SHARED_FIXTURES / "elbencho",
        BASE,
    )
    series = aggregate_series(rows, ops=["write"])
    # live.csv, Total rows of the WRITE phase: IOPS 160, 0, 160, 0, 160, 0
    assert series["iops"] == [(t / 2, 160.0 if t % 2 else 0.0) for t in range(1, 7)]
    # the two services' MiB/s (80 each in the intervals that wrote) summed, not the Total's
    # added to them: 160 MiB/s
    assert series["bw"][0] == (0.5, 2 * 41943040 / 0.5)


def test_a_bin_without_io_has_no_latency_and_rows_need_t_s():
    rows = [row("a", 1.0, iops=0.0, ios=0, lat_mean_ns=None), row("a", 2.0, iops=5.0, ios=5)]
    assert aggregate_series(rows)["lat_mean"] == [(1.0, None), (2.0, None)]
    with pytest.raises(ValueError, match="time-series row without t_s"):
        aggregate_series([row("a", None, iops=1.0)])


def test_real_fio_intervals_of_two_unaligned_hosts():
    text = (FIXTURES / "status-interval.json.txt").read_text()
    node1 = rows_from_status_interval(text, host="node1", base={})
    node2 = [{**r, "host": "node2", "t_s": r["t_s"] + 0.2} for r in node1]  # 1.093, 2.093 ...
    series = aggregate_series(node1 + node2)
    assert [t for t, _ in series["iops"]] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert series["iops"][1] == (2.0, 2 * 27980.0)  # fio's read.total_ios 57520 - 29540
    # the last 1 s interval and the final 0.108 s one share bin 5: bytes over their time
    assert series["bw"][4][1] == pytest.approx(2 * (140005376 + 14319616) / 1.108)
    assert series["lat_mean"][1][1] == pytest.approx(node1[1]["lat_mean_ns"])
    assert series["errors"][0] == (1.0, None)  # fio gives no per-interval error count
