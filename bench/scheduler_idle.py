"""The controller's scheduler while a run runs: CPU of the Snakemake process, many runs waiting.

A campaign of N runs (default 400) of one fio job on one local directory target, so the runs
go one at a time and the others wait for the target: fio reads 10 I/O per s for 20 s each
(`rate_iops` swept 10 … 10+N-1, one run id each). Once every run's job file is rendered,
the Snakemake process's own CPU time (utime + stime, its jobs not counted) is read over 10 s
while a run runs, then the campaign is stopped. Two ways, one after the other: (a) storbench
as it is; (b) the anchor, the same with `--max-jobs-per-timespan 1000/1s`, a limit storbench
keeps, so Snakemake's job rate limiter runs its rounds as it does by default (a limit that
never binds here). Writes bench/out/scheduler_idle.json: each one's CPU seconds per second
and their ratio. `--runs N` for another campaign size.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import yaml
from common import OUT, REPO, SNAKEMAKE, print_table, write_result

WORK = OUT / "scheduler-idle-work"
TARGET = Path("/var/tmp/storbench/scheduler-idle")
SAMPLE_S = 10.0
RUNTIME_S = 20
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def campaign(runs: int) -> dict:
    return {
        "hosts": {"localhost": {"transport": "local"}},
        "targets": {"scratch": {"type": "directory", "path": str(TARGET)}},
        "experiments": {
            "idle": {
                "tool": "fio",
                "hosts": "localhost",
                "target": "scratch",
                "iterations": 1,
                "job": {
                    "rw": "read",
                    "bs": "4k",
                    "size": "1MiB",
                    "runtime": f"{RUNTIME_S}s",
                    "time_based": 1,
                    "ioengine": "psync",
                },
                "sweep": {"rate_iops": list(range(10, 10 + runs))},
            }
        },
    }


def cpu_seconds(pid: int) -> float:
    """The process's own user + system CPU seconds (/proc/<pid>/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def fio_running() -> bool:
    found = subprocess.run(["pgrep", "-x", "fio"], capture_output=True)
    return found.returncode == 0


def measure(runs: int, label: str, extra: list[str]) -> dict:
    """Start the campaign, wait for every job file and a running fio, sample, stop."""
    workdir = WORK / label
    shutil.rmtree(workdir, ignore_errors=True)
    shutil.rmtree(TARGET, ignore_errors=True)
    (TARGET / "localhost").mkdir(parents=True)
    workdir.mkdir(parents=True)
    (workdir / "campaign.yaml").write_text(yaml.safe_dump(campaign(runs)))
    command = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--configfile", "campaign.yaml"]
    log = open(workdir / "snakemake.log", "w")  # noqa: SIM115 - open while the campaign runs
    process = subprocess.Popen([*command, "-c2", *extra], cwd=workdir, stdout=log, stderr=log)
    jobs = workdir / "results/idle/jobs"
    try:
        started = time.monotonic()
        while not (jobs.is_dir() and len(list(jobs.iterdir())) >= runs and fio_running()):
            if process.poll() is not None:
                raise RuntimeError(f"snakemake exited {process.returncode}: {log.name}")
            time.sleep(0.5)
        ready_s = time.monotonic() - started
        time.sleep(2)  # the renders' last ends handled
        before = cpu_seconds(process.pid)
        time.sleep(SAMPLE_S)
        used = cpu_seconds(process.pid) - before
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=300)
        log.close()
    return {"cpu_s": round(used, 3), "cpu_s_per_s": round(used / SAMPLE_S, 4),
            "job_files_ready_s": round(ready_s, 1)}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400, help="runs in the campaign")
    args = parser.parse_args()
    storbench = measure(args.runs, "storbench", [])
    anchor = measure(args.runs, "rate-limiter", ["--max-jobs-per-timespan", "1000/1s"])
    ratio = storbench["cpu_s"] / anchor["cpu_s"] if anchor["cpu_s"] else None
    result = {
        "runs": args.runs,
        "sample_s": SAMPLE_S,
        "storbench": storbench,
        "with_job_rate_limiter": anchor,
        "ratio_storbench_to_rate_limiter_cpu": None if ratio is None else round(ratio, 4),
    }
    path = write_result("scheduler_idle", result)
    print_table(
        f"Snakemake's CPU during a run, {args.runs} runs waiting",
        [
            ("storbench (CPU s per s)", storbench["cpu_s_per_s"]),
            ("with the job rate limiter", anchor["cpu_s_per_s"]),
            ("ratio", result["ratio_storbench_to_rate_limiter_cpu"]),
            ("written", path),
        ],
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
