"""Planned durations: a run's seconds from its job options, and how a time left reads.

Light on purpose: the progress lines of a running campaign (the logger plugin, in
Snakemake's own process) need these and nothing of the run engine.
"""

from __future__ import annotations

from storbench.core.units import UnitError, parse_duration


def run_seconds(params: dict) -> float | None:
    if "runtime" not in params:
        return None
    try:
        return parse_duration(params["runtime"]) + parse_duration(params.get("ramp_time", 0))
    except (UnitError, ValueError, TypeError):
        return None


def hours_text(seconds: float) -> str:
    hours, rest = divmod(int(round(seconds)), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {secs:02d}s"
