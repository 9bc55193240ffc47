# Input functions: each asks storbench.plan.workflow.WorkflowPlan one question by wildcards.
import inspect
import json  # noqa: F401  (rules/report.smk passes the config to `storbench plan`)
import os
import re
import sys

from snakemake import persistence
from snakemake.common import overwrite_function_params
from snakemake.exceptions import WorkflowError

from storbench.config import campaign as storbench_config
from storbench.config import compare as config_compare
from storbench.config import source as config_source
from storbench.core import paths
from storbench.plan.checks import adapter_problems
from storbench.plan.workflow import (
    WorkflowPlan,
    lock_name,
    names_pattern,
    port_lock_name,
)
from storbench.run import collector, live_progress
from storbench.run.cleanup import stop_campaign_services as stop_services_of
from storbench.run.job_records import keep_pandas_out_of_job_records
from storbench.run.processes import (
    cancel_pending_timers,
    drop_job_rate_limiter,
    forward_sigint_to_steps,
)
from storbench.run.render import own_job_problems
from storbench.run.scheduler_rounds import weigh_a_few_of_each_kind

# the DAG's millions of objects, scanned again at each of the collector's passes as they grow
collector.collect_sparsely_while_planning()

CONFIG_SOURCE = ", ".join(map(str, workflow.configfiles)) or "config"
try:
    # Snakemake's own loader keeps the last of two equal keys; ours refuses them.
    for configfile_path in workflow.configfiles:
        config_source.load_yaml(configfile_path)
    CAMPAIGN = storbench_config.load_campaign(config, source=CONFIG_SOURCE)
    # Before any path is built: a named campaign's outputs (and its steps') go to its own folders
    paths.use_campaign(CAMPAIGN.name)
    # What only the tools' adapters and own templates can say (as `storbench check`): before
    # any job starts, not at a later experiment's render (0.3 s for 10,000 fio runs)
    if ADAPTER_PROBLEMS := adapter_problems(CAMPAIGN) + own_job_problems(CAMPAIGN):
        raise config_source.ConfigError(ADAPTER_PROBLEMS, source=CONFIG_SOURCE)
except config_source.ConfigError as error:
    located = config_source.with_lines(error, workflow.configfiles)
    raise WorkflowError(str(located)) from None
PLAN = WorkflowPlan(CAMPAIGN)
# The storbench logger plugin prints runs done and time left from the campaign's plan
live_progress.follow(CAMPAIGN)
# SIGINT to Snakemake alone would let every running benchmark finish: stop them as Ctrl-C does
forward_sigint_to_steps()
# Snakemake's record of a job's params imported pandas when the first job ended (0.4 s)
keep_pandas_out_of_job_records(getattr(persistence, "PersistenceBase", None))


envvars:
    "PATH",


# Jobs call the `storbench` entry point of the interpreter running Snakemake (the project venv).
os.environ["PATH"] = os.pathsep.join(
    [os.path.dirname(sys.executable), os.environ["PATH"]]
)
EXPERIMENTS = PLAN.experiments
CAMPAIGN_REPORT = PLAN.campaign_report
# Processes drawing one report's figures: a second core halves their time.
FIGURE_WORKERS = 2
CAMPAIGN_HOSTS = PLAN.campaign_hosts()
# A search experiment's summary and report come from its probes, not from planned runs.
SEARCH_PATTERN = names_pattern(PLAN.search_experiments)
GRID_PATTERN = names_pattern(PLAN.grid_experiments)


# A run's host job folder (jobs/<run_id>) is never a standalone job file (jobs/<run_id>.fio).
HOST_JOBS_RUN_ID = r"[A-Za-z0-9][A-Za-z0-9._-]*(?<!{})".format(
    ")(?<!".join(rf"\.{re.escape(suffix)}" for suffix in PLAN.job_suffixes)
)


wildcard_constraints:
    experiment="|".join(re.escape(name) for name in EXPERIMENTS),
    run_id=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    iteration=r"\d+",
    suffix="|".join(PLAN.job_suffixes),
    target="|".join(re.escape(t) for t in PLAN.used_targets),
    bucket=r"[a-z0-9][a-z0-9.-]*",
    host="|".join(re.escape(name) for name in PLAN.host_names),
    tool="|".join(PLAN.service_tools) or "no-service-tools",
    step=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    dataset="|".join(re.escape(name) for name in CAMPAIGN.datasets) or "no-datasets",
    recipe="|".join(re.escape(name) for name in CAMPAIGN.recipes) or "no-recipes",
    stage=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    probe=r"p\d+",


def per_run(function):
    """Snakemake asks for an input function's parameters twice per call; a campaign calls the
    per-run ones once per run each, so they are read once, here, and handed to Snakemake
    the way its own helpers (subpath) hand theirs (no inspect.signature per call)."""
    overwrite_function_params(function, inspect.signature(function).parameters)
    return function


def run_lock(target):
    """A run job's hold on a target's lock: a number when it is the same for every run (no
    function call per job), else a function of the run."""
    fixed = PLAN.fixed_lock(target)
    if fixed is not None:
        return fixed
    return per_run(
        lambda wildcards: int(
            target
            in PLAN.run_targets(
                wildcards.experiment, getattr(wildcards, "run_id", None)
            )
        )
    )


def target_locks():
    """One scheduler resource per storage target, 1 only for jobs on that target."""
    return {lock_name(target): run_lock(target) for target in PLAN.used_targets}


def controller_port_locks():
    """One scheduler resource per port of this machine that hosts' workers dial: one run
    listening there at a time, and no preflight listening there for its hosts meanwhile.
    """
    ports = PLAN.dialed_ports
    return {
        port_lock_name(port): per_run(
            lambda wildcards, port=port: int(ports.get(wildcards.experiment) == port)
        )
        for port in sorted(set(ports.values()))
    }


def preparation_locks():
    """Preparation jobs hold the locks of the targets they write (a recipe's passes may name
    other targets): no benchmark runs on a target being prepared."""
    return {
        lock_name(target): (
            lambda wildcards, target=target: int(
                target
                in PLAN.preparation_targets(
                    wildcards.target, getattr(wildcards, "recipe", None)
                )
            )
        )
        for target in PLAN.used_targets
    }


# Every target of the config gets its cap of one run job here (a profile or --resources value
# stays, and must be 1), so a new target name needs no profile edit.
for target in PLAN.used_targets:
    workflow.global_resources.setdefault(lock_name(target), 1)
for port in set(PLAN.dialed_ports.values()):
    workflow.global_resources.setdefault(port_lock_name(port), 1)
missing_caps = PLAN.missing_lock_caps(workflow.global_resources)
if missing_caps:
    raise WorkflowError(
        "each storage target needs a run-job cap of 1; not 1: "
        f"{', '.join(missing_caps)}. Remove them from the profile's 'resources:' and from "
        "--resources, or set them to 1"
    )


def job_kind(job):
    """What a job needs from the scheduler: jobs alike wait for it alike."""
    wildcards = job.wildcards_dict
    port = PLAN.dialed_ports.get(wildcards.get("experiment"))
    return job.rule.name, job.priority, PLAN.job_targets(wildcards), port


def start_campaign():
    # its timers' rounds, which multiply with every job's end, took a core beside the runs
    drop_job_rate_limiter(workflow)
    collector.collect_as_usual_from_the_start()
    # a round weighed every ready job: every waiting run and job file of the campaign
    weigh_a_few_of_each_kind(workflow, job_kind)


def end_campaign():
    stop_services_of(CAMPAIGN)
    # nothing is scheduled after the end: Snakemake's last timer would hold the process 1 s
    cancel_pending_timers()


# --- runs ---------------------------------------------------------------------------------------


@per_run
def job_source(wildcards):
    """The template (or ready job file) a run's job file is made from."""
    return PLAN.job_source(wildcards.experiment)


# Every experiment on one template (the usual case): its path, not a function call per run
JOB_SOURCE = PLAN.shared_job_source or job_source


@per_run
def render_spec_json(wildcards):
    return PLAN.render_spec(wildcards.experiment, wildcards.run_id)


@per_run
def host_jobs_spec_json(wildcards):
    return PLAN.host_jobs_spec(wildcards.experiment, wildcards.run_id)


# ancient: telemetry taken again (another experiment on the host) never renders a finished
# run's job files again, which would run it again
@per_run
def run_host_facts_files(wildcards):
    return [
        ancient(p)
        for p in PLAN.run_host_facts_files(wildcards.experiment, wildcards.run_id)
    ]


@per_run
def run_spec_json(wildcards):
    return Tracked(PLAN.run_spec(wildcards.experiment, wildcards.run_id))


def recorded_with_another_spec(output, spec):
    """Whether Snakemake's record of this output lacks the spec now among its params (its
    params trigger will run it again). Behind an ancient link to a job it runs again (a
    preflight for a new host) Snakemake looks at a job's own record only in the next call,
    so such a job waits by a plain link and runs in this one. ``spec`` may be a function
    that gives it: a new output has no record, and its spec is not made twice for nothing.
    """
    try:
        record = workflow.persistence._read_record(output)
    except Exception:  # no records, or another Snakemake's: order only, as before
        return False
    if record is None or record.params is None or record.record_format_version < 6:
        return False
    return repr(spec() if callable(spec) else spec) not in record.params


def waiting_link(output, spec):
    """How the job of this output waits for a step it only comes after (a preflight):
    ancient, or a plain link when its own spec changed (recorded_with_another_spec)."""
    if recorded_with_another_spec(output, spec):
        return lambda path: path
    return ancient


class Tracked(str):
    """A step's spec (JSON) whose record for Snakemake's params trigger is only its measured
    part (specs.measured): a host's way in or a dataset's new tokens run no finished step
    again. Snakemake records a param as its repr."""

    def __new__(cls, spec):
        value = super().__new__(cls, spec.full)
        value.measured = spec.measured
        return value

    def __repr__(self):
        return repr(self.measured)


class Untracked:
    """A param value Snakemake leaves out of its params rerun trigger (it records only plain
    values): a time limit changed mid-campaign runs no finished run again."""

    def __init__(self, value):
        self.value = value

    def __format__(self, format_spec):
        return format(self.value, format_spec)


@per_run
def run_time_limit(wildcards):
    return Untracked(PLAN.run_time_limit(wildcards.experiment, wildcards.run_id))


def preflight_spec_json(wildcards):
    return PLAN.preflight_spec(wildcards.experiment)


def run_job_file(wildcards):
    return PLAN.run_job_files(wildcards.experiment, wildcards.run_id)


def services_spec_json(wildcards):
    return PLAN.services_spec(wildcards.tool)


def telemetry_spec_json(wildcards):
    return PLAN.telemetry_spec(wildcards.host)


def campaign_telemetry_spec_json(wildcards):
    return PLAN.campaign_telemetry_spec()


def campaign_host_preflights(wildcards):
    facts = PLAN.campaign_telemetry()[0]
    wait = waiting_link(facts, campaign_telemetry_spec_json(wildcards))
    return [wait(path) for path in PLAN.campaign_host_preflights()]


def host_preflights(wildcards):
    facts = paths.telemetry(wildcards.host)
    wait = waiting_link(facts, telemetry_spec_json(wildcards))
    return [wait(path) for path in PLAN.host_preflights(wildcards.host)]


def experiment_telemetry(wildcards):
    return PLAN.experiment_telemetry(wildcards.experiment)


def step_iterations(wildcards):
    return PLAN.step_iterations(wildcards.experiment, wildcards.step)


def parsed_iterations(wildcards):
    return PLAN.parsed_iterations(wildcards.experiment)


def parsed_timeseries(wildcards):
    return PLAN.parsed_timeseries(wildcards.experiment)


def experiment_fault_manifests(wildcards):
    return PLAN.fault_manifests(wildcards.experiment)


def experiment_job_files(wildcards):
    return PLAN.experiment_job_files(wildcards.experiment)


def experiment_bucket_marker(wildcards):
    return PLAN.bucket_marker(wildcards.experiment)


def s3_target_json(wildcards):
    return PLAN.s3_target(wildcards.target)


def cleanup_spec_json(wildcards):
    return PLAN.cleanup_spec()


def network_spec_json(wildcards):
    return PLAN.network_spec()


def network_min_fraction():
    return PLAN.network_min_fraction()


# --- reports ------------------------------------------------------------------------------------


def report_meta_json(wildcards):
    return PLAN.report_meta(wildcards.experiment)


def campaign_grid_summaries(wildcards):
    return PLAN.campaign_grid_summaries()


def campaign_search_results(wildcards):
    return PLAN.campaign_search_results()


def campaign_telemetry(wildcards):
    return PLAN.campaign_telemetry()


# Params are functions of wildcards: a string param would have Snakemake expand every
# '{...}' in it, and configs carry braces ("{cores}" host facts).
def campaign_meta_json(wildcards):
    return PLAN.campaign_meta()


# The reports come after their preflights anyway (through the runs); this link makes Snakemake
# look at a report whose config changed in the call that reruns a preflight, not the next.
def experiment_report_preflight(wildcards):
    html = paths.report_file("index.html", wildcards.experiment)
    return waiting_link(html, report_meta_json(wildcards))(
        paths.preflight(wildcards.experiment)
    )


def campaign_report_preflights(wildcards):
    html = paths.report_file("index.html", CAMPAIGN_REPORT)
    wait = waiting_link(html, campaign_meta_json(wildcards))
    return [wait(path) for path in PLAN.campaign_preflights()]


def final_reports():
    return PLAN.final_reports()


def finished_runs():
    return PLAN.finished_runs()


# --- datasets and preconditioning -------------------------------------------------------------


def dataset_spec_json(wildcards):
    return Tracked(PLAN.dataset_spec(wildcards.dataset, wildcards.target))


def dataset_limits(wildcards):
    return Untracked(PLAN.dataset_limits(wildcards.dataset))


# ancient: a repeated preflight or new telemetry alone never prepares a dataset again (its
# token says when to); a plain link where its own spec changed (waiting_link)
def dataset_waits(wildcards):
    marker = paths.dataset_marker(wildcards.target, wildcards.dataset)
    wait = waiting_link(marker, dataset_spec_json(wildcards))
    return {
        "preflight": [
            wait(p) for p in PLAN.preparation_preflights("dataset", wildcards.dataset)
        ],
        "facts": [
            wait(p) for p in PLAN.preparation_facts("dataset", wildcards.dataset)
        ],
    }


def stage_waits(wildcards):
    marker = paths.stage_marker(wildcards.target, wildcards.recipe, wildcards.stage)
    wait = waiting_link(marker, stage_spec_json(wildcards))
    return {
        "preflight": [
            wait(p) for p in PLAN.preparation_preflights("recipe", wildcards.recipe)
        ],
        "facts": [wait(p) for p in PLAN.preparation_facts("recipe", wildcards.recipe)],
    }


def previous_stage_marker(wildcards):
    return PLAN.previous_stage_marker(
        wildcards.recipe, wildcards.target, wildcards.stage
    )


def stage_spec_json(wildcards):
    return Tracked(PLAN.stage_spec(wildcards.recipe, wildcards.target, wildcards.stage))


def recipe_spec_json(wildcards):
    return Tracked(PLAN.recipe_spec(wildcards.recipe, wildcards.target))


def recipe_limits(wildcards):
    return Untracked(PLAN.recipe_limits(wildcards.recipe, wildcards.target))


def recipe_stage_markers(wildcards):
    return PLAN.recipe_stage_markers(wildcards.recipe, wildcards.target)


def before_flush_runs(wildcards):
    return PLAN.before_flush_runs(wildcards.recipe)


def recipe_flushed_marker(wildcards):
    return PLAN.recipe_flushed_marker(wildcards.recipe, wildcards.target)


def flushed_flag(wildcards, input):
    return f"--flushed {input.flushed}" if input.flushed else ""


# --- latency-SLO search -----------------------------------------------------------------------


def search_spec_json(wildcards):
    return Tracked(PLAN.search_spec(wildcards.experiment))


def search_time_limit(wildcards):
    return Untracked(PLAN.search_time_limit(wildcards.experiment))


def search_probe_markers(wildcards):
    return PLAN.probe_markers(wildcards.experiment)


@per_run
def run_inputs(wildcards):
    """Everything a run iteration waits for, from one input function: Snakemake's cost is per
    function called per job, and a campaign has one run job per run and iteration."""
    manifest = paths.manifest(
        wildcards.experiment, wildcards.run_id, wildcards.iteration
    )
    # ancient: a repeated preflight must not make finished runs look outdated
    wait = waiting_link(manifest, lambda: run_spec_json(wildcards))
    experiment = wildcards.experiment
    return {
        "job": run_job_file(wildcards),
        "bucket": experiment_bucket_marker(wildcards),
        "services": (
            wait(services) if (services := PLAN.services_marker(experiment)) else []
        ),
        "preparation": [wait(path) for path in PLAN.preparation_markers(experiment)],
        "before": runs_before(wildcards),
        "setup": [
            wait(path) for path in PLAN.setup_markers(experiment, wildcards.run_id)
        ],
        "preflight": wait(paths.preflight(experiment)),
        # the hosts' facts are taken before the runs, not while one measures the hosts
        "telemetry": [wait(path) for path in PLAN.experiment_telemetry(experiment)],
    }


# ancient: order only; an earlier run run again keeps these runs (an added one does not: a new
# input, and these runs no longer come after every run before them)
def runs_before(wildcards):
    before = PLAN.runs_before(
        wildcards.experiment, wildcards.run_id, wildcards.iteration
    )
    return [ancient(path) for path in before]


# ancient: a step done again (a mount) runs no finished preflight again, unless its own spec
# changed: then it runs in the call that runs the step again, not in the next one
def preflight_setup_markers(wildcards):
    wait = waiting_link(
        paths.preflight(wildcards.experiment), preflight_spec_json(wildcards)
    )
    return [wait(marker) for marker in PLAN.setup_markers(wildcards.experiment)]


def setup_spec_json(wildcards):
    return PLAN.setup_spec(wildcards.step, wildcards.host)


def probes_before(wildcards):
    return [ancient(path) for path in PLAN.runs_before(wildcards.experiment)]


def earlier_probe_markers(wildcards):
    return PLAN.earlier_probe_markers(wildcards.experiment, wildcards.probe)


def probe_inputs(wildcards):
    """Everything a search probe waits for, as run_inputs: the steps before it by ancient
    links (a repeated preflight must not make finished probes look outdated), or plain ones
    when its own spec changed, so that it runs in the call that runs them again."""
    experiment = wildcards.experiment
    marker = paths.probe_marker(experiment, wildcards.probe)
    wait = waiting_link(marker, search_spec_json(wildcards))
    return {
        "earlier": earlier_probe_markers(wildcards),
        "before": probes_before(wildcards),
        "setup": [wait(path) for path in PLAN.setup_markers(experiment)],
        "preflight": wait(paths.preflight(experiment)),
        "preparation": [wait(path) for path in PLAN.preparation_markers(experiment)],
    }
