"""SNIA PTS 2.0 steady state: every expected number below is worked out by hand.

Least squares over 5 rounds: the round deviations from the window's middle are -2..2
(sum of squares 10), so slope = sum(dx * dy) / 10 and intercept = average - slope * middle.
"""

from __future__ import annotations

import json

import pytest

from storbench.analysis.steadystate import check_window, evaluate

STEADY = [100, 98, 102, 101, 99]


def variable(verdict, index: int = 0) -> dict:
    return verdict.to_dict()["variables"][index]


def test_steady_series_is_steady_at_round_5():
    verdict = evaluate({"randwrite_bs4k.iops": STEADY})
    result = verdict.to_dict()
    assert result["status"] == "achieved"
    assert result["achieved"] is True
    assert (result["steady_round"], result["window"], result["rounds"]) == (5, [1, 5], 5)
    iops = result["variables"][0]
    assert iops["name"] == "randwrite_bs4k.iops"
    assert iops["average"] == 100.0
    assert iops["range"] == 4.0  # 102 - 98
    assert iops["range_ratio"] == pytest.approx(0.04)
    # dy 0, -2, 2, 1, -1: sum(dx * dy) = 0 + 2 + 0 + 1 - 2 = 1 -> slope 0.1
    assert iops["slope"] == pytest.approx(0.1)
    assert iops["intercept"] == pytest.approx(99.7)  # 100 - 0.1 * 3
    assert iops["excursion"] == pytest.approx(0.4)  # 0.1 * (5 - 1)
    assert iops["excursion_ratio"] == pytest.approx(0.004)
    assert (iops["range_ok"], iops["slope_ok"], iops["steady"]) == (True, True, True)


def test_to_dict_has_exactly_the_documented_shape():
    result = evaluate({"a.iops": STEADY}).to_dict()
    assert list(result) == [
        "status",
        "achieved",
        "rounds",
        "window_size",
        "max_rounds",
        "range_limit",
        "slope_limit",
        "steady_round",
        "window",
        "variables",
    ]
    assert (result["window_size"], result["max_rounds"]) == (5, 25)
    assert (result["range_limit"], result["slope_limit"]) == (0.2, 0.1)
    assert list(result["variables"][0]) == [
        "name",
        "values",
        "window_values",
        "average",
        "range",
        "range_ratio",
        "range_ok",
        "slope",
        "intercept",
        "excursion",
        "excursion_ratio",
        "slope_ok",
        "steady",
    ]
    assert json.loads(json.dumps(result)) == result


def test_range_violation_with_a_small_slope():
    check = check_window([80, 120, 100, 100, 100], first_round=1)
    assert (check.average, check.range, check.range_ratio) == (100.0, 40.0, 0.4)
    assert not check.range_ok
    # dy -20, 20, 0, 0, 0: sum(dx * dy) = 40 - 20 = 20 -> slope 2, excursion 8 <= 10
    assert check.slope == pytest.approx(2.0)
    assert check.excursion == pytest.approx(8.0)
    assert check.slope_ok
    assert not check.steady


def test_slope_violation_within_the_range():
    check = check_window([92, 96, 100, 104, 108], first_round=1)
    assert (check.average, check.range) == (100.0, 16.0)
    assert check.range_ok  # 16 <= 20
    assert check.slope == pytest.approx(4.0)
    assert check.excursion == pytest.approx(16.0)  # > 10
    assert check.excursion_ratio == pytest.approx(0.16)
    assert not check.slope_ok
    assert not check.steady


def test_converging_series_is_steady_at_the_first_window_meeting_both():
    rounds = [200, 150, 120, 105, 100, 100, 100, 100, 500, 1]
    verdict = evaluate({"w.bw": rounds})
    # rounds 1-5: range 100 > 0.2 * 135; rounds 2-6: range 50 > 0.2 * 115;
    # rounds 3-7 [120, 105, 100, 100, 100]: range 20 <= 21, but dy 15, 0, -5, -5, -5 gives
    #   slope -45 / 10 = -4.5, excursion 18 > 10.5;
    # rounds 4-8 [105, 100, 100, 100, 100]: average 101, range 5, dy 4, -1, -1, -1, -1 gives
    #   slope -10 / 10 = -1, excursion 4 <= 10.1: steady. Rounds 9 and 10 are ignored.
    assert (verdict.status, verdict.steady_round, verdict.window) == ("achieved", 8, (4, 8))
    result = variable(verdict)
    assert result["values"] == [float(value) for value in rounds]
    assert result["window_values"] == [105.0, 100.0, 100.0, 100.0, 100.0]
    assert result["average"] == 101.0
    assert result["slope"] == pytest.approx(-1.0)
    assert result["intercept"] == pytest.approx(107.0)  # absolute rounds: 101 + 1 * 6
    assert result["excursion"] == pytest.approx(4.0)

    before = check_window([120, 105, 100, 100, 100], first_round=3)
    assert before.range_ok and not before.slope_ok
    assert before.slope == pytest.approx(-4.5)
    assert before.intercept == pytest.approx(105 + 4.5 * 5)  # middle round 5


def test_never_steady_in_25_rounds_reports_the_last_window():
    rounds = [50.0 if number % 2 else 150.0 for number in range(1, 26)]
    result = evaluate({"r.iops": rounds}).to_dict()
    assert result["status"] == "not achieved"
    assert result["achieved"] is False
    assert (result["steady_round"], result["window"], result["rounds"]) == (None, [21, 25], 25)
    last = result["variables"][0]
    # rounds 21..25: 50, 150, 50, 150, 50 -> average 90, range 100; dy -40, 60, -40, 60, -40
    # gives sum(dx * dy) = 80 - 60 + 0 + 60 - 80 = 0: flat
    assert last["window_values"] == [50.0, 150.0, 50.0, 150.0, 50.0]
    assert last["average"] == 90.0
    assert last["range"] == 100.0
    assert last["slope"] == pytest.approx(0.0)
    assert last["intercept"] == pytest.approx(90.0)
    assert (last["range_ok"], last["slope_ok"], last["steady"]) == (False, True, False)


def test_rounds_past_max_rounds_are_not_evaluated():
    # steady only from round 26 on: too late
    rounds = [50.0 if number % 2 else 150.0 for number in range(1, 26)] + [100.0] * 5
    verdict = evaluate({"r.iops": rounds})
    assert (verdict.status, verdict.window, verdict.rounds) == ("not achieved", (21, 25), 30)
    assert variable(verdict)["values"] == rounds


def test_fewer_rounds_than_the_window_is_running_with_empty_window_fields():
    result = evaluate({"a.iops": [100, 98, 102], "a.lat": [1, 2, 3]}).to_dict()
    assert result["status"] == "running"
    assert (result["achieved"], result["steady_round"], result["window"]) == (False, None, None)
    assert result["rounds"] == 3
    iops = result["variables"][0]
    assert iops["values"] == [100.0, 98.0, 102.0]
    for field in ("window_values", "average", "range", "range_ratio", "slope", "intercept"):
        assert iops[field] is None
    for field in ("excursion", "excursion_ratio"):
        assert iops[field] is None
    assert (iops["range_ok"], iops["slope_ok"], iops["steady"]) == (False, False, False)
    assert [v["name"] for v in result["variables"]] == ["a.iops", "a.lat"]


def test_not_yet_steady_below_max_rounds_is_running_with_the_latest_window():
    verdict = evaluate({"a.iops": [200, 150, 120, 105, 100, 100, 100]})
    assert (verdict.status, verdict.steady_round, verdict.window) == ("running", None, (3, 7))


def test_all_variables_must_be_steady():
    verdict = evaluate({"x.iops": STEADY, "x.lat_mean_ns": [80, 120, 100, 100, 100]})
    assert verdict.status == "running"
    assert verdict.steady_round is None
    assert verdict.window == (1, 5)
    iops, latency = verdict.to_dict()["variables"]
    assert (iops["name"], iops["steady"]) == ("x.iops", True)
    assert (latency["name"], latency["steady"], latency["range_ok"]) == (
        "x.lat_mean_ns",
        False,
        False,
    )


def test_exactly_at_the_limits_is_steady():
    # range 20 = 20 % of 100; dy -10, 10, 0, 0, 0 -> slope 1, excursion 4
    at_range = check_window([90, 110, 100, 100, 100], first_round=1)
    assert (at_range.range, at_range.range_ratio, at_range.range_ok) == (20.0, 0.2, True)
    # slope 2.5, excursion 10 = 10 % of 100; range 10
    at_slope = check_window([95, 97.5, 100, 102.5, 105], first_round=1)
    assert at_slope.excursion == pytest.approx(10.0)
    assert at_slope.slope_ok and at_slope.steady
    # 20 % of an average of 105 is 21, not exactly representable in binary
    assert check_window([94, 115, 105, 105, 106], first_round=1).range_ok
    assert not check_window([94, 115.01, 105, 105, 106], first_round=1).range_ok
    verdict = evaluate({"a": [90, 110, 100, 100, 100], "b": [95, 97.5, 100, 102.5, 105]})
    assert (verdict.status, verdict.steady_round) == ("achieved", 5)


def test_all_zero_values_are_not_steady_and_have_no_ratios():
    check = check_window([0, 0, 0, 0, 0], first_round=1)
    assert (check.average, check.range, check.slope, check.excursion) == (0.0, 0.0, 0.0, 0.0)
    assert check.range_ratio is None and check.excursion_ratio is None
    assert not check.range_ok and not check.slope_ok and not check.steady
    result = evaluate({"trim.iops": [0.0] * 25}).to_dict()
    assert result["status"] == "not achieved"
    json.dumps(result, allow_nan=False)


def test_other_window_and_limits():
    # window 3, rounds 2-4 [100, 101, 102]: range 2 <= 5 % of 101; slope 1, excursion 2 <= 2.02
    verdict = evaluate(
        {"a": [10, 100, 101, 102]}, window=3, max_rounds=10, range_limit=0.05, slope_limit=0.02
    )
    assert (verdict.status, verdict.steady_round, verdict.window) == ("achieved", 4, (2, 4))
    assert variable(verdict)["excursion"] == pytest.approx(2.0)


def test_variables_of_different_lengths_name_the_variable():
    with pytest.raises(ValueError, match="'b.lat'"):
        evaluate({"a.iops": STEADY, "b.lat": STEADY[:4]})


@pytest.mark.parametrize(
    "kwargs",
    [{"window": 1}, {"max_rounds": 4}, {"range_limit": -0.1}, {"slope_limit": -1}],
)
def test_bad_parameters(kwargs):
    with pytest.raises(ValueError):
        evaluate({"a": STEADY}, **kwargs)


def test_no_variables_is_an_error():
    with pytest.raises(ValueError, match="no variables"):
        evaluate({})
