"""Parse fio ``json`` / ``json+`` output into rows of the common result schema.

Standalone runs give one output per host (``jobs[]``); a client/server run gives one output
with ``client_stats[]`` holding one entry per server plus ``All clients``: the ``all`` rows
are always recomputed from the per-host rows by :func:`aggregate_hosts`, and fio's own
``All clients`` bandwidth and IOPS are kept beside them (``tool_bw_bytes_s``,
``tool_iops``), never used by the reports. ``lat_mean_ns`` is always fio's ``lat_ns``
(submission to completion) and ``clat_mean_ns`` its ``clat_ns``; ``lat_basis`` names the
basis of the percentiles and histogram. ``error_code`` is the job's ``error`` (an errno).

CPU (``cpu_pct``, ``cpu_sys_pct``, basis ``process``): fio's ``usr_cpu`` + ``sys_cpu`` and
``sys_cpu`` of the job, percent of one CPU (its getrusage user and system time over
``job_runtime``), on each of the job's op rows. A ``group_reporting`` entry prints the mean
over the group's jobs (their summed times over their summed ``job_runtime``): its rows get
that times ``job_runtime`` / the entry's longest op ``runtime``, the sum over its jobs, as
the ``all`` rows sum the jobs and hosts. Without ``job_runtime`` (fio before 3.17) a group
entry's CPU stays null.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Sequence
from typing import Any, TypedDict

from storbench.core import histogram
from storbench.core.addresses import with_port
from storbench.core.aggregate import (
    LATENCY_SUMMARY,
    aggregate_hosts,
    histogram_percentiles,
    no_percentiles,
)
from storbench.core.schema_names import CPU_PROCESS, PERCENTILE_COLUMNS, PERCENTILES
from storbench.core.units import UnitError, parse_duration, parse_size
from storbench.tools.base import ToolOutputError
from storbench.tools.base import result_columns as _schema_columns

OPS = ("read", "write", "trim")
ALL_CLIENTS = "All clients"

# where a JSON report begins in fio's output (notes and status lines around it)
DOCUMENT_START = re.compile(r"(?:^|(?<=\r))\{", re.MULTILINE)
_DOCUMENT_START_BYTES = re.compile(DOCUMENT_START.pattern.encode(), re.MULTILINE)

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


def fio_bin_keys(bits: int = 6, groups: int = 29) -> dict[str, int]:
    """{key: value} of every latency bin fio 3.x can print in json+: stat.h's
    FIO_IO_U_PLAT_BITS and FIO_IO_U_PLAT_GROUP_NR, the value by stat.c's plat_idx_to_val."""
    per_group = 1 << bits
    values = list(range(2 * per_group))  # exact below 2 * per_group
    for index in range(2 * per_group, groups * per_group):
        error_bits = (index >> bits) - 1
        # the middle of the bucket: base + (k + 0.5) * 2**error_bits
        middle = ((index % per_group) << error_bits) + (1 << (error_bits - 1))
        values.append((1 << (error_bits + bits)) + middle)
    return {str(value): value for value in values}


FIO_BIN_KEYS = fio_bin_keys()


# --- documents ---------------------------------------------------------------------------


def load_documents(text: str | bytes, *, source: str = "fio output") -> list[dict]:
    """All JSON documents in fio's output text, skipping non-JSON lines around them.
    Bytes are read as UTF-8, with U+FFFD for what is not.

    A document cut short after the last complete one is an error: with --status-interval
    the complete ones are interim reports, and the cut one was the final report.
    """
    if (single := _only_document(text)) is not None:
        return [single]
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    decoder = json.JSONDecoder()
    documents = []
    position = 0
    cut_at = None  # where the last document that failed to decode began
    while match := DOCUMENT_START.search(text, position):
        try:
            document, end = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError as decode_error:
            cut_at = (match.start(), decode_error)
            position = match.start() + 1
            continue
        documents.append(document)
        position = end
        cut_at = None
    if not documents:
        raise FioOutputError(f"{source}: no complete fio JSON document ({_first_line(text)})")
    if cut_at is not None:
        start, error = cut_at
        raise FioOutputError(
            f"{source}: truncated: the JSON document starting at character {start} after the "
            f"{len(documents)} complete one(s) is cut short ({error.msg} at character {error.pos})"
        )
    return documents


def _only_document(text: str | bytes, typed_decoder=None) -> dict | None:
    """The output's only document (fio's usual output), its note lines cut, decoded in one
    pass (several times faster than json), bytes in place; None when there is none, more
    follows it (status-interval reports) or it does not decode (UTF-8 JSON, of
    typed_decoder()'s type when given): the general way reads it then."""
    start = _document_start(text)
    return None if start is None else _decoded(_document_text(text, start), typed_decoder)


def _decoded(document_text, typed_decoder=None) -> dict | None:
    """The JSON object in document_text (msgspec; typed_decoder() gives its type), else None."""
    try:
        import msgspec  # lazy: parsing only
    except ImportError:  # the standard library's decoder does the same, slower
        return None
    try:
        if typed_decoder is None:
            document = msgspec.json.decode(document_text)
        else:
            document = typed_decoder().decode(document_text)
    # DecodeError: also a value of another type than decoder's; ValueError: not UTF-8
    except (msgspec.DecodeError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def _document_text(text, start: int):
    """text[start:].rstrip() without the '<host> ...' note lines fio --client puts between
    the document's lines after its first (each cut with the line break before it), copied
    once: the output is large. Bytes are cut from a memoryview, uncopied without notes."""
    end = _stripped_end(text)
    note, newline = ("<", "\n") if isinstance(text, str) else (b"<", b"\n")
    cut = memoryview(text) if isinstance(text, bytes) else text
    pieces = []
    kept_from = searched_from = start
    # a one-character find scans at memchr speed; '<' is rare outside the note lines
    while (mark := text.find(note, searched_from, end)) != -1:
        searched_from = mark + 1
        if mark == start or text[mark - 1 : mark] != newline:
            continue
        pieces.append(cut[kept_from : mark - 1])
        line_end = text.find(newline, mark, end)
        kept_from = searched_from = end if line_end == -1 else line_end
    pieces.append(cut[kept_from:end])
    return pieces[0] if len(pieces) == 1 else text[:0].join(pieces)


# --- the final document, decoded into just what the rows are made of -------------------------


# Every field the rows read (the rest of fio's document is skipped, not built), in the types
# fio writes; a latency bin's key is decoded as its int value. A document of other types is
# read the general way (load_documents), whose checks name what is wrong.
class _Latency(TypedDict, total=False):
    N: Any
    mean: Any
    stddev: Any
    min: Any
    max: Any
    bins: dict[int, int]
    percentile: Any


class _Direction(TypedDict, total=False):
    io_bytes: Any
    total_ios: Any
    runtime: Any
    bw_bytes: Any
    iops: Any
    lat_ns: _Latency
    clat_ns: _Latency


_Job = TypedDict(
    "_Job",
    {
        "jobname": Any,
        "groupid": Any,
        "error": Any,
        "total_err": Any,
        "job options": dict,
        "hostname": Any,
        "port": Any,
        "read": _Direction,
        "write": _Direction,
        "trim": _Direction,
        "usr_cpu": Any,
        "sys_cpu": Any,
        "job_runtime": Any,
    },
    total=False,
)
_Final = TypedDict(
    "_Final",
    {"fio version": Any, "global options": dict, "jobs": list[_Job], "client_stats": list[_Job]},
    total=False,
)


@functools.cache
def _final_decoder():
    import msgspec  # lazy: parsing only

    return msgspec.json.Decoder(_Final)


def final_document(text: str | bytes, *, source: str) -> tuple[dict, histogram.BinValues]:
    """The output's last document (earlier ones are --status-interval reports) and the bin
    values of its histograms.

    fio's usual output (one document, the types fio writes) is decoded by a typed decoder
    into the fields the rows read, bin keys as ints: about 1.5 times as fast as decoding it
    whole. Anything else is read the general way.
    """
    if (typed := _only_document(text, _final_decoder)) is not None:
        return typed, histogram.INT_KEYS
    return load_documents(text, source=source)[-1], histogram.BinValues(FIO_BIN_KEYS)


def _document_start(text: str | bytes) -> int | None:
    if isinstance(text, bytes):
        first_bytes = _DOCUMENT_START_BYTES.search(text)
        return None if first_bytes is None else first_bytes.start()
    first = DOCUMENT_START.search(text)
    return None if first is None else first.start()


def _stripped_end(text: str | bytes, chunk: int = 4096) -> int:
    """len(text.rstrip()), without copying the text."""
    end = len(text)
    while end:
        tail = text[max(0, end - chunk) : end]
        kept = len(tail.rstrip())
        end -= len(tail) - kept
        if kept:
            break
    return end


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
    bin_values: histogram.BinValues | None = None,
) -> list[dict]:
    """Per-host rows (never 'all') from one final fio document.

    bin_values: its histograms' bin values (those of final_document); fio's by default.

    Output of another fio version parses when it has the fields read here (the rows record
    its version); otherwise FioOutputError names the source, the version and the field.
    """
    version = doc.get("fio version") if isinstance(doc, dict) else None
    try:
        bins = histogram.BinValues(FIO_BIN_KEYS) if bin_values is None else bin_values
        return _document_rows(doc, host, base, client_names or {}, source, bins)
    except FioOutputError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError) as error:
        raise FioOutputError(
            f"{source}: unexpected fio JSON layout{_of_version(version)} "
            f"({type(error).__name__}: {error})"
        ) from None


def _of_version(version) -> str:
    return f" (output of {version}; storbench reads fio 3.x json/json+)" if version else ""


def _document_rows(
    doc: dict, host, base: dict, client_names: dict, source: str, bin_values: histogram.BinValues
) -> list[dict]:
    entries = _host_entries(doc, host, client_names, source)
    if not entries:
        raise FioOutputError(f"{source}: the JSON document lists no jobs")
    labels = _job_labels(entries)
    inherited = {key: value for key, value in base.items() if key in _schema_columns()}
    global_options = doc.get("global options") or {}
    parameters = ParameterCache(base)
    rows = []
    for (entry_host, entry), job in zip(entries, labels, strict=True):
        options = {**global_options, **(entry.get("job options") or {})}
        shared = {
            **inherited,
            **parameters.of(options),
            "host": entry_host,
            "job": job,
            "errors": _entry_errors(entry),
            "error_code": int(entry.get("error") or 0),
        }
        if doc.get("fio version") is not None:
            shared["tool_version"] = doc["fio version"]
        shared.update(job_cpu(entry, _grouped(options)))
        for op in OPS:
            stats = _op_stats(entry, op, job, doc.get("fio version"), source)
            if stats["total_ios"] > 0:
                row = {**shared, "op": op}
                _add_op_metrics(row, stats, bin_values)
                rows.append(row)
    return rows


def _grouped(options: dict) -> bool:
    value = options.get("group_reporting")
    return value is not None and str(value).strip().lower() not in ("0", "false", "no", "off")


def job_cpu(entry: dict, grouped: bool) -> dict:
    """cpu_pct / cpu_sys_pct / cpu_basis of one job entry (the module's docstring says how);
    nothing when fio printed no figures or they are not numbers."""
    usr, sys_cpu = _measure(entry.get("usr_cpu")), _measure(entry.get("sys_cpu"))
    if usr is None or sys_cpu is None:
        return {}
    jobs = 1.0
    if grouped:
        job_runtime = _measure(entry.get("job_runtime"))
        runtimes = [
            runtime
            for op in OPS
            if type(stats := entry.get(op)) is dict
            and stats.get("total_ios")
            and (runtime := _measure(stats.get("runtime")))
        ]
        if job_runtime is None or not runtimes:
            return {}
        jobs = job_runtime / max(runtimes)  # the group's jobs, by their summed run time
    return {
        "cpu_pct": (usr + sys_cpu) * jobs,
        "cpu_sys_pct": sys_cpu * jobs,
        "cpu_basis": CPU_PROCESS,
    }


def _measure(value) -> float | None:
    """A finite number >= 0 as a float (not a bool), else None."""
    if type(value) in (int, float) and 0 <= value < math.inf:
        return float(value)
    return None


# what a direction's statistics must hold when it did I/O (fio 3.x json and json+)
REQUIRED_OP_FIELDS = ("io_bytes", "total_ios", "runtime", "bw_bytes", "iops")
RATE_FIELDS = ("bw_bytes", "iops")  # fio prints these as fractions; the others are counts
LATENCY_FIELDS = ("lat_ns", "clat_ns")


NUMBER_TYPES = (int, float)


def _op_stats(entry: dict, op: str, job: str, version, source: str) -> dict:
    """One direction's statistics, checked for the fields the rows are made of."""
    stats = entry.get(op)
    if type(stats) is dict and _plainly_valid(stats):
        return stats
    where = f"{source}: job {job!r}"
    if not isinstance(stats, dict):
        raise FioOutputError(f"{where} has no {op!r} statistics{_of_version(version)}")
    if "total_ios" not in stats:
        raise FioOutputError(f"{where}: no '{op}.total_ios'{_of_version(version)}")
    _check_number(stats, op, "total_ios", where, whole=True)
    if stats["total_ios"] == 0:
        return stats
    missing = [f"'{op}.{field}'" for field in REQUIRED_OP_FIELDS if field not in stats]
    if not any(field in stats for field in LATENCY_FIELDS):
        missing.append(" or ".join(f"'{op}.{field}'" for field in LATENCY_FIELDS))
    if missing:
        raise FioOutputError(f"{where}: no {', '.join(missing)}{_of_version(version)}")
    for field in REQUIRED_OP_FIELDS:
        _check_number(stats, op, field, where, whole=field not in RATE_FIELDS)
    return stats


def _plainly_valid(stats: dict) -> bool:
    """What _op_stats accepts, in the types fio writes: the usual case, checked quickly."""
    total = stats.get("total_ios")
    if not _plain_count(total):
        return False
    return total == 0 or (
        _plain_count(stats.get("io_bytes"))
        and _plain_count(stats.get("runtime"))
        and _plain_rate(stats.get("bw_bytes"))
        and _plain_rate(stats.get("iops"))
        and ("lat_ns" in stats or "clat_ns" in stats)
    )


def _plain_count(value) -> bool:
    return type(value) is int and value >= 0


def _plain_rate(value) -> bool:
    return type(value) in NUMBER_TYPES and value >= 0


def _check_number(stats: dict, op: str, field: str, where: str, *, whole: bool) -> None:
    value = stats[field]
    kinds = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not value >= 0:
        kind = "a whole number" if whole else "a number"
        raise FioOutputError(f"{where}: '{op}.{field}' is {value!r}, not {kind} >= 0")


def _host_entries(doc: dict, host, client_names: dict, source: str) -> list[tuple]:
    """(host, entry) for every job entry of the document."""
    if "client_stats" in doc:
        return [
            (client_host(entry, client_names), entry)
            for entry in doc["client_stats"]
            if entry.get("jobname") != ALL_CLIENTS
        ]
    if "jobs" in doc:
        return [(host, entry) for entry in doc["jobs"]]
    raise FioOutputError(f"{source}: JSON document has neither 'jobs' nor 'client_stats'")


def client_host(entry: dict, client_names: dict) -> str:
    """The configured name of a client_stats entry's host (client_names: {endpoint: name})."""
    hostname, port = entry.get("hostname"), entry.get("port")
    address = hostname if port is None else with_port(str(hostname), port)
    return str(client_names.get(address) or client_names.get(hostname) or address)


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


class ParameterCache:
    """The parameter columns of each distinct set of option values (a run's clones share
    theirs), parsed once."""

    _OPTION_NAMES = tuple(_FIO_OPTION_NAMES.get(column, column) for column in _PARAMETER_PARSERS)

    def __init__(self, base: dict):
        self.base = base
        self.parsed: dict[tuple, dict] = {}

    def of(self, options: dict) -> dict:
        values = tuple(map(options.get, self._OPTION_NAMES))
        key = (values, tuple(map(type, values)))  # 1, 1.0 and True are equal keys, not values
        try:
            return self.parsed[key]
        except KeyError:
            parameters = self.parsed[key] = _parameters(options, self.base)
            return parameters
        except TypeError:  # an unhashable option value: not fio's output, parsed every time
            return _parameters(options, self.base)


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


def _add_op_metrics(row: dict, stats: dict, bin_values: histogram.BinValues) -> None:
    row["bytes"] = stats.get("io_bytes")
    row["ios"] = stats.get("total_ios")
    row["duration_s"] = stats["runtime"] / 1000 if "runtime" in stats else None
    row["bw_bytes_s"] = _float(stats.get("bw_bytes"))
    row["iops"] = _float(stats.get("iops"))
    clat = stats.get("clat_ns") or {}
    row["clat_mean_ns"] = float(clat["mean"]) if clat.get("N") else None
    row.update(_latency_summary(stats.get("lat_ns") or {}))
    row.update(_percentiles(stats, bin_values))


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


BASES = (("lat", "lat_ns"), ("clat", "clat_ns"))  # the percentiles' basis, first found


def _percentiles(stats: dict, bin_values: histogram.BinValues) -> dict:
    for basis, field in BASES:
        bins = (stats.get(field) or {}).get("bins")
        if bins:
            values, counts = histogram.from_mapping(bins, bin_values)
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
    outputs: Sequence[tuple[str | None, str | bytes]],
    *,
    base: dict,
    client_names: dict | None = None,
    sources: list[str] | None = None,
) -> list[dict]:
    """Per-host rows of every output plus the host='all' rows over them.

    sources: the file each output was read from, named in errors.
    """
    rows = []
    totals: dict = {}
    for index, (host, text) in enumerate(outputs):
        source = "fio client output" if host is None else f"fio output of host {host}"
        if host == "":  # an imported file: no host name to give
            source = "fio output"
        if sources:
            source = f"{sources[index]} ({source})"
        final, bin_values = final_document(text, source=source)
        rows += rows_from_document(
            final,
            host=host,
            base=base,
            client_names=client_names,
            source=source,
            bin_values=bin_values,
        )
        totals.update(_all_clients(final))
    return rows + [_with_tool_totals(row, totals) for row in aggregate_hosts(rows)]


def _all_clients(doc: dict) -> dict:
    """{op: (bw, iops)} of fio's own 'All clients' entry (client/server output), kept beside
    storbench's sum: fio divides the summed I/O by the aggregate runtime, and some fio
    versions get it wrong, so the reports never use it."""
    entries = [e for e in doc.get("client_stats") or [] if e.get("jobname") == ALL_CLIENTS]
    if len(entries) != 1:
        return {}
    totals = {}
    for op in OPS:
        stats = entries[0].get(op) or {}
        if stats.get("total_ios"):
            totals[op] = (_float(stats.get("bw_bytes")), _float(stats.get("iops")))
    return totals


def _with_tool_totals(row: dict, totals: dict) -> dict:
    if row["op"] not in totals:
        return row
    bw, iops = totals[row["op"]]
    return {**row, "tool_bw_bytes_s": bw, "tool_iops": iops}
