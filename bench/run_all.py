"""Benchmarks of storbench itself (make bench); results go to bench/out/.

overhead: a 16-point fio sweep (2 s runs, local directory) run (a) as a bare shell loop of
the same fio commands and (c) through storbench (render, run, parse, gather, report).
The ratio (c)/(a) is the orchestration overhead; the goal is at most 1.05.
services (bench/services.py), dispatch (bench/dispatch.py) and slo_search
(bench/slo_search.py) run as their own scripts; they write services.json, dispatch.json and
slo_search.json, and their summaries are copied into results.json.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out"
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
TARGET = Path("/var/tmp/storbench/bench")

SWEEP_CONFIG = {
    "hosts": {"localhost": {"transport": "local"}},
    "targets": {"scratch": {"type": "directory", "path": str(TARGET)}},
    "experiments": {
        "overhead": {
            "tool": "fio",
            "hosts": "localhost",
            "target": "scratch",
            "iterations": 1,
            "job": {"size": "64MiB", "runtime": "2s", "ioengine": "libaio", "direct": 1},
            "sweep": {
                "rw": ["read", "write", "randread", "randwrite"],
                "bs": ["4k", "64k"],
                "iodepth": [1, 16],
            },
        }
    },
}


def timed(command: list[str], cwd: Path, shell: bool = False) -> float:
    start = time.monotonic()
    subprocess.run(command, cwd=cwd, check=True, capture_output=True, shell=shell)
    return time.monotonic() - start


def bare_loop_script(job_dir: Path, output_dir: Path) -> str:
    output_dir.mkdir(parents=True, exist_ok=True)
    fio = "STORBENCH_HOST=localhost fio --output-format=json+"
    output = f'--output={output_dir}/$(basename "$job").json'
    return f'for job in {job_dir}/*.fio; do {fio} {output} "$job"; done'


def overhead() -> dict:
    work = OUT / "overhead-work"
    subprocess.run(["rm", "-rf", str(work)], check=True)
    work.mkdir(parents=True)
    (TARGET / "localhost").mkdir(parents=True, exist_ok=True)
    (work / "campaign.yaml").write_text(yaml.safe_dump(SWEEP_CONFIG))
    base = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--configfile", "campaign.yaml", "-c2"]
    # Job files first, so the bare loop runs exactly the commands storbench runs.
    subprocess.run([*base, "--until", "render_job"], cwd=work, check=True, capture_output=True)
    loop = timed(
        ["bash", "-c", bare_loop_script(work / "results/overhead/jobs", work / "loop")], work
    )
    storbench = timed(base, work)
    return {
        "points": 16,
        "runtime_s_per_point": 2,
        "bare_shell_loop_s": round(loop, 2),
        "storbench_s": round(storbench, 2),
        "ratio_storbench_to_loop": round(storbench / loop, 3),
        "note": "storbench time includes parse, gather and report; render ran before both",
    }


def separate_benchmark(script: str, output: str, keys: list[str]) -> dict:
    """Run bench/<script> (it prints its own table), return the given keys of its JSON."""
    subprocess.run([sys.executable, str(REPO / "bench" / script)], cwd=REPO, check=True)
    details = json.loads((OUT / output).read_text())
    return {key: details[key] for key in keys} | {"details": f"bench/out/{output}"}


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    results = {"overhead": overhead()}
    results["services"] = separate_benchmark(
        "services.py", "services.json", ["hosts", "repetitions", "summary", "ratios"]
    )
    results["dispatch"] = separate_benchmark(
        "dispatch.py",
        "dispatch.json",
        ["hosts", "runs", "wall_s", "fio_runtime_sum_s", "dispatch_overhead_per_run_s",
         "run_cycle_median_s", "breakdown_s", "host_start_delay_s", "bare_client_loop"],
    )  # fmt: skip
    results["slo_search"] = separate_benchmark(
        "slo_search.py",
        "slo_search.json",
        ["search", "grid", "relative_difference", "within_tolerance", "run_ratio"],
    )
    (OUT / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
