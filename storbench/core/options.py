"""Job options every tool reads the same way: which are sizes and durations, and their
unambiguous spelling in a job file."""

from __future__ import annotations

from storbench.core import hostfacts, units

SIZE_OPTIONS = frozenset({"bs", "blocksize", "size", "filesize", "io_size", "offset"})
DURATION_OPTIONS = frozenset({"runtime", "ramp_time", "startdelay", "status_interval"})
PERCENT_SIZE_OPTIONS = frozenset({"size", "io_size", "offset"})


def normalized_options(params: dict) -> dict[str, object]:
    """Option values as the tool reads them unambiguously (sizes binary, durations with units)."""
    options: dict[str, object] = {}
    for option, value in params.items():
        text = str(value)
        if hostfacts.has_expression(value):
            options[option] = value  # shown as written (plan); resolved per host before a run
        elif (
            option in SIZE_OPTIONS
            and not text.endswith("%")
            and "-" not in text
            and "," not in text
        ):
            options[option] = units.job_size(value)
        elif option in DURATION_OPTIONS:
            options[option] = units.job_duration(value)
        elif isinstance(value, bool):
            options[option] = int(value)
        else:
            options[option] = value
    return options


def truthy(value) -> bool:
    """A yes/no job option as the tools read it: 1, true, yes or on (any case) is yes."""
    return str(value).strip().lower() in ("1", "true", "yes", "on")


# counts every tool reads the same way: a queue depth and a number of jobs (threads) per host
COUNT_OPTIONS = frozenset({"iodepth", "numjobs"})
