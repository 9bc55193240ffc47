import json
import os
import re
import sys

from snakemake.exceptions import WorkflowError

from storbench import config as storbench_config
from storbench import plan
from storbench.tools import get_tool

try:
    CAMPAIGN = storbench_config.load_campaign(config, source="config")
except storbench_config.ConfigError as error:
    raise WorkflowError(str(error)) from None


envvars:
    "PATH",


# Jobs call the `storbench` entry point of the interpreter running Snakemake (the project venv).
os.environ["PATH"] = os.pathsep.join(
    [os.path.dirname(sys.executable), os.environ["PATH"]]
)
EXPERIMENTS = list(CAMPAIGN.experiments)
RUNS = {
    name: {run.run_id: run for run in plan.experiment_runs(CAMPAIGN, name)}
    for name in EXPERIMENTS
}
USED_TARGETS = sorted({e.target_name for e in CAMPAIGN.experiments.values()})
JOB_SUFFIXES = sorted(
    {get_tool(e.tool).job_suffix.lstrip(".") for e in CAMPAIGN.experiments.values()}
)


wildcard_constraints:
    experiment="|".join(re.escape(name) for name in EXPERIMENTS),
    run_id=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    iteration=r"\d+",
    suffix="|".join(JOB_SUFFIXES),
    target="|".join(re.escape(t) for t in USED_TARGETS),
    bucket=r"[a-z0-9][a-z0-9.-]*",


def lock_name(target):
    return "lock_" + re.sub(r"\W", "_", target)


def target_locks():
    """One scheduler resource per storage target, 1 only for jobs on that target."""
    return {
        lock_name(target): (
            lambda wildcards, target=target: int(
                CAMPAIGN.experiments[wildcards.experiment].target_name == target
            )
        )
        for target in USED_TARGETS
    }


def require_target_lock_caps():
    """Without a cap Snakemake ignores a resource, so run jobs on one target could overlap."""
    missing = [
        lock_name(t)
        for t in USED_TARGETS
        if workflow.global_resources.get(lock_name(t)) != 1
    ]
    if missing:
        flags = " ".join(f"{name}=1" for name in missing)
        raise WorkflowError(
            "each storage target needs a run-job cap of 1; missing or not 1: "
            f"{', '.join(missing)}. Add them under 'resources:' in profiles/default/config.yaml "
            f"or pass --resources {flags}"
        )


require_target_lock_caps()


def experiment_of(wildcards):
    return CAMPAIGN.experiments[wildcards.experiment]


def run_of(wildcards):
    try:
        return RUNS[wildcards.experiment][wildcards.run_id]
    except KeyError:
        raise WorkflowError(
            f"experiment {wildcards.experiment!r} has no run {wildcards.run_id!r}"
        ) from None


def job_path(experiment, run_id):
    suffix = get_tool(CAMPAIGN.experiments[experiment].tool).job_suffix
    return f"results/{experiment}/jobs/{run_id}{suffix}"


def job_source(wildcards):
    """The template (or ready job file) a run's job file is made from."""
    experiment = experiment_of(wildcards)
    if experiment.job_file:
        return experiment.job_file
    if experiment.template:
        return experiment.template
    return workflow.source_path(
        f"../templates/{get_tool(experiment.tool).default_template}"
    )


def render_spec_json(wildcards):
    return plan.to_json(
        plan.render_spec(CAMPAIGN, wildcards.experiment, run_of(wildcards))
    )


def run_spec_json(wildcards):
    return plan.to_json(
        plan.run_spec(CAMPAIGN, wildcards.experiment, run_of(wildcards))
    )


def preflight_spec_json(wildcards):
    return plan.to_json(plan.preflight_spec(CAMPAIGN, wildcards.experiment))


def run_job_file(wildcards):
    return job_path(wildcards.experiment, wildcards.run_id)


def parsed_iterations(wildcards):
    experiment = experiment_of(wildcards)
    return [
        f"results/{wildcards.experiment}/parsed/{run_id}/it{iteration}.parquet"
        for run_id in RUNS[wildcards.experiment]
        for iteration in range(1, experiment.iterations + 1)
    ]


def parsed_timeseries(wildcards):
    return [
        path.replace(".parquet", ".timeseries.parquet")
        for path in parsed_iterations(wildcards)
    ]


def experiment_job_files(wildcards):
    return [
        job_path(wildcards.experiment, run_id) for run_id in RUNS[wildcards.experiment]
    ]


def report_meta_json(wildcards):
    name = wildcards.experiment
    experiment = CAMPAIGN.experiments[name]
    snapshot = {
        "experiments": {name: CAMPAIGN.raw["experiments"][name]},
        "hosts": {g: CAMPAIGN.raw["hosts"][g] for g in experiment.host_groups},
        "targets": {
            experiment.target_name: CAMPAIGN.raw["targets"][experiment.target_name]
        },
    }
    meta = {
        "title": f"storbench report: {name}",
        "experiment": name,
        "tool": experiment.tool,
        "hosts": [h["name"] for h in CAMPAIGN.hosts_of(name)],
        "target": {"name": experiment.target_name, **experiment.target},
        "iterations": experiment.iterations,
        "job": experiment.job,
        "sweep": experiment.sweep,
        "run_ids": list(RUNS[name]),
        "config_yaml": storbench_config.redacted_yaml(snapshot),
    }
    return json.dumps(meta, sort_keys=True)


def final_reports():
    return [f"reports/{name}/index.html" for name in CAMPAIGN.default_experiments]


S3_TARGETS = sorted(
    {e.target_name for e in CAMPAIGN.experiments.values() if e.target["type"] == "s3"}
)


def experiment_bucket_marker(wildcards):
    """S3 experiments need their bucket before the first run; other targets need nothing."""
    target = plan.experiment_target(CAMPAIGN, wildcards.experiment)
    if target["type"] != "s3":
        return []
    return f"results/targets/{target['name']}/buckets/{target['bucket']}.json"


def s3_target_json(wildcards):
    return json.dumps(
        {"name": wildcards.target, **CAMPAIGN.raw["targets"][wildcards.target]},
        sort_keys=True,
    )


def cleanup_spec_json():
    """Every S3 target of the config with the buckets its experiments use."""
    buckets = {}
    for name in EXPERIMENTS:
        target = plan.experiment_target(CAMPAIGN, name)
        if target["type"] == "s3":
            entry = buckets.setdefault(
                target["name"], {"target": target, "buckets": []}
            )
            entry["buckets"].append(target["bucket"])
    return json.dumps(list(buckets.values()), sort_keys=True)
