"""The report's paper tables, each exported as CSV, Markdown, LaTeX and HTML (report.tables).

``report_tables(raw, summary)`` returns {stem: Table}:

- ``bandwidth``: tool × access pattern × op × hosts in the run, GB/s and GiB/s (both on
  purpose, report.units first) with the 95 % interval on the log scale (geometric mean);
- ``latency``: mean latency (weighted by I/O count) and p50 … p99.99 from merged histograms;
- ``prep_state``: IOPS and mean latency per workload × preparation state (only when the rows
  record a state);
- ``per_host``: IOPS and throughput of every client host (node) against host 'all' (system).

Bandwidth is GB/s, or GiB/s with ``units`` binary (storbench.core.report_units).

Numbers are text with a fixed number of decimals per column (three significant digits for the
column's smallest value), so CSV, Markdown, LaTeX and HTML show the same digits; a missing
value is an empty cell.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from storbench.analysis import scaling, stats
from storbench.core import report_units
from storbench.core.numbers import NO_VALUE, is_missing, scaled  # noqa: E402
from storbench.core.results import ALL_HOSTS, PERCENTILE_COLUMNS, PERCENTILES
from storbench.core.units import size_label
from storbench.report import tables, tool_wording

NS_PER_US = 1000.0
SIGNIFICANT_DIGITS = 3
MAX_DECIMALS = 6
TABLE_DIR = "tables"
STEMS = ("bandwidth", "latency", "prep_state", "per_host")
SEQUENTIAL = {"read", "write", "rw", "readwrite", "trim", "trimwrite"}
RANDOM = {"randread", "randwrite", "randrw", "randtrim"}
SYSTEM = "system"
NODE = "node"
INTERVAL_NAME = "95 % interval on the log scale (geometric mean)"
INTERVAL_METHOD = (
    "exp(m ± t(0.975, n − 1) · s / √n), m and s the mean and sample sd of the logarithms of "
    "the n iteration values: an interval for the geometric mean, always above 0 and wider "
    "above than below (the mean shown is the arithmetic mean, never below the geometric mean, "
    "so with widely spread iterations it can lie above the interval)"
)
INTERVAL_FALLBACK = (
    "Where an iteration measured 0 the plain Student t interval mean ± t(0.975, n − 1) · sd / "
    "√n is used instead, a lower bound under 0 shown as 0."
)
CI_NOTE = f"CI: two-sided {INTERVAL_NAME}, {INTERVAL_METHOD}; empty for n = 1. {INTERVAL_FALLBACK}"
SMALL_N = 3  # iterations below which a 95 % interval says little (flagged, never hidden)
SMALL_N_MARK = "§"
SMALL_N_NOTE = (
    f"{SMALL_N_MARK} n below {SMALL_N}: an interval over so few iterations is wide (with n = 2 "
    "its half-width uses t(0.975, 1) = 12.7) and rests on the normal assumption; read it as "
    "indicative only."
)
MISSING_NOTE = "An empty cell: value not available."


def access_pattern(rw) -> str | None:
    """'sequential' for read/write/rw, 'random' for randread/randwrite/randrw, else None."""
    if rw in SEQUENTIAL:
        return "sequential"
    if rw in RANDOM:
        return "random"
    return None


def report_tables(
    raw: pd.DataFrame, summary: pd.DataFrame, units: str = report_units.DEFAULT_UNITS
) -> dict[str, tables.Table]:
    """{stem: Table} of STEMS; 'prep_state' only when some row records a preparation state."""
    built = {
        "bandwidth": bandwidth_table(summary, units),
        "latency": latency_table(summary),
        "prep_state": prep_state_table(summary),
        "per_host": per_host_table(raw, summary, units),
    }
    return {stem: table for stem, table in built.items() if table is not None}


def write_tables(built: dict[str, tables.Table], out_dir: Path) -> dict[str, Path]:
    """Write every table into out_dir/tables as csv, md, tex and html; {'tables/x.csv': path}.

    Files of a table not built this time (a state table from an earlier build) are removed.
    """
    table_dir = Path(out_dir) / TABLE_DIR
    table_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for stem in STEMS:
        if stem not in built:
            for suffix in tables.SUFFIXES:
                (table_dir / f"{stem}.{suffix}").unlink(missing_ok=True)
            continue
        for name, path in tables.write_all(built[stem], table_dir, stem).items():
            written[f"{TABLE_DIR}/{name}"] = path
    return written


# ---------------------------------------------------------------------------------------
# Formatting


def column_decimals(values, significant: int = SIGNIFICANT_DIGITS) -> int:
    """Decimals that give the smallest non-zero |value| ``significant`` significant digits."""
    present = [abs(float(v)) for v in values if not is_missing(v) and float(v) != 0]
    if not present:
        return 0
    exponent = math.floor(math.log10(min(present)))
    return max(0, min(MAX_DECIMALS, significant - 1 - exponent))


def non_negative(value):
    """A lower bound of a quantity that is never negative (missing stays missing)."""
    return value if is_missing(value) else max(float(value), 0.0)


def fixed(value, decimals: int) -> str | None:
    """'1234.57' (decimals=2, no thousands separator: CSV and LaTeX read it); missing -> None."""
    return None if is_missing(value) else f"{float(value):.{decimals}f}"


def small_n_text(iterations) -> str | None:
    """'2§' below SMALL_N iterations, else '5'; missing -> None."""
    if is_missing(iterations):
        return None
    count = int(iterations)
    return f"{count}{SMALL_N_MARK}" if count < SMALL_N else str(count)


def _int_text(value) -> str | None:
    return None if is_missing(value) else str(int(value))


def _bs_text(value) -> str | None:
    return None if is_missing(value) else size_label(int(value))


MIXED_RW = {"rw", "readwrite", "randrw"}


def rw_label(row) -> str:
    """'randrw (70 % read)' for mixed workloads, the rw name otherwise; NO_VALUE for a row
    without an access pattern (elbencho's mkdir, an iperf3 stream)."""
    if is_missing(row["rw"]):
        return NO_VALUE
    if row["rw"] in MIXED_RW and not is_missing(row.get("rwmixread")):
        return f"{row['rw']} ({int(row['rwmixread'])} % read)"
    return str(row["rw"])


def _metric_columns(frame: pd.DataFrame, column: str, unit: float, label: str) -> dict:
    """{header: [text per row]} for the mean and CI of ``column`` scaled by ``unit``."""
    means = [scaled(v, unit) for v in frame[f"{column}_mean"]]
    decimals = column_decimals(means)
    return {
        label: [fixed(v, decimals) for v in means],
        f"{label} CI low": [
            fixed(non_negative(scaled(v, unit)), decimals) for v in frame[f"{column}_ci_low"]
        ],
        f"{label} CI high": [fixed(scaled(v, unit), decimals) for v in frame[f"{column}_ci_high"]],
    }


def _bandwidth_columns(frame: pd.DataFrame, units: str) -> dict:
    label, divisor = report_units.large_bandwidth_unit(units)
    return _metric_columns(frame, "bw_bytes_s", divisor, label)


def _table(columns: dict[str, list], text_columns: int, **kwargs) -> tables.Table:
    """A Table from {header: cells}; the first ``text_columns`` columns left-aligned."""
    headers = list(columns)
    rows = [list(cells) for cells in zip(*columns.values(), strict=True)] if columns else []
    align = "l" * text_columns + "r" * (len(headers) - text_columns)
    return tables.Table(columns=headers, rows=rows, align=align, **kwargs)


def _workload(frame: pd.DataFrame) -> dict[str, list]:
    return {
        "Run": [str(v) for v in frame["run_id"]],
        "rw": [None if is_missing(row["rw"]) else rw_label(row) for _, row in frame.iterrows()],
        "bs": [_bs_text(v) for v in frame["bs"]],
        "iodepth": [_int_text(v) for v in frame["iodepth"]],
        "numjobs": [_int_text(v) for v in frame["numjobs"]],
    }


# ---------------------------------------------------------------------------------------
# Tables


def bandwidth_table(summary: pd.DataFrame, units: str = report_units.DEFAULT_UNITS) -> tables.Table:
    """Per cell, ordered by tool, pattern, op and hosts in the run: GB/s and GiB/s (the
    configured system first), mean and CI."""
    frame = summary.assign(
        pattern=[access_pattern(rw) for rw in summary["rw"]],
        _hosts=summary["hosts_in_run"].astype("Float64"),
    )
    frame = frame.sort_values(
        ["tool", "pattern", "op", "_hosts"], kind="stable", na_position="last"
    )
    columns = {
        "Tool": [str(v) for v in frame["tool"]],
        "Pattern": [v or "" for v in frame["pattern"]],
        "op": [str(v) for v in frame["op"]],
        "Hosts": [_int_text(v) for v in frame["hosts_in_run"]],
        **_workload(frame),
        "n": [small_n_text(v) for v in frame["n"]],
        **_bandwidth_columns(frame, units),
        **_bandwidth_columns(frame, report_units.other_system(units)),
    }
    return _table(
        columns,
        9,
        caption="Bandwidth by tool, access pattern, operation and hosts in the run "
        f"(aggregate over the hosts; {BOTH_UNITS_NOTE[report_units.checked(units)]}).",
        label="tab:bandwidth",
        notes=(f"Mean over n iterations. {CI_NOTE}", SMALL_N_NOTE, MISSING_NOTE),
    )


LATENCY_HEADERS = [f"p{p:g} µs" for p in PERCENTILES]


def latency_table(summary: pd.DataFrame) -> tables.Table:
    """Per cell: mean latency weighted by I/O count and percentiles of the merged histograms."""
    values = {
        "Mean µs": [scaled(v, NS_PER_US) for v in summary["lat_mean_ns"]],
        **{
            header: [scaled(v, NS_PER_US) for v in summary[column]]
            for header, column in zip(LATENCY_HEADERS, PERCENTILE_COLUMNS, strict=True)
        },
    }
    decimals = column_decimals([v for column in values.values() for v in column])
    columns = {
        **_workload(summary),
        "op": [str(v) for v in summary["op"]],
        "n": [_int_text(v) for v in summary["n"]],
        **{header: [fixed(v, decimals) for v in cells] for header, cells in values.items()},
    }
    basis = ", ".join(sorted({str(b) for b in summary["lat_basis"].dropna()})) or "unknown"
    return _table(
        columns,
        6,
        caption=f"Latency per run and operation (µs; latency basis: {basis}).",
        label="tab:latency",
        notes=(
            "Mean weighted by the I/O count of each iteration, on the latency basis (with "
            "basis clat, fio's completion latency mean). Percentiles are never averaged: "
            "the histograms of all hosts and iterations are merged by summing bin counts and a "
            "percentile is the first bin whose cumulative count reaches it; a run of one "
            "iteration without histograms shows the tool's own percentiles.",
            *filter(None, [tool_wording.resolution_note(summary)]),
            MISSING_NOTE,
        ),
    )


def prep_state_table(summary: pd.DataFrame) -> tables.Table | None:
    """IOPS (mean and CI) and mean latency per workload × preparation state; None without any."""
    if "prep_state" not in summary or not summary["prep_state"].notna().any():
        return None
    frame = summary.sort_values(
        ["rw", "bs", "iodepth", "numjobs", "op", "prep_state"], kind="stable", na_position="last"
    )
    iops = [scaled(v, 1.0) for v in frame["iops_mean"]]
    decimals = column_decimals(iops)
    latency = [scaled(v, NS_PER_US) for v in frame["lat_mean_ns"]]
    lat_decimals = column_decimals(latency)
    columns = {
        **_workload(frame),
        "op": [str(v) for v in frame["op"]],
        "State": [v if isinstance(v, str) else "" for v in frame["prep_state"]],
        "n": [small_n_text(v) for v in frame["n"]],
        "IOPS": [fixed(v, decimals) for v in iops],
        "IOPS CI low": [fixed(non_negative(v), decimals) for v in frame["iops_ci_low"]],
        "IOPS CI high": [fixed(v, decimals) for v in frame["iops_ci_high"]],
        "Mean lat µs": [fixed(v, lat_decimals) for v in latency],
    }
    return _table(
        columns,
        7,
        caption="IOPS and mean latency of each workload by preparation state of the target.",
        label="tab:prep-state",
        notes=(
            f"Mean over n iterations; latency weighted by I/O count. {CI_NOTE}",
            SMALL_N_NOTE,
            "An empty state: the run recorded no preparation state.",
        ),
    )


CPU_HEADER = "CPU %"
CPU_NOTE = (
    "CPU %: user + system CPU as the tool measured it (mean over the iterations), and of "
    "what: 'host' is % of all of a host's CPUs, every process on it (elbencho, vdbench; a "
    "system row is the mean over its hosts); 'process' is % of one CPU used by the tool's "
    "own processes (fio's jobs, iperf3; a system row is their sum: 200 = two CPUs busy). "
    "A mixed job's CPU is the job's, on each of its operations' rows (not to be added). "
    "Empty: the tool measures none (warp, GOSBench)."
)


def has_cpu(frame: pd.DataFrame) -> bool:
    """Whether any row of a summary frame has a CPU figure (a column worth showing)."""
    return "cpu_pct" in frame and bool(frame["cpu_pct"].notna().any())


def cpu_text(pct, basis) -> str | None:
    """'51.6 host', '57.0 process'; None without a figure."""
    if is_missing(pct) or is_missing(basis) or basis is None:
        return None
    return f"{pct:,.1f} {basis}"


PER_HOST_COLUMNS = ("scope", "host")
# Above this many hosts, a report page lists a run's slowest and fastest host and their
# aggregate; the figures show the hosts' spread, the exported files every host.
MAX_LISTED_HOSTS = 12
LISTED_NODES_NOTE = (
    f"A run on more than {MAX_LISTED_HOSTS} hosts: its slowest and fastest node (by mean "
    "bandwidth) above the system; every node is in the exported files."
)


def per_host_summary(raw: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """stats.summarize per client host (scope 'node') and for host 'all' (scope 'system').

    Each cell's node rows (hosts in natural order) come right before its system row, cells in
    the order of ``summary``.
    """
    hosts = sorted({str(h) for h in raw["host"].dropna()} - {ALL_HOSTS}, key=scaling.natural_key)
    parts = [stats.summarize_each_host(raw, hosts).assign(scope=NODE)]
    parts.append(summary.assign(scope=SYSTEM, host=ALL_HOSTS))
    frame = pd.concat([p for p in parts if not p.empty] or parts[-1:], ignore_index=True)
    keys = list(stats.CELL_KEYS)
    order = {tuple(row): i for i, row in enumerate(summary[keys].itertuples(index=False))}
    position = [order.get(tuple(row), len(order)) for row in frame[keys].itertuples(index=False)]
    frame = frame.assign(
        _cell=position,
        _system=frame["scope"] == SYSTEM,
        _host=[hosts.index(h) if h in hosts else -1 for h in frame["host"]],
    )
    frame = frame.sort_values(["_cell", "_system", "_host"], kind="stable")
    return frame.drop(columns=["_cell", "_system", "_host"]).reset_index(drop=True)


BOTH_UNITS_NOTE = {
    report_units.DECIMAL: "1 GB = 10^9 bytes, 1 GiB = 2^30 bytes",
    report_units.BINARY: "1 GiB = 2^30 bytes, 1 GB = 10^9 bytes",
}


def per_host_table(
    raw: pd.DataFrame, summary: pd.DataFrame, units: str = report_units.DEFAULT_UNITS
) -> tables.Table:
    """IOPS and GB/s or GiB/s (mean and CI) of every client host and of the system (host
    'all')."""
    frame = per_host_summary(raw, summary)
    shown = _slowest_and_fastest_nodes(frame, MAX_LISTED_HOSTS)
    iops = list(frame["iops_mean"])
    decimals = column_decimals(iops)
    columns = {
        **_workload(frame),
        "op": [str(v) for v in frame["op"]],
        "Scope": list(frame["scope"]),
        "Host": list(frame["host"]),
        "n": [small_n_text(v) for v in frame["n"]],
        "IOPS": [fixed(v, decimals) for v in iops],
        "IOPS CI low": [fixed(non_negative(v), decimals) for v in frame["iops_ci_low"]],
        "IOPS CI high": [fixed(v, decimals) for v in frame["iops_ci_high"]],
        **_bandwidth_columns(frame, units),
    }
    cpu = has_cpu(frame)
    if cpu:
        columns[CPU_HEADER] = [
            cpu_text(pct, basis)
            for pct, basis in zip(frame["cpu_pct"], frame["cpu_basis"], strict=True)
        ]
    return _table(
        columns,
        8,
        caption="Per-node and per-system IOPS and throughput: each client host alone "
        "(node) and the aggregate of all hosts of the run (system, host 'all'; "
        f"{report_units.units_note(units)}).",
        label="tab:per-host",
        notes=(
            f"Mean over n iterations. {CI_NOTE}",
            SMALL_N_NOTE,
            *([CPU_NOTE] if cpu else []),
            MISSING_NOTE,
        ),
        shown=shown,
        shown_note=LISTED_NODES_NOTE if shown is not None else "",
    )


def _slowest_and_fastest_nodes(frame: pd.DataFrame, max_nodes: int) -> list[int] | None:
    """The rows a page shows of per_host_summary's frame: every row of a cell on at most
    max_nodes nodes; of a larger cell its slowest and fastest node and its system row. None
    when no cell is larger."""
    nodes = frame[frame["scope"] == NODE]
    crowded, picked = slowest_and_fastest(
        nodes, list(stats.CELL_KEYS), "bw_bytes_s_mean", "iops_mean", max_nodes
    )
    if not crowded:
        return None
    hidden = crowded - set(picked)
    return [position for position, index in enumerate(frame.index) if index not in hidden]


SLOWEST, FASTEST = "slowest", "fastest"


def slowest_and_fastest(
    hosts: pd.DataFrame, keys: list[str], bandwidth: str, iops: str, most: int
) -> tuple[set, dict]:
    """Of each group of ``hosts`` rows (one per host, grouped by ``keys``) larger than
    ``most``: (the index of every row of such groups, {index: (SLOWEST or FASTEST, the
    group's size)} of its host of least and most ``bandwidth``, else ``iops``)."""
    sizes = hosts.groupby(keys, dropna=False)["host"].transform("size")
    crowded = hosts[sizes > most]
    picked: dict = {}
    for _, group in crowded.groupby(keys, dropna=False, sort=False):
        metric = group[bandwidth] if group[bandwidth].notna().any() else group[iops]
        if metric.notna().any():
            picked[metric.idxmin()] = (SLOWEST, len(group))
            picked[metric.idxmax()] = (FASTEST, len(group))
    return set(crowded.index), picked
