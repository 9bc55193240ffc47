"""Value checks the config sections share; each appends '<key path>: <problem>' lines."""

from __future__ import annotations

from storbench.core import units


def positive_duration(key: str, value, problems: list[str]) -> float | None:
    """Seconds of a duration that must be more than zero; None with a problem otherwise."""
    try:
        seconds = units.parse_duration(value)
    except units.UnitError as error:
        problems.append(f"{key}: {error}")
        return None
    if seconds <= 0:
        problems.append(f"{key}: must be more than 0s, got {value!r}")
        return None
    return seconds
