"""Latency-SLO search settings: their checks, the objective, the ladder and the probe budget.

A search experiment has a chain of probe jobs ``p01`` ... ``pNN`` (N = :func:`probe_budget`).
Each probe job reads the markers of the probes before it, asks ``slo_search.next_probe``
what to run, runs that job (fio or vdbench) on every host and publishes its marker
``results/<experiment>/search/<probe>.json``; once the search is done the remaining probes
publish a ``done`` marker without touching a host. A killed search resumes at its first
missing marker, and the decision is the same because it depends only on the markers.

Run ids tell the probe's loop: ``qd8`` (closed loop, queue depth 8), ``rate95000`` (open
loop, 95,000 IOPS offered over all hosts and jobs) and ``rate95000-confirm`` (confirmation
runs, one iteration each). The standard library only until the run has finished.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from storbench.core.units import parse_duration, parse_size
from storbench.tools import get_tool, known_tools

DEFAULT_MAX_IODEPTH = 64
DEFAULT_MAX_PROBES = 12
# The search sets these itself for every probe.


def settings(key: str, spec: dict, problems: list[str]) -> dict | None:
    """The search settings of an experiment's config, or None after appending problems."""
    search = spec["search"]
    before = len(problems)
    for option, reason in (
        ("sweep", "a search finds its own queue depths and rates; run one workload"),
        ("schedule", "a search runs one workload"),
        ("steps", "client stepping is not combined with a search"),
        ("job_file", "the search renders each probe's job; use job or a template"),
        ("rwmixreadhost", "a host-level read/write split is not combined with a search"),
    ):
        if option in spec:
            problems.append(f"{key}.{option}: not allowed with search ({reason})")
    tool = get_tool(spec["tool"]) if spec["tool"] in known_tools() else None
    if tool is None or "iops" not in tool.capabilities.search_metrics:
        searchable = [n for n in known_tools() if get_tool(n).capabilities.search_metrics]
        problems.append(
            f"{key}.search: {spec['tool']!r} cannot hold an offered rate "
            f"(search tools: {', '.join(searchable)})"
        )
    if not isinstance(spec["target"], str) and len(spec["target"]) > 1:
        problems.append(f"{key}.target: a search runs on one target, not a target set")
    if spec.get("execution", "standalone") != "standalone":
        problems.append(f"{key}.execution: a search runs standalone")
    if tool is not None:
        problems += [f"{key}.job.{p}" for p in tool.search_job_problems(spec.get("job") or {})]
    objective = _objective(key, search, problems)
    block_size = None
    if objective is not None and objective.metric == "bandwidth":
        block_size = _one_block_size((spec.get("job") or {}).get("bs"))
        if block_size is None:
            problems.append(
                f"{key}.search.objective.metric: bandwidth needs one block size in job.bs "
                "(the search holds IOPS; bandwidth is IOPS x bs)"
            )
    if objective is None or len(problems) > before:
        return None
    max_iodepth = int(search.get("max_iodepth", DEFAULT_MAX_IODEPTH))
    max_probes = int(search.get("max_probes", DEFAULT_MAX_PROBES))
    iterations = int(spec.get("iterations", 1))
    return {
        "objective": asdict(objective),
        "max_iodepth": max_iodepth,
        "max_probes": max_probes,
        "iterations": iterations,
        "arrivals": search.get("arrivals", "poisson"),
        "probes": probe_budget(max_iodepth, max_probes, iterations),
        **({"block_size": block_size} if block_size else {}),
    }


def _one_block_size(value) -> int | None:
    """bs as one size in bytes; None for a range, a list, a read/write pair or none."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str) and any(mark in value for mark in (",", "-", ":", "/")):
        return None
    try:
        return parse_size(value)
    except ValueError:
        return None


def _bare_positive_number(value) -> bool:
    """A number without a unit (2, '2', 0.5): durations read it as seconds."""
    if isinstance(value, bool):
        return False
    try:
        return float(value) > 0
    except (TypeError, ValueError):
        return False


def _objective(key: str, search: dict, problems: list[str]) -> Objective | None:
    fields = {**search["objective"]}
    for name in ("tolerance", "min_achieved"):
        if name in search:
            fields[name] = search[name]
    try:
        return Objective.from_config(fields)
    except ValueError as error:
        field, _, reason = str(error).partition(": ")
        name = field.removeprefix("Objective.").removesuffix("_ns")  # limit_ns: the limit
        where = f"objective.{name}" if name in ("limit", "latency", "metric") else name
        if name in fields and ", not " in reason:  # the value as written (200%, not 2.0)
            rule = reason.rsplit(", not ", 1)[0].replace("positive number", "positive duration")
            reason = f"{rule}, not {fields[name]!r}"
        problems.append(f"{key}.search.{where}: {reason or error}")
        return None


CONFIRMATION_ROUNDS = 4  # a noisy target near the limit can fail a few confirmation rounds


def probe_budget(max_iodepth: int, max_probes: int, iterations: int) -> int:
    """Probe jobs in the chain: the ladder, the bisection, and rounds of confirmations."""
    ladder = len(qd_ladder(max_iodepth))
    return ladder + max_probes + CONFIRMATION_ROUNDS * iterations


def probe_ids(search_settings: dict) -> list[str]:
    return [f"p{n:02d}" for n in range(1, search_settings["probes"] + 1)]


LATENCY_KEYS = ("mean", "p50", "p90", "p99", "p99.9", "p99.99")


# bandwidth: with one block size, the highest bandwidth within the limit is the highest IOPS
# times that size, so the search runs on IOPS and reports both
METRICS = ("iops", "bandwidth")


@dataclass(frozen=True, kw_only=True)
class Objective:
    """The latency limit the answer must meet; raises ValueError naming a bad field."""

    limit_ns: float
    latency: str = "p99"
    metric: str = "iops"
    tolerance: float = 0.02
    min_achieved: float = 0.99

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ValueError(f"Objective.metric: {self.metric!r} is not one of {METRICS}")
        if self.latency not in LATENCY_KEYS:
            raise ValueError(
                f"Objective.latency: {self.latency!r} is not one of {', '.join(LATENCY_KEYS)}"
            )
        if not finite_number(self.limit_ns) or self.limit_ns <= 0:
            raise ValueError(
                f"Objective.limit_ns: must be a positive number, not {self.limit_ns!r}"
            )
        if not finite_number(self.tolerance) or not 0 < self.tolerance <= 0.5:
            raise ValueError(f"Objective.tolerance: must be in (0, 0.5], not {self.tolerance!r}")
        if not finite_number(self.min_achieved) or not 0 < self.min_achieved <= 1:
            raise ValueError(
                f"Objective.min_achieved: must be in (0, 1], not {self.min_achieved!r}"
            )

    @classmethod
    def from_config(cls, spec: Mapping) -> Objective:
        """``{metric: iops, latency: p99, limit: 2ms, tolerance: 2%}`` (limit is a duration)."""
        if "limit" not in spec:
            raise ValueError("Objective.limit: missing (e.g. limit: 2ms)")
        if _bare_positive_number(spec["limit"]):
            number = spec["limit"]
            raise ValueError(
                f"Objective.limit: give the latency's unit ({number}ms or {number}us):"
                f" a bare {number} would read as {number} s"
            )
        try:
            limit_ns = round(parse_duration(spec["limit"]) * 1e9, 3)
        except ValueError as error:
            raise ValueError(f"Objective.limit: {error}") from None
        return cls(
            limit_ns=limit_ns,
            latency=str(spec.get("latency", "p99")),
            metric=str(spec.get("metric", "iops")),
            tolerance=_fraction(spec.get("tolerance", 0.02), "tolerance"),
            min_achieved=_fraction(spec.get("min_achieved", 0.99), "min_achieved"),
        )


def qd_ladder(max_qd: int) -> list[int]:
    """1, 2, 4 ... up to max_qd, and max_qd itself even when it is not a power of two."""
    if not isinstance(max_qd, int) or isinstance(max_qd, bool) or max_qd < 1:
        raise ValueError(f"max_qd: must be an integer >= 1, not {max_qd!r}")
    ladder = []
    depth = 1
    while depth < max_qd:
        ladder.append(depth)
        depth *= 2
    ladder.append(max_qd)
    return ladder


def finite_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _fraction(value, name: str) -> float:
    """0.02 or '2%' -> 0.02."""
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            return float(value.strip()[:-1]) / 100
        except ValueError:
            raise ValueError(f"Objective.{name}: not a percentage: {value!r}") from None
    if not finite_number(value):
        raise ValueError(f"Objective.{name}: not a number: {value!r}")
    return float(value)


def limit_label(limit_ns: float) -> str:
    """2e6 -> '2 ms', 500e3 -> '500 µs'."""
    if limit_ns >= 1e6:
        return f"{limit_ns / 1e6:g} ms"
    return f"{limit_ns / 1e3:g} µs"
