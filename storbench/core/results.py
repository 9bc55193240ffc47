"""The one result schema every tool adapter produces, and atomic Parquet I/O.

One row per (experiment, run_id, iteration, host, job, op). ``host`` is a configured host
name, or ``all`` for the aggregate over every host of the run. ``op`` is one of
``read``, ``write``, ``trim`` (block/file tools) and ``delete``, ``list``, ``stat`` (object
tools). Units are in the column names: bytes, ns, seconds, bytes/s.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import math
import os
import sys
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from storbench.core.atomic import atomic_outputs, naming_write_errors
from storbench.core.schema_names import (  # noqa: F401  re-exported
    ALL_HOSTS,
    PERCENTILE_COLUMNS,
    PERCENTILES,
    percentile_column,
)
from storbench.core.secrets import scrub_command

SCHEMA_VERSION = 6

_IDENTITY = [
    ("experiment", pa.string()),
    ("run_id", pa.string()),
    ("iteration", pa.int32()),
    ("attempt", pa.int32()),
    ("tool", pa.string()),
    ("host", pa.string()),
    ("job", pa.string()),
    ("op", pa.string()),
]
# Where a run ran: its client step, how many hosts, which target, how far apart hosts started.
_PLACEMENT = [
    ("step", pa.string()),  # client step label ('h4', 'host-client07'); null when not stepped
    ("hosts_in_run", pa.int32()),
    ("target", pa.string()),  # storage target name
    ("start_skew_s", pa.float64()),  # latest minus earliest host start time of the iteration
    ("prep_state", pa.string()),  # preparation the target was in: 'afa, after flush'; v3
    ("loop", pa.string()),  # 'closed' (fixed queue depth) or 'open' (offered rate); v4
    ("offered_iops", pa.float64()),  # open loop: aggregate rate offered over hosts and jobs; v4
]
_PARAMETERS = [
    ("rw", pa.string()),
    ("bs", pa.int64()),  # bytes; object size for S3 tools
    ("iodepth", pa.int32()),
    ("numjobs", pa.int32()),
    ("rwmixread", pa.int32()),
    ("size", pa.int64()),  # bytes
    ("runtime_s", pa.float64()),  # configured runtime
    ("params_json", pa.string()),  # every parameter of the sweep point, JSON object
]
_METRICS = [
    ("bytes", pa.int64()),
    ("ios", pa.int64()),
    ("duration_s", pa.float64()),  # measured time the op ran
    ("bw_bytes_s", pa.float64()),
    ("iops", pa.float64()),
    ("lat_mean_ns", pa.float64()),
    ("lat_stdev_ns", pa.float64()),
    ("lat_min_ns", pa.float64()),
    ("lat_max_ns", pa.float64()),
    *[(name, pa.float64()) for name in PERCENTILE_COLUMNS],
    ("lat_basis", pa.string()),  # 'lat' (submission to completion) or 'clat' (completion)
    ("pct_source", pa.string()),  # 'histogram' (from merged bins) or 'tool' (as printed)
    ("hist_ns", pa.list_(pa.int64())),  # histogram bin values (ns), ascending
    ("hist_count", pa.list_(pa.int64())),  # count per bin, same length as hist_ns
    ("errors", pa.int64()),
    # v5: the completion-latency mean beside lat_mean_ns (always submission to completion),
    # the tool's own error code, and its own aggregate beside storbench's sum (host 'all')
    ("clat_mean_ns", pa.float64()),
    ("error_code", pa.int32()),
    ("tool_bw_bytes_s", pa.float64()),
    ("tool_iops", pa.float64()),
    # v6: CPU utilisation as the tool measured it (null where it measures none: warp,
    # GOSBench), user + system and its system (kernel) part, in percent, on a basis:
    # 'host': % of all the host's CPUs, every process on the host (elbencho: /proc/stat busy
    #   time, everything but idle and iowait, no user/system split; vdbench: /proc/stat user
    #   and system+irq+softirq); 0-100; an 'all' row is the mean over its hosts.
    # 'process': % of ONE CPU used by the tool's own processes (getrusage: fio per job, its
    #   usr_cpu + sys_cpu, a group_reporting entry summed over the group's jobs; iperf3 its
    #   process, host_total / host_system); 250 = 2.5 CPUs busy; an 'all' row sums its rows.
    ("cpu_pct", pa.float64()),
    ("cpu_sys_pct", pa.float64()),
    ("cpu_basis", pa.string()),
]
_PROVENANCE = [
    ("tool_version", pa.string()),
    ("job_file_sha256", pa.string()),
    ("command", pa.string()),
    ("raw_path", pa.string()),
    ("start_time", pa.string()),  # ISO 8601 UTC
    ("end_time", pa.string()),
    ("schema_version", pa.int32()),
]

SCHEMA = pa.schema(_IDENTITY + _PLACEMENT + _PARAMETERS + _METRICS + _PROVENANCE)
COLUMNS = tuple(SCHEMA.names)

# Per-interval series (fio status/log intervals, elbencho live CSV, vdbench intervals):
# one row per (run, iteration, host, job, op, interval); t_s is the interval's end.
TIMESERIES_SCHEMA = pa.schema(
    _IDENTITY
    + [
        ("t_s", pa.float64()),  # seconds since the workload started, at the interval's end
        ("interval_s", pa.float64()),
        ("bytes", pa.int64()),  # in this interval
        ("ios", pa.int64()),
        ("bw_bytes_s", pa.float64()),
        ("iops", pa.float64()),
        ("lat_mean_ns", pa.float64()),
        ("errors", pa.int64()),
        ("timestamp", pa.string()),  # ISO 8601 UTC of the interval's end, when the tool gives it
        ("source", pa.string()),  # the raw file the row came from
        ("schema_version", pa.int32()),
    ]
)
TIMESERIES_COLUMNS = tuple(TIMESERIES_SCHEMA.names)


class ResultValueError(ValueError):
    """A parsed value that does not fit its result column (a corrupt tool output)."""


_UNFIT = (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError)


def table_from_rows(rows: list[dict], schema: pa.Schema = SCHEMA) -> pa.Table:
    """Build a table in the schema; missing keys become nulls, unknown keys are an error, and
    a measure no run can have (negative, NaN, infinite) is a ResultValueError naming it. The
    command column has the values of its secret options replaced by ***."""
    unknown = {key for row in rows for key in row} - set(schema.names)
    if unknown:
        raise ValueError(f"rows have columns outside the result schema: {sorted(unknown)}")
    columns = {name: [row.get(name) for row in rows] for name in schema.names}
    columns["schema_version"] = [SCHEMA_VERSION] * len(rows)
    if "command" in columns:
        columns["command"] = [
            None if command is None else scrub_command(command) for command in columns["command"]
        ]
    if schema in (SCHEMA, TIMESERIES_SCHEMA):
        _check_measures(rows, columns)
    with _pandas_kept_out():
        try:
            return pa.table(columns, schema=schema)
        except _UNFIT as error:
            raise _unfit_value(rows, columns, schema, error) from None


# What a run measured: None (not measured) or a finite number >= 0, whatever the tool.
MEASURES = (
    "bytes",
    "ios",
    "duration_s",
    "bw_bytes_s",
    "iops",
    "lat_mean_ns",
    "lat_stdev_ns",
    "lat_min_ns",
    "lat_max_ns",
    *PERCENTILE_COLUMNS,
    "errors",
    "clat_mean_ns",
    "tool_bw_bytes_s",
    "tool_iops",
    "cpu_pct",
    "cpu_sys_pct",
)


def _check_measures(rows: list[dict], columns: dict) -> None:
    """Every measure None or a finite number >= 0, every histogram count too: one check for
    every tool's parser, on import and in the parse step alike."""
    for name in MEASURES:
        if name in columns:
            index = _first_impossible(columns[name])
            if index is not None:
                raise _impossible(rows[index], name, columns[name][index])
    for index, counts in enumerate(columns.get("hist_count") or ()):
        bad = _first_impossible(counts or ())
        if bad is not None:
            raise _impossible(rows[index], "hist_count", counts[bad])


def _first_impossible(values) -> int | None:
    for index, value in enumerate(values):
        if value is None or isinstance(value, str):  # a string: pyarrow names it, below
            continue
        try:
            if not 0 <= value < math.inf:  # False for NaN
                return index
        except TypeError:  # not a number: pyarrow names it, below
            continue
    return None


def _impossible(row: dict, column: str, value) -> ResultValueError:
    return ResultValueError(
        f"{_row_where(row)}: {column} = {_shown(value)} is not a number >= 0; is the tool's "
        "output corrupt?"
    )


def _row_where(row: dict) -> str:
    """'<raw file>: run R (host H)': where a row came from, as far as it says."""
    source = row.get("source") or row.get("raw_path")
    run = f"run {row.get('run_id')} (host {row.get('host')})"
    return f"{source}: {run}" if source else run


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:24]}... ({len(text)} characters)"


def _unfit_value(rows: list[dict], columns: dict, schema: pa.Schema, error) -> ResultValueError:
    """The first value that does not fit its column, named with its row's source file, its
    run and host."""
    for field in schema:
        for index, value in enumerate(columns[field.name]):
            try:
                pa.array([value], type=field.type)
            except _UNFIT:
                return ResultValueError(
                    f"{_row_where(rows[index])}: {field.name} = {_shown(value)} does not fit "
                    f"the result schema ({field.type}); is the tool's output corrupt?"
                )
    return ResultValueError(f"rows do not fit the result schema: {error}")


class _NoPandas(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "pandas":
            raise ModuleNotFoundError(f"{name} is kept out while rows become a table", name=name)
        return None


@contextlib.contextmanager
def _pandas_kept_out():
    """pyarrow imports pandas to ask whether each column is a pandas object: 0.2 s of CPU
    in every parse job, which has none. A process that has not imported pandas keeps it out
    for the call; pyarrow imports it later if anything in the process asks for it."""
    if "pandas" in sys.modules:
        yield
        return
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def write_parquet(table: pa.Table, path: str | os.PathLike) -> None:
    write_parquets([(table, path)])


def write_parquets(
    tables: Sequence[tuple[pa.Table, str | os.PathLike]],
    removing: Sequence[str | os.PathLike] = (),
) -> None:
    """Each (table, path); the files appear together or not at all, and the files in
    ``removing`` (a series that belonged to the rows replaced) go as they appear."""
    with atomic_outputs(*(path for _, path in tables), removing=removing) as temps:
        for (table, path), tmp in zip(tables, temps, strict=True):
            with naming_write_errors(path):
                pq.write_table(table, tmp)


def write_rows(rows: list[dict], path: str | os.PathLike) -> None:
    write_parquet(table_from_rows(rows), path)


def read_parquet(paths, schema: pa.Schema = SCHEMA) -> pa.Table:
    """Read one or more result files into one table in the schema: a column a file lacks (an
    earlier schema version) is null, one the schema lacks is left out."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    tables = [_read_one(path, schema) for path in paths]
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables)


class ResultsFileError(ValueError):
    """A file given as results that is not Parquet, or whose columns do not fit the schema."""


def _read_one(path, schema: pa.Schema) -> pa.Table:
    try:
        # not pq.read_table(path, schema=...): its dataset reader imports pandas (0.16 s a step)
        return in_schema(pq.ParquetFile(path).read(), schema)
    except pa.ArrowException as error:
        if isinstance(error, OSError):  # a missing or unreadable file: the caller names it
            raise
        raise ResultsFileError(f"{os.fspath(path)}: not a results Parquet file: {error}") from None


def in_schema(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table``'s columns in ``schema``'s order and types, null where it has none."""
    columns = [
        table.column(field.name).cast(field.type)
        if field.name in table.column_names
        else pa.nulls(table.num_rows, field.type)
        for field in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)
