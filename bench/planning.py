"""Scale of planning: `snakemake -n` for a 10,000-run campaign vs empty workflows.

Campaign: one fio experiment on localhost whose sweep is rw (4) x bs (5) x iodepth (10) x
numjobs (5) x size (10) = 10,000 runs, one iteration each; `snakemake -n` over storbench's
Snakefile plans render, run and parse jobs per run and the experiment's gather and report.
Baselines with exactly the job count Snakemake reports for the campaign, each in its own
temporary folder:
  flat:    rule all over N - 1 outputs of one one-line rule;
  chained: the same shape as the campaign (three one-line rules chained per run, one rule
           gathering them, one more after it, rule all), padded to the same count.
Nothing runs (-n). Each dry run is `--quiet rules`: Snakemake's listing of every job is
printing, the same for every workflow, not planning; its job stats table still goes to a file
(the job counts are read from it). `--first-job` also times a real run of storbench and of
the chained workflow until Snakemake starts its first job, then stops it: planning as a
campaign's start or resume waits for it, without a dry run's listing. Writes
bench/out/planning.json: the times, the ratios and the job counts.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml
from common import OUT, REPO, SNAKEMAKE, print_table, timed_command, write_result

WORK = OUT / "planning-work"
SWEEP = {
    "rw": ["read", "write", "randread", "randwrite"],
    "bs": ["4k", "8k", "16k", "64k", "1m"],
    "iodepth": [1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
    "numjobs": [1, 2, 4, 8, 16],
    "size": [f"{16 * k}MiB" for k in range(1, 11)],
}
QUICK_SIZES = ["64MiB"]  # --quick: 1,000 runs
LIMIT_SIZES = [f"{16 * k}MiB" for k in range(1, 21)]  # --at-limit: 20,000 runs, MAX_RUNS
STATS_LINE = re.compile(r"^(\w+)\s+(\d+)\s*$")

FLAT_SNAKEFILE = """\
N = {outputs}


rule all:
    input:
        expand("out/{{i}}.txt", i=range(N)),


rule one:
    output:
        "out/{{i}}.txt",
    shell:
        "touch {{output}}"
"""

CHAINED_SNAKEFILE = """\
RUNS = {runs}
EXTRA = {extra}


rule all:
    input:
        "report.txt",
        expand("extra/{{i}}.txt", i=range(EXTRA)),


rule render:
    output:
        "jobs/{{run}}.txt",
    shell:
        "touch {{output}}"


rule run:
    input:
        "jobs/{{run}}.txt",
    output:
        "raw/{{run}}.txt",
    shell:
        "touch {{output}}"


rule parse:
    input:
        "raw/{{run}}.txt",
    output:
        "parsed/{{run}}.txt",
    shell:
        "touch {{output}}"


rule gather:
    input:
        expand("parsed/{{run}}.txt", run=range(RUNS)),
    output:
        "summary.txt",
    shell:
        "touch {{output}}"


rule report:
    input:
        "summary.txt",
    output:
        "report.txt",
    shell:
        "touch {{output}}"


rule extra:
    output:
        "extra/{{i}}.txt",
    shell:
        "touch {{output}}"
"""


def campaign(sizes: list[str]) -> dict:
    return {
        "hosts": {"localhost": {"transport": "local"}},
        "targets": {"scratch": {"type": "directory", "path": "/var/tmp/storbench/bench-plan"}},
        "experiments": {
            "planned": {
                "tool": "fio",
                "hosts": "localhost",
                "target": "scratch",
                "iterations": 1,
                "job": {"runtime": "2s", "ioengine": "libaio", "direct": 1},
                "sweep": {**SWEEP, "size": sizes},
            }
        },
    }


def runs_of(config: dict) -> int:
    count = 1
    for values in config["experiments"]["planned"]["sweep"].values():
        count *= len(values)
    return count


def dry_run(workdir: Path, command: list[str]) -> tuple[float, dict[str, int]]:
    """(seconds, Snakemake's job stats: {rule: count, 'total': count}) of `snakemake -n`."""
    log = workdir / "dry-run.log"
    seconds = timed_command([*command, "-n", "--quiet", "rules"], workdir, log=log)
    stats = job_stats(log.read_text())
    if "total" not in stats:
        raise RuntimeError(f"no 'total' line in Snakemake's job stats: {log}")
    return seconds, stats


STOP_WAIT_S = 30


def time_to_first_job(workdir: Path, command: list[str]) -> float:
    """Seconds from starting ``command`` (a real run) until Snakemake starts its first job (it
    marks the job's outputs incomplete in .snakemake/incomplete); the run is then stopped."""
    shutil.rmtree(workdir / ".snakemake", ignore_errors=True)
    incomplete = workdir / ".snakemake" / "incomplete"
    log = workdir / "first-job.log"
    with open(log, "w") as output:
        start = time.monotonic()
        process = subprocess.Popen(
            command, cwd=workdir, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            while not (incomplete.is_dir() and any(incomplete.iterdir())):
                if process.poll() is not None:
                    raise RuntimeError(f"{command[0]} ended before its first job: {log}")
                time.sleep(0.002)
            seconds = time.monotonic() - start
        finally:
            # Snakemake stops its jobs on SIGTERM
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    return seconds


def job_stats(log_text: str) -> dict[str, int]:
    """The last 'Job stats:' table of a Snakemake log, as {rule: count}."""
    table = log_text.rsplit("Job stats:", 1)[-1].splitlines()
    stats = {}
    for line in table[3:]:  # after 'Job stats:', the header and its underline
        match = STATS_LINE.match(line)
        if not match:
            break
        stats[match[1]] = int(match[2])
    return stats


def storbench_command() -> list[str]:
    return [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--configfile", "campaign.yaml"]


def use_this_checkout() -> None:
    """Snakemake imports this checkout's storbench, not the one the venv was installed from."""
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])


def storbench_dry_run(workdir: Path, config: dict) -> tuple[float, dict[str, int]]:
    workdir.mkdir(parents=True)
    (workdir / "campaign.yaml").write_text(yaml.safe_dump(config))
    return dry_run(workdir, storbench_command())


BASELINE_COMMAND = [SNAKEMAKE, "-c1"]


def baseline_dry_run(workdir: Path, snakefile: str) -> tuple[float, dict[str, int]]:
    workdir.mkdir(parents=True)
    (workdir / "Snakefile").write_text(snakefile)
    return dry_run(workdir, BASELINE_COMMAND)


def chained_snakefile(jobs: int, runs: int) -> str:
    """render/run/parse per run, gather, report, all: 3 runs + 3; padding to ``jobs``."""
    extra = jobs - (3 * runs + 3)
    if extra < 0:
        raise ValueError(f"{jobs} jobs is fewer than the chained shape of {runs} runs needs")
    return CHAINED_SNAKEFILE.format(runs=runs, extra=extra)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 runs instead of 10,000")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="dry runs of each workflow, taken in turn; the fastest of each counts",
    )
    parser.add_argument(
        "--first-job",
        action="store_true",
        help="also time real runs of storbench and the chained workflow until their first job",
    )
    parser.add_argument(
        "--at-limit",
        action="store_true",
        help="storbench alone at MAX_RUNS (20,000 runs): time and peak memory of the dry run",
    )
    args = parser.parse_args()
    use_this_checkout()
    if args.at_limit:
        return at_limit()
    config = campaign(QUICK_SIZES if args.quick else SWEEP["size"])
    runs = runs_of(config)
    shutil.rmtree(WORK, ignore_errors=True)
    storbench_s, storbench_stats = storbench_dry_run(WORK / "storbench", config)
    jobs = storbench_stats["total"]
    flat_s, flat_stats = baseline_dry_run(WORK / "flat", FLAT_SNAKEFILE.format(outputs=jobs - 1))
    chained_s, chained_stats = baseline_dry_run(WORK / "chained", chained_snakefile(jobs, runs))
    if not jobs == flat_stats["total"] == chained_stats["total"]:
        raise RuntimeError(
            f"job counts differ: storbench {jobs}, flat {flat_stats['total']}, "
            f"chained {chained_stats['total']}"
        )
    for _ in range(args.repeat - 1):  # a shared machine: the fastest of each is the least disturbed
        storbench_s = min(storbench_s, dry_run(WORK / "storbench", storbench_command())[0])
        flat_s = min(flat_s, dry_run(WORK / "flat", BASELINE_COMMAND)[0])
        chained_s = min(chained_s, dry_run(WORK / "chained", BASELINE_COMMAND)[0])
    first_job = {}
    if args.first_job:
        first_job = first_job_times(WORK, args.repeat)
    sweep = config["experiments"]["planned"]["sweep"]
    result = {
        "runs": runs,
        "repeat": args.repeat,
        "sweep_lengths": {key: len(values) for key, values in sweep.items()},
        "storbench_dry_run_s": round(storbench_s, 2),
        "empty_flat_dry_run_s": round(flat_s, 2),
        "empty_chained_dry_run_s": round(chained_s, 2),
        "ratio_storbench_to_flat": round(storbench_s / flat_s, 2),
        "ratio_storbench_to_chained": round(storbench_s / chained_s, 2),
        "storbench_job_stats": storbench_stats,
        "empty_flat_job_stats": flat_stats,
        "empty_chained_job_stats": chained_stats,
        **first_job,
        "note": "job stats are the table each dry run printed; times: the fastest of `repeat`",
    }
    write_result("planning", result)
    print_table(
        f"snakemake -n --quiet rules, {runs} runs (fastest of {args.repeat})",
        [
            ("jobs (each workflow)", jobs),
            ("storbench s", result["storbench_dry_run_s"]),
            ("empty flat s", result["empty_flat_dry_run_s"]),
            ("empty chained s", result["empty_chained_dry_run_s"]),
            ("storbench / flat", result["ratio_storbench_to_flat"]),
            ("storbench / chained", result["ratio_storbench_to_chained"]),
            *[(key.replace("_", " "), value) for key, value in first_job.items()],
        ],
    )
    shutil.rmtree(WORK, ignore_errors=True)
    return 0


def first_job_times(work: Path, repeat: int) -> dict[str, float]:
    """Time to the first job of a real run, storbench and the chained workflow in turn."""
    storbench_s = chained_s = float("inf")
    for _ in range(repeat):
        storbench_s = min(storbench_s, time_to_first_job(work / "storbench", storbench_command()))
        chained_s = min(chained_s, time_to_first_job(work / "chained", BASELINE_COMMAND))
    return {
        "storbench_first_job_s": round(storbench_s, 2),
        "empty_chained_first_job_s": round(chained_s, 2),
        "ratio_first_job_storbench_to_chained": round(storbench_s / chained_s, 2),
    }


def at_limit() -> int:
    """Where MAX_RUNS lies: the dry run of a campaign of exactly that many runs."""
    import resource

    sys.path.insert(0, str(REPO))
    from storbench.config.sweep import MAX_RUNS

    config = campaign(LIMIT_SIZES)
    runs = runs_of(config)
    if runs != MAX_RUNS:
        raise RuntimeError(f"the limit campaign has {runs} runs, MAX_RUNS is {MAX_RUNS}")
    shutil.rmtree(WORK, ignore_errors=True)
    seconds, stats = storbench_dry_run(WORK / "limit", config)
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    result = {
        "runs": runs,
        "jobs": stats["total"],
        "storbench_dry_run_s": round(seconds, 2),
        "peak_rss_mib": round(peak_mib),
    }
    write_result("planning_limit", result)
    print_table(f"snakemake -n at MAX_RUNS ({runs} runs)", list(result.items()))
    shutil.rmtree(WORK, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
