"""Names shared by the result schema and the tool adapters, importable without pyarrow."""

from __future__ import annotations

ALL_HOSTS = "all"
CONTROLLER = "controller"  # the machine running Snakemake, as a fault host and in service mode

PERCENTILES = (50.0, 90.0, 99.0, 99.9, 99.99)


def percentile_column(p: float) -> str:
    """50.0 -> 'p50_ns', 99.9 -> 'p99_9_ns', 99.99 -> 'p99_99_ns'."""
    text = f"{p:g}".replace(".", "_")
    return f"p{text}_ns"


PERCENTILE_COLUMNS = tuple(percentile_column(p) for p in PERCENTILES)

# cpu_basis: what a row's cpu_pct / cpu_sys_pct are a percentage of (core/results.py)
CPU_HOST = "host"  # all the host's CPUs, every process on it (elbencho, vdbench); 0-100
CPU_PROCESS = "process"  # one CPU, the tool's own processes (fio jobs, iperf3); may pass 100
CPU_COLUMNS = ("cpu_pct", "cpu_sys_pct", "cpu_basis")

# What a config's report.tables may pivot on (beside sweep parameters and experiment labels)
# and show in a cell.
PIVOT_DIMENSIONS = (
    "experiment",
    "tool",
    "target",
    "step",
    "hosts_in_run",
    "prep_state",
    "rw",
    "bs",
    "iodepth",
    "numjobs",
    "rwmixread",
    "op",
)
PIVOT_PERCENTILES = {
    f"p{p:g}": column for p, column in zip(PERCENTILES, PERCENTILE_COLUMNS, strict=True)
}
PIVOT_VALUES = ("bw", "iops", "lat_mean", *PIVOT_PERCENTILES)

# The op column: block/file I/O, object and metadata operations, and network directions.
OPERATIONS = (
    "read",
    "write",
    "trim",
    "delete",
    "list",
    "stat",
    "mkdir",
    "rmdir",
    "send",
    "receive",
    "mixed",  # a tool's total over operations it does not report apart (a GOSBench mix)
)
_OP_ALIASES = {
    "get": "read",
    "put": "write",
    "head": "stat",
    "rmfiles": "delete",
    "rmdirs": "rmdir",
    "mkdirs": "mkdir",
}


def normalize_op(name: str) -> str:
    """A tool's operation name in the op vocabulary: GET -> read, PUT -> write, HEAD -> stat."""
    key = str(name).strip().lower()
    op = _OP_ALIASES.get(key, key)
    if op not in OPERATIONS:
        raise ValueError(f"unknown operation {name!r} (known: {', '.join(OPERATIONS)})")
    return op
