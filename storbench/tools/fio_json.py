"""Parse fio ``json`` / ``json+`` output into rows of the common result schema.

Standalone runs give one output per host (``jobs[]``); a client/server run gives one output
with ``client_stats[]`` holding one entry per server plus ``All clients``, which is skipped:
the ``all`` rows are always recomputed from the per-host rows by :func:`aggregate_hosts`.
"""

from __future__ import annotations

import functools
import json
import math
import re

from storbench import histogram
from storbench.schema_names import ALL_HOSTS, PERCENTILE_COLUMNS, PERCENTILES
from storbench.units import UnitError, parse_duration, parse_size

OPS = ("read", "write", "trim")
ALL_CLIENTS = "All clients"

_DOCUMENT_START = re.compile(r"(?:^|(?<=\r))\{", re.MULTILINE)
_CLONE_LABEL = re.compile(r"^(?P<base>.*)\[\d+\]$")

_PARAMETER_PARSERS = {
    "rw": str,
    "bs": parse_size,
    "iodepth": int,
    "numjobs": int,
    "rwmixread": int,
    "size": parse_size,
    "runtime_s": parse_duration,
}
_FIO_OPTION_NAMES = {"runtime_s": "runtime"}

_SUMMED = ("bytes", "ios", "bw_bytes_s", "iops", "errors")
_LATENCY_SUMMARY = ("lat_mean_ns", "lat_stdev_ns", "lat_min_ns", "lat_max_ns")
_PERCENTILE_FIELDS = (*PERCENTILE_COLUMNS, "lat_basis", "pct_source", "hist_ns", "hist_count")
_METRICS = frozenset((*_SUMMED, "duration_s", *_LATENCY_SUMMARY, *_PERCENTILE_FIELDS))
_PER_ROW_IDENTITY = frozenset(("host", "job", "op"))
_JOINED_WHEN_DIFFERENT = frozenset(("command", "raw_path", "tool_version"))


class FioOutputError(ValueError):
    pass


@functools.cache
def _schema_columns() -> frozenset[str]:
    from storbench.results import COLUMNS  # lazy: results imports pyarrow

    return frozenset(COLUMNS)


# --- documents ---------------------------------------------------------------------------


def load_documents(text: str, *, source: str = "fio output") -> list[dict]:
    """All JSON documents in fio's output text, skipping non-JSON lines around them."""
    decoder = json.JSONDecoder()
    documents = []
    position = 0
    while match := _DOCUMENT_START.search(text, position):
        try:
            document, end = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            position = match.start() + 1
            continue
        documents.append(document)
        position = end
    if not documents:
        raise FioOutputError(f"{source}: no complete fio JSON document ({_first_line(text)})")
    return documents


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return f"first line: {line.strip()[:200]!r}"
    return "output is empty"


# --- per-host rows -----------------------------------------------------------------------


def rows_from_document(
    doc: dict,
    *,
    host: str | None,
    base: dict,
    client_names: dict | None = None,
    source: str = "fio output",
) -> list[dict]:
    """Per-host rows (never 'all') from one final fio document."""
    entries = _host_entries(doc, host, client_names or {}, source)
    labels = _job_labels(entries)
    inherited = {key: value for key, value in base.items() if key in _schema_columns()}
    global_options = doc.get("global options") or {}
    rows = []
    for (entry_host, entry), job in zip(entries, labels, strict=True):
        options = {**global_options, **(entry.get("job options") or {})}
        shared = {
            **inherited,
            **_parameters(options, base),
            "host": entry_host,
            "job": job,
            "errors": _entry_errors(entry),
        }
        if doc.get("fio version") is not None:
            shared["tool_version"] = doc["fio version"]
        for op in OPS:
            stats = entry.get(op) or {}
            if stats.get("total_ios", 0) > 0:
                rows.append({**shared, "op": op, **_op_metrics(stats)})
    return rows


def _host_entries(doc: dict, host, client_names: dict, source: str) -> list[tuple]:
    """(host, entry) for every job entry of the document."""
    if "client_stats" in doc:
        return [
            (_client_host(entry, client_names), entry)
            for entry in doc["client_stats"]
            if entry.get("jobname") != ALL_CLIENTS
        ]
    if "jobs" in doc:
        return [(host, entry) for entry in doc["jobs"]]
    raise FioOutputError(f"{source}: JSON document has neither 'jobs' nor 'client_stats'")


def _client_host(entry: dict, client_names: dict) -> str:
    hostname, port = entry.get("hostname"), entry.get("port")
    address = hostname if port is None else f"{hostname}:{port}"
    return client_names.get(address) or client_names.get(hostname) or address


def _job_labels(entries: list[tuple]) -> list[str]:
    """jobname, or jobname[k] for numjobs clones reported separately on the same host."""
    keys = [(host, entry.get("groupid"), entry.get("jobname")) for host, entry in entries]
    totals: dict[tuple, int] = {}
    for key in keys:
        totals[key] = totals.get(key, 0) + 1
    seen: dict[tuple, int] = {}
    labels = []
    for key in keys:
        jobname = key[2]
        if totals[key] == 1:
            labels.append(jobname)
            continue
        labels.append(f"{jobname}[{seen.get(key, 0)}]")
        seen[key] = seen.get(key, 0) + 1
    return labels


def _parameters(options: dict, base: dict) -> dict:
    """Parameter columns from fio's options, else from base; None when neither parses."""
    parameters = {}
    for column, parse in _PARAMETER_PARSERS.items():
        candidates = (options.get(_FIO_OPTION_NAMES.get(column, column)), base.get(column))
        parameters[column] = next(
            (parsed for value in candidates if (parsed := _parse(parse, value)) is not None),
            None,
        )
    return parameters


def _parse(parse, value):
    if value is None:
        return None
    try:
        return parse(value)
    except (UnitError, ValueError, TypeError):  # e.g. bs ranges '4k-16k', size '50%'
        return None


def _entry_errors(entry: dict) -> int:
    if "total_err" in entry:
        return int(entry["total_err"])
    return 1 if entry.get("error", 0) != 0 else 0


def _op_metrics(stats: dict) -> dict:
    metrics = {
        "bytes": stats.get("io_bytes"),
        "ios": stats.get("total_ios"),
        "duration_s": stats["runtime"] / 1000 if "runtime" in stats else None,
        "bw_bytes_s": _float(stats.get("bw_bytes")),
        "iops": _float(stats.get("iops")),
    }
    return {**metrics, **_latency_summary(stats.get("lat_ns") or {}), **_percentiles(stats)}


def _float(value):
    return None if value is None else float(value)


def _latency_summary(lat: dict) -> dict:
    if not lat.get("N"):  # fio prints zeros, not nulls, when nothing was measured
        return dict.fromkeys(_LATENCY_SUMMARY)
    return {
        "lat_mean_ns": float(lat["mean"]),
        "lat_stdev_ns": float(lat["stddev"]),
        "lat_min_ns": float(lat["min"]),
        "lat_max_ns": float(lat["max"]),
    }


def _percentiles(stats: dict) -> dict:
    for basis in ("lat", "clat"):
        bins = (stats.get(f"{basis}_ns") or {}).get("bins")
        if bins:
            values, counts = histogram.from_mapping(bins)
            return _histogram_percentiles(values, counts, basis)
    printed = (stats.get("clat_ns") or {}).get("percentile")
    if printed:
        return {
            **{
                column: _float(printed.get(f"{p:.6f}"))
                for p, column in zip(PERCENTILES, PERCENTILE_COLUMNS, strict=True)
            },
            "lat_basis": "clat",
            "pct_source": "tool",
            "hist_ns": None,
            "hist_count": None,
        }
    return _no_percentiles()


def _histogram_percentiles(values: list[int], counts: list[int], basis: str) -> dict:
    return {
        **dict(zip(PERCENTILE_COLUMNS, _percentile_values(values, counts), strict=True)),
        "lat_basis": basis,
        "pct_source": "histogram",
        "hist_ns": values,
        "hist_count": counts,
    }


def _percentile_values(values: list[int], counts: list[int]) -> list:
    return histogram.percentiles(values, counts, PERCENTILES)


def _no_percentiles() -> dict:
    return dict.fromkeys(_PERCENTILE_FIELDS)


# --- aggregate over hosts ----------------------------------------------------------------


def aggregate_hosts(rows: list[dict]) -> list[dict]:
    """Rows with host='all': one per (job base name, op) over every host and numjobs clone."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        if row.get("host") != ALL_HOSTS:
            groups.setdefault((_base_job(row.get("job")), row.get("op")), []).append(row)
    return [_aggregate(job, op, group) for (job, op), group in groups.items()]


def _base_job(job):
    match = _CLONE_LABEL.match(job) if job is not None else None
    return match.group("base") if match else job


def _aggregate(job, op, group: list[dict]) -> dict:
    return {
        **_shared_columns(group),
        "host": ALL_HOSTS,
        "job": job,
        "op": op,
        **{column: _sum(row.get(column) for row in group) for column in _SUMMED},
        "duration_s": _max(row.get("duration_s") for row in group),
        **_pooled_latency(group),
        **_merged_percentiles(group),
    }


def _shared_columns(group: list[dict]) -> dict:
    """Parameter/provenance columns: the common value, else None (or the values joined)."""
    columns = {key for row in group for key in row} - _METRICS - _PER_ROW_IDENTITY
    shared = {}
    for column in sorted(columns):
        values = list(dict.fromkeys(row.get(column) for row in group))
        if len(values) == 1:
            shared[column] = values[0]
        elif column in _JOINED_WHEN_DIFFERENT:
            shared[column] = "; ".join(str(value) for value in values if value is not None)
        else:
            shared[column] = None
    return shared


def _sum(values):
    present = [value for value in values if value is not None]
    return sum(present) if present else None


def _max(values):
    present = [value for value in values if value is not None]
    return max(present) if present else None


def _min(values):
    present = [value for value in values if value is not None]
    return min(present) if present else None


def _pooled_latency(group: list[dict]) -> dict:
    """Exact mean/stdev of the union of samples, from per-row mean, stdev and count.

    fio's stddev is the sample one (divides by n-1), so the pooled value is too.
    """
    measured = [row for row in group if row.get("lat_mean_ns") is not None and row.get("ios")]
    if len(measured) == 1:  # keep fio's own figures rather than re-derive them with rounding
        return {column: measured[0][column] for column in _LATENCY_SUMMARY}
    total = sum(row["ios"] for row in measured)
    if not total:
        return dict.fromkeys(_LATENCY_SUMMARY)
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
        return {column: measured[0].get(column) for column in _PERCENTILE_FIELDS}
    bases = {row.get("lat_basis") for row in measured}
    if len(bases) != 1 or any(row.get("hist_ns") is None for row in measured):
        return _no_percentiles()
    values, counts = histogram.merge((row["hist_ns"], row["hist_count"]) for row in measured)
    return _histogram_percentiles(values, counts, bases.pop())


def _has_latency(row: dict) -> bool:
    """False for ops that did I/O but measured nothing (e.g. the one failed write of a job)."""
    return row.get("pct_source") is not None or row.get("lat_mean_ns") is not None


# --- whole run ---------------------------------------------------------------------------


def parse_outputs(
    outputs: list[tuple[str | None, str]], *, base: dict, client_names: dict | None = None
) -> list[dict]:
    """Per-host rows of every output plus the host='all' rows over them."""
    rows = []
    for host, text in outputs:
        source = "fio client output" if host is None else f"fio output of host {host}"
        final = load_documents(text, source=source)[-1]  # earlier ones: --status-interval
        rows += rows_from_document(
            final, host=host, base=base, client_names=client_names, source=source
        )
    return rows + aggregate_hosts(rows)
