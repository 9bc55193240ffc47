"""What Snakemake does for each planned run, through a real dry run of the Snakefile."""

from tests.workflow.test_workflow import harnessed_snakemake, planned_jobs, tiny_config

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
    config = tiny_config(tmp_path / "target")
    result, asked = harnessed_snakemake(
        COUNTING_SNAKEMAKE, "SIGNATURES", tmp_path, config, "-n", "--quiet", "rules"
    )
    # 2 rw x 2 iterations: 4 run jobs, 2 job files, each function called for each of its jobs
    planned = planned_jobs(result)
    assert (planned["run_iteration"], planned["render_job"]) == (4, 2)
    # once each, as the Snakefile is read; before, twice per job (8 for a run's functions)
    assert {name: asked.get(name) for name in PER_RUN_FUNCTIONS} == dict.fromkeys(
        PER_RUN_FUNCTIONS, 1
    )


# Snakemake with each run's spec counted as it is made, and the collector's state at the exit
WATCHED_SNAKEMAKE = """
import atexit, collections, gc, json, sys
from snakemake.cli import main
from storbench.plan import specs

made = collections.Counter()
run_spec = specs.run_spec


def counted(campaign, experiment, run):
    made[run.run_id] += 1
    return run_spec(campaign, experiment, run)


specs.run_spec = counted
atexit.register(
    lambda: print(
        "WATCHED "
        + json.dumps(
            {
                "specs": made,
                "thresholds": gc.get_threshold(),
                "frozen": gc.get_freeze_count(),
            }
        ),
        file=sys.stderr,
    )
)
sys.argv = ["snakemake", *sys.argv[1:]]
main()
"""


def watched_snakemake(workdir, config, *args) -> dict:
    return harnessed_snakemake(
        WATCHED_SNAKEMAKE, "WATCHED", workdir, config, "--cores", "2", *args
    )[1]


def test_planning_makes_each_new_runs_spec_once(tmp_path):
    config = tiny_config(tmp_path / "target")
    # more runs than the plan's cache of the last 8 specs: made once, not again for the params
    config["experiments"]["tiny"]["sweep"]["bs"] = ["4k", "8k", "16k", "32k", "64k", "128k"]
    watched = watched_snakemake(tmp_path, config, "-n")
    assert len(watched["specs"]) == 12
    assert set(watched["specs"].values()) == {1}


def test_planning_collects_garbage_sparsely_and_the_campaign_as_usual(tmp_path):
    config = tiny_config(tmp_path / "target", rw=("read",))
    config["experiments"]["tiny"]["iterations"] = 1
    planned = watched_snakemake(tmp_path, config, "-n")
    assert planned["thresholds"] == [100_000, 50, 100]
    assert planned["frozen"] == 0
    ran = watched_snakemake(tmp_path, config)
    assert ran["thresholds"] == [700, 10, 10]
    # the DAG and everything built before the first job, out of the campaign's collections
    assert ran["frozen"] > 10_000
