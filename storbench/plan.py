"""Expand experiments into runs: sweep points, run ids, and the specs the rules pass on.

Run id format: the workload's ``rw``, then ``bs<size>``, ``qd<iodepth>``, ``nj<numjobs>``
(each only when the option is set), then every other swept option as ``<option>-<value>``
in sweep order; e.g. ``randread_bs4k_qd16_nj1`` or ``randrw_bs4k_qd1_nj1_mix70``.
Sizes are written short (4096 -> 4k); characters other than letters, digits, '.' and '-'
become '-'. An experiment without any of these options has the single run id ``run``.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass

from storbench import units
from storbench.config import DURATION_OPTIONS, SIZE_OPTIONS, Campaign

RUN_ID_PARTS = (
    ("rw", ""),
    ("bs", "bs"),
    ("iodepth", "qd"),
    ("numjobs", "nj"),
    ("rwmixread", "mix"),
)
DEFAULT_ITERATION_TIMEOUT_S = 3600.0
_UNSAFE = re.compile(r"[^A-Za-z0-9.-]")


class PlanError(ValueError):
    pass


@dataclass(frozen=True)
class Run:
    run_id: str
    params: dict  # job options with this sweep point applied, in config order
    point: dict  # only the swept options


def sweep_points(sweep: dict) -> list[dict]:
    """Cross product of the lists; lists under ``zip`` are paired element-wise first."""
    zipped = sweep.get("zip") or {}
    lengths = {key: len(values) for key, values in zipped.items()}
    if len(set(lengths.values())) > 1:
        detail = ", ".join(f"{k}={n}" for k, n in lengths.items())
        raise PlanError(f"zip lists must have equal lengths ({detail})")
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


def _label(option: str, value) -> str:
    if option in SIZE_OPTIONS and "-" not in str(value) and "," not in str(value):
        try:
            return units.size_label(value)
        except units.UnitError:
            pass
    return _UNSAFE.sub("-", str(value))


def run_id(params: dict, point: dict) -> str:
    parts = []
    named = {option for option, _ in RUN_ID_PARTS}
    for option, prefix in RUN_ID_PARTS:
        if option in params:
            parts.append(prefix + _label(option, params[option]))
    for option, value in point.items():
        if option not in named:
            parts.append(f"{option}-{_label(option, value)}")
    return "_".join(parts) or "run"


def experiment_runs(campaign: Campaign, name: str) -> list[Run]:
    experiment = campaign.experiments[name]
    runs: list[Run] = []
    seen: dict[str, dict] = {}
    for point in sweep_points(experiment.sweep):
        params = {**experiment.job, **point}
        rid = run_id(params, point)
        if rid in seen:
            raise PlanError(f"sweep points {seen[rid]} and {point} both get run id {rid!r}")
        seen[rid] = point
        runs.append(Run(run_id=rid, params=params, point=point))
    return runs


def iteration_timeout(params: dict, configured: float | None) -> float:
    """Upper bound of one iteration: configured, else twice the planned time plus slack."""
    if configured:
        return configured
    if "runtime" not in params:
        return DEFAULT_ITERATION_TIMEOUT_S
    planned = units.parse_duration(params["runtime"]) + units.parse_duration(
        params.get("ramp_time", 0)
    )
    return 2 * planned + 120.0


def normalized_options(params: dict) -> dict:
    """Option values as the tool reads them unambiguously (sizes binary, durations with units)."""
    options = {}
    for option, value in params.items():
        text = str(value)
        if (
            option in SIZE_OPTIONS
            and not text.endswith("%")
            and "-" not in text
            and "," not in text
        ):
            options[option] = units.fio_size(value)
        elif option in DURATION_OPTIONS:
            options[option] = units.fio_duration(value)
        elif isinstance(value, bool):
            options[option] = int(value)
        else:
            options[option] = value
    return options


def _run_identity(campaign: Campaign, name: str, run: Run) -> dict:
    """What every step's spec says about the run: which, with what tool, on which target."""
    experiment = campaign.experiments[name]
    return {
        "experiment": name,
        "run_id": run.run_id,
        "tool": experiment.tool,
        "target": experiment_target(campaign, name),
        "params": run.params,
    }


def experiment_target(campaign: Campaign, name: str) -> dict:
    """The experiment's target as the steps see it; S3 targets gain the experiment's bucket."""
    experiment = campaign.experiments[name]
    target = {"name": experiment.target_name, **experiment.target}
    if target["type"] == "s3":
        from storbench.s3 import bucket_name

        target["bucket"] = bucket_name(target, name)
    return target


def render_spec(campaign: Campaign, name: str, run: Run) -> dict:
    experiment = campaign.experiments[name]
    return {
        **_run_identity(campaign, name, run),
        "hosts": [host["name"] for host in campaign.hosts_of(name)],
        "point": run.point,
        "template": experiment.template,
        "job_file": experiment.job_file,
    }


def run_spec(campaign: Campaign, name: str, run: Run) -> dict:
    return {
        **_run_identity(campaign, name, run),
        "hosts": campaign.hosts_of(name),
        "timeout_s": iteration_timeout(run.params, campaign.experiments[name].timeout),
    }


def preflight_spec(campaign: Campaign, name: str) -> dict:
    experiment = campaign.experiments[name]
    return {
        "experiment": name,
        "tool": experiment.tool,
        "target": experiment_target(campaign, name),
        "hosts": campaign.hosts_of(name),
    }


def to_json(spec: dict) -> str:
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))
