"""Rows with host='all' from per-host rows, for every tool: sums, pooled latency, merged bins.

Percentiles of an aggregate come only from summed histogram bins, never from averaging
the hosts' percentiles; without bins on every row the aggregate has no percentiles.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator

from storbench.core import histogram
from storbench.core.schema_names import (
    ALL_HOSTS,
    CPU_COLUMNS,
    CPU_HOST,
    CPU_PROCESS,
    PERCENTILE_COLUMNS,
    PERCENTILES,
)

SUMMED = ("bytes", "ios", "bw_bytes_s", "iops", "errors")
LATENCY_SUMMARY = ("lat_mean_ns", "lat_stdev_ns", "lat_min_ns", "lat_max_ns")
PERCENTILE_FIELDS = (*PERCENTILE_COLUMNS, "lat_basis", "pct_source", "hist_ns", "hist_count")
TOOL_TOTALS = ("tool_bw_bytes_s", "tool_iops")  # the tool's own aggregate, never summed
_METRICS = frozenset(
    (
        *SUMMED,
        "duration_s",
        *LATENCY_SUMMARY,
        *PERCENTILE_FIELDS,
        "clat_mean_ns",
        *TOOL_TOTALS,
        *CPU_COLUMNS,
    )
)
_PER_ROW_IDENTITY = frozenset(("host", "job", "op"))
_JOINED_WHEN_DIFFERENT = frozenset(("command", "raw_path", "tool_version"))
_CLONE_LABEL = re.compile(r"^(?P<base>.*)\[\d+\]$")  # fio numjobs clones: name[3]


def histogram_percentiles(values: list[int], counts: list[int], basis: str) -> dict:
    """The percentile columns, basis and bins of one histogram."""
    columns = dict(
        zip(PERCENTILE_COLUMNS, histogram.percentiles(values, counts, PERCENTILES), strict=True)
    )
    columns["lat_basis"] = basis
    columns["pct_source"] = "histogram"
    columns["hist_ns"] = values
    columns["hist_count"] = counts
    return columns


def no_percentiles() -> dict:
    return dict.fromkeys(PERCENTILE_FIELDS)


def aggregate_hosts(rows: list[dict]) -> list[dict]:
    """Rows with host='all': one per (job base name, op) over every host and numjobs clone."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        if row.get("host") != ALL_HOSTS:
            groups.setdefault((base_job(row.get("job")), row.get("op")), []).append(row)
    return [_aggregate(job, op, group) for (job, op), group in groups.items()]


def base_job(job):
    """A job's name without a clone's index: fio's numjobs clones are name[3]."""
    match = _CLONE_LABEL.match(job) if job is not None else None
    return match.group("base") if match else job


def _aggregate(job, op, group: list[dict]) -> dict:
    clat = {"clat_mean_ns": _weighted_mean(group, "clat_mean_ns")}
    return {
        **(clat if any("clat_mean_ns" in row for row in group) else {}),
        **_shared_columns(group),
        "host": ALL_HOSTS,
        "job": job,
        "op": op,
        **{column: _sum(_column(group, column)) for column in SUMMED},
        "duration_s": _max(_column(group, "duration_s")),
        **_pooled_latency(group),
        **_merged_percentiles(group),
        **(aggregate_cpu(group) if any("cpu_basis" in row for row in group) else {}),
    }


def aggregate_cpu(group: list[dict]) -> dict:
    """The CPU columns of an aggregate of ``group`` (rows of one basis, each measured):
    'process' (% of one CPU, the tool's own processes) sums the rows, the CPUs all of them
    kept busy; 'host' (% of all of a host's CPUs) is the mean over the hosts, each host's
    figure once (elbencho's own rule for its service-mode total, vdbench's for a multi-host
    run). Empty when a row lacks a figure or the bases differ: a part would read as the
    whole."""
    empty = dict.fromkeys(CPU_COLUMNS)
    bases = {row.get("cpu_basis") for row in group}
    if len(bases) != 1 or any(row.get("cpu_pct") is None for row in group):
        return empty
    basis = bases.pop()
    if basis == CPU_PROCESS:
        return {
            "cpu_pct": sum(row["cpu_pct"] for row in group),
            "cpu_sys_pct": _sum_all(row.get("cpu_sys_pct") for row in group),
            "cpu_basis": basis,
        }
    if basis == CPU_HOST:
        hosts = {row.get("host"): row for row in group}  # one figure per host
        sys_total = _sum_all(row.get("cpu_sys_pct") for row in hosts.values())
        return {
            "cpu_pct": sum(row["cpu_pct"] for row in hosts.values()) / len(hosts),
            "cpu_sys_pct": None if sys_total is None else sys_total / len(hosts),
            "cpu_basis": basis,
        }
    return empty


def _sum_all(values):
    """The sum, None when a value is missing (a sum of some would read as the total)."""
    values = list(values)
    return None if None in values else sum(values)


def joined(values) -> str | None:
    """Several hosts' values of one column (a tool version, a command) in one: each distinct
    one once, in order, joined by '; '; None when there is none."""
    return "; ".join(str(value) for value in dict.fromkeys(values) if value is not None) or None


def _shared_columns(group: list[dict]) -> dict:
    """Parameter/provenance columns: the common value, else None (or the values joined)."""
    columns = set().union(*group) - _METRICS - _PER_ROW_IDENTITY
    shared = {}
    for column in sorted(columns):
        values = list(dict.fromkeys(_column(group, column)))
        if len(values) == 1:
            shared[column] = values[0]
        elif column in _JOINED_WHEN_DIFFERENT:
            shared[column] = joined(values)
        else:
            shared[column] = None
    return shared


def _column(group: list[dict], column: str) -> Iterator:
    """row.get(column) of each row (a map: the groups are large)."""
    return map(dict.get, group, itertools.repeat(column))


def _sum(values):
    present = [value for value in values if value is not None]
    return sum(present) if present else None


def _max(values):
    present = [value for value in values if value is not None]
    return max(present) if present else None


def _min(values):
    present = [value for value in values if value is not None]
    return min(present) if present else None


def _weighted_mean(group: list[dict], column: str):
    """The I/O-weighted mean of a per-row mean (None unless every row measured it); a group
    of one row without an I/O count (fio's terse output prints none) has its own mean."""
    if len(group) == 1 and not group[0].get("ios"):
        return group[0].get(column)
    if any(row.get(column) is None or not row.get("ios") for row in group):
        return None
    total = sum(row["ios"] for row in group)
    return sum(row["ios"] * row[column] for row in group) / total


def _pooled_latency(group: list[dict]) -> dict:
    """Exact mean/stdev of the union of samples, from per-row mean, stdev and count.

    fio's stddev is the sample one (divides by n-1), so the pooled value is too.
    """
    if len(group) == 1:  # its own figures, counted or not
        return {column: group[0].get(column) for column in LATENCY_SUMMARY}
    measured = [row for row in group if row.get("lat_mean_ns") is not None and row.get("ios")]
    if len(measured) == 1:  # keep fio's own figures rather than re-derive them with rounding
        return {column: measured[0].get(column) for column in LATENCY_SUMMARY}
    total = sum(row["ios"] for row in measured)
    if not total:
        return dict.fromkeys(LATENCY_SUMMARY)
    mean = sum(row["ios"] * row["lat_mean_ns"] for row in measured) / total
    squares = sum(
        (row["ios"] - 1) * (row.get("lat_stdev_ns") or 0.0) ** 2
        + row["ios"] * (row["lat_mean_ns"] - mean) ** 2
        for row in measured
    )
    return {
        "lat_mean_ns": mean,
        "lat_stdev_ns": math.sqrt(squares / (total - 1)) if total > 1 else 0.0,
        "lat_min_ns": _min(row.get("lat_min_ns") for row in measured),
        "lat_max_ns": _max(row.get("lat_max_ns") for row in measured),
    }


def _merged_percentiles(group: list[dict]) -> dict:
    """Percentiles of the summed bins; None if any row lacks bins (never average percentiles)."""
    measured = [row for row in group if _has_latency(row)]
    if len(measured) == 1:  # one row: its percentiles, even fio's printed ones, are exact
        return {column: measured[0].get(column) for column in PERCENTILE_FIELDS}
    bases = {row.get("lat_basis") for row in measured}
    if len(bases) != 1 or any(row.get("hist_ns") is None for row in measured):
        return no_percentiles()
    values, counts = histogram.merge((row["hist_ns"], row["hist_count"]) for row in measured)
    return histogram_percentiles(values, counts, str(bases.pop()))


def _has_latency(row: dict) -> bool:
    """False for ops that did I/O but measured nothing (e.g. the one failed write of a job)."""
    return row.get("pct_source") is not None or row.get("lat_mean_ns") is not None


def with_hosts_in_run(rows: list[dict]) -> list[dict]:
    """Rows whose hosts_in_run is unset get the number of hosts their run and iteration have
    rows for (imported outputs); a run with only 'all' rows keeps it unknown."""
    hosts: dict[tuple, set] = {}
    for row in rows:
        if row.get("host") != ALL_HOSTS:
            hosts.setdefault((row.get("run_id"), row.get("iteration")), set()).add(row["host"])
    return [
        row
        if row.get("hosts_in_run") is not None
        else {
            **row,
            "hosts_in_run": len(hosts.get((row.get("run_id"), row.get("iteration")), ())) or None,
        }  # fmt: skip
        for row in rows
    ]
