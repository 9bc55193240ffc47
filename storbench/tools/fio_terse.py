"""fio's terse output (``--minimal``, ``--output-format=terse``; terse version 3, fio's
default), as old campaign scripts kept it for their spreadsheets: one line per job of
';'-separated fields (fio's HOWTO, "Terse output"): version, fio version, job name, group
id, error, then the read and the write direction (KiB, bandwidth KiB/s, IOPS, runtime ms,
submission, completion and total latency min/max/mean/stdev µs, 20 completion-latency
percentiles as ``p%=µs`` with ``0%=0`` for those not printed, bandwidth min/max/share/
mean/stdev), then CPU, I/O depths, latency buckets and disk use.

What it lacks is left empty, not guessed: the I/O count (fio prints only IOPS, rounded
down), the options (block size, queue depth: the run id is the file's name), latency
histograms (its percentiles are fio's own, whole µs: a run's 'all' row has them only for a
run of one job line). The reports of ``--status-interval`` are refused: terse does not
mark where one ends.
"""

from __future__ import annotations

import re

from storbench.core.aggregate import aggregate_hosts, no_percentiles
from storbench.core.schema_names import CPU_PROCESS, PERCENTILE_COLUMNS, PERCENTILES
from storbench.tools.base import ToolOutputError, result_columns
from storbench.tools.fio_json import ParameterCache

TERSE_VERSION = "3"
TERSE_LINE = re.compile(rb"^(?:\xef\xbb\xbf)?3;fio-[0-9]")
GENERAL_FIELDS = 5  # terse version, fio version, job name, group id, error
DIRECTION_FIELDS = 4 + 4 + 4 + 20 + 4 + 5  # status, slat, clat, percentiles, lat, bw
CPU_FIELDS = 5
FIELDS = GENERAL_FIELDS + 2 * DIRECTION_FIELDS + CPU_FIELDS  # the fields read here
OPS = ("read", "write")


def is_terse(head: bytes) -> bool:
    """Whether a file's first bytes are a fio terse v3 line."""
    return TERSE_LINE.match(head) is not None


def rows_from_terse(text: str, *, host: str, base: dict, source: str) -> list[dict]:
    """One row per job line and direction that did I/O on the file's host, and the host's
    'all' rows over them, as for fio's JSON."""
    columns = result_columns()
    inherited = {key: value for key, value in base.items() if key in columns}
    inherited.update(ParameterCache(base).of({}))  # the base's, as terse prints no options
    rows: list[dict] = []
    seen: dict[str, int] = {}
    lines = [line for line in text.removeprefix("\ufeff").splitlines() if line.strip()]
    names = [line.split(";", 3)[2] if line.count(";") >= 3 else "" for line in lines]
    if interim := _interim_reports(lines, names):
        raise ToolOutputError(f"{source}: {interim}")
    for number, line in enumerate(lines, start=1):
        fields = line.split(";")
        where = f"{source}: line {number}"
        if fields[0] != TERSE_VERSION or len(fields) < FIELDS or not fields[1].startswith("fio"):
            raise ToolOutputError(
                f"{where}: not a fio terse version 3 line ({len(fields)} fields; storbench"
                f" reads fio's default terse version 3, at least {FIELDS} fields)"
            )
        name = fields[2]
        label = name
        if names.count(name) > 1:  # numjobs clones reported one by one
            label = f"{name}[{seen.get(name, 0)}]"
            seen[name] = seen.get(name, 0) + 1
        try:
            rows += _job_rows(fields, host=host, job=label, base=inherited)
        except ValueError as error:
            raise ToolOutputError(f"{where}: {error}") from None
    if not lines:
        raise ToolOutputError(f"{source}: empty file")
    return rows + aggregate_hosts(rows)


STATUS_INTERVAL_MIN_MS = 500  # fio's --status-interval is whole seconds or more


def _interim_reports(lines: list[str], names: list[str]) -> str | None:
    """A job repeated with its runtime growing by a status interval each time: the reports
    of --status-interval, which terse prints without saying where one ends (numjobs clones
    repeat too, with near-equal runtimes)."""
    runtimes: dict[str, list[int]] = {}
    for line, name in zip(lines, names, strict=True):
        fields = line.split(";")
        read, write = (GENERAL_FIELDS + i * DIRECTION_FIELDS + 3 for i in range(2))
        if len(fields) >= FIELDS and fields[read].isdigit() and fields[write].isdigit():
            runtimes.setdefault(name, []).append(max(int(fields[read]), int(fields[write])))
    for name, times in runtimes.items():
        steps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
        if steps and all(step >= STATUS_INTERVAL_MIN_MS for step in steps):
            return (
                f"job {name!r} is reported {len(times)} times, its runtime growing"
                f" ({', '.join(map(str, times))} ms): the reports of --status-interval, which"
                " terse output does not tell apart; import the JSON output, or the last"
                " report's lines alone"
            )
    return None


def _job_rows(fields: list[str], *, host: str, job: str, base: dict) -> list[dict]:
    error = int(fields[4])
    cpu_start = GENERAL_FIELDS + 2 * DIRECTION_FIELDS
    usr, sys_cpu = (_percent(text) for text in fields[cpu_start : cpu_start + 2])
    shared = {
        **base,
        "host": host,
        "job": job,
        "tool_version": fields[1],
        "errors": 1 if error else 0,
        "error_code": error,
        # a job's figures, as fio's JSON gives them without group_reporting
        "cpu_pct": usr + sys_cpu,
        "cpu_sys_pct": sys_cpu,
        "cpu_basis": CPU_PROCESS,
    }
    rows = []
    for index, op in enumerate(OPS):
        start = GENERAL_FIELDS + index * DIRECTION_FIELDS
        direction = fields[start : start + DIRECTION_FIELDS]
        kib = _count(direction[0])
        if kib == 0:
            continue
        rows.append({**shared, "op": op, **_direction(direction, kib)})
    return rows


def _direction(fields: list[str], kib: int) -> dict:
    runtime_ms = _count(fields[3])
    clat_mean_us = _number(fields[10])
    lat_min, lat_max, lat_mean, lat_stdev = (_number(text) for text in fields[32:36])
    return {
        "bytes": kib * 1024,
        "ios": None,  # terse prints no I/O count
        "duration_s": runtime_ms / 1000,
        "bw_bytes_s": _number(fields[1]) * 1024,
        "iops": _number(fields[2]),
        "clat_mean_ns": clat_mean_us * 1000,
        "lat_mean_ns": lat_mean * 1000,
        "lat_stdev_ns": lat_stdev * 1000,
        "lat_min_ns": lat_min * 1000,
        "lat_max_ns": lat_max * 1000,
        **_percentiles(fields[12:32]),
    }


def _percentiles(fields: list[str]) -> dict:
    """fio's printed completion-latency percentiles ('99.000000%=199', µs) at storbench's."""
    printed = {}
    for text in fields:
        percent, _, value = text.partition("%=")
        if not value:
            raise ValueError(f"a percentile field is {text!r}, not 'p%=µs'")
        if float(percent) > 0:
            printed[round(float(percent), 6)] = _number(value) * 1000
    if not printed:
        return no_percentiles()
    return {
        **no_percentiles(),
        **{
            column: printed.get(p)
            for p, column in zip(PERCENTILES, PERCENTILE_COLUMNS, strict=True)
        },
        "lat_basis": "clat",
        "pct_source": "tool",
    }


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(f"a count is {text!r}")
    return value


def _number(text: str) -> float:
    value = float(text)
    if not 0 <= value < float("inf"):
        raise ValueError(f"a measure is {text!r}")
    return value


def _percent(text: str) -> float:
    return _number(text.removesuffix("%"))
