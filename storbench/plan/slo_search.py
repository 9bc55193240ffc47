"""Latency-SLO capacity search: the highest IOPS a target sustains under a latency limit.

Each probe is its own Snakemake job. A probe job reads the earlier probes' results and asks
:func:`next_probe` what to run next, so everything here is a pure function of the history
and the settings: the same history always gives the same decision, and a search that was
interrupted resumes where it stopped. The order of the history does not matter, except that
when one queue depth was probed twice in closed loop, the first of those probes counts.

Data::

    Objective(limit_ns=2e6, latency="p99", metric="iops", tolerance=0.02, min_achieved=0.99)
    Objective.from_config({"metric": "iops", "latency": "p99", "limit": "2ms"})
    Probe(phase, iodepth, offered_iops, achieved_iops, latency_ns)   # one finished run
    Decision(action, iodepth, offered_iops, reason)                  # what to run next

``phase`` is ``closed`` (fixed queue depth), ``open`` (bisection probe at an offered rate) or
``confirm`` (repeat at the answer); ``latency_ns`` maps ``mean``, ``p50`` ... ``p99.99`` to
the latency merged over all hosts (histograms summed, never percentiles averaged). Record the
aggregate rate that was really offered: fio's ``rate_iops`` is a whole number per job, so
``offered_iops = round(split_rate(rate, hosts, numjobs)) * hosts * numjobs``.

A probe meets the objective (:func:`meets`) when its latency is at most the limit and, in
open loop, it achieved at least ``min_achieved`` (99 %) of the offered rate; a target that
cannot keep up with the offered rate fails even when its latency looks fine.

The search (:func:`next_probe`, with :func:`result` reporting where it stands):

1. Closed loop over :func:`qd_ladder` (1, 2, 4 ... max_qd). The ladder stops early once two
   consecutive depths are both over the limit and the IOPS gain between them is below
   ``KNEE_GAIN`` (10 %). :func:`knee` summarises it: the peak, and the knee, which is the
   last depth before a ladder step gains less than 10 % IOPS while the objective's latency
   still rises (a doubling that gains under 10 % means the target is past saturation).
2. Open loop, bisection on the aggregate offered rate. The upper bound ``hi`` is the lowest
   open-loop rate that failed, or ``CEILING`` (1.05) x the closed-loop peak while none has.
   The lower bound ``lo`` is the highest open-loop rate that met below ``hi`` or, while none
   has, the best closed-loop IOPS within the limit (a starting hint, checked later by the
   confirmation runs). Rates within ``tolerance / 10`` of ``hi`` count as ``hi``: one rate
   cannot both meet and fail. The next probe is ``(lo + hi) / 2`` until ``hi - lo <=
   tolerance * hi`` or ``max_probes`` open probes were used.
3. Confirmation: ``iterations`` open-loop runs at ``lo``. A confirmation that fails is an
   open-loop failure at that rate: ``hi`` drops to it and the search goes on below it.

Never met: when there is no lower bound at all (no closed-loop depth met the limit, or every
open-loop rate down to the hint failed), the next probe is half the lowest failed rate, down
to the floor, ``FLOOR`` (1 %) of the closed-loop peak. If the floor fails, or no open probe
is left, the search is done with status ``not met``. Every path is bounded: at most
``len(qd_ladder(max_qd)) + max_probes`` closed and open probes, each confirmation round is
at a distinct, lower rate, and as a last guard ``(max_probes + 2) * iterations``
confirmation runs end the search as ``not met``.

For an open or confirm decision, the caller sets fio's ``rate_iops`` to
``split_rate(offered_iops, hosts, numjobs)`` (rounded), ``rate_process=poisson`` and
``iodepth = iodepth_for_rate(that rate, objective.limit_ns)``: with twice the in-flight IOs
Little's law needs at the limit, the depth only runs out when the mean latency is already
twice the limit, and then the achieved rate falls short and the probe fails anyway.

:func:`result` returns::

    {"status": "found" | "not met" | "running", "rate_iops": float | None,
     "bracket": [lo, hi] | None, "relative_width": (hi - lo) / hi | None,
     "hi_tested": bool, "confirmations": [met, required], "probes": n,
     "closed_probes": n, "open_probes": n, "confirm_probes": n, "reason": str,
     "closed": knee(...)}

``hi_tested`` is false when no open-loop rate failed: the answer is then capped by the
closed-loop peak (raise ``max_qd``).

Standard library only: this runs on the run path.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from storbench.config.search import Objective, finite_number, qd_ladder

CLOSED, OPEN, CONFIRM, DONE = "closed", "open", "confirm", "done"
PHASES = (CLOSED, OPEN, CONFIRM)
FOUND, NOT_MET, RUNNING = "found", "not met", "running"

KNEE_GAIN = 0.10  # a ladder step gaining less IOPS than this is past the knee
CEILING = 1.05  # first upper bound, as a multiple of the closed-loop peak
FLOOR = 0.01  # lowest open-loop rate tried, as a fraction of the closed-loop peak
POISSON_SIGMAS = 2.0  # allowance for the randomness of Poisson arrivals, in standard deviations
_SAME_RATE = 0.1  # rates closer than this fraction of the tolerance are one rate


@dataclass(frozen=True)
class Probe:
    """One finished run: closed loop at ``iodepth``, or open loop at ``offered_iops``."""

    phase: str
    iodepth: int | None
    offered_iops: float | None
    achieved_iops: float
    latency_ns: Mapping[str, float]
    duration_s: float | None = None  # measured time; gives open-loop probes a Poisson allowance

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ValueError(f"Probe.phase: {self.phase!r} is not one of {PHASES}")
        if self.phase == CLOSED and not (isinstance(self.iodepth, int) and self.iodepth >= 1):
            raise ValueError(
                f"Probe.iodepth: a closed-loop probe needs one >= 1, not {self.iodepth!r}"
            )
        if self.phase != CLOSED and (
            self.offered_iops is None
            or not finite_number(self.offered_iops)
            or self.offered_iops <= 0
        ):
            raise ValueError(
                f"Probe.offered_iops: an open-loop probe needs one > 0, not {self.offered_iops!r}"
            )
        if not finite_number(self.achieved_iops) or self.achieved_iops < 0:
            raise ValueError(f"Probe.achieved_iops: must be >= 0, not {self.achieved_iops!r}")

    @property
    def rate(self) -> float:
        """The offered rate of an open-loop probe (checked at construction)."""
        if self.offered_iops is None:
            raise ValueError(f"a {self.phase} probe has no offered rate")
        return self.offered_iops

    @property
    def depth(self) -> int:
        """The iodepth of a closed-loop probe (checked at construction)."""
        if self.iodepth is None:
            raise ValueError(f"a {self.phase} probe has no iodepth")
        return self.iodepth

    @classmethod
    def from_dict(cls, data: Mapping) -> Probe:
        """The inverse of :meth:`to_dict`, for probe markers stored as JSON."""
        return cls(
            phase=data["phase"],
            iodepth=data.get("iodepth"),
            offered_iops=data.get("offered_iops"),
            achieved_iops=float(data["achieved_iops"]),
            latency_ns={key: float(value) for key, value in data["latency_ns"].items()},
            duration_s=data.get("duration_s"),
        )

    def to_dict(self) -> dict:
        return {**asdict(self), "latency_ns": dict(self.latency_ns)}


@dataclass(frozen=True)
class Decision:
    """What to run next: ``closed`` at ``iodepth``, ``open``/``confirm`` at ``offered_iops``
    (aggregate over all hosts and jobs), or ``done``."""

    action: str
    iodepth: int | None
    offered_iops: float | None
    reason: str

    def to_dict(self) -> dict:
        return asdict(self)


def latency_of(probe: Probe, objective: Objective) -> float:
    try:
        return float(probe.latency_ns[objective.latency])
    except KeyError:
        raise ValueError(
            f"Probe.latency_ns: has no {objective.latency!r} (has {sorted(probe.latency_ns)})"
        ) from None


def meets(probe: Probe, objective: Objective) -> bool:
    """Latency within the limit and, in open loop, achieved >= min_achieved x offered.

    With ``duration_s`` the achieved rate may also fall short by the Poisson noise of the
    arrivals themselves, ``POISSON_SIGMAS`` x sqrt(offered x duration) I/Os: at 10,000
    arrivals one standard deviation is already 1 %, so a target with room to spare would
    otherwise fail the 99 % test by chance.
    """
    if latency_of(probe, objective) > objective.limit_ns:
        return False
    if probe.phase == CLOSED:
        return True
    required = objective.min_achieved * probe.rate
    if probe.duration_s:
        required -= POISSON_SIGMAS * math.sqrt(probe.rate / probe.duration_s)
    return probe.achieved_iops >= required


def knee(closed: Sequence[Probe], objective: Objective) -> dict:
    """Peak and knee of the closed-loop probes (others are ignored), ``KNEE_GAIN`` rule.

    ``peak_qd`` is the shallowest depth reaching the peak. ``knee_qd`` is the first depth d
    whose next tested depth gains less than 10 % IOPS while the latency rises; None (and
    ``saturated`` false) when no step flattened. ``best_within_limit_iops`` is the highest
    IOPS of a depth within the latency limit, 0.0 when none was.
    """
    by_depth = _closed_by_depth(closed)
    depths = sorted(by_depth)
    summary: dict = {
        "peak_iops": 0.0,
        "peak_qd": None,
        "knee_qd": None,
        "knee_iops": None,
        "saturated": False,
        "best_within_limit_iops": 0.0,
        "best_within_limit_qd": None,
    }
    for depth in depths:
        probe = by_depth[depth]
        if probe.achieved_iops > summary["peak_iops"]:
            summary["peak_iops"], summary["peak_qd"] = probe.achieved_iops, depth
        if meets(probe, objective) and probe.achieved_iops > summary["best_within_limit_iops"]:
            summary["best_within_limit_iops"] = probe.achieved_iops
            summary["best_within_limit_qd"] = depth
    for shallow, deep in zip(depths, depths[1:], strict=False):
        if _flattened(by_depth[shallow], by_depth[deep], objective):
            summary.update(
                knee_qd=shallow, knee_iops=by_depth[shallow].achieved_iops, saturated=True
            )
            break
    return summary


def next_probe(
    history: Sequence[Probe],
    objective: Objective,
    *,
    max_qd: int,
    max_probes: int = 12,
    iterations: int = 3,
    rate_step: float = 0.0,
) -> Decision:
    """The next run of the search, from the finished probes alone (see the module docstring).

    ``max_probes`` bounds the open-loop bisection probes; ``iterations`` is the number of
    confirmation runs at the answer. ``rate_step`` (hosts x numjobs for fio, whose
    ``rate_iops`` is a whole number per job) makes every offered rate a multiple of it, so
    the rate recorded for a probe is the rate decided.
    """
    return _search(history, objective, max_qd, max_probes, iterations, rate_step).decision


def result(
    history: Sequence[Probe],
    objective: Objective,
    *,
    max_qd: int,
    max_probes: int = 12,
    iterations: int = 3,
    rate_step: float = 0.0,
) -> dict:
    """Where the search stands; same settings as :func:`next_probe`."""
    state = _search(history, objective, max_qd, max_probes, iterations, rate_step)
    if state.decision.action != DONE:
        status = RUNNING
    elif state.lo > 0 and state.confirmed >= iterations:
        status = FOUND
    else:
        status = NOT_MET
    bracket = None if state.hi is None else [state.lo, state.hi]
    counts = {phase: sum(probe.phase == phase for probe in history) for phase in PHASES}
    return {
        "status": status,
        "rate_iops": state.lo if status == FOUND else None,
        "bracket": bracket,
        "relative_width": None if state.hi is None else (state.hi - state.lo) / state.hi,
        "hi_tested": state.hi_tested,
        "confirmations": [state.confirmed, iterations],
        "probes": len(history),
        "closed_probes": counts[CLOSED],
        "open_probes": counts[OPEN],
        "confirm_probes": counts[CONFIRM],
        "reason": state.decision.reason,
        "closed": knee(history, objective),
    }


def iodepth_for_rate(
    rate_iops_per_job: float, latency_ns: float, headroom: float = 2.0, cap: int = 1024
) -> int:
    """Little's law: ceil(rate x latency x headroom) IOs in flight, between 1 and cap."""
    if not finite_number(rate_iops_per_job) or rate_iops_per_job < 0:
        raise ValueError(f"rate_iops_per_job: must be >= 0, not {rate_iops_per_job!r}")
    if not finite_number(latency_ns) or latency_ns < 0:
        raise ValueError(f"latency_ns: must be >= 0, not {latency_ns!r}")
    if not finite_number(headroom) or headroom <= 0:
        raise ValueError(f"headroom: must be > 0, not {headroom!r}")
    if not isinstance(cap, int) or cap < 1:
        raise ValueError(f"cap: must be an integer >= 1, not {cap!r}")
    in_flight = rate_iops_per_job * latency_ns * headroom / 1e9
    # 47.50000000001 from binary rounding must not become 48 when the exact value is 47.5
    depth = math.ceil(in_flight - 1e-9)
    return min(max(depth, 1), cap)


def split_rate(total_iops: float, hosts: int, numjobs: int) -> float:
    """The per-job rate (fio's rate_iops is per job) for an aggregate offered rate."""
    if not finite_number(total_iops) or total_iops < 0:
        raise ValueError(f"total_iops: must be >= 0, not {total_iops!r}")
    for name, value in (("hosts", hosts), ("numjobs", numjobs)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name}: must be an integer >= 1, not {value!r}")
    return total_iops / (hosts * numjobs)


@dataclass(frozen=True)
class _State:
    decision: Decision
    lo: float = 0.0
    hi: float | None = None
    hi_tested: bool = False
    confirmed: int = 0


def _search(
    history: Sequence[Probe],
    objective: Objective,
    max_qd: int,
    max_probes: int,
    iterations: int,
    rate_step: float = 0.0,
) -> _State:
    ladder = qd_ladder(max_qd)
    if not finite_number(rate_step) or rate_step < 0:
        raise ValueError(f"rate_step: must be >= 0, not {rate_step!r}")
    for name, value in (("max_probes", max_probes), ("iterations", iterations)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name}: must be an integer >= 1, not {value!r}")
    by_depth = _closed_by_depth(history)
    pending = _next_depth(ladder, by_depth, objective)
    if pending is not None:
        return _State(Decision(CLOSED, pending, None, f"closed-loop ladder: queue depth {pending}"))

    closed = knee(history, objective)
    peak = closed["peak_iops"]
    if peak <= 0:
        return _State(Decision(DONE, None, None, "the closed-loop ladder achieved no IOPS"))
    same = objective.tolerance * _SAME_RATE
    loop_probes = [probe for probe in history if probe.phase != CLOSED]
    open_used = sum(probe.phase == OPEN for probe in loop_probes)
    failed = [probe.rate for probe in loop_probes if not meets(probe, objective)]
    hi = min([*failed, CEILING * peak])
    hi_tested = bool(failed) and min(failed) <= CEILING * peak
    below_hi = hi * (1 - same)
    met = [p.rate for p in loop_probes if meets(p, objective) and p.rate < below_hi]
    hint = _step_down(closed["best_within_limit_iops"], rate_step)
    lo = max(met) if met else (hint if hint < below_hi else 0.0)
    state = {"lo": lo, "hi": hi, "hi_tested": hi_tested}

    if lo <= 0:
        floor = _step_up(FLOOR * peak, rate_step)
        if hi <= floor * (1 + same):
            reason = f"not met: the floor rate {floor:.6g} IOPS ({FLOOR:.0%} of peak) failed"
            return _State(Decision(DONE, None, None, reason), **state)
        if open_used >= max_probes:
            reason = f"not met: {max_probes} open-loop probes used and none met the objective"
            return _State(Decision(DONE, None, None, reason), **state)
        # halve below the lowest failure: a hint that fails by a little costs one probe, and a
        # target that never meets reaches the floor in log2(1 / FLOOR) probes
        rate = max(floor, _step_down(hi / 2, rate_step))
        if rate <= floor * (1 + same):
            reason = f"no rate meets the objective yet: try the floor, {FLOOR:.0%} of peak"
            return _State(Decision(OPEN, None, floor, reason), **state)
        reason = f"no rate meets the objective yet: try half of {hi:.6g} IOPS"
        return _State(Decision(OPEN, None, rate, reason), **state)

    middle = _step_nearest((lo + hi) / 2, rate_step)
    splittable = lo < middle < hi  # rates one step apart cannot be split further
    if hi - lo > objective.tolerance * hi and splittable and open_used < max_probes:
        reason = f"bisection between {lo:.6g} (met) and {hi:.6g} IOPS"
        return _State(Decision(OPEN, None, middle, reason), **state)

    confirmed = sum(
        probe.phase == CONFIRM and math.isclose(probe.rate, lo, rel_tol=same)
        for probe in loop_probes
    )
    state["confirmed"] = confirmed
    if len(loop_probes) - open_used >= (max_probes + 2) * iterations:
        # unreachable when recorded rates round the same way each time; a last guard
        reason = f"not met: {len(loop_probes) - open_used} confirmation runs and none settled"
        return _State(Decision(DONE, None, None, reason), **state)
    if confirmed < iterations:
        reason = f"confirmation {confirmed + 1} of {iterations} at {lo:.6g} IOPS"
        return _State(Decision(CONFIRM, None, lo, reason), **state)
    closed_by = "bracket within tolerance" if hi - lo <= objective.tolerance * hi else "budget"
    reason = f"found {lo:.6g} IOPS ({closed_by}; {iterations} confirmations met)"
    return _State(Decision(DONE, None, None, reason), **state)


def _step_down(rate: float, step: float) -> float:
    return math.floor(rate / step) * step if step else rate


def _step_up(rate: float, step: float) -> float:
    return max(step, math.ceil(rate / step) * step) if step else rate


def _step_nearest(rate: float, step: float) -> float:
    return round(rate / step) * step if step else rate


def _closed_by_depth(probes: Sequence[Probe]) -> dict[int, Probe]:
    by_depth: dict[int, Probe] = {}
    for probe in probes:
        if probe.phase == CLOSED:
            by_depth.setdefault(probe.depth, probe)
    return by_depth


def _flattened(shallow: Probe, deep: Probe, objective: Objective) -> bool:
    gain_small = deep.achieved_iops < (1 + KNEE_GAIN) * shallow.achieved_iops
    return gain_small and latency_of(deep, objective) > latency_of(shallow, objective)


def _ladder_can_stop(shallow: Probe, deep: Probe, objective: Objective) -> bool:
    """Both depths over the limit and the deeper one gained under KNEE_GAIN IOPS."""
    both_over = not meets(shallow, objective) and not meets(deep, objective)
    return both_over and deep.achieved_iops < (1 + KNEE_GAIN) * shallow.achieved_iops


def _next_depth(ladder: list[int], by_depth: dict[int, Probe], objective: Objective) -> int | None:
    """The first untested ladder depth, or None once the ladder is done or stopped early."""
    previous = None
    for depth in ladder:
        probe = by_depth.get(depth)
        if probe is None:
            return depth
        if previous is not None and _ladder_can_stop(previous, probe, objective):
            return None
        previous = probe
    return None
