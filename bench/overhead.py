"""Orchestration overhead: one 16-point fio sweep run three ways, wall time of each.

Sweep: rw {read, write, randread, randwrite} x bs {4k, 64k} x iodepth {1, 16}, 2 s runs of
64 MiB, libaio, direct=1, one iteration, on the local directory /var/tmp/storbench/bench.
(a) a bare shell loop of fio over the job files storbench renders (json+ output);
(b) bench-fio from the fio-plot package (pinned in envs/requirements-bench.txt) with the
    closest equivalent options; what still differs is listed in the JSON;
(c) storbench from an empty results tree: render, preflight, telemetry, run, parse, gather
    and report.
The target directory is emptied before each variant, so each lays out its own data files.
Writes bench/out/overhead.json with the times and the ratios (c)/(a) and (c)/(b), and where
(c)'s time goes beyond the loop's, from the job times Snakemake records and the runs'
manifests: its start until the first run, each run's launch, tool and end, the time between
runs, and the steps after the last run (gather, the reports, their PDFs, Snakemake's exit).
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import yaml
from common import (
    BIN,
    OUT,
    REPO,
    SNAKEMAKE,
    job_times,
    print_table,
    timed_command,
    write_result,
)

WORK = OUT / "overhead-work"
TARGET = Path("/var/tmp/storbench/bench")
BENCH_FIO = str(BIN / "bench-fio")
RW = ["read", "write", "randread", "randwrite"]
BS = ["4k", "64k"]
IODEPTH = [1, 16]
POINTS = len(RW) * len(BS) * len(IODEPTH)
RUNTIME_S = 2

SWEEP_CONFIG = {
    "hosts": {"localhost": {"transport": "local"}},
    "targets": {"scratch": {"type": "directory", "path": str(TARGET)}},
    "experiments": {
        "overhead": {
            "tool": "fio",
            "hosts": "localhost",
            "target": "scratch",
            "iterations": 1,
            "job": {
                "size": "64MiB",
                "runtime": f"{RUNTIME_S}s",
                "ioengine": "libaio",
                "direct": 1,
            },
            "sweep": {"rw": RW, "bs": BS, "iodepth": IODEPTH},
        }
    },
}

BENCH_FIO_DIFFERENCES = [
    "bench-fio writes fio's json, not json+ (no latency histogram bins)",
    "bench-fio adds write_bw_log/write_lat_log/write_iops_log with log_avg_msec=1000: "
    "five per-second log files per run",
    "bench-fio runs every point on one data file (directory/FIOJOB.0.0), laid out once; "
    "the loop and storbench use one file per run id (16 files of 64 MiB laid out)",
    "bench-fio's job files also set invalidate=1 and loops=1 (fio's defaults too)",
    "bench-fio's numjobs loop is pinned to one value (--numjobs 1); no ramp, no precondition",
    "bench-fio runs a no-op 'echo 3 > /proc/sys/vm/drop_caches' command (no shell) per run",
    "bench-fio only runs fio: no parse, no table, no figures (storbench's time includes them)",
]


def campaign_command(workdir: Path) -> list[str]:
    (workdir / "campaign.yaml").write_text(yaml.safe_dump(SWEEP_CONFIG))
    return [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--configfile", "campaign.yaml", "-c2"]


def empty_target() -> None:
    shutil.rmtree(TARGET, ignore_errors=True)
    (TARGET / "localhost").mkdir(parents=True)


def render_jobs(workdir: Path) -> tuple[Path, float]:
    """The job files storbench renders (for the bare loop); (their folder, seconds)."""
    workdir.mkdir(parents=True)
    command = [*campaign_command(workdir), "--until", "render_job"]
    seconds = timed_command(command, workdir)
    return workdir / "results/overhead/jobs", seconds


def bare_loop(job_dir: Path, output_dir: Path) -> float:
    output_dir.mkdir(parents=True)
    fio = "STORBENCH_HOST=localhost fio --output-format=json+"
    output = f'--output={output_dir}/$(basename "$job").json'
    script = f'for job in {job_dir}/*.fio; do {fio} {output} "$job"; done'
    seconds = timed_command(["bash", "-c", script], output_dir)
    expect_outputs(sorted(output_dir.glob("*.json")), "bare loop")
    return seconds


def bench_fio_command(output_dir: Path) -> list[str]:
    # bench-fio loops over target x mode x iodepth x numjobs x block size: the same 16 points
    return [
        BENCH_FIO,
        "--target", str(TARGET / "bench-fio"),
        "--type", "directory",
        "--size", "64m",
        "--output", str(output_dir),
        "--mode", *RW,
        "--block-size", *BS,
        "--iodepth", *map(str, IODEPTH),
        "--numjobs", "1",
        "--runtime", str(RUNTIME_S),
        "--time-based",
        "--engine", "libaio",
        "--direct", "1",
        "--destructive",
        "--quiet",
    ]  # fmt: skip


def bench_fio(output_dir: Path) -> float:
    (TARGET / "bench-fio").mkdir(parents=True, exist_ok=True)
    output_dir.mkdir(parents=True)
    seconds = timed_command(bench_fio_command(output_dir), output_dir)
    expect_outputs(sorted(output_dir.rglob("*.json")), "bench-fio")
    return seconds


def expect_outputs(outputs: list[Path], variant: str) -> None:
    """Every point ran for its runtime: the figures compare complete sweeps only."""
    if len(outputs) != POINTS:
        raise RuntimeError(f"{variant}: {len(outputs)} fio outputs, expected {POINTS}")
    for path in outputs:
        job = json.loads(path.read_text())["jobs"][0]
        if job["error"] or job["job_runtime"] < RUNTIME_S * 1000 * 0.9:
            raise RuntimeError(f"{variant}: {path} did not run {RUNTIME_S} s without error")


def storbench(workdir: Path) -> tuple[float, float]:
    """(wall seconds, epoch when the command started)."""
    workdir.mkdir(parents=True)
    started = time.time()
    seconds = timed_command(campaign_command(workdir), workdir)
    runs = set(pq.read_table(workdir / "results/overhead/summary.parquet")["run_id"].to_pylist())
    if len(runs) != POINTS or not (workdir / "reports/overhead/index.html").exists():
        raise RuntimeError(f"storbench: {len(runs)} runs in summary.parquet or no report")
    return seconds, started


def _epoch(text: str) -> float:
    return datetime.datetime.fromisoformat(text).timestamp()


def tool_spans(workdir: Path) -> list[tuple[float, float]]:
    """(first launch, last end) of the tool on the hosts of each run, from its manifest."""
    spans = []
    for manifest in (workdir / "results/overhead/raw").glob("*/it*/run.json"):
        hosts = json.loads(manifest.read_text())["hosts"]
        spans.append(
            (
                min(_epoch(h["launch_time"]) for h in hosts),
                max(_epoch(h["end_time"]) for h in hosts),
            )
        )
    return spans


def breakdown(workdir: Path, started: float, seconds: float, loop_s: float) -> dict:
    """Where storbench's wall time goes, in seconds: the parts add up to it."""
    jobs = job_times(workdir)
    runs = [job for job in jobs if job["rule"] == "run_iteration"]
    spans = tool_spans(workdir)
    if len(runs) != POINTS or len(spans) != POINTS:
        raise RuntimeError(f"{workdir}: {len(runs)} run jobs and {len(spans)} manifests")
    launch = tool = after = 0.0
    for run in runs:
        span = next((s for s in spans if run["start"] <= s[0] <= run["end"]), None)
        if span is None:
            raise RuntimeError(f"{workdir}: no manifest launched within a run job's times")
        first, last = span
        launch += first - run["start"]
        tool += last - first
        after += run["end"] - last
    between = sum(later["start"] - earlier["end"] for earlier, later in itertools.pairwise(runs))

    def last_end(*rules: str) -> float:
        return max(job["end"] for job in jobs if job["rule"] in rules)

    runs_end = runs[-1]["end"]
    gathered = last_end("gather_experiment")
    reported = last_end("report_experiment", "campaign_report")
    printed = last_end("report_pdfs")
    ended = started + seconds
    return {
        "start_to_first_run_s": runs[0]["start"] - started,
        "run_launch_s": launch,  # each run job's start to its tool's launch, all runs
        "run_tool_s": tool,  # the tool's launch to its end, all runs
        "run_tool_minus_bare_loop_s": tool - loop_s,
        "run_end_s": after,  # the tool's end to its run job's end, all runs
        "between_runs_s": between,  # a run job's end to the next one's start
        "last_run_to_gather_s": gathered - runs_end,
        "gather_to_reports_s": reported - gathered,
        "reports_to_pdfs_s": printed - reported,
        "pdfs_to_exit_s": ended - printed,
    }


def one_round(round_dir: Path) -> tuple[dict, dict]:
    """(a), (b) and (c) once each, the target emptied before each; and where (c)'s time went."""
    job_dir, render_s = render_jobs(round_dir / "render")
    empty_target()
    loop_s = bare_loop(job_dir, round_dir / "loop")
    empty_target()
    bench_fio_s = bench_fio(round_dir / "bench-fio")
    empty_target()
    storbench_s, started = storbench(round_dir / "storbench")
    return {
        "bare_shell_loop_s": loop_s,
        "bench_fio_s": bench_fio_s,
        "storbench_s": storbench_s,
        "render_only_s": render_s,
    }, breakdown(round_dir / "storbench", started, storbench_s, loop_s)


def medians(rounds: list[dict]) -> dict:
    return {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}


def summarize(rounds: list[dict], breakdowns: list[dict]) -> dict:
    median = medians(rounds)
    return {
        "points": POINTS,
        "runtime_s_per_point": RUNTIME_S,
        "rounds": len(rounds),
        **{key: round(value, 2) for key, value in median.items()},
        "ratio_storbench_to_loop": round(median["storbench_s"] / median["bare_shell_loop_s"], 3),
        "ratio_storbench_to_bench_fio": round(median["storbench_s"] / median["bench_fio_s"], 3),
        "every_round": [{k: round(v, 2) for k, v in r.items()} for r in rounds],
        "storbench_breakdown": {k: round(v, 2) for k, v in medians(breakdowns).items()},
        "bench_fio_command": " ".join(bench_fio_command(Path("<out>"))),
        "bench_fio_differences": BENCH_FIO_DIFFERENCES,
        "note": "storbench time is a full snakemake run from an empty results tree (render, "
        "preflight, telemetry, run, parse, gather, report); render_only_s is the rendering "
        "step alone, done before the loop, which runs storbench's job files",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="repeat (a), (b), (c); medians")
    args = parser.parse_args()
    shutil.rmtree(WORK, ignore_errors=True)
    done = [one_round(WORK / f"round{k + 1}") for k in range(args.rounds)]
    result = summarize([times for times, _ in done], [parts for _, parts in done])
    write_result("overhead", result)
    print_table(
        f"orchestration overhead, {POINTS} points x {RUNTIME_S} s",
        [
            ("(a) bare shell loop s", result["bare_shell_loop_s"]),
            ("(b) bench-fio s", result["bench_fio_s"]),
            ("(c) storbench s", result["storbench_s"]),
            ("(c)/(a)", result["ratio_storbench_to_loop"]),
            ("(c)/(b)", result["ratio_storbench_to_bench_fio"]),
        ],
    )
    print()
    print_table("where (c)'s time goes, s", list(result["storbench_breakdown"].items()))
    shutil.rmtree(TARGET, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
