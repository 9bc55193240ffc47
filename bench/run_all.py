"""Benchmarks of storbench itself (make bench); every figure goes to bench/out/.

Each benchmark is its own script, runnable alone (`.venv/bin/python bench/<script>`), which
prints a short table and writes bench/out/<name>.json; this runs them one after another
and copies each one's summary into bench/out/results.json. bench/README.md lists them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out"

# (script and its options, its JSON in bench/out, the keys copied into results.json)
BENCHMARKS = [
    ("overhead.py", "overhead.json",
     ["points", "runtime_s_per_point", "bare_shell_loop_s", "bench_fio_s", "storbench_s",
      "ratio_storbench_to_loop", "ratio_storbench_to_bench_fio"]),
    ("ingest.py", "ingest.json",
     ["hosts", "jobs_per_host", "file_mb", "rows", "storbench_mb_s", "json_load_mb_s",
      "ratio_storbench_to_json_load_time"]),
    ("planning.py --first-job", "planning.json",
     ["runs", "storbench_dry_run_s", "empty_flat_dry_run_s", "empty_chained_dry_run_s",
      "ratio_storbench_to_flat", "ratio_storbench_to_chained", "storbench_job_stats",
      "storbench_first_job_s", "empty_chained_first_job_s",
      "ratio_first_job_storbench_to_chained"]),
    ("report_scale.py", "report_scale.json",
     ["runs", "iterations", "rows", "build_report_s", "storbench_report_cli_s"]),
    ("services.py", "services.json", ["hosts", "repetitions", "summary", "ratios"]),
    ("dispatch.py", "dispatch.json",
     ["hosts", "runs", "wall_s", "fio_runtime_sum_s", "dispatch_overhead_per_run_s",
      "run_cycle_median_s", "breakdown_s", "host_start_delay_s", "bare_client_loop"]),
    ("scale.py", "scale.json",
     ["hosts", "settings", "storbench_parallel_settings", "service_start", "sweep"]),
    ("held_start.py", "held_start.json", ["runs"]),
    ("scheduler_idle.py", "scheduler_idle.json",
     ["runs", "storbench", "with_job_rate_limiter", "ratio_storbench_to_rate_limiter_cpu"]),
    ("scheduler_rounds.py", "scheduler_rounds.json",
     ["jobs_per_run", "anchor", "storbench", "snakemake"]),
    ("slo_search.py", "slo_search.json",
     ["search", "grid", "relative_difference", "within_tolerance", "run_ratio"]),
]  # fmt: skip


def run_benchmark(script: str, output: str, keys: list[str]) -> dict:
    """Run bench/<script> (it prints its own table), return the given keys of its JSON."""
    name, *options = script.split()
    subprocess.run([sys.executable, str(REPO / "bench" / name), *options], cwd=REPO, check=True)
    details = json.loads((OUT / output).read_text())
    return {key: details[key] for key in keys} | {"details": f"bench/out/{output}"}


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    results = {
        output.removesuffix(".json"): run_benchmark(script, output, keys)
        for script, output, keys in BENCHMARKS
    }
    (OUT / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
