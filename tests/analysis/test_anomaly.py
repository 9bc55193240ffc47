"""Soak analysis: rolling anomalies, drift and chunk merging on series worked out by hand, and
merged chunks of real fio 3.33 intervals (tests/fixtures/fio/README.md:
status-interval.json.txt is a 5 s randread job with --status-interval=1)."""

from __future__ import annotations

import math

import pytest

from storbench.analysis.anomaly import Chunk, drift, merge_chunks, rolling_anomalies
from storbench.analysis.fault_analysis import aggregate_series
from storbench.tools.fio_timeseries import rows_from_status_interval
from tests.paths import FIXTURES as SHARED_FIXTURES

FIXTURES = SHARED_FIXTURES / "fio"


def wobble(count: int = 200, **overrides: float) -> list[tuple[float, float]]:
    """1000 +- up to 20, deterministic: offsets -20, 0, 20, -10, 10 repeating (t = 1, 2, ...)."""
    offsets = (-20.0, 0.0, 20.0, -10.0, 10.0)
    values = {t: 1000.0 + offsets[(t - 1) % 5] for t in range(1, count + 1)}
    values.update({int(t[1:]): v for t, v in overrides.items()})
    return [(float(t), v) for t, v in sorted(values.items())]


# --- rolling anomalies -------------------------------------------------------------------


def test_one_spike_in_a_wobbling_series_and_nothing_else():
    # any 31 points hold 6 or 7 of each offset: median 1000, MAD 10, robust sd 14.826
    found = rolling_anomalies(wobble(t150=1500.0), window=31, k=5.0)
    assert [(a.t_s, a.value, a.median) for a in found] == [(150.0, 1500.0, 1000.0)]
    assert found[0].robust_sd == pytest.approx(14.826)
    assert found[0].score == pytest.approx(500 / 14.826)
    assert rolling_anomalies(wobble(), window=31, k=5.0) == []  # noise reaches 20/14.826 = 1.35


def test_a_drop_scores_negative_and_the_first_window_is_never_scored():
    found = rolling_anomalies(wobble(t100=700.0, t20=10.0), window=31, k=5.0)
    assert [(a.t_s, round(a.score, 2)) for a in found] == [(100.0, round(-300 / 14.826, 2))]


def test_flat_window_uses_the_floor_instead_of_mad_zero():
    flat = [(float(t), 1000.0) for t in range(1, 51)]
    series = [(t, {45.0: 1005.0, 48.0: 1100.0}.get(t, v)) for t, v in flat]
    floored = rolling_anomalies(series, window=31, k=5.0)  # sd = 1 % of 1000 = 10
    assert [(a.t_s, a.robust_sd, a.score) for a in floored] == [(48.0, 10.0, 10.0)]
    unfloored = rolling_anomalies(series, window=31, k=5.0, sd_floor=0.0)
    assert [(a.t_s, a.robust_sd, a.score) for a in unfloored] == [
        (45.0, 0.0, math.inf),
        (48.0, 0.0, math.inf),
    ]
    zeros = [(float(t), 5.0 if t == 40 else 0.0) for t in range(1, 51)]
    assert [(a.t_s, a.score) for a in rolling_anomalies(zeros, window=31)] == [(40.0, math.inf)]


def test_values_without_a_measurement_are_skipped_and_bad_settings_refused():
    series = wobble(60, t50=1500.0)
    with_gaps = [(t, None if t in (10.0, 49.0) else v) for t, v in series]
    assert [a.t_s for a in rolling_anomalies(with_gaps, window=31)] == [50.0]
    with pytest.raises(ValueError, match="window >= 3"):
        rolling_anomalies(series, window=2)


# --- drift ---------------------------------------------------------------------------------


def test_ramp_is_a_sustained_drift_with_its_slope():
    ramp = [(float(t), 1000.0 + 2.0 * t) for t in range(1, 101)]
    result = drift(ramp, min_fraction=0.05)
    assert result.slope_per_s == pytest.approx(2.0)
    assert result.change == pytest.approx(198.0)  # 2 per s over 99 s
    assert result.mean == pytest.approx(1101.0)  # 1000 + 2 * 50.5
    assert result.change_fraction == pytest.approx(198 / 1101)
    # tenths: t 1..10 and 91..100, medians 1000 + 2 * 5.5 and 1000 + 2 * 95.5
    assert (result.first_tenth_median, result.last_tenth_median) == (1011.0, 1191.0)
    assert result.tenth_change_fraction == pytest.approx(180 / 1101)
    assert result.flagged and result.sustained


def test_flat_wobble_is_no_drift():
    result = drift(wobble(), min_fraction=0.05)
    assert abs(result.change_fraction) < 0.001
    assert not result.flagged and not result.sustained


def test_a_late_dip_tilts_the_slope_but_is_not_sustained():
    series = [(float(t), 700.0 if 71 <= t <= 90 else 1000.0) for t in range(1, 101)]
    result = drift(series, min_fraction=0.05)
    # sum (t - 50.5)^2 = 100 * (100^2 - 1) / 12 = 83325; sum (t - 50.5) * v = -300 * 20 * 30
    assert result.slope_per_s == pytest.approx(-180000 / 83325)
    assert result.mean == 940.0
    assert result.flagged  # |-2.16 * 99 / 940| = 0.23
    assert result.tenth_change_fraction == 0.0 and not result.sustained


def test_drift_needs_two_values():
    with pytest.raises(ValueError, match="at least 2 values, got 1"):
        drift([(1.0, 5.0), (2.0, None)])


# --- chunks ----------------------------------------------------------------------------------


def rows_at(*ends: float) -> list[dict]:
    return [{"host": "h", "job": "j", "op": "read", "t_s": t, "iops": 10.0 * t} for t in ends]


def test_chunks_are_shifted_by_the_durations_before_them():
    merged = merge_chunks(
        [
            Chunk("c0", 3.0, rows_at(1.0, 2.0, 3.0)),
            ("c1", None, rows_at(1.0, 2.0)),  # duration: its last t_s
            Chunk("c2", 10.0, rows_at(0.5, 1.0)),
            Chunk("c3", None, rows_at(1.0)),
        ]
    )
    assert [row["t_s"] for row in merged] == [1.0, 2.0, 3.0, 4.0, 5.0, 5.5, 6.0, 16.0]
    assert [row["iops"] for row in merged] == [10.0, 20.0, 30.0, 10.0, 20.0, 5.0, 10.0, 10.0]


def test_chunk_given_twice_and_overlapping_chunks_are_refused():
    with pytest.raises(ValueError, match="chunk 'c1' is given twice"):
        merge_chunks([Chunk("c0", None, rows_at(1.0)), *[Chunk("c1", None, rows_at(1.0))] * 2])
    with pytest.raises(ValueError, match=r"chunk 7: an interval ends at t_s=3.5, after .* 3.0"):
        merge_chunks([Chunk(7, 3.0, rows_at(1.0, 3.5))])
    with pytest.raises(ValueError, match="chunk 'c0': no rows and no duration_s"):
        merge_chunks([Chunk("c0", None, [])])


def test_resumed_fio_chunks_keep_every_interval_once():
    text = (FIXTURES / "status-interval.json.txt").read_text()
    chunk = rows_from_status_interval(text, host="node1", base={})  # ends 0.893 .. 5.001
    merged = merge_chunks([Chunk(0, None, chunk), Chunk(1, None, chunk)])
    assert len(merged) == 2 * len(chunk)
    assert sum(row["ios"] for row in merged) == 2 * 157328  # fio's read.total_ios, twice
    series = aggregate_series(merged)["iops"]
    assert [t for t, _ in series] == [float(t) for t in range(1, 11)]
    # the second chunk's first interval (5.001 + 0.893) is its own bin, not added to bin 5
    assert series[5] == (6.0, pytest.approx(29540 / 0.893))
