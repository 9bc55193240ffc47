"""fio per-interval data as time-series rows (``results.TIMESERIES_COLUMNS``).

Two sources:

- ``--status-interval`` JSON output: concatenated documents whose job counters are
  cumulative since the job started. A row is the difference between consecutive documents
  (the last document is the final report, so the intervals add up to fio's totals);
  ``t_s`` is the direction's ``runtime`` (ms), ``timestamp`` the document's
  ``timestamp_ms``, the interval's latency mean comes from the ``lat_ns`` sums (mean x N).
  Documents where a job's runtime did not advance (not started yet, or done) give no row;
  counters that go backwards (the reset at the end of ``ramp_time``) start a new baseline.
- ``write_bw_log`` / ``write_iops_log`` / ``write_lat_log`` files, named
  ``<prefix>_<kind>[.<job number>].log``, lines ``time_ms, value, ddir, bs[, ...]``: one row
  per line, carrying that log's one value (bw KiB/s -> bytes/s, IO/s, total latency ns);
  ``interval_s`` is the time since the previous sample of the same direction (fio's
  ``log_avg_msec`` window, shorter at job end; null for a repeated timestamp). ``clat``,
  ``slat`` and histogram logs are skipped: the only latency column is total latency.

fio's terse output is not read: it lacks I/O counts, so per-interval ios and latency
could not be derived exactly. Rows are per host and job; no ``all`` rows, as hosts'
intervals do not line up in time.
"""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from typing import NamedTuple

from storbench.tools.base import ToolOutputError
from storbench.tools.base import timeseries_columns as _timeseries_columns
from storbench.tools.fio_json import (
    OPS,
    FioOutputError,
    _host_entries,
    _job_labels,
    load_documents,
)

LOG_KIB = 1024  # fio's bw logs are in KiB/s
_LOG_NAME = re.compile(
    r"^(?P<prefix>.+)_(?P<kind>clat_hist|lat_hist|bw|iops|clat|slat|lat)(?:\.(?P<job>\d+))?\.log$"
)
_LOG_COLUMN = {"bw": "bw_bytes_s", "iops": "iops", "lat": "lat_mean_ns"}
_LOG_SCALE = {"bw": LOG_KIB, "iops": 1, "lat": 1}
_SKIPPED_LOGS = frozenset({"clat", "slat", "clat_hist", "lat_hist"})
_EPOCH_MS = 10**12  # log_unix_epoch stamps; runtimes are never this long


# --- --status-interval JSON --------------------------------------------------------------


def rows_from_status_interval(
    text: str, *, host: str | None, base: dict, source: str | None = None
) -> list[dict]:
    """Per-interval rows of every job and direction from ``--status-interval`` JSON output."""
    source = source or base.get("raw_path") or "fio output"
    try:
        documents = load_documents(text, source=source)
    except FioOutputError as error:
        raise ToolOutputError(str(error)) from error
    snapshots = [_labelled_entries(document, host, source) for document in documents]
    inherited = _inherited(base)
    rows = []
    for key, final in snapshots[-1].items():
        for op in OPS:
            if (final.get(op) or {}).get("total_ios", 0) > 0:
                series = [
                    (document, entries.get(key))
                    for document, entries in zip(documents, snapshots, strict=True)
                ]
                rows += _interval_rows(series, op, key, inherited, source)
    return rows


def _labelled_entries(document: dict, host, source: str) -> dict:
    try:
        entries = _host_entries(document, host, {}, source)
    except FioOutputError as error:
        raise ToolOutputError(str(error)) from error
    labels = _job_labels(entries)
    return {
        (entry_host, label): entry
        for (entry_host, entry), label in zip(entries, labels, strict=True)
    }


def _interval_rows(series, op: str, key: tuple, inherited: dict, source: str) -> list[dict]:
    host, job = key
    previous = _ZERO
    rows = []
    for document, entry in series:
        if entry is None:
            continue
        current = _counters(entry.get(op) or {})
        if any(now < before for now, before in zip(current, previous, strict=True)):
            previous = _ZERO  # stats were reset when ramp_time ended
        interval_ms = current.runtime_ms - previous.runtime_ms
        if interval_ms <= 0:
            continue
        interval_s = interval_ms / 1000
        ios = current.ios - previous.ios
        latencies = current.lat_n - previous.lat_n
        rows.append(
            {
                **inherited,
                "host": host,
                "job": job,
                "op": op,
                "t_s": current.runtime_ms / 1000,
                "interval_s": interval_s,
                "bytes": current.bytes - previous.bytes,
                "ios": ios,
                "bw_bytes_s": (current.bytes - previous.bytes) / interval_s,
                "iops": ios / interval_s,
                "lat_mean_ns": (
                    (current.lat_sum - previous.lat_sum) / latencies if latencies > 0 else None
                ),
                "timestamp": _iso_ms(document.get("timestamp_ms")),
                "source": source,
            }
        )
        previous = current
    return rows


class _Counters(NamedTuple):
    """Cumulative counters of one direction since the job started."""

    runtime_ms: int
    bytes: int
    ios: int
    lat_n: int
    lat_sum: float


_ZERO = _Counters(0, 0, 0, 0, 0.0)


def _counters(stats: dict) -> _Counters:
    lat = stats.get("lat_ns") or {}
    count = lat.get("N") or 0
    return _Counters(
        runtime_ms=stats.get("runtime", 0),
        bytes=stats.get("io_bytes", 0),
        ios=stats.get("total_ios", 0),
        lat_n=count,
        lat_sum=float(lat.get("mean", 0.0)) * count,
    )


def _iso_ms(timestamp_ms) -> str | None:
    if timestamp_ms is None:
        return None
    moment = datetime.datetime.fromtimestamp(timestamp_ms / 1000, datetime.UTC)
    return moment.isoformat(timespec="milliseconds")


# --- write_*_log files -------------------------------------------------------------------


def rows_from_logs(paths, *, host: str | None, base: dict) -> list[dict]:
    """One row per sample line of fio's bw/iops/lat logs; clat/slat/histogram logs skipped."""
    inherited = _inherited(base)
    rows = []
    for path in map(Path, paths):
        match = _LOG_NAME.match(path.name)
        if not match:
            raise ToolOutputError(
                f"{path}: not a fio log file name (<prefix>_bw|iops|lat[.<job>].log)"
            )
        if match["kind"] in _SKIPPED_LOGS:
            continue
        job = match["prefix"] if match["job"] is None else f"{match['prefix']}.{match['job']}"
        shared = {**inherited, "host": host, "job": job, "source": str(path)}
        rows += [{**shared, **sample} for sample in _log_samples(path, match["kind"])]
    return rows


def _log_samples(path: Path, kind: str) -> list[dict]:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as error:
        raise ToolOutputError(f"{path}: cannot read: {error.strerror}") from error
    if not any(line.strip() for line in lines):
        raise ToolOutputError(f"{path}: empty fio log")
    column, scale = _LOG_COLUMN[kind], _LOG_SCALE[kind]
    last_ms: dict[str, int] = {}
    samples = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        time_ms, value, op = _log_line(path, number, line)
        interval_ms = time_ms - last_ms.get(op, 0)
        last_ms[op] = time_ms
        samples.append(
            {
                "op": op,
                "t_s": time_ms / 1000,
                "interval_s": interval_ms / 1000 if interval_ms > 0 else None,
                column: float(value * scale),
            }
        )
    return samples


def _log_line(path: Path, number: int, line: str) -> tuple[int, float, str]:
    fields = [field.strip() for field in line.split(",")]
    try:
        if len(fields) < 4:
            raise ValueError("fewer than 4 fields")
        time_ms, value, direction = int(fields[0]), float(fields[1]), int(fields[2])
        if direction not in range(len(OPS)):
            raise ValueError(f"data direction {direction} is not 0, 1 or 2")
        op = OPS[direction]
    except ValueError as error:
        raise ToolOutputError(
            f"{path}:{number}: not a fio log line (time_ms, value, ddir, bs, ...): "
            f"{line[:80]!r} ({error})"
        ) from error
    if time_ms >= _EPOCH_MS:
        raise ToolOutputError(f"{path}:{number}: log_unix_epoch timestamps are not supported")
    return time_ms, value, op


# --- shared ------------------------------------------------------------------------------


def _inherited(base: dict) -> dict:
    return {key: value for key, value in base.items() if key in _timeseries_columns()}
