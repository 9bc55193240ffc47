"""Sweeps: the cross product (and zip) of swept options, and the run id each point gets.

Run id format: the workload's ``rw``, then ``bs<size>``, ``qd<iodepth>``, ``nj<numjobs>``
(each only when the option is set; ``host`` when its value is a host-fact expression, e.g.
``njhost``), then every other swept option as ``<option>-<value>``
in sweep order; e.g. ``randread_bs4k_qd16_nj1`` or ``randrw_bs4k_qd1_nj1_mix70``.
Sizes are written short (4096 -> 4k); characters other than letters, digits, '.' and '-'
become '-'. An experiment without any of these options has the single run id ``run``.
"""

from __future__ import annotations

import itertools
import math
import re

from storbench.core import hostfacts, units
from storbench.core.options import SIZE_OPTIONS

RUN_ID_PARTS = (
    ("rw", ""),
    ("bs", "bs"),
    ("iodepth", "qd"),
    ("numjobs", "nj"),
    ("rwmixread", "mix"),
)


_UNSAFE = re.compile(r"[^A-Za-z0-9.-]")


class PlanError(ValueError):
    pass


# Snakemake builds a DAG of several jobs per run: 10,000 runs plan in about 45 s on two cores
# (README, make bench), so a campaign stops at twice that, before any point is expanded.
MAX_RUNS = 20_000


def sweep_points(sweep: dict) -> list[dict]:
    """Cross product of the lists; lists under ``zip`` are paired element-wise first."""
    zipped = sweep.get("zip") or {}
    lengths = {key: len(values) for key, values in zipped.items()}
    if len(set(lengths.values())) > 1:
        detail = ", ".join(f"{k}={n}" for k, n in lengths.items())
        raise PlanError(f"zip lists must have equal lengths ({detail})")
    count = point_count(sweep)
    if count > MAX_RUNS:
        raise PlanError(
            f"{count:,} sweep points, more than a campaign may plan (MAX_RUNS = {MAX_RUNS:,});"
            " split the sweep into several campaigns"
        )
    axes: list[list[dict]] = []
    if zipped:
        keys = list(zipped)
        rows = zip(*zipped.values(), strict=True)
        axes.append([dict(zip(keys, values, strict=True)) for values in rows])
    for key, values in sweep.items():
        if key != "zip":
            axes.append([{key: value} for value in values])
    points = []
    for combination in itertools.product(*axes):
        point: dict = {}
        for part in combination:
            point.update(part)
        points.append(point)
    return points


def point_count(sweep: dict) -> int:
    """How many points the sweep has, without expanding it."""
    zipped = sweep.get("zip") or {}
    count = len(next(iter(zipped.values()))) if zipped else 1
    return count * math.prod(len(values) for key, values in sweep.items() if key != "zip")


# The spelling of a host-fact value in a run id: plain 'host', its words, or its operators too
PLAIN, WORDS, OPERATORS = 0, 1, 2
_OPERATOR = re.compile(r"\*\*|//|[-+*/%]")
_OPERATOR_WORDS = {
    "**": "pow",
    "//": "div",
    "/": "over",
    "*": "x",
    "+": "plus",
    "-": "minus",
    "%": "mod",
}


def _label(option: str, value, spell: int = PLAIN) -> str:

    if hostfacts.has_expression(value):
        if spell == PLAIN:
            return "host"  # computed per host from its facts: 'njhost'
        text = str(value)
        if spell == OPERATORS:  # '{cores * 2}' and '{cores // 2}': 'cores-x-2', 'cores-div-2'
            text = _OPERATOR.sub(lambda found: f" {_OPERATOR_WORDS[found.group()]} ", text)
        words = re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-")
        return f"host-{words}"  # two host-fact values of one option: 'njhost-cores-2'
    if option in SIZE_OPTIONS and "-" not in str(value) and "," not in str(value):
        try:
            return units.size_label(value)
        except units.UnitError:
            pass
    return _UNSAFE.sub("-", str(value))


def run_id(params: dict, point: dict, spell_expressions: int = PLAIN) -> str:
    """The run id; spell_expressions writes host-fact values out (WORDS, for sweeps that
    would give two points the same 'host' label; OPERATORS where their words still would)."""
    parts = []
    named = {option for option, _ in RUN_ID_PARTS}
    for option, prefix in RUN_ID_PARTS:
        if option in params:
            parts.append(prefix + _label(option, params[option], spell_expressions))
    for option, value in point.items():
        if option not in named:
            parts.append(f"{option}-{_label(option, value, spell_expressions)}")
    return "_".join(parts) or "run"
