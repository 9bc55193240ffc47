"""What Snakemake does for each planned run, through a real dry run of the Snakefile."""

import json
import subprocess
import sys

import yaml

from tests.workflow.test_workflow import REPO, planned_jobs, tiny_config

# Snakemake with inspect.signature counted per function, the counts printed as it exits
COUNTING_SNAKEMAKE = """
import atexit, collections, inspect, json, sys
from snakemake.cli import main

asked = collections.Counter()
signature = inspect.signature


def counted(function, *args, **kwargs):
    asked[getattr(function, "__qualname__", "")] += 1
    return signature(function, *args, **kwargs)


inspect.signature = counted
atexit.register(lambda: print("SIGNATURES " + json.dumps(asked), file=sys.stderr))
sys.argv = ["snakemake", *sys.argv[1:]]
main()
"""
PER_RUN_FUNCTIONS = ("render_spec_json", "run_spec_json", "run_time_limit", "run_inputs")


def test_the_per_run_input_functions_signatures_are_read_once_not_per_job(tmp_path):
    (tmp_path / "campaign.yaml").write_text(yaml.safe_dump(tiny_config(tmp_path / "target")))
    command = [sys.executable, "-c", COUNTING_SNAKEMAKE, "-s", str(REPO / "Snakefile")]
    command += ["--configfile", "campaign.yaml", "-n", "--quiet", "rules"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(line for line in result.stderr.splitlines() if line.startswith("SIGNATURES "))
    asked = json.loads(line.removeprefix("SIGNATURES "))
    # 2 rw x 2 iterations: 4 run jobs, 2 job files, each function called for each of its jobs
    planned = planned_jobs(result)
    assert (planned["run_iteration"], planned["render_job"]) == (4, 2)
    # once each, as the Snakefile is read; before, twice per job (8 for a run's functions)
    assert {name: asked.get(name) for name in PER_RUN_FUNCTIONS} == dict.fromkeys(
        PER_RUN_FUNCTIONS, 1
    )
