"""Snakemake's scheduler as a campaign grows: the time per job against the campaign's size.

A workflow of a campaign's shape with jobs that take no time: per run a job file, a run and
its parse (`touch`), the runs on one target (a resource of 1, priority 5, six inputs as a
run job has: its job file and shared preflight, telemetry and set-up markers), one gather;
Snakemake's job rate limiter and its collector as in a campaign. Whatever the jobs take beyond
their own few milliseconds is the scheduler's: after each job's end it looks at every job of
the campaign and weighs every job ready to run (the stat of each one's inputs, its resources,
the greedy selection). Two ways at each size (`--runs`, default 250, 1,000, 2,000): storbench's,
whose rounds weigh the first few ready jobs of each kind (storbench.run.scheduler_rounds), and
Snakemake's, which weighs them all. The anchor is Snakemake's time per job at the smallest
size, in the same run. `--subsample K` also times the largest size with Snakemake's own
`--scheduler-subsample K`. Writes bench/out/scheduler_rounds.json.
"""

from __future__ import annotations

import argparse
import os
import shutil

from common import OUT, REPO, SNAKEMAKE, print_table, timed_command, write_result

WORK = OUT / "scheduler-rounds-work"
SNAKEFILE = """\
from storbench.run import collector
from storbench.run.processes import drop_job_rate_limiter
from storbench.run.scheduler_rounds import weigh_a_few_of_each_kind

collector.collect_sparsely_while_planning()
RUNS = int(config["runs"])
SHARED = ["preflight.txt", "telemetry.txt", "setup.txt", "bucket.txt", "services.txt"]


onstart:
    drop_job_rate_limiter(workflow)
    collector.collect_as_usual_from_the_start()
    if config["weigh"]:
        weigh_a_few_of_each_kind(workflow, lambda job: (job.rule.name, job.priority))


rule all:
    input:
        "summary.txt",


rule shared:
    output:
        SHARED,
    shell:
        "touch {output}"


rule render:
    output:
        "jobs/{run}.txt",
    shell:
        "touch {output}"


rule run:
    input:
        "jobs/{run}.txt",
        SHARED,
    output:
        "raw/{run}.txt",
    priority: 5
    resources:
        lock=1,
    shell:
        "touch {output}"


rule parse:
    input:
        "raw/{run}.txt",
    output:
        "parsed/{run}.txt",
    shell:
        "touch {output}"


rule gather:
    input:
        expand("parsed/{run}.txt", run=range(RUNS)),
    output:
        "summary.txt",
    shell:
        "touch {output}"
"""


def campaign_seconds(runs: int, weigh: bool, *options: str) -> float:
    workdir = WORK / f"{runs}{'-'.join(('', *options))}"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    (workdir / "Snakefile").write_text(SNAKEFILE)
    command = [SNAKEMAKE, "--config", f"runs={runs}", f"weigh={int(weigh)}", "--cores", "2"]
    command += ["--resources", "lock=1"]
    command += ["--scheduler", "greedy", "--quiet", "all", *options]
    seconds = timed_command(command, workdir)
    assert len(list((workdir / "parsed").iterdir())) == runs
    shutil.rmtree(workdir)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[250, 1000, 2000])
    parser.add_argument("--subsample", type=int, default=0, help="0: not timed")
    args = parser.parse_args()
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    sizes = sorted(args.runs)
    ways = {"storbench": True, "snakemake": False}
    seconds = {way: {runs: campaign_seconds(runs, weigh) for runs in sizes}
               for way, weigh in ways.items()}  # fmt: skip
    per_job = {way: {runs: s / (3 * runs + 2) for runs, s in times.items()}
               for way, times in seconds.items()}  # fmt: skip
    anchor = per_job["snakemake"][sizes[0]]
    result: dict = {"jobs_per_run": 3, "anchor": f"snakemake at {sizes[0]} runs"}
    rows: list[tuple[str, object]] = []
    for way in ways:
        result[way] = {
            "seconds": {str(runs): round(s, 2) for runs, s in seconds[way].items()},
            "ms_per_job": {str(runs): round(1000 * s, 2) for runs, s in per_job[way].items()},
            "ratio_to_anchor": {str(r): round(s / anchor, 2) for r, s in per_job[way].items()},
        }
        rows += [(f"{way}, {runs} runs: s, ms per job, x the anchor",
                  f"{seconds[way][runs]:.1f}  {1000 * per_job[way][runs]:.1f}  "
                  f"{per_job[way][runs] / anchor:.2f}") for runs in sizes]  # fmt: skip
    if args.subsample:
        largest = sizes[-1]
        subsampled = campaign_seconds(largest, False, "--scheduler-subsample", str(args.subsample))
        result["subsample"] = {"k": args.subsample, "runs": largest,
                               "seconds": round(subsampled, 2)}  # fmt: skip
        rows.append((f"snakemake, {largest} runs, --scheduler-subsample {args.subsample}: s",
                     f"{subsampled:.1f}"))  # fmt: skip
    path = write_result("scheduler_rounds", result)
    rows.append(("written", path))
    print_table("Snakemake's scheduler by campaign size (jobs of no time)", rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
