"""Snakemake's scheduler runs a round after each job's end, not one a second per job ended.

Its job rate limiter (dropped for a local campaign, storbench.run.processes) started a Timer
after each round that ran one more round, and that round another: every job's end added a
chain, so a long campaign's scheduler kept a core busy beside the benchmark. Counted in
Snakemake's own debug lines ('Ready jobs: N', one per round with a job waiting to run).
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from tests.workflow.test_workflow import harnessed_snakemake, snakemake, tiny_config


def test_a_round_per_job_end_while_runs_wait_for_their_target(tmp_path):
    config = tiny_config(tmp_path / "target", rw=("randread", "read", "write"))
    tiny = config["experiments"]["tiny"]
    tiny["iterations"] = 1
    tiny["job"]["runtime"] = "3s"  # three runs of 3 s, one at a time (one target)
    result = snakemake(tmp_path, config, "--verbose")
    output = result.stdout + result.stderr
    finished = output.count("Finished jobid: ")
    rounds = output.count("Ready jobs: ")
    assert finished == 16  # render, run, parse per run; preflight, telemetry, gather, reports, all
    # the first round, then at most one per job's end (a round with nothing ready says nothing)
    assert rounds <= finished + 1, f"{rounds} rounds for {finished} jobs"


def test_a_limit_asked_for_is_kept(tmp_path):
    """--max-jobs-per-timespan other than Snakemake's default: its rounds, one a second."""
    config = tiny_config(tmp_path / "target", rw=("randread", "read"))
    tiny = config["experiments"]["tiny"]
    tiny["iterations"] = 1
    tiny["job"]["runtime"] = "3s"
    result = snakemake(tmp_path, config, "--verbose", "--max-jobs-per-timespan", "1000/1s")
    output = result.stdout + result.stderr
    assert output.count("Ready jobs: ") > output.count("Finished jobid: ") + 1


# Snakemake whose rounds weigh one job of each kind (storbench's rounds, their limits at 0 and 1)
ONE_OF_EACH_KIND_SNAKEMAKE = """
import atexit, collections, json, sys
from snakemake.cli import main
from storbench.run import scheduler_rounds

weigh = scheduler_rounds.weigh_a_few_of_each_kind
kinds = collections.Counter()


def weigh_one_of_each(workflow, kind):
    def counted(job):
        found = kind(job)
        kinds[json.dumps(found)] += 1
        return found

    return weigh(workflow, counted, round_limit=0, kind_limit=1)


scheduler_rounds.weigh_a_few_of_each_kind = weigh_one_of_each
atexit.register(lambda: print("KINDS " + json.dumps(kinds), file=sys.stderr))
sys.argv = ["snakemake", *sys.argv[1:]]
main()
"""


def test_rounds_that_weigh_one_job_of_each_kind_run_the_whole_campaign(tmp_path):
    config = tiny_config(tmp_path / "target", rw=("randread", "read", "write"))
    _, seen = harnessed_snakemake(
        ONE_OF_EACH_KIND_SNAKEMAKE, "KINDS", tmp_path, config, "--cores", "2"
    )
    kinds = {tuple(json.loads(kind)[:2]): kind for kind in seen}
    # a run's kind: its rule, its priority, the target whose lock it holds and the port of
    # this machine its hosts' workers dial (controller_port_<port>: none for fio)
    assert json.loads(kinds[("run_iteration", 5)]) == ["run_iteration", 5, ["scratch"], None]
    assert ("render_job", 0) in kinds and ("parse_iteration", 0) in kinds
    # 3 runs x 2 iterations, each run's rows in the summary
    summary = pq.read_table(tmp_path / "results" / "tiny" / "summary.parquet").to_pylist()
    assert sorted({(row["rw"], row["iteration"]) for row in summary}) == [
        (rw, k) for rw in ("randread", "read", "write") for k in (1, 2)
    ]
