"""Checks and settings of an experiment's ``faults:``, ``fault_analysis:`` and ``soak:`` keys.

``check_faults`` refuses fault commands unless the experiment says ``allow_faults: true``,
and checks each event's host, offsets and recovery against the workload. ``fault_settings``
gives the analysis settings. ``soak_plan`` turns ``soak: {duration, chunk}`` into the number
of chunks (the experiment's iterations) and the job's runtime. The per-interval series both
need comes from the tool's adapter (``with_interval_series``, applied by config.campaign:
fio's ``status_interval: 1s`` when the job does not set one).
"""

from __future__ import annotations

import math
import sys

from storbench.config.values import positive_duration
from storbench.core import units
from storbench.core.schema_names import CONTROLLER

# One-sided by default: a rate-limited fio catches up after a stall, which is not a dip.
FAULT_ANALYSIS_DEFAULTS = {
    "baseline_s": 10.0,
    "band": 0.10,
    "hold_intervals": 3,
    "two_sided": False,
}
SOAK_DEFAULTS = {"window": 31, "k": 5.0, "drift": 0.05}


def check_faults(key: str, spec: dict, job: dict, host_names: list[str], problems: list[str]):
    """Problems of ``spec['faults']`` (none when the experiment has no faults)."""
    faults = spec.get("faults")
    if not faults:
        return
    if spec.get("allow_faults") is not True:
        problems.append(
            f"{key}.allow_faults: faults run commands that change the system under test; "
            "set allow_faults: true to run them"
        )
    if spec.get("execution") == "service":
        problems.append(f"{key}.faults: not available with execution: service")
    if "search" in spec or "soak" in spec:
        problems.append(f"{key}.faults: not combined with search or soak")
    runtime = _seconds(job.get("runtime"))
    if runtime is None:
        problems.append(f"{key}.job.runtime: a fault experiment needs a timed workload")
    names = [event["name"] for event in faults]
    for index, event in enumerate(faults):
        where = f"{key}.faults[{index}]"
        if names.count(event["name"]) > 1:
            problems.append(f"{where}.name: {event['name']!r} is used by another fault")
        if event["host"] != CONTROLLER and event["host"] not in host_names:
            problems.append(
                f"{where}.host: {event['host']!r} is not a host of the experiment "
                f"({', '.join(host_names)}) nor {CONTROLLER!r}"
            )
        at = _checked_offset(f"{where}.at", event["at"], runtime, problems)
        if "timeout" in event:
            positive_duration(f"{where}.timeout", event["timeout"], problems)
        recover = event.get("recover")
        if recover:
            recover_at = _checked_offset(f"{where}.recover.at", recover["at"], runtime, problems)
            if at is not None and recover_at is not None and recover_at <= at:
                problems.append(f"{where}.recover.at: must be after at ({event['at']})")


def _checked_offset(where: str, value, runtime: float | None, problems: list[str]):
    seconds = _seconds_or_problem(where, value, problems)
    if seconds is not None and runtime is not None and seconds >= runtime:
        problems.append(f"{where}: {value} is not before the end of the workload ({runtime:g} s)")
    return seconds


def fault_settings(key: str, spec: dict, job: dict, problems: list[str]) -> dict:
    """fault_analysis settings in seconds and fractions, for the report."""

    given = spec.get("fault_analysis") or {}
    settings: dict = {
        **FAULT_ANALYSIS_DEFAULTS,
        "expected_end_s": _seconds(job.get("runtime")),  # a workload ending before died
    }
    if "baseline" in given:
        settings["baseline_s"] = positive_duration(
            f"{key}.fault_analysis.baseline", given["baseline"], problems
        )
    if "band" in given:
        try:
            settings["band"] = units.parse_percent(given["band"])
        except units.UnitError as error:
            problems.append(f"{key}.fault_analysis.band: {error}")
    settings["hold_intervals"] = int(given.get("hold", settings["hold_intervals"]))
    settings["two_sided"] = bool(given.get("two_sided", settings["two_sided"]))
    return settings


def soak_plan(key: str, spec: dict, job: dict, problems: list[str]) -> dict | None:
    """{'duration_s', 'chunk_s', 'chunks', window, k, drift} of ``spec['soak']``, or None."""
    soak = spec.get("soak")
    if not soak:
        return None

    if "iterations" in spec:
        problems.append(f"{key}.iterations: a soak's chunks are its iterations; leave it out")
    if "runtime" in job:
        problems.append(f"{key}.job.runtime: a soak sets each chunk's runtime (soak.chunk)")
    if "search" in spec:
        problems.append(f"{key}.soak: not combined with search")
    duration = positive_duration(f"{key}.soak.duration", soak["duration"], problems)
    chunk = positive_duration(f"{key}.soak.chunk", soak["chunk"], problems)
    if duration is None or chunk is None:
        return None
    if chunk > duration:
        problems.append(f"{key}.soak.chunk: longer than soak.duration")
        return None
    chunks = math.ceil(duration / chunk - 1e-9)
    if chunks * chunk > duration + 1e-9:
        print(
            f"storbench: warning: {key}.soak: {soak['duration']} is not a whole number of"
            f" {soak['chunk']} chunks; the soak runs {chunks} of them, {chunks * chunk:g} s",
            file=sys.stderr,
        )
    drift = SOAK_DEFAULTS["drift"]
    if "drift" in soak:
        try:
            drift = units.parse_percent(soak["drift"])
        except units.UnitError as error:
            problems.append(f"{key}.soak.drift: {error}")
    return {
        "duration_s": duration,
        "chunk_s": chunk,
        "chunks": chunks,
        "window": int(soak.get("window", SOAK_DEFAULTS["window"])),
        "k": float(soak.get("k", SOAK_DEFAULTS["k"])),
        "drift": drift,
    }


def _seconds(value) -> float | None:
    try:
        return None if value is None else units.parse_duration(value)
    except units.UnitError:
        return None


def _seconds_or_problem(where: str, value, problems: list[str]) -> float | None:
    try:
        return units.parse_duration(value)
    except units.UnitError as error:
        problems.append(f"{where}: {error}")
        return None
