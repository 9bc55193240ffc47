"""SNIA PTS 2.0 steady state (PTS 2.0.2 section 2.1.24) over per-round values.

A round is one pass of the test loop; each tracked variable (``randwrite_bs4k.iops``, ...;
names are opaque here) has one value per round, rounds numbered 1..n. Over a measurement
window of ``window`` rounds ending at round x (x-window+1..x):

- range criterion: ``max(y) - min(y) <= range_limit * average(y)``;
- slope criterion: the least-squares line ``y = slope * round + intercept`` fitted with
  absolute round numbers; ``excursion = |slope| * (window - 1) <= slope_limit * average(y)``.

Both use ``<=`` (as CloudHarmony's implementation). Steady state is the first round
x >= window at which every variable meets both criteria; rounds after it are ignored. Only
rounds 1..max_rounds are evaluated: past max_rounds without steady state the status is
``not achieved`` (reported window: the last one, ending at max_rounds); fewer rounds and not
steady is ``running``. A window whose average is not positive (all zeros) is never steady
and its ratios are null.

``Verdict.to_dict()`` is the JSON shape other modules render::

    {"status", "achieved", "rounds", "window_size", "max_rounds", "range_limit",
     "slope_limit", "steady_round", "window": [first, last] | null,
     "variables": [{"name", "values", "window_values", "average", "range", "range_ratio",
                    "range_ok", "slope", "intercept", "excursion", "excursion_ratio",
                    "slope_ok", "steady"}, ...]}

Standard library only: this runs on the run path.
"""

from __future__ import annotations

from dataclasses import dataclass

WINDOW = 5
MAX_ROUNDS = 25
RANGE_LIMIT = 0.20
SLOPE_LIMIT = 0.10
ACHIEVED, NOT_ACHIEVED, RUNNING = "achieved", "not achieved", "running"
# A limit that is exact in decimal (20 % of 105) must not be lost to binary rounding.
_TOLERANCE = 1e-9


@dataclass(frozen=True)
class WindowCheck:
    """Both criteria for one variable over one measurement window."""

    first_round: int
    window_values: tuple[float, ...]
    average: float
    range: float
    range_ratio: float | None
    range_ok: bool
    slope: float
    intercept: float
    excursion: float
    excursion_ratio: float | None
    slope_ok: bool

    @property
    def last_round(self) -> int:
        return self.first_round + len(self.window_values) - 1

    @property
    def steady(self) -> bool:
        return self.range_ok and self.slope_ok


@dataclass(frozen=True)
class VariableResult:
    name: str
    values: tuple[float, ...]
    check: WindowCheck | None  # None when fewer rounds than the window

    def to_dict(self) -> dict:
        check = self.check
        if check is None:
            return {
                "name": self.name,
                "values": list(self.values),
                **dict.fromkeys(("window_values", "average", "range", "range_ratio"), None),
                "range_ok": False,
                **dict.fromkeys(("slope", "intercept", "excursion", "excursion_ratio"), None),
                "slope_ok": False,
                "steady": False,
            }
        return {
            "name": self.name,
            "values": list(self.values),
            "window_values": list(check.window_values),
            "average": check.average,
            "range": check.range,
            "range_ratio": check.range_ratio,
            "range_ok": check.range_ok,
            "slope": check.slope,
            "intercept": check.intercept,
            "excursion": check.excursion,
            "excursion_ratio": check.excursion_ratio,
            "slope_ok": check.slope_ok,
            "steady": check.steady,
        }


@dataclass(frozen=True)
class Verdict:
    status: str
    rounds: int
    window_size: int
    max_rounds: int
    range_limit: float
    slope_limit: float
    steady_round: int | None
    window: tuple[int, int] | None
    variables: tuple[VariableResult, ...]

    @property
    def achieved(self) -> bool:
        return self.status == ACHIEVED

    def to_dict(self) -> dict:
        return {
            "status": self.status,
            "achieved": self.achieved,
            "rounds": self.rounds,
            "window_size": self.window_size,
            "max_rounds": self.max_rounds,
            "range_limit": self.range_limit,
            "slope_limit": self.slope_limit,
            "steady_round": self.steady_round,
            "window": list(self.window) if self.window else None,
            "variables": [variable.to_dict() for variable in self.variables],
        }


def check_window(
    values: list[float],
    first_round: int,
    range_limit: float = RANGE_LIMIT,
    slope_limit: float = SLOPE_LIMIT,
) -> WindowCheck:
    """Range and slope criteria for ``values`` of rounds first_round, first_round+1, ..."""
    _check_limits(range_limit, slope_limit)
    window_values = tuple(float(value) for value in values)
    size = len(window_values)
    if size < 2:
        raise ValueError(f"a steady-state window needs at least 2 rounds, got {size}")
    rounds = range(first_round, first_round + size)
    average = sum(window_values) / size
    mean_round = first_round + (size - 1) / 2
    spread = sum((x - mean_round) ** 2 for x in rounds)
    slope = (
        sum((x - mean_round) * (y - average) for x, y in zip(rounds, window_values, strict=True))
        / spread
    )
    value_range = max(window_values) - min(window_values)
    excursion = abs(slope) * (size - 1)
    positive = average > 0
    return WindowCheck(
        first_round=first_round,
        window_values=window_values,
        average=average,
        range=value_range,
        range_ratio=value_range / average if positive else None,
        range_ok=positive and value_range <= range_limit * average * (1 + _TOLERANCE),
        slope=slope,
        intercept=average - slope * mean_round,
        excursion=excursion,
        excursion_ratio=excursion / average if positive else None,
        slope_ok=positive and excursion <= slope_limit * average * (1 + _TOLERANCE),
    )


def evaluate(
    values: dict[str, list[float]],
    *,
    window: int = WINDOW,
    max_rounds: int = MAX_ROUNDS,
    range_limit: float = RANGE_LIMIT,
    slope_limit: float = SLOPE_LIMIT,
) -> Verdict:
    """Steady-state verdict for per-round values (rounds 1..n) of every tracked variable."""
    _check_limits(range_limit, slope_limit)
    if window < 2:
        raise ValueError(f"window must be at least 2 rounds, got {window}")
    if max_rounds < window:
        raise ValueError(f"max_rounds ({max_rounds}) is smaller than the window ({window})")
    if not values:
        raise ValueError("no variables to evaluate for steady state")
    series = {name: tuple(float(value) for value in column) for name, column in values.items()}
    rounds = _common_length(series)

    checks: dict[str, WindowCheck] = {}
    steady_round = None
    for last in range(window, min(rounds, max_rounds) + 1):
        first = last - window + 1
        checks = {
            name: check_window(list(column[first - 1 : last]), first, range_limit, slope_limit)
            for name, column in series.items()
        }
        if all(check.steady for check in checks.values()):
            steady_round = last
            break

    if steady_round is not None:
        status = ACHIEVED
    elif rounds >= max_rounds:
        status = NOT_ACHIEVED
    else:
        status = RUNNING
    some_check = next(iter(checks.values()), None)
    return Verdict(
        status=status,
        rounds=rounds,
        window_size=window,
        max_rounds=max_rounds,
        range_limit=range_limit,
        slope_limit=slope_limit,
        steady_round=steady_round,
        window=(some_check.first_round, some_check.last_round) if some_check else None,
        variables=tuple(
            VariableResult(name, column, checks.get(name)) for name, column in series.items()
        ),
    )


def _common_length(series: dict[str, tuple[float, ...]]) -> int:
    names = iter(series)
    first = next(names)
    rounds = len(series[first])
    for name in names:
        if len(series[name]) != rounds:
            raise ValueError(
                f"variable {name!r} has {len(series[name])} rounds, "
                f"{first!r} has {rounds}: every variable needs one value per round"
            )
    return rounds


def _check_limits(range_limit: float, slope_limit: float) -> None:
    if range_limit < 0 or slope_limit < 0:
        raise ValueError(
            f"range_limit and slope_limit must not be negative, got {range_limit}, {slope_limit}"
        )
