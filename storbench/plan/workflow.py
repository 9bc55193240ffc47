"""What the rules ask of a campaign: names for wildcards, each job's inputs, specs and metadata.

``WorkflowPlan(campaign)`` answers every question the .smk input functions have, by
experiment, run, host, target, recipe or probe name, so the rules only declare and this logic
is unit-tested. Paths come from ``core.paths``; nothing here touches a host.
"""

from __future__ import annotations

import functools
import json
import re

from storbench.config import search as search_config
from storbench.core import paths
from storbench.core.model import Campaign, Run
from storbench.core.secrets import redacted, redacted_yaml
from storbench.core.specs import CleanupSpec
from storbench.plan import preparation as prepare_plan
from storbench.plan import specs
from storbench.tools import get_tool


class WorkflowPlanError(ValueError):
    """A target or wildcard names something the campaign does not have."""


def lock_name(target: str) -> str:
    """The scheduler resource that keeps one benchmark job at a time on a storage target."""
    return "lock_" + re.sub(r"\W", "_", target)


def port_lock_name(port: int) -> str:
    """The scheduler resource that keeps one job at a time on a port of this machine that
    workers dial (a run's server, or the preflight listening there for its hosts)."""
    return f"controller_port_{port}"


def names_pattern(names) -> str:
    """A wildcard pattern of exactly these names; one that matches nothing when empty."""
    return "|".join(re.escape(name) for name in names) or "(?!x)x"


class WorkflowPlan:
    def __init__(self, campaign: Campaign):
        self.campaign = campaign
        self.experiments = list(campaign.experiments)
        self.runs: dict[str, dict[str, Run]] = {
            name: {run.run_id: run for run in campaign.experiment_runs(name)}
            for name in self.experiments
        }
        self.search_experiments = [n for n, e in campaign.experiments.items() if e.search]
        self.service_tools = specs.service_tools(campaign)
        self.report_settings = campaign.report_settings
        self.campaign_report = self.report_settings["name"]
        self.report_units = self.report_settings["units"]  # report.units: decimal | binary

    # --- names the wildcards may take ----------------------------------------------------------

    @functools.cached_property
    def used_targets(self) -> list[str]:
        campaign = self.campaign
        return sorted(
            {t for e in campaign.experiments.values() for t in (e.target_set or (e.target_name,))}
            | {d.target_name for d in campaign.datasets.values()}
            | {t for r in campaign.recipes.values() for t in r.target_names}
        )

    @functools.cached_property
    def dialed_ports(self) -> dict[str, int]:
        """Experiment -> the port of this machine its hosts' workers dial (service mode)."""
        ports = {name: specs.dialed_port(e) for name, e in self.campaign.experiments.items()}
        return {name: port for name, port in ports.items() if port}

    @functools.cached_property
    def any_setup(self) -> bool:
        return bool(specs.used_setup_steps(self.campaign))

    @functools.cached_property
    def host_names(self) -> list[str]:
        return sorted({h["name"] for hosts in self.campaign.host_groups.values() for h in hosts})

    @functools.cached_property
    def job_suffixes(self) -> list[str]:
        tools = {e.tool for e in self.campaign.experiments.values()}
        return sorted({get_tool(tool).job_suffix.lstrip(".") for tool in tools})

    @property
    def grid_experiments(self) -> list[str]:
        return [n for n in self.experiments if n not in self.search_experiments]

    # --- runs and their files ------------------------------------------------------------------

    def run(self, experiment: str, run_id: str) -> Run:
        try:
            return self.runs[experiment][run_id]
        except KeyError:
            raise WorkflowPlanError(f"experiment {experiment!r} has no run {run_id!r}") from None

    def run_targets(self, experiment: str, run_id: str | None) -> tuple[str, ...]:
        """Every storage target a run writes to (all members for a run on a whole target set)."""
        run = self.runs[experiment].get(run_id) if run_id is not None else None
        if run is not None and run.targets:
            return run.targets
        return (self.campaign.experiments[experiment].target_name,)

    def job_targets(self, wildcards) -> tuple[str, ...]:
        """What decides the target locks a job of these wildcards holds: a run's or probe's
        targets; a preparation's target and recipe (its targets, preparation_targets)."""
        experiment = wildcards.get("experiment")
        if experiment in self.runs:
            return self.run_targets(experiment, wildcards.get("run_id"))
        target = wildcards.get("target")
        if target is not None:
            return (target, wildcards.get("recipe") or "")
        return ()

    def fixed_lock(self, target: str) -> int | None:
        """A target's lock for every run and probe alike: 1 when all of them hold it, 0 when
        none does; None when it depends on the run (a target set's runs)."""
        held = {
            target in self.run_targets(name, run_id)
            for name in self.experiments
            for run_id in self.runs[name] or [None]
        }
        return int(held.pop()) if len(held) == 1 else None

    def missing_lock_caps(self, caps: dict) -> list[str]:
        """Without a cap Snakemake ignores a resource, so run jobs on one target could overlap."""
        return [lock_name(t) for t in self.used_targets if caps.get(lock_name(t)) != 1]

    def suffix(self, experiment: str) -> str:
        return get_tool(self.campaign.experiments[experiment].tool).job_suffix

    def job_path(self, experiment: str, run_id: str) -> str:
        return paths.job(experiment, run_id, self.suffix(experiment))

    @functools.cache  # noqa: B019  (one plan per workflow; asked once per run while planning)
    def uses_per_host_jobs(self, experiment: str) -> bool:
        return specs.per_host_jobs(self.campaign.experiments[experiment])

    def run_job_files(self, experiment: str, run_id: str) -> str:
        """The run's job file, or the folder of its hosts' own (service mode, host split,
        host facts), which one job renders."""
        if not self.uses_per_host_jobs(experiment):
            return self.job_path(experiment, run_id)
        return paths.host_jobs(experiment, run_id)

    def experiment_job_files(self, experiment: str) -> list[str]:
        return [self.run_job_files(experiment, run_id) for run_id in self.runs[experiment]]

    def job_source(self, experiment: str) -> str:
        """The template (or ready job file) a run's job file is made from."""
        exp = self.campaign.experiments[experiment]
        if exp.job_file:
            return exp.job_file
        if exp.template:
            return exp.template
        return str(paths.TEMPLATES_DIR / get_tool(exp.tool).default_template)

    @functools.cached_property
    def shared_job_source(self) -> str | None:
        """The one template (or job file) of every experiment, when they all have the same."""
        sources = {self.job_source(name) for name in self.experiments}
        return sources.pop() if len(sources) == 1 else None

    def host_jobs_spec(self, experiment: str, run_id: str) -> str:
        run = self.run(experiment, run_id)
        return specs.to_json(specs.host_jobs_spec(self.campaign, experiment, run))

    def run_host_facts_files(self, experiment: str, run_id: str) -> list[str]:
        """The telemetry of the run's hosts, when its jobs use host facts."""
        if not specs.uses_host_facts(self.campaign.experiments[experiment]):
            return []
        run = self.run(experiment, run_id)
        return [paths.telemetry(h["name"]) for h in specs.run_hosts(self.campaign, experiment, run)]

    def iterations(self, experiment: str) -> range:
        return range(1, self.campaign.experiments[experiment].iterations + 1)

    def manifests(self, experiment: str) -> list[str]:
        return [
            paths.manifest(experiment, run_id, k)
            for run_id in self.runs[experiment]
            for k in self.iterations(experiment)
        ]

    def finished_markers(self, experiment: str) -> list[str]:
        """What exists once every run of the experiment is done (a search: its result)."""
        if self.campaign.experiments[experiment].search:
            return [paths.search_result(experiment)]
        return self.manifests(experiment)

    def runs_before(
        self, experiment: str, run_id: str | None = None, iteration: int | str | None = None
    ) -> list[str]:
        """What a run waits for: the experiments it comes after, in an ordered sweep every
        iteration of the run before it, and in a soak the chunk before (chunks are one series)."""
        exp = self.campaign.experiments[experiment]
        before = [marker for other in exp.after for marker in self.finished_markers(other)]
        if exp.soak and run_id is not None and iteration is not None and int(iteration) > 1:
            before.append(paths.manifest(experiment, run_id, int(iteration) - 1))
        if exp.ordered and run_id is not None:
            previous = self._previous_runs(experiment).get(run_id)
            if previous is not None:
                before += [
                    paths.manifest(experiment, previous, k) for k in self.iterations(experiment)
                ]
        return before

    @functools.cache  # noqa: B019  (one plan per Snakemake process)
    def _previous_runs(self, experiment: str) -> dict[str, str]:
        """Each run's run before it in the sweep's order (a list's index per run was 50
        million comparisons for an ordered sweep of 10,000 runs)."""
        order = list(self.runs[experiment])
        return dict(zip(order[1:], order[:-1], strict=True))

    def parsed_iterations(self, experiment: str) -> list[str]:
        return [
            paths.parsed(experiment, run_id, k)
            for run_id in self.runs[experiment]
            for k in self.iterations(experiment)
        ]

    def parsed_timeseries(self, experiment: str) -> list[str]:
        return [
            paths.parsed_timeseries(experiment, run_id, k)
            for run_id in self.runs[experiment]
            for k in self.iterations(experiment)
        ]

    def step_iterations(self, experiment: str, step: str) -> list[str]:
        found = [
            paths.parsed(experiment, run_id, k)
            for run_id, run in self.runs[experiment].items()
            if run.step == step
            for k in self.iterations(experiment)
        ]
        if not found:
            raise WorkflowPlanError(f"experiment {experiment!r} has no client step {step!r}")
        return found

    def fault_manifests(self, experiment: str) -> list[str]:
        """The manifests record when each fault command ran; only fault experiments need them."""
        return self.manifests(experiment) if self.campaign.experiments[experiment].faults else []

    # --- specs of the steps ----------------------------------------------------------------

    def render_spec(self, experiment: str, run_id: str, host: str | None = None) -> str:
        run = self.run(experiment, run_id)
        return specs.to_json(specs.render_spec(self.campaign, experiment, run, host=host))

    @functools.lru_cache(maxsize=8)  # noqa: B019  (a run job's inputs and params ask in turn)
    def run_spec(self, experiment: str, run_id: str) -> specs.SpecJson:
        run = self.run(experiment, run_id)
        return specs.spec_json(specs.run_spec(self.campaign, experiment, run))

    def run_time_limit(self, experiment: str, run_id: str) -> float:
        return specs.run_time_limit(self.campaign, experiment, self.run(experiment, run_id))

    def search_time_limit(self, experiment: str) -> float:
        return specs.search_time_limit(self.campaign, experiment)

    def preflight_spec(self, experiment: str) -> str:
        return specs.to_json(specs.preflight_spec(self.campaign, experiment))

    def services_spec(self, tool: str) -> str:
        return specs.to_json(specs.service_spec(self.campaign, tool))

    def telemetry_spec(self, host: str) -> str:
        return specs.to_json(specs.telemetry_spec(self.campaign, host))

    def services_marker(self, experiment: str) -> list[str] | str:
        """Service-mode runs need the campaign's services (started once, stopped at the end)."""
        exp = self.campaign.experiments[experiment]
        campaign_long = exp.execution == "service" and exp.tool in self.service_tools
        return paths.services_marker(exp.tool) if campaign_long else []

    def host_preflights(self, host: str) -> list[str]:
        """Preflight first: it names every bad host at once, telemetry would stop at the first."""
        return [
            paths.preflight(name)
            for name in self.experiments
            if any(h["name"] == host for h in self.campaign.hosts_of(name))
        ]

    def setup_markers(self, experiment: str, run_id: str | None = None) -> list[str]:
        """The set-up steps done on the run's hosts (a search: the experiment's hosts)."""
        if not self.any_setup:
            return []
        if run_id is None:
            hosts = [h["name"] for h in self.campaign.hosts_of(experiment)]
        else:
            run = self.run(experiment, run_id)
            hosts = [h["name"] for h in specs.run_hosts(self.campaign, experiment, run)]
        return specs.setup_markers(self.campaign, experiment, hosts)

    def setup_spec(self, step: str, host: str) -> str:
        return specs.to_json(specs.setup_spec(self.campaign, step, host))

    def experiment_telemetry(self, experiment: str) -> list[str]:
        return [paths.telemetry(h["name"]) for h in self.campaign.hosts_of(experiment)]

    # --- S3 buckets and cleanup -------------------------------------------------------------

    def bucket_marker(self, experiment: str) -> list[str] | str:
        """S3 experiments need their bucket before the first run; other targets need nothing."""
        target = specs.experiment_target(self.campaign, experiment)
        if target["type"] != "s3":
            return []
        return paths.bucket_marker(target["name"], target["bucket"])

    def s3_target(self, target: str) -> str:
        return json.dumps({"name": target, **self.campaign.raw["targets"][target]}, sort_keys=True)

    def cleanup_spec(self) -> str:
        """Every tool service of the campaign, and every S3 target with its experiments' buckets."""
        buckets: dict[str, dict] = {}
        for name in self.experiments:
            target = specs.experiment_target(self.campaign, name)
            if target["type"] == "s3":
                entry = buckets.setdefault(target["name"], {"target": target, "buckets": []})
                entry["buckets"].append(target["bucket"])
        services = [specs.service_spec(self.campaign, tool) for tool in self.service_tools]
        setups = [
            specs.setup_spec(self.campaign, name, host["name"]).to_dict()
            for name, step in self.campaign.setups.items()
            for host in step.step_hosts()
        ]
        connections = [
            host
            for group in self.campaign.host_groups.values()
            for host in group
            # transport.disconnect closes what a host's connection keeps open (none per step)
            if host.get("transport") == "ssh"
        ]
        return CleanupSpec(
            services=tuple(services), buckets=tuple(buckets.values()), setups=tuple(setups),
            connections=tuple(connections),
        ).to_json()  # fmt: skip

    def network_spec(self) -> str:
        spec = specs.network_spec(self.campaign)
        if spec is None:
            raise WorkflowPlanError(
                "the network check needs a 'network:' section (server, clients) in the config"
            )
        return specs.to_json(spec)

    def network_min_fraction(self) -> float:
        return (self.campaign.raw.get("network") or {}).get("min_fraction", 0.8)

    # --- reports --------------------------------------------------------------------------------

    def report_meta(self, experiment: str) -> str:
        campaign, exp = self.campaign, self.campaign.experiments[experiment]
        raw = campaign.raw
        snapshot = {
            **({"data_path": raw["data_path"]} if "data_path" in raw else {}),
            "experiments": {experiment: raw["experiments"][experiment]},
            "hosts": {g: raw["hosts"][g] for g in exp.host_groups},
            "targets": {t: raw["targets"][t] for t in (exp.target_set or (exp.target_name,))},
        }
        meta = {
            "title": f"storbench report: {experiment}",
            "experiment": experiment,
            "tool": exp.tool,
            "hosts": [h["name"] for h in campaign.hosts_of(experiment)],
            "target": {"name": exp.target_name, **exp.target},
            "iterations": exp.iterations,
            "job": exp.job,
            "sweep": exp.sweep,
            "run_ids": list(self.runs[experiment]),
            "config_yaml": redacted_yaml(snapshot),
            "execution": exp.execution,
            "steps": specs.steps_meta(campaign, experiment),
            "data_path": raw.get("data_path"),
            "slow_host_percent": exp.slow_host_percent,
            "max_start_skew_s": exp.max_start_skew_s,
            "rwmixreadhost": exp.rwmixreadhost,
            "target_set": list(exp.target_set),
            "preparation": self.preparation_meta(experiment),
            "fault_analysis": exp.fault_analysis,
            "soak": exp.soak,
            "units": self.report_units,
        }
        return json.dumps(meta, sort_keys=True)

    def preparation_meta(self, experiment: str) -> dict | None:
        exp = self.campaign.experiments[experiment]
        if not (exp.dataset or exp.precondition):
            return None
        page = None
        if exp.precondition:
            recipe = self.campaign.recipes[exp.precondition]
            page = f"../targets/{recipe.target_name}/{recipe.name}/index.html"
        return {
            "dataset": exp.dataset,
            "precondition": exp.precondition,
            "flush": exp.flush_phase,
            "page": page,
        }

    def campaign_grid_summaries(self) -> list[str]:
        return [
            paths.summary(name)
            for name in self.campaign.default_experiments
            if name not in self.search_experiments
        ]

    def campaign_search_results(self) -> list[str]:
        return [
            paths.search_result(name)
            for name in self.campaign.default_experiments
            if name in self.search_experiments
        ]

    def campaign_hosts(self) -> list[str]:
        """Every host of the experiments rule all runs."""
        hosts = {
            host["name"]
            for name in self.campaign.default_experiments
            for host in self.campaign.hosts_of(name)
        }
        return sorted(hosts)

    def campaign_telemetry(self) -> list[str]:
        return [paths.telemetry(host) for host in self.campaign_hosts()]

    def campaign_telemetry_spec(self) -> str:
        """The campaign's hosts for one telemetry job, each with its own facts file."""
        return specs.to_json(
            {
                "hosts": [
                    {**specs.telemetry_spec(self.campaign, host), "output": paths.telemetry(host)}
                    for host in self.campaign_hosts()
                ]
            }
        )

    def campaign_preflights(self) -> list[str]:
        """The preflights of the experiments in the campaign report."""
        return [paths.preflight(name) for name in self.campaign.default_experiments]

    def campaign_host_preflights(self) -> list[str]:
        """The preflights the campaign's hosts' telemetry waits for (host_preflights, all)."""
        return sorted(
            {path for host in self.campaign_hosts() for path in self.host_preflights(host)}
        )

    def campaign_meta(self) -> str:
        campaign = self.campaign
        experiments = {
            name: {
                "tool": campaign.experiments[name].tool,
                "kind": "search" if name in self.search_experiments else "grid",
                "description": campaign.raw["experiments"][name].get("description"),
                "iterations": campaign.experiments[name].iterations,
                "hosts": [h["name"] for h in campaign.hosts_of(name)],
                "target": campaign.experiments[name].target_name,
                "job": campaign.experiments[name].job,
                "runs": len(self.runs[name]) or None,
                "labels": campaign.raw["experiments"][name].get("labels") or {},
            }
            for name in campaign.default_experiments
        }
        hosts = [
            {"name": h["name"], "group": h["group"], "transport": h["transport"]}
            for group in campaign.host_groups.values()
            for h in group
        ]
        meta = {
            "title": self.report_settings["title"],
            "name": self.campaign_report,
            "experiments": experiments,
            "hosts": hosts,
            "targets": redacted(campaign.raw["targets"]),
            "config_yaml": redacted_yaml(campaign.raw),
            "tables": self.report_settings.get("tables") or {},
            "storage": campaign.raw.get("storage") or {},
            "units": self.report_units,
        }
        return json.dumps(meta, sort_keys=True)

    def finished_runs(self) -> list[str]:
        """Every run's manifest (a search's result) of the experiments run by default: a run
        whose manifest is gone (a rerun stopped part way) runs again although the reports
        built from it are there, as Snakemake rebuilds no other missing file."""
        return [
            marker
            for name in self.campaign.default_experiments
            for marker in self.finished_markers(name)
        ]

    def final_reports(self) -> list[str]:
        folders = [*self.campaign.default_experiments, self.campaign_report]
        reports = [paths.report_index(name) for name in folders]
        if self.report_settings["pdf"]:
            reports += [paths.report_pdf(name) for name in folders]
        recipes = {
            self.campaign.experiments[name].precondition
            for name in self.campaign.default_experiments
        }
        reports += [
            f"{prepare_plan.report_dir(self.campaign.recipes[name])}/index.html"
            for name in sorted(recipes - {None})
        ]
        return reports

    # --- datasets and preconditioning --------------------------------------------------------

    def recipe(self, recipe: str, target: str):
        found = self.campaign.recipes[recipe]
        if found.target_name != target:
            raise WorkflowPlanError(
                f"recipe {found.name!r} is for target {found.target_name!r}, not {target!r}"
            )
        return found

    def dataset_spec(self, dataset: str, target: str) -> specs.SpecJson:
        found = self.campaign.datasets[dataset]
        if found.target_name != target:
            raise WorkflowPlanError(
                f"dataset {found.name!r} is on target {found.target_name!r}, not {target!r}"
            )
        return specs.spec_json(prepare_plan.dataset_spec(found))

    def preparation_targets(self, target: str, recipe: str | None) -> tuple[str, ...]:
        """The targets a preparation job writes: a dataset's, or every target of a recipe."""
        if recipe is None:
            return (target,)
        return self.recipe(recipe, target).target_names

    def preparation_preflights(self, kind: str, name: str) -> list[str]:
        """The preflights of the experiments on a dataset or recipe: its target may be a mount
        that a set-up step makes, and the preflight waits for those steps."""
        key = "dataset" if kind == "dataset" else "precondition"
        return [
            paths.preflight(experiment)
            for experiment in self.experiments
            if getattr(self.campaign.experiments[experiment], key) == name
        ]

    def preparation_facts(self, kind: str, name: str) -> list[str]:
        """Telemetry of the hosts of a dataset or recipe whose job uses their facts."""
        found = (self.campaign.datasets if kind == "dataset" else self.campaign.recipes)[name]
        if not found.needs_telemetry:
            return []
        return [paths.telemetry(host["name"]) for host in found.hosts]

    def stage(self, recipe: str, target: str, stage: str):
        for candidate in self.recipe(recipe, target).stages():
            if candidate.stage_id == stage:
                return candidate
        raise WorkflowPlanError(f"recipe {recipe!r} has no stage {stage!r}")

    def previous_stage_marker(self, recipe: str, target: str, stage: str) -> list[str] | str:
        """Stages run in recipe order: each waits for the marker of the one before it."""
        found = self.stage(recipe, target, stage)
        if found.index == 1:
            return []
        previous = self.recipe(recipe, target).stages()[found.index - 2]
        return prepare_plan.stage_marker(self.recipe(recipe, target), previous.stage_id)

    def stage_spec(self, recipe: str, target: str, stage: str) -> specs.SpecJson:
        found = self.recipe(recipe, target)
        return specs.spec_json(prepare_plan.stage_spec(found, self.stage(recipe, target, stage)))

    def recipe_spec(self, recipe: str, target: str) -> specs.SpecJson:
        return specs.spec_json(prepare_plan.recipe_spec(self.recipe(recipe, target)))

    def recipe_limits(self, recipe: str, target: str) -> str:
        return specs.to_json(prepare_plan.limits(self.recipe(recipe, target)))

    def dataset_limits(self, dataset: str) -> str:
        return specs.to_json(prepare_plan.limits(self.campaign.datasets[dataset]))

    def recipe_stage_markers(self, recipe: str, target: str) -> list[str]:
        found = self.recipe(recipe, target)
        return [prepare_plan.stage_marker(found, s.stage_id) for s in found.stages()]

    def before_flush_runs(self, recipe: str) -> list[str]:
        """The flush waits for every run that must see the data still in the write buffer."""
        return [
            manifest
            for name, exp in self.campaign.experiments.items()
            if exp.precondition == recipe and exp.flush_phase == "before"
            for manifest in self.manifests(name)
        ]

    def recipe_flushed_marker(self, recipe: str, target: str) -> list[str] | str:
        found = self.recipe(recipe, target)
        return prepare_plan.flushed_marker(found) if found.flush else []

    def preparation_markers(self, experiment: str) -> list[str]:
        """A run waits for its dataset and its recipe (before or after the flush)."""
        exp = self.campaign.experiments[experiment]
        markers = []
        if exp.dataset:
            markers.append(prepare_plan.dataset_marker(self.campaign.datasets[exp.dataset]))
        if exp.precondition:
            recipe = self.campaign.recipes[exp.precondition]
            if exp.flush_phase == "after":
                markers.append(prepare_plan.flushed_marker(recipe))
            else:
                markers.append(prepare_plan.prepared_marker(recipe))
        return markers

    # --- latency-SLO search ----------------------------------------------------------------

    def search_settings(self, experiment: str) -> dict:
        settings = self.campaign.experiments[experiment].search
        if not settings:
            raise WorkflowPlanError(f"experiment {experiment!r} is not a search")
        return settings

    def search_spec(self, experiment: str) -> specs.SpecJson:
        return specs.spec_json(specs.search_spec(self.campaign, experiment))

    def probe_markers(self, experiment: str) -> list[str]:
        return [
            paths.probe_marker(experiment, probe)
            for probe in search_config.probe_ids(self.search_settings(experiment))
        ]

    def earlier_probe_markers(self, experiment: str, probe: str) -> list[str]:
        """A probe decides from every probe before it, so it waits for all of them."""
        markers = self.probe_markers(experiment)
        own = paths.probe_marker(experiment, probe)
        if own not in markers:
            raise WorkflowPlanError(
                f"search {experiment!r} has probes p01..p{len(markers):02d}, not {probe!r}"
            )
        return markers[: markers.index(own)]
