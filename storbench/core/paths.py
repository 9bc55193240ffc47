"""Where things are: the project's own folders, and every results/ and reports/ path.

Each function gives one kind of path. Called without arguments it gives the Snakemake
pattern with the wildcards (``manifest()`` is
``results/{experiment}/raw/{run_id}/it{iteration}/run.json``), so the rules declare their
outputs with the same function the Python steps use for one concrete path.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parents[2]
TEMPLATES_DIR = PROJECT_DIR / "templates"
REPORT_TEMPLATES_DIR = TEMPLATES_DIR / "report"
SCHEMA_PATH = PROJECT_DIR / "config" / "schema.yaml"

RESULTS = "results"
REPORTS = "reports"
# A named campaign keeps its outputs in results/<campaign>/ and reports/<campaign>/; the
# Snakefile sets it, and the steps Snakemake starts inherit it through the environment.
CAMPAIGN_ENV = "STORBENCH_CAMPAIGN"
_campaign = {"name": os.environ.get(CAMPAIGN_ENV) or None}
E, R, K = "{experiment}", "{run_id}", "{iteration}"

# A name from the config that becomes one folder or file name: a letter or digit first (no
# '.', '..', hidden files or options), then letters, digits, '_', '.', '-' (no '/', no spaces)
SAFE_COMPONENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,199}")
_WILDCARD = re.compile(r"\{[a-z_]+\}")
COMPONENT_RULE = "a letter or digit, then letters, digits, '_', '.' or '-' (at most 200)"


class PathComponentError(ValueError):
    """A value that would not stay one folder or file name inside results/ or reports/."""


def component(value: str, what: str = "name") -> str:
    """value, when it is safe as one path component (or a Snakemake wildcard); else an error.

    Every results/ and reports/ path built from config values goes through this: a value
    with '/', '..', a newline or a leading '.' can never name a folder outside its place.
    """
    text = str(value)
    if SAFE_COMPONENT.fullmatch(text) or _WILDCARD.fullmatch(text):
        return text
    raise PathComponentError(f"{what} {text!r} cannot name a file or folder: {COMPONENT_RULE}")


def use_campaign(name: str | None) -> None:
    """Put this process's (and its child steps') outputs under the named campaign's folders."""
    _campaign["name"] = component(name, "campaign") if name else None
    os.environ[CAMPAIGN_ENV] = _campaign["name"] or ""


def results_dir() -> str:
    """results/, or results/<campaign> for a named campaign."""
    return f"{RESULTS}/{_campaign['name']}" if _campaign["name"] else RESULTS


def reports_dir() -> str:
    """reports/, or reports/<campaign> for a named campaign."""
    return f"{REPORTS}/{_campaign['name']}" if _campaign["name"] else REPORTS


# --- one experiment ----------------------------------------------------------------------------


def experiment_dir(experiment: str = E) -> str:
    return f"{results_dir()}/{component(experiment, 'experiment')}"


def log(name: str, experiment: str = E) -> str:
    """A step's log: results/<experiment>/logs/<name>."""
    return f"{experiment_dir(experiment)}/logs/{name}"


def run_log(experiment: str = E, run_id: str = R, iteration: int | str = K) -> str:
    """A run iteration's log (a search probe's run keeps its attempts' logs by this name)."""
    return log(f"run/{run_id}.it{iteration}.log", experiment)


def attempt_log(log_path: str, attempt: int) -> str:
    """A run's log as its attempt a<attempt> wrote it, beside the log (``<log>.attempt-2``):
    Snakemake deletes the log it declares before each attempt of the job."""
    return f"{log_path}.attempt-{attempt}"


def figure_cache(experiment: str = E) -> str:
    """The report figures last drawn for the experiment, by a hash of what they draw."""
    return f"{experiment_dir(experiment)}/figure_cache"


def preflight(experiment: str = E) -> str:
    return f"{experiment_dir(experiment)}/preflight.json"


def job(experiment: str = E, run_id: str = R, suffix: str = ".{suffix}") -> str:
    """A run's job file (suffix with its dot: '.fio')."""
    return f"{experiment_dir(experiment)}/jobs/{component(run_id, 'run id')}{suffix}"


def host_jobs(experiment: str = E, run_id: str = R) -> str:
    """The folder of a run's per-host job files (service mode, host split, host facts)."""
    return f"{experiment_dir(experiment)}/jobs/{component(run_id, 'run id')}"


def host_job(
    experiment: str = E, run_id: str = R, host: str = "{host}", suffix: str = ".{suffix}"
) -> str:
    """One host's own job file, in its run's host_jobs folder."""
    return f"{host_jobs(experiment, run_id)}/{component(host, 'host')}{suffix}"


def iteration_dir(experiment: str = E, run_id: str = R, iteration: int | str = K) -> str:
    return f"{experiment_dir(experiment)}/raw/{component(run_id, 'run id')}/it{iteration}"


def manifest(experiment: str = E, run_id: str = R, iteration: int | str = K) -> str:
    """Published last, when every host of the iteration succeeded."""
    return f"{iteration_dir(experiment, run_id, iteration)}/run.json"


def start_setup(iteration_folder: str, tool: str, hosts_key: str) -> str:
    """The set-up times held starts saw on one set of hosts (run/start_margin), not an
    output: results/<experiment>/.start-setup/, found from an iteration's folder."""
    experiment = os.path.dirname(os.path.dirname(os.path.dirname(iteration_folder)))
    return f"{experiment}/.start-setup/{component(tool, 'tool')}-{hosts_key}.json"


def parsed(experiment: str = E, run_id: str = R, iteration: int | str = K) -> str:
    return (
        f"{experiment_dir(experiment)}/parsed/{component(run_id, 'run id')}/it{iteration}.parquet"
    )


def parsed_timeseries(experiment: str = E, run_id: str = R, iteration: int | str = K) -> str:
    run_folder = f"{experiment_dir(experiment)}/parsed/{component(run_id, 'run id')}"
    return f"{run_folder}/it{iteration}.timeseries.parquet"


def summary(experiment: str = E) -> str:
    return f"{experiment_dir(experiment)}/summary.parquet"


def timeseries(experiment: str = E) -> str:
    return f"{experiment_dir(experiment)}/timeseries.parquet"


def step_summary(experiment: str = E, step: str = "{step}") -> str:
    return f"{experiment_dir(experiment)}/steps/{component(step, 'step')}.parquet"


def probe_marker(experiment: str = E, probe: str = "{probe}") -> str:
    return f"{experiment_dir(experiment)}/search/{probe}.json"


def search_result(experiment: str = E) -> str:
    return f"{experiment_dir(experiment)}/search.json"


def remote_attempt_dir(
    workdir: str, experiment: str, run_id: str, iteration: int | str, host: str, attempt: int | str
) -> str:
    """An attempt's folder on its host: one per host, so hosts sharing one work folder (an
    NFS home) never write into each other's; ends in /a<attempt> (stale attempts match it)."""
    run = f"{component(experiment, 'experiment')}/{component(run_id, 'run id')}"
    return f"{workdir.rstrip('/')}/{run}/it{iteration}/{component(host, 'host')}/a{attempt}"


def host_versions_dir(workdir: str) -> str:
    """Where a host keeps the versions its tools printed (one file per tool and program file)."""
    return f"{workdir.rstrip('/')}/versions"


# --- the campaign ------------------------------------------------------------------------------


def telemetry(host: str = "{host}") -> str:
    return f"{results_dir()}/telemetry/{component(host, 'host')}.json"


def services_dir() -> str:
    return f"{results_dir()}/services"


def services_marker(tool: str = "{tool}") -> str:
    return f"{services_dir()}/{component(tool, 'tool')}.json"


def setup_marker(step: str = "{step}", host: str = "{host}") -> str:
    return f"{results_dir()}/setup/{component(step, 'setup step')}/{component(host, 'host')}.json"


def campaign_log(name: str) -> str:
    return f"{results_dir()}/logs/{name}"


def telemetry_log(host: str = "{host}") -> str:
    return f"{results_dir()}/telemetry/logs/{component(host, 'host')}.log"


def services_log(tool: str = "{tool}") -> str:
    return f"{services_dir()}/logs/{tool}.start.log"


def network_dir() -> str:
    return f"{results_dir()}/network"


def network_results() -> str:
    return f"{network_dir()}/network.parquet"


def network_raw_dir() -> str:
    return f"{network_dir()}/raw"


def network_log(name: str) -> str:
    return f"{network_dir()}/logs/{name}"


# --- targets: buckets, datasets, preconditioning ----------------------------------------------


def target_dir(target: str = "{target}") -> str:
    return f"{results_dir()}/targets/{component(target, 'target')}"


def target_log(name: str, target: str = "{target}") -> str:
    return f"{target_dir(target)}/logs/{name}"


def bucket_marker(target: str = "{target}", bucket: str = "{bucket}") -> str:
    return f"{target_dir(target)}/buckets/{component(bucket, 'bucket')}.json"


def dataset_marker(target: str = "{target}", dataset: str = "{dataset}") -> str:
    return f"{target_dir(target)}/datasets/{component(dataset, 'dataset')}.json"


def dataset_raw_dir(target: str, dataset: str) -> str:
    return f"{target_dir(target)}/datasets/{component(dataset, 'dataset')}"


def recipe_dir(target: str = "{target}", recipe: str = "{recipe}") -> str:
    return f"{target_dir(target)}/precondition/{component(recipe, 'recipe')}"


def stage_marker(target: str = "{target}", recipe: str = "{recipe}", stage: str = "{stage}"):
    return f"{recipe_dir(target, recipe)}/stages/{component(stage, 'stage')}.json"


def prepared_marker(target: str = "{target}", recipe: str = "{recipe}") -> str:
    return f"{recipe_dir(target, recipe)}/prepared.json"


def flushed_marker(target: str = "{target}", recipe: str = "{recipe}") -> str:
    return f"{recipe_dir(target, recipe)}/flushed.json"


# --- reports -----------------------------------------------------------------------------------


def report_dir(name: str = "{report}") -> str:
    """An experiment's or the campaign's report folder (reports/<name>)."""
    return f"{reports_dir()}/{component(name, 'report')}"


def report_file(file: str, name: str = "{report}") -> str:
    return f"{report_dir(name)}/{file}"


def report_index(name: str = "{report}") -> str:
    return f"{report_dir(name)}/index.html"


def report_pdf(name: str = "{report}") -> str:
    return f"{report_dir(name)}/report.pdf"


def compare_dir(comparison: str = "{comparison}") -> str:
    return f"{reports_dir()}/compare/{component(comparison, 'comparison')}"


def recipe_report_dir(target: str = "{target}", recipe: str = "{recipe}") -> str:
    return f"{reports_dir()}/targets/{component(target, 'target')}/{component(recipe, 'recipe')}"
