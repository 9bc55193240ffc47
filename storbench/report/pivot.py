"""The guides' own tables: pivot tables whose rows, columns and values the config chooses.

``report.tables`` in the config names them, for example VAST's Tables 11–13 (tool × client
network × read/write) or WildFire's block size × threads with IOPS and bandwidth per cell::

    report:
      tables:
        wildfire_read:
          rows: [bs]
          columns: [numjobs]
          values: [iops, bw]
          where: {rw: randread}
          per: [system, storage_node]
          latency_unit: ms

A dimension is a result column (tool, experiment, target, step, hosts_in_run, rw, bs,
iodepth, numjobs, rwmixread, op, prep_state), a sweep parameter of the run, or a label the
experiment declares (``labels: {network: 100GbE}``). Each value is the mean over the
iterations of the system row (host 'all'); a target set's run counts by its sum over the
set's targets unless ``target`` is a dimension. Without ``op`` as a dimension, bandwidth and IOPS
of a mixed run are the sum of its read and write (the run's total), the mean latency is
weighted by I/O count, and percentiles are shown only where the run has one operation
(percentiles of different operations cannot be combined from their summaries).
``per: storage_node`` divides bandwidth and IOPS by the storage nodes of ``storage:``.
A table without ``bandwidth_unit`` shows GB/s, or GiB/s when ``report.units`` is binary.
A cell that several runs fall into shows each value, separated by ' / ', and the table's
note names the run parameters that differ there (add one of them as a dimension).
"""

from __future__ import annotations

import json

import pandas as pd

from storbench.core import report_units, units
from storbench.core.numbers import is_missing
from storbench.core.schema_names import PERCENTILE_COLUMNS, PIVOT_DIMENSIONS, PIVOT_PERCENTILES
from storbench.core.units import size_label
from storbench.report import tables
from storbench.report.paper_tables import column_decimals, fixed

RESULT_DIMENSIONS = PIVOT_DIMENSIONS
PERCENTILE_VALUES = PIVOT_PERCENTILES
LATENCY_UNITS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
BANDWIDTH_UNITS = {"GB/s": 1e9, "MB/s": 1e6, "GiB/s": 1024**3, "MiB/s": 1024**2}
PER = ("system", "storage_node")
DEFAULTS = {"latency_unit": "ms", "bandwidth_unit": "GB/s", "per": ["system"], "columns": []}
RUN_KEYS = ("experiment", "run_id", "job")
PARAM_KEYS = "_parameters"  # a record's sweep parameters and labels (the other dimensions)


def value_label(value: str, settings: dict) -> str:
    if value == "bw":
        return settings["bandwidth_unit"]
    if value == "iops":
        return "IOPS"
    unit = "µs" if settings["latency_unit"] == "us" else settings["latency_unit"]
    name = "mean latency" if value == "lat_mean" else value
    return f"{name} ({unit})"


def default_bandwidth_unit(meta: dict) -> str:
    """The campaign's large unit (GB/s or GiB/s), for a table that sets no bandwidth_unit."""
    label, _ = report_units.large_bandwidth_unit(report_units.units_of(meta))
    return label


def pivot_table(
    name: str, spec: dict, summary: pd.DataFrame, raw: pd.DataFrame, meta: dict
) -> tables.Table:
    """The table ``spec`` asks for, from the summary cells of the campaign's experiments."""
    settings = {**DEFAULTS, "bandwidth_unit": default_bandwidth_unit(meta), **spec}
    runs = _runs(summary, raw, meta, settings)
    unmatched = _unmatched_where(summary, raw, meta, settings) if runs.empty else []
    dimensions = [*settings["rows"], *settings["columns"]]
    per_op = "op" in dimensions
    if "target" not in dimensions:
        runs = _set_totals(runs)
    records = _run_records(runs, per_op)
    nodes = ((meta.get("storage") or {}).get("nodes")) or None
    column_keys = _ordered_keys(records, settings["columns"])
    row_keys = _ordered_keys(records, settings["rows"])
    values = [
        (value, per)
        for per in settings["per"]
        for value in settings["values"]
        if per == "system" or value in ("bw", "iops")
    ]
    cells: dict[tuple, list[dict]] = {}
    for record in records:
        key = (_key(record, settings["rows"]), _key(record, settings["columns"]))
        cells.setdefault(key, []).append(record)
    decimals = {
        (value, per): column_decimals(
            [_scaled(r, value, per, settings, nodes) for group in cells.values() for r in group]
        )
        for value, per in values
    }
    headers = [_dimension_label(d) for d in settings["rows"]]
    for column_key in column_keys:
        prefix = " ".join(
            _column_shown(d, v) for d, v in zip(settings["columns"], column_key, strict=True)
        )
        for value, per in values:
            label = value_label(value, settings) + (" per node" if per == "storage_node" else "")
            headers.append(f"{prefix} {label}".strip())
    rows = []
    crowded: set[str] = set()
    for row_key in row_keys:
        row: list[str | None] = [
            _shown(d, v) for d, v in zip(settings["rows"], row_key, strict=True)
        ]
        for column_key in column_keys:
            group = cells.get((row_key, column_key), [])
            if len(group) > 1:
                crowded |= _differing(group)
            for value, per in values:
                texts = [
                    fixed(_scaled(r, value, per, settings, nodes), decimals[(value, per)])
                    for r in group
                ]
                shown = [t for t in texts if t is not None]
                row.append(" / ".join(shown) if shown else None)
        rows.append(row)
    return tables.Table(
        columns=headers,
        rows=rows,
        caption=settings.get("title") or _caption(settings),
        label=f"tab:{name}",
        align="l" * len(settings["rows"]) + "r" * (len(headers) - len(settings["rows"])),
        notes=[*unmatched, *_notes(settings, crowded, nodes, per_op)],
    )


def pivot_tables(summary: pd.DataFrame | None, raw: pd.DataFrame | None, meta: dict) -> dict:
    """{table name: Table} of every table the config's ``report.tables`` names."""
    specs = meta.get("tables") or {}
    if summary is None or raw is None or not specs:
        return {}
    return {name: pivot_table(name, spec, summary, raw, meta) for name, spec in specs.items()}


def _runs(summary: pd.DataFrame, raw: pd.DataFrame, meta: dict, settings: dict) -> pd.DataFrame:
    """The summary cells of the chosen experiments with their parameters and labels."""
    chosen = settings.get("experiments")
    frame = summary if not chosen else summary[summary["experiment"].isin(chosen)]
    params = (
        raw.drop_duplicates(["experiment", "run_id"])
        .set_index(["experiment", "run_id"])["params_json"]
        .to_dict()
    )
    labels = {
        name: (experiment or {}).get("labels") or {}
        for name, experiment in (meta.get("experiments") or {}).items()
    }
    records = []
    for record in frame.to_dict("records"):
        extra = {
            **_params(params.get((record["experiment"], record["run_id"]))),
            **labels.get(record["experiment"], {}),
        }
        merged = {**{k: v for k, v in extra.items() if k not in record}, **record}
        merged[PARAM_KEYS] = tuple(extra)
        where = (settings.get("where") or {}).items()
        if all(_matches(k, merged.get(k), wanted) for k, wanted in where):
            records.append(merged)
    return pd.DataFrame.from_records(records)


def _params(text) -> dict:
    if is_missing(text):
        return {}
    try:
        loaded = json.loads(text)
    except (TypeError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _matches(dimension: str, value, wanted) -> bool:
    options = wanted if isinstance(wanted, list) else [wanted]
    if dimension == "bs":  # results hold bytes, configs write 4k
        options = [_bytes(option) for option in options]
    return any(_same(value, option) for option in options)


def _bytes(value):
    try:
        return units.parse_size(value)
    except units.UnitError:
        return value


def _same(value, option) -> bool:
    if is_missing(value):
        return False
    if str(value) == str(option):
        return True
    try:
        return float(value) == float(option)
    except (TypeError, ValueError):
        return False


def _set_totals(runs: pd.DataFrame) -> pd.DataFrame:
    """A target set's run only by its sum rows (target 'a+b+...'), not each member too."""
    if runs.empty or "target" not in runs:
        return runs
    members = runs["target"].fillna("").astype(str).str.count(r"\+")
    widest = members.groupby([runs["experiment"], runs["run_id"]]).transform("max")
    return runs[members == widest]


def _run_records(runs: pd.DataFrame, per_op: bool) -> list[dict]:
    """One record per run (its ops combined), or per run and op when op is a dimension."""
    if runs.empty:
        return []
    if per_op:
        return runs.to_dict("records")
    combined = []
    for _, group in runs.groupby(list(RUN_KEYS), sort=False, dropna=False):
        first = group.iloc[0].to_dict()
        ios = group["iops_mean"].fillna(0)
        latency = group["lat_mean_ns"]
        weight = ios[latency.notna()].sum()
        first["bw_bytes_s_mean"] = _sum(group["bw_bytes_s_mean"])
        first["iops_mean"] = _sum(group["iops_mean"])
        first["lat_mean_ns"] = (
            float((latency.fillna(0) * ios).sum() / weight) if weight else latency.mean()
        )
        if len(group) > 1:
            first["op"] = "+".join(str(op) for op in group["op"])
            for column in PERCENTILE_COLUMNS:
                first[column] = None
        combined.append(first)
    return combined


def _sum(values: pd.Series):
    present = values.dropna()
    return float(present.sum()) if len(present) else None


def _key(record: dict, dimensions: list[str]) -> tuple:
    return tuple(_hashable(record.get(d)) for d in dimensions)


def _hashable(value):
    if is_missing(value):
        return None
    if hasattr(value, "item"):  # numpy scalars from the summary frame
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value if isinstance(value, (str, int, float, bool)) else json.dumps(value)


def _ordered_keys(records: list[dict], dimensions: list[str]) -> list[tuple]:
    """Each key once, in the order the runs first give it (the config's sweep order)."""
    seen: dict[tuple, None] = {}
    for record in records:
        seen.setdefault(_key(record, dimensions), None)
    return list(seen) if dimensions else [()]


def _shown(dimension: str, value) -> str:
    if value is None:
        return "–"
    if dimension == "bs" and isinstance(value, int):
        return size_label(value)
    return str(value)


def _column_shown(dimension: str, value) -> str:
    """'iodepth 4', 'bs 64k' (a number says nothing alone); 'randread', '100GbE' as they are."""
    text = _shown(dimension, value)
    return f"{dimension} {text}" if isinstance(value, (int, float)) else text


def _dimension_label(dimension: str) -> str:
    return {"numjobs": "threads (numjobs)", "hosts_in_run": "hosts"}.get(dimension, dimension)


def _scaled(record: dict, value: str, per: str, settings: dict, nodes) -> float | None:
    if value == "bw":
        number = record.get("bw_bytes_s_mean")
        unit = BANDWIDTH_UNITS[settings["bandwidth_unit"]]
    elif value == "iops":
        number, unit = record.get("iops_mean"), 1.0
    else:
        column = "lat_mean_ns" if value == "lat_mean" else PERCENTILE_VALUES[value]
        number, unit = record.get(column), LATENCY_UNITS[settings["latency_unit"]]
    if number is None or is_missing(number):
        return None
    if per == "storage_node":
        if not nodes:
            return None
        number = float(number) / nodes
    return float(number) / unit


def _differing(group: list[dict]) -> set[str]:
    """The dimensions and run parameters whose values differ between the runs of a cell."""
    keys = set(RESULT_DIMENSIONS).union(*(r.get(PARAM_KEYS, ()) for r in group))
    return {key for key in keys if len({_hashable(r.get(key)) for r in group}) > 1}


def _caption(settings: dict) -> str:
    values = ", ".join(value_label(v, settings) for v in settings["values"])
    by = " × ".join(_dimension_label(d) for d in [*settings["rows"], *settings["columns"]])
    return f"{values} by {by}" if by else values


def _unmatched_where(summary, raw, meta: dict, settings: dict) -> list[str]:
    """A table left empty by its where (a value misspelt: rw: randred) says what there is."""
    where = settings.get("where") or {}
    if not where:
        return []
    every = _runs(summary, raw, meta, {**settings, "where": {}})
    found = []
    for key in where:
        values = every[key].dropna().unique() if key in every else []
        found.append(f"{key}: {', '.join(sorted(map(str, values))) or 'none'}")
    return [f"No run matches where {where}; the runs have {'; '.join(found)}."]


def _notes(settings: dict, crowded: set[str], nodes, per_op: bool) -> list[str]:
    notes = [
        "Mean over the iterations of each run's system total (all hosts). "
        + ("" if per_op else "A mixed run's bandwidth and IOPS are its read and write summed.")
    ]
    if "storage_node" in settings["per"]:
        notes.append(
            f"Per node: divided by the {nodes} storage nodes of storage.nodes."
            if nodes
            else "Per node: empty, the config declares no storage.nodes."
        )
    if crowded:
        notes.append(
            "Several runs share a cell (values separated by ' / '); they differ in "
            + ", ".join(sorted(crowded))
            + ": add one of them to rows, columns or where."
        )
    return notes
