"""Sizes and durations as written in configs and fio job files.

Sizes are binary whatever the spelling, as in fio's default ``kb_base=1024``:
``4k`` = ``4K`` = ``4KB`` = ``4KiB`` = 4096 bytes. A bare number is bytes.
Durations: ``500ms``, ``5s``, ``2m``, ``1h``, ``1d``; a bare number is seconds.
"""

from __future__ import annotations

import math
import re

MAX_SIZE = 2**63 - 1  # the largest byte count a result column (int64) holds
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtpe]?)(i?b?)\s*$", re.IGNORECASE)
_SIZE_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5, "e": 6}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(us|ms|s|m|h|d)?\s*$")
_DURATION_SECONDS = {
    "us": 1e-6,
    "ms": 1e-3,
    None: 1.0,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}
SHORT_SUFFIXES = ((4, "t"), (3, "g"), (2, "m"), (1, "k"))  # read as binary by every tool


class UnitError(ValueError):
    pass


def parse_size(value) -> int:
    """'4k' -> 4096, '256MiB' -> 268435456, 4096 -> 4096. Raises UnitError."""
    if isinstance(value, bool):
        raise UnitError(f"not a size: {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise UnitError(f"size must not be negative: {value}")
        return _within_range(value, value)
    match = _SIZE.match(str(value))
    if not match:
        raise UnitError(f"not a size: {value!r} (expected e.g. 4k, 1m, 256MiB, 1g)")
    number, prefix, unit = match.groups()
    if unit.lower() == "i" and not prefix:  # '4Ki' is accepted, '4i' is not
        raise UnitError(f"not a size: {value!r}")
    result = float(number) * 1024 ** _SIZE_POWERS[prefix.lower()]
    if not math.isfinite(result):
        raise UnitError(f"size is too large: {value!r}")
    if result != int(result):
        raise UnitError(f"size is not a whole number of bytes: {value!r}")
    return _within_range(int(result), value)


def _within_range(size: int, value) -> int:
    if size > MAX_SIZE:
        raise UnitError(f"size is too large: {value!r} (at most {MAX_SIZE} bytes)")
    return size


def in_whole_units(size: int, suffixes=SHORT_SUFFIXES) -> tuple[int, str]:
    """(count, suffix) of the largest power of 1024 in suffixes that divides size:
    4096 -> (4, 'k'); (size, '') when none does (or size is 0)."""
    for power, suffix in suffixes:
        if size and size % 1024**power == 0:
            return size // 1024**power, suffix
    return size, ""


def job_size(value) -> str:
    """A size as a job file spells it, read the same way by every tool (fio whatever its
    kb_base): '256MiB' -> '256m'."""
    count, suffix = in_whole_units(parse_size(value))
    return f"{count}{suffix}"


def size_label(value) -> str:
    """Short readable label for run ids and figures: 4096 -> '4k', 1048576 -> '1m'."""
    return job_size(value)


def parse_duration(value) -> float:
    """'5s' -> 5.0, '2m' -> 120.0, 3 -> 3.0. Raises UnitError."""
    if isinstance(value, bool):
        raise UnitError(f"not a duration: {value!r}")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise UnitError(f"not a duration: {value!r} (expected e.g. 500ms, 5s, 2m, 1h)")
        if value < 0:
            raise UnitError(f"duration must not be negative: {value}")
        return float(value)
    match = _DURATION.match(str(value))
    if not match:
        micro = "; microseconds are us" if "µ" in str(value) or "μ" in str(value) else ""
        raise UnitError(f"not a duration: {value!r} (expected e.g. 500ms, 5s, 2m, 1h{micro})")
    number, unit = match.groups()
    seconds = float(number) * _DURATION_SECONDS[unit]
    if not math.isfinite(seconds):
        raise UnitError(f"duration is too long: {value!r}")
    return seconds


def job_duration(value) -> str:
    """Seconds or milliseconds as a job file spells them: '5s' -> '5s', '1.5s' -> '1500ms'."""
    seconds = parse_duration(value)
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{round(seconds * 1000)}ms"


def parse_percent(value) -> float:
    """'85%' -> 0.85; a bare number is a fraction below 1 (0.85), never a percentage."""
    text = str(value).strip()
    try:
        number = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise UnitError(f"not a percentage: {value!r} (e.g. 85%)") from None
    if not text.endswith("%") and number >= 1:
        raise UnitError(f"{value!r} is ambiguous; write a percentage such as 85% or 100%")
    if not 0 < number <= 1:
        raise UnitError(f"{value!r} is not between 0 and 100 %")
    return number
