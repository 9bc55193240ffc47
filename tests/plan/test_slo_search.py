"""Latency-SLO search on synthetic targets; every expected number is worked out by hand.

The M/M/1-like target: capacity C = 100k IOPS, base latency B = 100 us, and in open loop
latency(rate) = B / (1 - rate / C). The limit 2 ms is met up to 1 - r/C = 0.05, r = 95k.
In closed loop at depth q, Little's law q = iops * latency(iops) gives
iops(q) = C * q / (q + C * B) = 1e5 * q / (q + 10) and latency(q) = (q + 10) * 10 us.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from storbench import cli
from storbench.plan.slo_search import (
    Decision,
    Objective,
    Probe,
    iodepth_for_rate,
    knee,
    meets,
    next_probe,
    qd_ladder,
    result,
    split_rate,
)
from tests.paths import REPO

MS = 1_000_000.0  # ns
US = 1_000.0  # ns
LIMIT_2MS = Objective(limit_ns=2 * MS)


@dataclass(frozen=True)
class Target:
    """closed(qd) -> (iops, latency_ns); open(rate) -> (achieved, latency_ns)."""

    closed: Callable[[int], tuple[float, float]]
    open: Callable[[float], tuple[float, float]]

    def run(self, decision: Decision, key: str = "p99") -> Probe:
        if decision.action == "closed":
            iops, latency = self.closed(decision.iodepth)
            return Probe("closed", decision.iodepth, None, iops, {key: latency})
        achieved, latency = self.open(decision.offered_iops)
        return Probe(decision.action, None, decision.offered_iops, achieved, {key: latency})


def mm1(capacity: float = 100_000.0, base_ns: float = 100 * US) -> Target:
    def closed(qd: int) -> tuple[float, float]:
        iops = capacity * qd / (qd + capacity * base_ns / 1e9)
        return iops, qd / iops * 1e9

    def open_loop(rate: float) -> tuple[float, float]:
        if rate >= capacity:
            return capacity, 1e12  # saturated: the queue grows without bound
        return rate, base_ns / (1 - rate / capacity)

    return Target(closed, open_loop)


def simulate(target: Target, objective: Objective, history=(), **settings):
    """Ask, run, append until done; returns the history and every decision made."""
    history, decisions = list(history), []
    for _ in range(200):
        decision = next_probe(history, objective, **settings)
        decisions.append(decision)
        if decision.action == "done":
            return history, decisions
        history.append(target.run(decision, objective.latency))
    raise AssertionError("the search did not finish in 200 probes")


def offered(history, phase: str) -> list[float]:
    return [probe.offered_iops for probe in history if probe.phase == phase]


# The closed ladder of the M/M/1 target, qd -> (1e5 * qd / (qd + 10), (qd + 10) * 10 us).
MM1_LADDER = {
    1: (9090.91, 110 * US),
    2: (16666.67, 120 * US),
    4: (28571.43, 140 * US),
    8: (44444.44, 180 * US),
    16: (61538.46, 260 * US),
    32: (76190.48, 420 * US),
    64: (86486.49, 740 * US),
    128: (92753.62, 1380 * US),
    256: (96240.60, 2660 * US),
}


def test_mm1_target_closed_ladder_matches_the_hand_table():
    target = mm1()
    for qd, (iops, latency) in MM1_LADDER.items():
        assert target.closed(qd) == (pytest.approx(iops, abs=0.01), pytest.approx(latency))


def test_mm1_search_finds_95k_within_tolerance_with_a_third_of_a_20_point_grid():
    target = mm1()
    history, decisions = simulate(target, LIMIT_2MS, max_qd=256)

    # A 20-point grid 5k, 10k ... 100k: the highest rate within 2 ms is 95k (latency = 2 ms).
    grid = [5_000.0 * step for step in range(1, 21)]
    grid_answer = max(rate for rate in grid if target.open(rate)[1] <= 2 * MS + 1e-6)
    assert grid_answer == 95_000.0

    assert [probe.iodepth for probe in history[:9]] == list(MM1_LADDER)
    # lo = best closed within 2 ms = qd 128 (92753.62); hi = 1.05 * peak 96240.60 = 101052.63.
    # mid 96903.13: 100 us / (1 - 0.969) = 3.23 ms, fails -> hi
    # mid 94828.37: 100 us / 0.0517 = 1.93 ms, meets -> lo; width 2074.8 > 2 % of hi 1938.1
    # mid 95865.75: 2.42 ms, fails -> hi; width 1037.4 <= 2 % of 95865.75 = 1917.3: bracketed
    assert offered(history, "open") == pytest.approx([96903.13, 94828.37, 95865.75], abs=0.01)
    assert offered(history, "confirm") == pytest.approx([94828.37] * 3, abs=0.01)
    assert decisions[-1].action == "done"

    summary = result(history, LIMIT_2MS, max_qd=256)
    assert summary["status"] == "found"
    assert summary["rate_iops"] == pytest.approx(94828.37, abs=0.01)
    assert summary["rate_iops"] == pytest.approx(95_000, rel=LIMIT_2MS.tolerance)
    assert summary["rate_iops"] == pytest.approx(grid_answer, rel=LIMIT_2MS.tolerance)
    assert summary["bracket"] == pytest.approx([94828.37, 95865.75], abs=0.01)
    assert summary["relative_width"] == pytest.approx(1037.38 / 95865.75, rel=1e-4)
    assert summary["hi_tested"] is True
    assert summary["confirmations"] == [3, 3]
    counts = [summary[key] for key in ("probes", "closed_probes", "open_probes", "confirm_probes")]
    assert counts == [15, 9, 3, 3]
    assert summary["open_probes"] <= len(grid) / 3


def test_knee_and_peak_of_the_mm1_ladder():
    target = mm1()
    closed = [target.run(Decision("closed", qd, None, "")) for qd in qd_ladder(256)]
    summary = knee(closed, LIMIT_2MS)
    # Gains per doubling: 32 -> 64 +13.5 %, 64 -> 128 +7.2 % (< 10 %): the knee is 64.
    assert summary["knee_qd"] == 64
    assert summary["knee_iops"] == pytest.approx(6_400_000 / 74)
    assert summary["saturated"] is True
    assert (summary["peak_qd"], summary["peak_iops"]) == (256, pytest.approx(25_600_000 / 266))
    # qd 128 is 1.38 ms, qd 256 is 2.66 ms: the best within 2 ms is qd 128.
    assert summary["best_within_limit_qd"] == 128
    assert summary["best_within_limit_iops"] == pytest.approx(12_800_000 / 138)


def test_knee_is_none_while_iops_keeps_growing():
    target = mm1()
    closed = [target.run(Decision("closed", qd, None, "")) for qd in qd_ladder(32)]
    summary = knee(closed, LIMIT_2MS)
    assert (summary["knee_qd"], summary["knee_iops"], summary["saturated"]) == (None, None, False)
    assert summary["peak_qd"] == 32


def test_ladder_stops_after_two_depths_over_the_limit_with_flat_iops():
    objective = Objective(limit_ns=150 * US)
    target = mm1()
    history, decisions = simulate(target, objective, max_qd=1024)
    # qd 64 (740 us) and 128 (1380 us) are both over 150 us and 128 gains 7.2 %: stop there;
    # qd 8 and 16 are over too but 16 gained 38 %. 256, 512 and 1024 are never run.
    assert [p.iodepth for p in history if p.phase == "closed"] == [1, 2, 4, 8, 16, 32, 64, 128]
    # Then bisection from lo = qd 4 (28571.43, 140 us) and hi = 1.05 * 92753.62 = 97391.30.
    first_open = decisions[8]
    assert first_open.action == "open"
    assert first_open.offered_iops == pytest.approx((28571.43 + 97391.30) / 2, abs=0.01)
    # Truth: 1 - r / C = 100 / 150, r = 33333.3.
    summary = result(history, objective, max_qd=1024)
    assert summary["status"] == "found"
    assert summary["rate_iops"] == pytest.approx(100_000 / 3, rel=objective.tolerance)
    assert summary["open_probes"] <= 12


def test_the_open_probe_budget_ends_the_bisection():
    objective = Objective(limit_ns=150 * US)
    history, _ = simulate(mm1(), objective, max_qd=1024, max_probes=3)
    # Bisection from [28571.43, 97391.30]: 62981.37 fails (270 us), 45776.40 fails (184 us),
    # 37173.91 fails (159 us); the budget is used up, so the hint 28571.43 is confirmed.
    assert offered(history, "open") == pytest.approx([62981.37, 45776.40, 37173.91], abs=0.01)
    summary = result(history, objective, max_qd=1024, max_probes=3)
    assert summary["status"] == "found"
    assert summary["rate_iops"] == pytest.approx(28571.43, abs=0.01)
    assert summary["relative_width"] == pytest.approx(1 - 28571.43 / 37173.91, rel=1e-5)
    assert summary["open_probes"] == 3 and summary["confirm_probes"] == 3


def rate_limited(limit_iops: float = 50_000.0, base_ns: float = 500 * US) -> Target:
    """Fast (500 us) but never above 50k IOPS: closed-loop latency grows past qd 25."""

    def closed(qd: int) -> tuple[float, float]:
        iops = min(qd / base_ns * 1e9, limit_iops)
        return iops, qd / iops * 1e9

    def open_loop(rate: float) -> tuple[float, float]:
        return min(rate, limit_iops), base_ns

    return Target(closed, open_loop)


def test_achieved_below_99_percent_of_offered_fails_even_with_a_good_latency():
    probe = Probe("open", None, 100_000.0, 98_999.0, {"p99": 1 * MS})
    assert not meets(probe, LIMIT_2MS)
    assert meets(Probe("open", None, 100_000.0, 99_000.0, {"p99": 1 * MS}), LIMIT_2MS)
    # Closed loop has no offered rate: only the latency counts.
    assert meets(Probe("closed", 4, None, 10.0, {"p99": 2 * MS}), LIMIT_2MS)
    assert not meets(Probe("closed", 4, None, 10.0, {"p99": 2 * MS + 1}), LIMIT_2MS)

    history, _ = simulate(rate_limited(), LIMIT_2MS, max_qd=128)
    # Closed: qd 32 reaches 50k at 640 us, the peak; qd 128 is 2.56 ms. hi0 = 52500.
    # 51250: achieved 50000 < 0.99 * 51250 = 50737.5 -> fails; 50625: 50000 < 50118.75 -> fails;
    # width 625 <= 2 % of 50625: confirm the hint 50000 (achieved 50000 >= 49500).
    opens = [probe for probe in history if probe.phase == "open"]
    assert [probe.offered_iops for probe in opens] == [51_250.0, 50_625.0]
    assert all(probe.latency_ns["p99"] == 500 * US for probe in opens)
    assert not any(meets(probe, LIMIT_2MS) for probe in opens)
    summary = result(history, LIMIT_2MS, max_qd=128)
    assert summary["status"] == "found"
    assert summary["rate_iops"] == 50_000.0
    assert summary["bracket"] == [50_000.0, 50_625.0]
    # Truth by the achieved rule: 50000 / 0.99 = 50505.05; 50000 is 1 % below it.
    assert summary["rate_iops"] == pytest.approx(50_000 / 0.99, rel=LIMIT_2MS.tolerance)


def test_a_target_slower_than_the_limit_is_not_met_after_the_ladder_and_the_floor():
    target = mm1(base_ns=3 * MS)  # closed: iops = 1e5 * qd / (qd + 300), latency >= 3.01 ms
    history, decisions = simulate(target, LIMIT_2MS, max_qd=64)
    # Every depth fails but IOPS keeps growing (qd 32 -> 64: +80 %), so the ladder runs out.
    # Peak 6400000 / 364 = 17582.42, hi0 = 1.05 x peak = 18461.54; no rate met, so each probe
    # halves the lowest failure (9230.77 ... 288.46) until half would be below the floor, 1 %
    # of the peak = 175.82 (3.005 ms), which fails too.
    peak = 6_400_000 / 364
    halves = [1.05 * peak / 2**k for k in range(1, 7)]
    assert [probe.phase for probe in history] == ["closed"] * 7 + ["open"] * 7
    opens = [probe.offered_iops for probe in history[7:]]
    assert opens == pytest.approx([*halves, peak / 100])
    assert decisions[-1].action == "done"
    assert "floor" in decisions[-1].reason
    summary = result(history, LIMIT_2MS, max_qd=64)
    assert summary["status"] == "not met"
    assert summary["rate_iops"] is None
    assert summary["bracket"] == [0.0, pytest.approx(175.82, abs=0.01)]
    assert summary["probes"] == 14


def test_closed_loop_meets_but_open_loop_never_does_ends_not_met():
    # Closed loop hides the stalls (10k IOPS per depth at 100 us); open loop sees 5 ms.
    target = Target(lambda qd: (10_000.0 * qd, 100 * US), lambda rate: (rate, 5 * MS))
    history, decisions = simulate(target, LIMIT_2MS, max_qd=8)
    # hint 80000, hi 84000: 82000 and 81000 fail, the bracket [80000, 81000] closes, the
    # confirmation at the hint fails, so hi = 80000 and halving goes down to 1250; half of that
    # is below the floor (800), which is tried last and fails.
    halves = [("open", 80_000.0 / 2**k) for k in range(1, 7)]
    assert [(p.phase, p.offered_iops) for p in history if p.phase != "closed"] == [
        ("open", 82_000.0),
        ("open", 81_000.0),
        ("confirm", 80_000.0),
        *halves,
        ("open", 800.0),
    ]
    assert decisions[-1].action == "done"
    summary = result(history, LIMIT_2MS, max_qd=8)
    assert (summary["status"], summary["open_probes"], summary["confirm_probes"]) == (
        "not met",
        9,
        1,
    )


def test_a_failed_confirmation_reopens_the_search_below_it():
    target = mm1()
    history, _ = simulate(target, LIMIT_2MS, max_qd=256)
    # Pretend the first confirmation at 94828.37 came back at 2.1 ms.
    first_confirm = next(i for i, probe in enumerate(history) if probe.phase == "confirm")
    bad = Probe("confirm", None, history[first_confirm].offered_iops, 94_828.0, {"p99": 2.1 * MS})
    truncated = [*history[:first_confirm], bad]
    decision = next_probe(truncated, LIMIT_2MS, max_qd=256)
    # hi is now 94828.37; lo falls back to the closed-loop hint 92753.62; width 2074.75 > 1896.6
    assert decision.action == "open"
    assert decision.offered_iops == pytest.approx((92753.62 + 94828.37) / 2, abs=0.01)


def test_same_history_same_decision_and_resume_continues_identically():
    target = mm1()
    history, decisions = simulate(target, LIMIT_2MS, max_qd=256)
    for count in range(len(history) + 1):
        prefix = history[:count]
        assert next_probe(prefix, LIMIT_2MS, max_qd=256) == decisions[count]
        assert next_probe(list(prefix), LIMIT_2MS, max_qd=256) == decisions[count]
        # The order of the finished probes does not matter.
        assert next_probe(prefix[::-1], LIMIT_2MS, max_qd=256) == decisions[count]
    for cut in (0, 5, 9, 10, 12, 13):
        resumed, resumed_decisions = simulate(target, LIMIT_2MS, history[:cut], max_qd=256)
        assert resumed == history
        assert resumed_decisions == decisions[cut:]


def test_probes_round_trip_through_json():
    probe = Probe("open", None, 94828.5, 94800.0, {"p99": 1.9 * MS, "mean": 300 * US})
    assert Probe.from_dict(json.loads(json.dumps(probe.to_dict()))) == probe
    decision = next_probe([], LIMIT_2MS, max_qd=4)
    assert decision.to_dict() == {
        "action": "closed",
        "iodepth": 1,
        "offered_iops": None,
        "reason": "closed-loop ladder: queue depth 1",
    }


def test_qd_ladder():
    assert qd_ladder(1) == [1]
    assert qd_ladder(8) == [1, 2, 4, 8]
    assert qd_ladder(48) == [1, 2, 4, 8, 16, 32, 48]
    with pytest.raises(ValueError, match="max_qd"):
        qd_ladder(0)


def test_iodepth_for_rate_by_littles_law():
    # 95k IOPS over 2 hosts x 4 jobs = 11875 per job; at 2 ms, 23.75 in flight, x 2 = 47.5
    assert iodepth_for_rate(11_875, 2 * MS) == 48
    assert iodepth_for_rate(1_000, 2 * MS) == 4  # exactly 4.0, not rounded up to 5
    assert iodepth_for_rate(25_000, 100 * US, headroom=1.0) == 3  # 2.5
    assert iodepth_for_rate(0, 2 * MS) == 1
    assert iodepth_for_rate(1_000_000, 2 * MS) == 1024  # 4000 capped
    assert iodepth_for_rate(1_000_000, 2 * MS, cap=256) == 256
    with pytest.raises(ValueError, match="headroom"):
        iodepth_for_rate(1, 1, headroom=0)


def test_split_rate_per_fio_job():
    assert split_rate(95_000, 2, 4) == 11_875.0
    assert split_rate(100, 3, 1) == pytest.approx(33.333333)
    with pytest.raises(ValueError, match="hosts"):
        split_rate(100, 0, 1)
    with pytest.raises(ValueError, match="numjobs"):
        split_rate(100, 1, 0)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"latency": "p95"}, "latency"),
        ({"limit_ns": 0}, "limit_ns"),
        ({"limit_ns": -1.0}, "limit_ns"),
        ({"limit_ns": math.nan}, "limit_ns"),
        ({"tolerance": 0}, "tolerance"),
        ({"tolerance": 0.6}, "tolerance"),
        ({"tolerance": -0.01}, "tolerance"),
        ({"metric": "throughput"}, "metric"),
        ({"min_achieved": 1.5}, "min_achieved"),
    ],
)
def test_bad_objectives_name_the_field(fields, field):
    with pytest.raises(ValueError, match=f"Objective.{field}"):
        Objective(**{"limit_ns": 2 * MS, **fields})


def test_objective_edges_and_config():
    assert Objective(limit_ns=1, tolerance=0.5).tolerance == 0.5
    objective = Objective.from_config({"metric": "iops", "latency": "p99.9", "limit": "2ms"})
    assert objective == Objective(limit_ns=2 * MS, latency="p99.9")
    assert Objective.from_config({"limit": "500us", "tolerance": "5%"}).tolerance == 0.05
    assert Objective.from_config({"limit": "500us", "latency": "mean"}).limit_ns == 500 * US
    with pytest.raises(ValueError, match="Objective.limit"):
        Objective.from_config({"limit": "fast"})
    with pytest.raises(ValueError, match="Objective.limit"):
        Objective.from_config({"latency": "p99"})


def test_a_probe_without_the_objectives_latency_is_an_error():
    with pytest.raises(ValueError, match="p99"):
        meets(Probe("closed", 1, None, 100.0, {"mean": 1.0}), LIMIT_2MS)


def test_search_settings_are_checked():
    with pytest.raises(ValueError, match="max_probes"):
        next_probe([], LIMIT_2MS, max_qd=4, max_probes=0)
    with pytest.raises(ValueError, match="iterations"):
        next_probe([], LIMIT_2MS, max_qd=4, iterations=0)


def test_check_counts_a_searchs_probes_not_its_planned_runs(capsys):
    """A search plans no run ahead ('0 run(s)' read as nothing to do): check gives its budget,
    the ladder 1 ... 16 (5), 12 open-loop probes and 4 rounds of the 3 confirmations."""
    assert cli.main(["check", "--config", str(REPO / "config/examples/slo-search.yaml")]) == 0
    assert capsys.readouterr().out == (
        "slo_randread: fio on 1 host(s) [localhost] -> target scratch; a latency-SLO search"
        " of at most 29 probe run(s), each decided by the ones before it, 3 at the answer\n"
    )
