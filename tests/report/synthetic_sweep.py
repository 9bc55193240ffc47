"""A synthetic fio sweep in the result schema, as the parse step makes it: the rows of
bench/report_scale.py (report time at 1,000 runs) and of the report layout tests.

rw (4) x bs (5) x iodepth (10) x numjobs (5) = 1,000 runs, 3 iterations each, one row per
run, iteration and op on host 'localhost' with a latency histogram (150 log-spaced bins,
counts from a log-normal shape) and percentiles computed from it, and the host 'all' rows
made by storbench.core.aggregate.aggregate_hosts.
"""

from __future__ import annotations

import json
import math
import random

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
