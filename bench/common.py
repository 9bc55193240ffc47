"""Shared pieces of the bench/ scripts: paths, timing, the JSON result file, the table."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out"
BIN = Path(sys.executable).parent
SNAKEMAKE = str(BIN / "snakemake")


def timed_command(command: list[str], cwd: Path, log: Path | None = None) -> float:
    """Wall seconds of one command. Its output goes to ``log`` if given, else it is
    captured; either way its tail is shown when it fails."""
    start = time.monotonic()
    if log is None:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
        output = done.stderr or done.stdout
    else:
        with open(log, "w") as file:
            done = subprocess.run(command, cwd=cwd, stdout=file, stderr=subprocess.STDOUT)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        tail = (output if log is None else log.read_text())[-3000:]
        raise RuntimeError(f"{command[0]} exited {done.returncode} in {cwd}:\n{tail}")
    return seconds


def job_times(workdir: Path) -> list[dict]:
    """Every job Snakemake recorded in workdir/.snakemake/metadata, in start order: its rule
    and its start and end (epoch seconds). Snakemake keeps a record per output file; a job
    with several outputs is one entry here."""
    jobs = {}
    for record in (workdir / ".snakemake" / "metadata").rglob("*"):
        if not record.is_file():
            continue
        meta = json.loads(record.read_text())
        if meta.get("starttime") is None or meta.get("endtime") is None:
            continue
        key = (meta["rule"], meta["starttime"], meta["endtime"])
        jobs[key] = {"rule": meta["rule"], "start": meta["starttime"], "end": meta["endtime"]}
    return sorted(jobs.values(), key=lambda job: (job["start"], job["end"]))


def median_seconds(action: Callable[[], object], repeat: int) -> tuple[float, list[float]]:
    """(median, every time) of ``repeat`` calls of ``action``."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def write_result(name: str, result: dict) -> Path:
    """bench/out/<name>.json"""
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    return path


def print_table(title: str, rows: list[tuple[str, object]]) -> None:
    """A two-column table of figure name and value."""
    width = max(len(name) for name, _ in rows)
    print(title)
    print("-" * len(title))
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
