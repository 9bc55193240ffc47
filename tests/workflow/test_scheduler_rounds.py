"""Snakemake's scheduler runs a round after each job's end, not one a second per job ended.

Its job rate limiter (dropped for a local campaign, storbench.run.processes) started a Timer
after each round that ran one more round, and that round another: every job's end added a
chain, so a long campaign's scheduler kept a core busy beside the benchmark. Counted in
Snakemake's own debug lines ('Ready jobs: N', one per round with a job waiting to run).
"""

from __future__ import annotations

from tests.workflow.test_workflow import snakemake, tiny_config


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
