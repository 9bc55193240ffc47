"""The latency-SLO search against a full grid on a target whose capacity is known.

Target: fio's null engine with 200 µs of think time after every I/O, one job, so it cannot
pass about 1 / 200 µs = 5,000 IOPS at any queue depth or offered rate. Objective: p99 within
1 ms and at least 99 % of the offered rate achieved, tolerance 2 %.

(1) the search experiment as storbench runs it (ladder, bisection, confirmations);
(2) the grid a user would otherwise run for the same 2 % resolution: the same closed-loop
    ladder plus every offered rate in steps of 2 % of 1.05 x the closed-loop peak, one run
    each, through a plain storbench sweep experiment (rate_iops swept);
the grid's answer is its highest rate meeting the objective. Writes bench/out/slo_search.json
with both answers, their difference and both run counts. Run with `make bench`.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import yaml

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out"
WORK = OUT / "slo-work"
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
TARGET = "/var/tmp/storbench/bench-slo"
LIMIT_NS = 1_000_000
TOLERANCE = 0.02
MAX_IODEPTH = 8
JOB = {
    "rw": "randread",
    "bs": "4k",
    "size": "16MiB",
    "ioengine": "null",
    "numjobs": 1,
    "runtime": "3s",
    "thinktime": "200us",
}
BASE = {
    "hosts": {"localhost": {"transport": "local"}},
    "targets": {"scratch": {"type": "directory", "path": TARGET}},
}


def snakemake(workdir: Path, config: dict) -> float:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "campaign.yaml").write_text(yaml.safe_dump(config))
    command = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--configfile", "campaign.yaml"]
    start = time.monotonic()
    subprocess.run([*command, "--cores", "2"], cwd=workdir, check=True, capture_output=True)
    return time.monotonic() - start


def run_search() -> dict:
    config = {
        **BASE,
        "experiments": {
            "slo": {
                "tool": "fio",
                "hosts": "localhost",
                "target": "scratch",
                "iterations": 3,
                "job": JOB,
                "search": {
                    "objective": {"metric": "iops", "latency": "p99", "limit": "1ms"},
                    "tolerance": "2%",
                    "max_iodepth": MAX_IODEPTH,
                    "max_probes": 12,
                    "arrivals": "linear",
                },
            }
        },
    }
    wall = snakemake(WORK / "search", config)
    result = json.loads((WORK / "search/results/slo/search.json").read_text())
    return {
        "wall_s": round(wall, 1),
        "runs": len(result["probes"]),
        "answer_iops": result["answer"]["rate_iops"],
        "status": result["answer"]["status"],
        "bracket": result["answer"]["bracket"],
        "closed_peak_iops": result["answer"]["closed"]["peak_iops"],
    }


def grid_rates(peak: float) -> list[int]:
    """Every offered rate in steps of 2 % of 1.05 x peak, up to 1.05 x peak."""
    top = 1.05 * peak
    step = TOLERANCE * top
    return [round(step * k) for k in range(1, math.floor(top / step) + 1)]


def run_grid(peak: float) -> dict:
    rates = grid_rates(peak)
    ladder = [1, 2, 4, 8]
    # Little's law at the limit with twice the headroom, as the search sets it
    depth = max(1, math.ceil(max(rates) * LIMIT_NS * 2 / 1e9))
    experiments = {
        "ladder": {
            "tool": "fio", "hosts": "localhost", "target": "scratch", "iterations": 1,
            "job": JOB, "sweep": {"iodepth": ladder},
        },
        "grid": {
            "tool": "fio", "hosts": "localhost", "target": "scratch", "iterations": 1,
            "job": {**JOB, "iodepth": depth, "rate_process": "linear"},
            "sweep": {"rate_iops": rates},
        },
    }  # fmt: skip
    wall = snakemake(WORK / "grid", {**BASE, "experiments": experiments})
    rows = pq.read_table(WORK / "grid/results/grid/summary.parquet").to_pylist()
    met = []
    for row in rows:
        if row["host"] != "all" or not row["ios"]:
            continue
        if row["p99_ns"] <= LIMIT_NS and row["iops"] >= 0.99 * row["offered_iops"]:
            met.append(row["offered_iops"])
    return {
        "wall_s": round(wall, 1),
        "runs": len(rates) + len(ladder),
        "rates": len(rates),
        "ladder": ladder,
        "answer_iops": max(met) if met else None,
    }


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    shutil.rmtree(WORK, ignore_errors=True)
    search = run_search()
    grid = run_grid(search["closed_peak_iops"])
    difference = None
    if search["answer_iops"] and grid["answer_iops"]:
        difference = abs(search["answer_iops"] - grid["answer_iops"]) / grid["answer_iops"]
    summary = {
        "target": "fio null engine, thinktime 200us, 1 job (about 5,000 IOPS at most)",
        "objective": "p99 <= 1 ms and achieved >= 99 % of offered; tolerance 2 %",
        "search": search,
        "grid": grid,
        "relative_difference": difference,
        "within_tolerance": difference is not None and difference <= TOLERANCE,
        "run_ratio": search["runs"] / grid["runs"],
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "slo_search.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    shutil.rmtree(WORK, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
