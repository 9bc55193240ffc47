"""Report generation time for a 1,000-run campaign of synthetic result rows.

Rows in the result schema (storbench.core.results.SCHEMA) for one fio experiment on one host:
rw (4) x bs (5) x iodepth (10) x numjobs (5) = 1,000 runs, 3 iterations each, one row per
run, iteration and op on host 'localhost' with a latency histogram (150 log-spaced bins,
counts from a log-normal shape) and percentiles computed from it, and the host 'all' rows
made by storbench.core.aggregate.aggregate_hosts, as the parse step makes them. So every figure
and table runs on full data, including the latency CDF from merged bins. The Parquet goes
to a temporary folder; then storbench.report.experiment.build_report is timed in this process (after
its imports) and the `storbench report` command end to end (a fresh interpreter, as the
workflow runs it). Writes bench/out/report_scale.json with the seconds and row counts.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import tempfile
import time
from pathlib import Path

from common import BIN, print_table, timed_command, write_result

from storbench.core import results
from storbench.core.aggregate import aggregate_hosts, histogram_percentiles

SWEEP = {
    "rw": ["read", "write", "randread", "randwrite"],
    "bs": ["4k", "16k", "64k", "256k", "1m"],
    "iodepth": [1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
    "numjobs": [1, 2, 4, 8, 16],
}
BS_BYTES = {"4k": 4096, "16k": 16384, "64k": 65536, "256k": 262144, "1m": 1048576}
QUICK_IODEPTH = [1, 16]  # --quick: 200 runs
ITERATIONS = 3
HOST = "localhost"
RUNTIME_S = 60.0
BINS = 150
BIN_STEP = 1.04  # ratio between neighbouring bin values, about fio's 64 bins per doubling / 4


def run_id(point: dict) -> str:
    """storbench's run id for these keys: <rw>_bs<bs>_qd<iodepth>_nj<numjobs>."""
    return f"{point['rw']}_bs{point['bs']}_qd{point['iodepth']}_nj{point['numjobs']}"


def sweep_points(sweep: dict) -> list[dict]:
    points = [{}]
    for key, values in sweep.items():
        points = [{**point, key: value} for point in points for value in values]
    return points


def latency_histogram(median_ns: float, ios: int, rng: random.Random) -> tuple[list, list]:
    """Log-spaced bin values around the median; log-normal counts summing to ``ios``."""
    sigma = 0.35 + 0.1 * rng.random()
    values = [round(median_ns * BIN_STEP ** (k - BINS // 2)) for k in range(BINS)]
    weights = [math.exp(-((math.log(v / median_ns) / sigma) ** 2) / 2) for v in values]
    scale = ios / sum(weights)
    counts = [max(1, round(w * scale)) for w in weights]
    return values, counts


def host_row(point: dict, iteration: int, rng: random.Random) -> dict:
    """One localhost row of a run's iteration: its metrics from a simple device model."""
    bs = BS_BYTES[point["bs"]]
    in_flight = point["iodepth"] * point["numjobs"]
    median_ns = 80_000 + bs * 0.2 + 2_000 * in_flight
    iops = min(in_flight / (median_ns / 1e9), 2e9 / bs) * rng.uniform(0.95, 1.05)
    ios = max(1, round(iops * RUNTIME_S))
    values, counts = latency_histogram(median_ns, ios, rng)
    op = "write" if "write" in point["rw"] else "read"
    return {
        "experiment": "report-scale",
        "run_id": run_id(point),
        "iteration": iteration,
        "attempt": 1,
        "tool": "fio",
        "host": HOST,
        "job": run_id(point),
        "op": op,
        "hosts_in_run": 1,
        "target": "scratch",
        "loop": "closed",
        "rw": point["rw"],
        "bs": bs,
        "iodepth": point["iodepth"],
        "numjobs": point["numjobs"],
        "size": 1 << 30,
        "runtime_s": RUNTIME_S,
        "params_json": json.dumps(point, sort_keys=True),
        "bytes": ios * bs,
        "ios": ios,
        "duration_s": RUNTIME_S,
        "bw_bytes_s": iops * bs,
        "iops": iops,
        "lat_mean_ns": median_ns * 1.05,
        "lat_stdev_ns": median_ns * 0.3,
        "lat_min_ns": float(values[0]),
        "lat_max_ns": float(values[-1]),
        **histogram_percentiles(values, counts, "lat"),
        "errors": 0,
        "tool_version": "fio-3.33",
        "job_file_sha256": "0" * 64,
        "command": "fio --output-format=json+ job.fio",
        "raw_path": f"results/report-scale/raw/{run_id(point)}/it{iteration}/a1",
        "start_time": "2026-01-01T00:00:00+00:00",
        "end_time": "2026-01-01T00:01:00+00:00",
    }


def synthetic_rows(sweep: dict) -> list[dict]:
    rng = random.Random(9)
    rows = []
    for point in sweep_points(sweep):
        for iteration in range(1, ITERATIONS + 1):
            per_host = [host_row(point, iteration, rng)]
            rows += per_host + aggregate_hosts(per_host)
    return rows


def report_meta(sweep: dict) -> dict:
    return {
        "title": "storbench report: report-scale",
        "experiment": "report-scale",
        "tool": "fio",
        "hosts": [HOST],
        "target": {"name": "scratch", "type": "directory", "path": "/var/tmp/storbench"},
        "iterations": ITERATIONS,
        "job": {"size": "1GiB", "runtime": f"{RUNTIME_S:g}s", "ioengine": "libaio", "direct": 1},
        "sweep": sweep,
        "run_ids": [run_id(point) for point in sweep_points(sweep)],
    }


def time_build_report(summary: Path, out_dir: Path, meta: dict) -> tuple[float, float, int]:
    """(import seconds, build_report seconds, files written) in this process."""
    start = time.perf_counter()
    from storbench.report import experiment as report

    imported = time.perf_counter()
    written = report.build_report(summary, out_dir, title=meta["title"], meta=meta)
    return imported - start, time.perf_counter() - imported, len(written)


def time_cli(summary: Path, out_dir: Path, meta: dict) -> float:
    command = [
        str(BIN / "storbench"),
        "report",
        "--summary", str(summary),
        "--out-dir", str(out_dir),
        "--meta", json.dumps(meta),
    ]  # fmt: skip
    return timed_command(command, out_dir.parent)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 runs instead of 1,000")
    args = parser.parse_args()
    sweep = {**SWEEP, "iodepth": QUICK_IODEPTH} if args.quick else SWEEP
    meta = report_meta(sweep)
    with tempfile.TemporaryDirectory(prefix="storbench-report-scale-") as scratch:
        summary = Path(scratch) / "summary.parquet"
        rows = synthetic_rows(sweep)
        results.write_rows(rows, summary)
        import_s, build_s, files = time_build_report(summary, Path(scratch) / "in-process", meta)
        cli_s = time_cli(summary, Path(scratch) / "cli", meta)
        parquet_mb = summary.stat().st_size / 1e6
    result = {
        "runs": len(meta["run_ids"]),
        "iterations": ITERATIONS,
        "rows": len(rows),
        "rows_host_all": sum(row["host"] == "all" for row in rows),
        "histogram_bins_per_row": BINS,
        "parquet_mb": round(parquet_mb, 2),
        "build_report_s": round(build_s, 2),
        "report_import_s": round(import_s, 2),
        "storbench_report_cli_s": round(cli_s, 2),
        "files_written": files,
        "python": sys.version.split()[0],
        "note": "no per-interval series and no telemetry: those sections are empty",
    }
    write_result("report_scale", result)
    print_table(
        f"report of {result['runs']} runs x {ITERATIONS} iterations",
        [
            ("rows", result["rows"]),
            ("build_report s", result["build_report_s"]),
            ("storbench report (CLI) s", result["storbench_report_cli_s"]),
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
