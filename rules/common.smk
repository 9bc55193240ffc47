import functools
import json
import os
import re
import sys

from snakemake.exceptions import WorkflowError

from storbench.config import campaign as storbench_config
from storbench.plan import specs as plan
from storbench.plan import preparation as prepare_plan
from storbench.config import search as search_config
from storbench.plan import search
from storbench.core import paths
from storbench.tools import get_tool

CONFIG_SOURCE = ", ".join(map(str, workflow.configfiles)) or "config"
try:
    # Snakemake's own loader keeps the last of two equal keys; ours refuses them.
    for configfile_path in workflow.configfiles:
        storbench_config.load_yaml(configfile_path)
    CAMPAIGN = storbench_config.load_campaign(config, source=CONFIG_SOURCE)
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
    name: {run.run_id: run for run in CAMPAIGN.experiment_runs(name)}
    for name in EXPERIMENTS
}
USED_TARGETS = sorted(
    {
        t
        for e in CAMPAIGN.experiments.values()
        for t in (e.target_set or (e.target_name,))
    }
    | {d.target_name for d in CAMPAIGN.datasets.values()}
    | {r.target_name for r in CAMPAIGN.recipes.values()}
)
HOST_NAMES = sorted(
    {h["name"] for hosts in CAMPAIGN.host_groups.values() for h in hosts}
)
SEARCH_EXPERIMENTS = [n for n, e in CAMPAIGN.experiments.items() if e.search]
SERVICE_TOOLS = plan.service_tools(CAMPAIGN)
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
    host="|".join(re.escape(name) for name in HOST_NAMES),
    tool="|".join(SERVICE_TOOLS) or "no-service-tools",
    step=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    dataset="|".join(re.escape(name) for name in CAMPAIGN.datasets) or "no-datasets",
    recipe="|".join(re.escape(name) for name in CAMPAIGN.recipes) or "no-recipes",
    stage=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    probe=r"p\d+",


def names_pattern(names):
    """A wildcard pattern of exactly these names; one that matches nothing when empty."""
    return "|".join(re.escape(name) for name in names) or "(?!x)x"


# A search experiment's summary and report come from its probes, not from planned runs.
SEARCH_PATTERN = names_pattern(SEARCH_EXPERIMENTS)
GRID_PATTERN = names_pattern(
    [name for name in EXPERIMENTS if name not in SEARCH_EXPERIMENTS]
)


def lock_name(target):
    return "lock_" + re.sub(r"\W", "_", target)


def target_locks():
    """One scheduler resource per storage target, 1 only for jobs on that target."""
    return {
        lock_name(target): (
            lambda wildcards, target=target: int(target in run_targets(wildcards))
        )
        for target in USED_TARGETS
    }


def run_targets(wildcards):
    """Every storage target a run writes to (all members for a run on a whole target set)."""
    run = RUNS[wildcards.experiment].get(getattr(wildcards, "run_id", None))
    if run is not None and run.targets:
        return run.targets
    return (CAMPAIGN.experiments[wildcards.experiment].target_name,)


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
    return experiment_job_source(wildcards.experiment)


@functools.cache  # asked once per run while Snakemake plans
def experiment_job_source(experiment_name):
    experiment = CAMPAIGN.experiments[experiment_name]
    if experiment.job_file:
        return experiment.job_file
    if experiment.template:
        return experiment.template
    return str(paths.TEMPLATES_DIR / get_tool(experiment.tool).default_template)


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


@functools.cache
def uses_per_host_jobs(experiment_name):
    return plan.per_host_jobs(CAMPAIGN.experiments[experiment_name])


def run_job_file(wildcards):
    """The run's job file, or one per host (service mode, host split, host facts)."""
    if not uses_per_host_jobs(wildcards.experiment):
        return job_path(wildcards.experiment, wildcards.run_id)
    suffix = get_tool(experiment_of(wildcards).tool).job_suffix
    return [
        f"results/{wildcards.experiment}/jobs/{wildcards.run_id}/{host}{suffix}"
        for host in run_of(wildcards).hosts
    ]


def render_host_spec_json(wildcards):
    return plan.to_json(
        plan.render_spec(
            CAMPAIGN, wildcards.experiment, run_of(wildcards), host=wildcards.host
        )
    )


def host_facts_file(wildcards):
    """A job with host-fact expressions is rendered from that host's telemetry."""
    if plan.uses_host_facts(experiment_of(wildcards)):
        return f"results/telemetry/{wildcards.host}.json"
    return []


def facts_flag(wildcards, input):
    return f"--facts {input.facts}" if input.facts else ""


def services_marker(wildcards):
    """Service-mode runs need the campaign's services (started once, stopped at the end)."""
    experiment = experiment_of(wildcards)
    if experiment.execution != "service":
        return []
    return ancient(f"results/services/{experiment.tool}.json")


def services_spec_json(wildcards):
    return plan.to_json(plan.service_spec(CAMPAIGN, wildcards.tool))


def telemetry_spec_json(wildcards):
    return plan.to_json(plan.telemetry_spec(CAMPAIGN, wildcards.host))


def host_preflights(wildcards):
    """Preflight first: it names every bad host at once, telemetry would stop at the first."""
    return [
        ancient(f"results/{name}/preflight.json")
        for name in EXPERIMENTS
        if any(h["name"] == wildcards.host for h in CAMPAIGN.hosts_of(name))
    ]


def experiment_telemetry(wildcards):
    return [
        f"results/telemetry/{host['name']}.json"
        for host in CAMPAIGN.hosts_of(wildcards.experiment)
    ]


def step_iterations(wildcards):
    experiment = experiment_of(wildcards)
    paths = [
        f"results/{wildcards.experiment}/parsed/{run_id}/it{iteration}.parquet"
        for run_id, run in RUNS[wildcards.experiment].items()
        if run.step == wildcards.step
        for iteration in range(1, experiment.iterations + 1)
    ]
    if not paths:
        raise WorkflowError(
            f"experiment {wildcards.experiment!r} has no client step {wildcards.step!r}"
        )
    return paths


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


def experiment_fault_manifests(wildcards):
    """The manifests record when each fault command ran; only fault experiments need them."""
    name = wildcards.experiment
    if not CAMPAIGN.experiments[name].faults:
        return []
    return [
        f"results/{name}/raw/{run_id}/it{iteration}/run.json"
        for run_id in RUNS[name]
        for iteration in range(1, CAMPAIGN.experiments[name].iterations + 1)
    ]


def experiment_job_files(wildcards):
    name = wildcards.experiment
    if not uses_per_host_jobs(name):
        return [job_path(name, run_id) for run_id in RUNS[name]]
    suffix = get_tool(CAMPAIGN.experiments[name].tool).job_suffix
    return [
        f"results/{name}/jobs/{run_id}/{host}{suffix}"
        for run_id, run in RUNS[name].items()
        for host in run.hosts
    ]


def report_meta_json(wildcards):
    name = wildcards.experiment
    experiment = CAMPAIGN.experiments[name]
    snapshot = {
        **(
            {"data_path": CAMPAIGN.raw["data_path"]}
            if "data_path" in CAMPAIGN.raw
            else {}
        ),
        "experiments": {name: CAMPAIGN.raw["experiments"][name]},
        "hosts": {g: CAMPAIGN.raw["hosts"][g] for g in experiment.host_groups},
        "targets": {
            t: CAMPAIGN.raw["targets"][t]
            for t in (experiment.target_set or (experiment.target_name,))
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
        "execution": experiment.execution,
        "steps": plan.steps_meta(CAMPAIGN, name),
        "data_path": CAMPAIGN.raw.get("data_path"),
        "slow_host_percent": experiment.slow_host_percent,
        "max_start_skew_s": experiment.max_start_skew_s,
        "rwmixreadhost": experiment.rwmixreadhost,
        "target_set": list(experiment.target_set),
        "preparation": experiment_preparation_meta(experiment),
        "fault_analysis": experiment.fault_analysis,
        "soak": experiment.soak,
    }
    return json.dumps(meta, sort_keys=True)


def experiment_preparation_meta(experiment):
    if not (experiment.dataset or experiment.precondition):
        return None
    page = None
    if experiment.precondition:
        recipe = CAMPAIGN.recipes[experiment.precondition]
        page = f"../targets/{recipe.target_name}/{recipe.name}/index.html"
    return {
        "dataset": experiment.dataset,
        "precondition": experiment.precondition,
        "flush": experiment.flush_phase,
        "page": page,
    }


REPORT_SETTINGS = CAMPAIGN.report_settings
CAMPAIGN_REPORT = REPORT_SETTINGS["name"]


def campaign_grid_summaries(wildcards):
    return [
        f"results/{name}/summary.parquet"
        for name in CAMPAIGN.default_experiments
        if name not in SEARCH_EXPERIMENTS
    ]


def campaign_search_results(wildcards):
    return [
        f"results/{name}/search.json"
        for name in CAMPAIGN.default_experiments
        if name in SEARCH_EXPERIMENTS
    ]


def campaign_experiment_reports(wildcards):
    """The campaign report links them, so they are built first."""
    return [f"reports/{name}/index.html" for name in CAMPAIGN.default_experiments]


def campaign_telemetry(wildcards):
    hosts = {
        host["name"]
        for name in CAMPAIGN.default_experiments
        for host in CAMPAIGN.hosts_of(name)
    }
    return [f"results/telemetry/{host}.json" for host in sorted(hosts)]


def campaign_meta_json():
    names = CAMPAIGN.default_experiments
    experiments = {
        name: {
            "tool": CAMPAIGN.experiments[name].tool,
            "kind": "search" if name in SEARCH_EXPERIMENTS else "grid",
            "description": CAMPAIGN.raw["experiments"][name].get("description"),
            "iterations": CAMPAIGN.experiments[name].iterations,
            "hosts": [h["name"] for h in CAMPAIGN.hosts_of(name)],
            "target": CAMPAIGN.experiments[name].target_name,
            "job": CAMPAIGN.experiments[name].job,
            "runs": len(RUNS[name]) or None,
        }
        for name in names
    }
    hosts = [
        {"name": h["name"], "group": h["group"], "transport": h["transport"]}
        for hosts in CAMPAIGN.host_groups.values()
        for h in hosts
    ]
    meta = {
        "title": REPORT_SETTINGS["title"],
        "name": CAMPAIGN_REPORT,
        "experiments": experiments,
        "hosts": hosts,
        "targets": storbench_config.redacted(CAMPAIGN.raw["targets"]),
        "config_yaml": storbench_config.redacted_yaml(CAMPAIGN.raw),
    }
    return json.dumps(meta, sort_keys=True)


def final_reports():
    folders = [*CAMPAIGN.default_experiments, CAMPAIGN_REPORT]
    reports = [f"reports/{name}/index.html" for name in folders]
    if REPORT_SETTINGS["pdf"]:
        reports += [f"reports/{name}/report.pdf" for name in folders]
    recipes = {
        CAMPAIGN.experiments[name].precondition for name in CAMPAIGN.default_experiments
    }
    reports += [
        f"{prepare_plan.report_dir(CAMPAIGN.recipes[name])}/index.html"
        for name in sorted(recipes - {None})
    ]
    return reports


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
    """Every tool service of the campaign, and every S3 target with its experiments' buckets."""
    buckets = {}
    for name in EXPERIMENTS:
        target = plan.experiment_target(CAMPAIGN, name)
        if target["type"] == "s3":
            entry = buckets.setdefault(
                target["name"], {"target": target, "buckets": []}
            )
            entry["buckets"].append(target["bucket"])
    services = [plan.service_spec(CAMPAIGN, tool) for tool in SERVICE_TOOLS]
    return plan.to_json({"services": services, "buckets": list(buckets.values())})


def stop_campaign_services():
    """At the end of the workflow (success or error): no service outlives the campaign."""
    from storbench.hosts import services

    for tool in SERVICE_TOOLS:
        if not services.maybe_running(tool):
            continue  # `snakemake plan` or a dry run touched no host and stops nothing
        spec = plan.service_spec(CAMPAIGN, tool)
        try:
            services.stop_services(spec["hosts"], tool, spec["port"])
        except services.ServiceError as error:
            print(f"storbench: {error}; run `snakemake cleanup` again", file=sys.stderr)


def network_spec_json(wildcards):
    spec = plan.network_spec(CAMPAIGN)
    if spec is None:
        raise WorkflowError(
            "the network check needs a 'network:' section (server, clients) in the config"
        )
    return plan.to_json(spec)


def network_min_fraction():
    return (CAMPAIGN.raw.get("network") or {}).get("min_fraction", 0.8)


# --- datasets and preconditioning -------------------------------------------------------------


def preparation_locks():
    """Preparation jobs hold their target's lock: no benchmark runs on a target being prepared."""
    return {
        lock_name(target): (
            lambda wildcards, target=target: int(wildcards.target == target)
        )
        for target in USED_TARGETS
    }


def recipe_of(wildcards):
    recipe = CAMPAIGN.recipes[wildcards.recipe]
    if recipe.target_name != wildcards.target:
        raise WorkflowError(
            f"recipe {recipe.name!r} is for target {recipe.target_name!r}, not {wildcards.target!r}"
        )
    return recipe


def dataset_spec_json(wildcards):
    dataset = CAMPAIGN.datasets[wildcards.dataset]
    if dataset.target_name != wildcards.target:
        raise WorkflowError(
            f"dataset {dataset.name!r} is on target {dataset.target_name!r}, not {wildcards.target!r}"
        )
    return plan.to_json(prepare_plan.dataset_spec(dataset))


def recipe_stages(wildcards):
    return recipe_of(wildcards).stages()


def stage_of(wildcards):
    for stage in recipe_stages(wildcards):
        if stage.stage_id == wildcards.stage:
            return stage
    raise WorkflowError(f"recipe {wildcards.recipe!r} has no stage {wildcards.stage!r}")


def previous_stage_marker(wildcards):
    """Stages run in recipe order: each waits for the marker of the one before it."""
    stage = stage_of(wildcards)
    if stage.index == 1:
        return []
    previous = recipe_stages(wildcards)[stage.index - 2]
    return prepare_plan.stage_marker(recipe_of(wildcards), previous.stage_id)


def stage_spec_json(wildcards):
    return plan.to_json(
        prepare_plan.stage_spec(recipe_of(wildcards), stage_of(wildcards))
    )


def recipe_spec_json(wildcards):
    return plan.to_json(prepare_plan.recipe_spec(recipe_of(wildcards)))


def recipe_stage_markers(wildcards):
    recipe = recipe_of(wildcards)
    return [prepare_plan.stage_marker(recipe, s.stage_id) for s in recipe.stages()]


def before_flush_runs(wildcards):
    """The flush waits for every run that must see the data still in the write buffer."""
    return [
        f"results/{name}/raw/{run_id}/it{iteration}/run.json"
        for name, experiment in CAMPAIGN.experiments.items()
        if experiment.precondition == wildcards.recipe
        and experiment.flush_phase == "before"
        for run_id in RUNS[name]
        for iteration in range(1, experiment.iterations + 1)
    ]


def recipe_flushed_marker(wildcards):
    recipe = recipe_of(wildcards)
    return prepare_plan.flushed_marker(recipe) if recipe.flush else []


def flushed_flag(wildcards, input):
    return f"--flushed {input.flushed}" if input.flushed else ""


def experiment_preparation(wildcards):
    """A run waits for its dataset and its recipe (before or after the flush)."""
    experiment = experiment_of(wildcards)
    markers = []
    if experiment.dataset:
        markers.append(
            prepare_plan.dataset_marker(CAMPAIGN.datasets[experiment.dataset])
        )
    if experiment.precondition:
        recipe = CAMPAIGN.recipes[experiment.precondition]
        if experiment.flush_phase == "after":
            markers.append(prepare_plan.flushed_marker(recipe))
        else:
            markers.append(prepare_plan.prepared_marker(recipe))
    # ancient: a dataset prepared again later must not make finished runs look outdated
    return [ancient(marker) for marker in markers]


# --- latency-SLO search -----------------------------------------------------------------------


def search_settings(wildcards):
    settings = experiment_of(wildcards).search
    if not settings:
        raise WorkflowError(f"experiment {wildcards.experiment!r} is not a search")
    return settings


def search_spec_json(wildcards):
    return plan.to_json(plan.search_spec(CAMPAIGN, wildcards.experiment))


def search_probe_markers(wildcards):
    return [
        search.probe_marker(wildcards.experiment, probe)
        for probe in search_config.probe_ids(search_settings(wildcards))
    ]


def earlier_probe_markers(wildcards):
    """A probe decides from every probe before it, so it waits for all of them."""
    markers = search_probe_markers(wildcards)
    own = search.probe_marker(wildcards.experiment, wildcards.probe)
    if own not in markers:
        raise WorkflowError(
            f"search {wildcards.experiment!r} has probes p01..p{len(markers):02d},"
            f" not {wildcards.probe!r}"
        )
    return markers[: markers.index(own)]
