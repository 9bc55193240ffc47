"""Parse fio ``json`` / ``json+`` output into rows of the common result schema.

Standalone runs give one output per host (``jobs[]``); a client/server run gives one output
with ``client_stats[]`` holding one entry per server plus ``All clients``, which is skipped:
the ``all`` rows are always recomputed from the per-host rows by :func:`aggregate_hosts`.
"""

from __future__ import annotations

import json
import re

from storbench import histogram
from storbench.aggregate import (
    LATENCY_SUMMARY,
    aggregate_hosts,
    histogram_percentiles,
    no_percentiles,
)
from storbench.schema_names import PERCENTILE_COLUMNS, PERCENTILES
from storbench.tools.base import ToolOutputError
from storbench.tools.base import result_columns as _schema_columns
from storbench.units import UnitError, parse_duration, parse_size

OPS = ("read", "write", "trim")
ALL_CLIENTS = "All clients"

_DOCUMENT_START = re.compile(r"(?:^|(?<=\r))\{", re.MULTILINE)

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


class FioOutputError(ToolOutputError):
    pass


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
        return dict.fromkeys(LATENCY_SUMMARY)
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
            return histogram_percentiles(values, counts, basis)
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
    return no_percentiles()


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
