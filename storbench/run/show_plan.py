"""`snakemake plan`: per run and host, the exact command lines and job files, touching nothing.

Job files are rendered in memory the way the render rules would. Host-fact expressions
are resolved from ``results/telemetry/<host>.json`` when a campaign already captured it;
otherwise the job shows the expression and says it is resolved at run time.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from storbench.config import search
from storbench.core import paths
from storbench.core.addresses import with_port
from storbench.core.model import Campaign, Host, Run
from storbench.plan import preparation as prepare_plan
from storbench.plan import slo_search
from storbench.plan import specs as plan
from storbench.plan.durations import hours_text, run_seconds
from storbench.run import prepare, render
from storbench.tools import get_tool, preparation_tool


def describe_campaign(campaign: Campaign, experiments: list[str] | None = None) -> str:
    names = experiments or list(campaign.experiments)
    lines: list[str] = []
    for dataset in sorted({campaign.experiments[n].dataset for n in names} - {None}):
        lines += describe_dataset(campaign.datasets[dataset])
    for recipe in sorted({campaign.experiments[n].precondition for n in names} - {None}):
        lines += describe_recipe(campaign.recipes[recipe])
    for name in names:
        lines += describe_experiment(campaign, name)
    lines += describe_wall_time(campaign, names)
    return "\n".join(lines) + "\n"


def describe_wall_time(campaign: Campaign, names: list[str]) -> list[str]:
    """The campaign's expected wall time from the planned durations, one line per experiment
    (the IDC plan's table of hours): runtime + ramp_time + wait per run and iteration."""
    rows, total, unknown = [], 0.0, []
    for name in names:
        experiment = campaign.experiments[name]
        if experiment.search:
            search_settings = experiment.search
            runs, iterations = search_settings["probes"], 1
            params_list = [experiment.job]
            what = f"up to {runs} probes"
        else:
            planned = campaign.experiment_runs(name)
            runs, iterations = len(planned), experiment.iterations
            params_list = [run.params for run in planned]
            what = f"{runs} run(s) x {iterations}"
        seconds = [run_seconds(params) for params in params_list]
        if not seconds or any(s is None for s in seconds):
            unknown.append(name)
            continue
        wait = experiment.wait_s or 0.0
        per_iteration = sum(s for s in seconds if s is not None) + wait * len(seconds)
        if experiment.search:
            per_iteration = (seconds[0] or 0.0) * runs + wait * runs
        spent = per_iteration * iterations
        total += spent
        rows.append(f"   {name:<28} {what:<24} {hours_text(spent):>10}")
    lines = [
        "== expected wall time (runtime + ramp_time + wait of each run; tool start-up,",
        "   preparation and parsing not counted)",
        *rows,
        f"   {'campaign':<28} {'':<24} {hours_text(total):>10}",
    ]
    if unknown:
        lines.append(f"   not estimated (no runtime in the job): {', '.join(unknown)}")
    return lines


def describe_dataset(dataset) -> list[str]:

    spec = prepare_plan.dataset_spec(dataset)
    host = dataset.hosts[0]["name"]
    lines = [
        f"== dataset {dataset.name} on target {dataset.target_name} ({dataset.method}), "
        f"hosts {', '.join(h['name'] for h in dataset.hosts)}",
        f"   state token on each host: {spec.tokens[host]}",
    ]
    text = prepare.render("dataset", host, *prepare.dataset_sections(spec, host))
    return lines + _job_listing({host: text}, preparation_tool().job_suffix)


def describe_recipe(recipe) -> list[str]:
    """Every stage in order, the commands it runs on the hosts, and sample job files."""

    stages = recipe.stages()
    host = recipe.hosts[0]["name"]
    lines = [
        f"== preconditioning {recipe.name} on target {recipe.target_name}: capacity "
        f"{recipe.capacity} bytes, {recipe.slice_bytes} per host, "
        f"hosts {', '.join(h['name'] for h in recipe.hosts)}",
        f"   stages in order ({len(stages)}): {', '.join(s.stage_id for s in stages)}",
    ]
    if recipe.purge:
        lines.append(f"   purge command on every host: {recipe.purge}")
    if recipe.flush:
        flush = recipe.flush
        if flush["method"] == "wait":
            lines.append(f"   flush: wait {flush['wait_s']:g}s")
        else:
            every = f"every {flush['poll_s']:g}s"
            lines.append(f"   flush: on {flush['host']} poll {flush['command']!r} {every}")
    shown = set()
    for stage in stages:
        key = (stage.kind, stage.pass_.name if stage.pass_ else None)
        if stage.kind == "purge" or key in shown:
            continue
        shown.add(key)
        spec = prepare_plan.stage_spec(recipe, stage)
        sections = prepare.pass_sections if stage.kind == "pass" else prepare.round_sections
        text = prepare.render(stage.stage_id, host, *sections(spec, 0, host))
        others = stage.pass_.targets if stage.pass_ else ()
        on = f" on {', '.join(t['name'] for t in others)}" if others else ""
        lines.append(f"   -- first {stage.kind} stage {stage.stage_id}{on}:")
        lines += _job_listing({host: text}, preparation_tool().job_suffix)
    return lines


def _describe_setup(campaign: Campaign, step_name: str) -> list[str]:
    # lazy: the set-up's command text is only needed here and on the hosts
    from storbench.run.setup import SetupError, command_text

    step = campaign.setups[step_name]
    scope = "the first host" if step.once else "each host"
    lines = [f"   setup {step_name} (before the runs, on {scope}; undone by cleanup):"]
    for host in step.step_hosts():
        spec = plan.setup_spec(campaign, step_name, host["name"])
        try:
            parts = [f"check: {command_text(spec, spec.check)}"] if spec.check else []
            parts.append(command_text(spec, spec.command))
            if spec.undo:
                parts.append(f"undo: {command_text(spec, spec.undo)}")
        except SetupError as error:
            parts = [str(error)]
        lines.append(f"     {host['name']}: " + " | ".join(parts))
    return lines


def _describe_services(campaign: Campaign, experiment, tool) -> list[str]:
    service = plan.service_spec(campaign, experiment.tool)
    port = service["port"]
    if tool.service_per_run:
        lines = [f"   workers (started for each run; the controller's side listens on {port}):"]
    else:
        lines = [f"   services (started once per campaign, port {port}):"]
    for host in campaign.hosts_of(experiment.name):
        spec = Host.from_dict(_host_fields(host))
        own = spec.service_ports.get(experiment.tool)
        if tool.service_per_run:
            controller = spec.controller_address or "127.0.0.1"
            argv = tool.worker_command(controller, port, own or tool.worker_port)
            text = shlex.join(argv) if argv else f"(started by {tool.name} itself)"
        else:
            text = shlex.join(tool.service_start_command(spec.tool_address, own or port))
        lines.append(f"     {host['name']}: {text}")
    return lines


def describe_experiment(campaign: Campaign, name: str) -> list[str]:
    experiment = campaign.experiments[name]
    tool = get_tool(experiment.tool)
    runs = campaign.experiment_runs(name)
    lines = [
        f"== experiment {name}: {experiment.tool}, {experiment.execution}, "
        f"{len(runs)} run(s) x {experiment.iterations} iteration(s), "
        f"target {experiment.target_name}",
    ]
    for step_name in experiment.setup:
        lines += _describe_setup(campaign, step_name)
    if experiment.after:
        lines.append(f"   after: every run of {', '.join(experiment.after)}")
    if experiment.ordered:
        lines.append("   ordered: each run starts when the one before it is done")
    if experiment.wait_s:
        lines.append(f"   wait: {experiment.wait_s:g} s before each run, holding the target")
    if experiment.execution == "service":
        lines += _describe_services(campaign, experiment, tool)
    if experiment.search:
        lines += _describe_search(experiment)
    if experiment.faults:
        lines += _describe_faults(experiment)
    lines += _describe_commands(tool, runs)
    if experiment.soak:
        soak = experiment.soak
        runs_s = soak["chunks"] * soak["chunk_s"]
        longer = f", {runs_s:g} s in all" if runs_s > soak["duration_s"] + 1e-9 else ""
        lines.append(
            f"   soak: {soak['duration_s']:g} s in {soak['chunks']} chunk(s) of "
            f"{soak['chunk_s']:g} s{longer} (the iterations; an interrupted soak repeats one"
            " chunk)"
        )
    for run in runs:
        lines += _describe_run(campaign, name, run, tool)
    return lines


def _describe_commands(tool, runs) -> list[str]:
    """Commands the tool runs on the hosts because of job options (allow_commands: true)."""
    commands: dict[tuple[str, str], list[str]] = {}
    for run in runs:
        for option, command in tool.command_options(run.params).items():
            commands.setdefault((option, command), []).append(run.run_id)
    lines = []
    if commands:
        lines.append("   COMMANDS FROM JOB OPTIONS (allow_commands: true), on every host:")
    for (option, command), run_ids in commands.items():
        which = "every run" if len(run_ids) == len(runs) else ", ".join(run_ids)
        lines.append(f"     {option}: {command}  [{which}]")
    return lines


def _describe_faults(experiment) -> list[str]:
    """Every fault command, before anything runs: they change the system under test."""
    lines = ["   FAULT COMMANDS (allow_faults: true), in every iteration of every run:"]
    for event in experiment.faults:
        lines.append(
            f"     at {event['at']} on {event['host']}: {event['command']}  [{event['name']}]"
        )
        recover = event.get("recover")
        if recover:
            lines.append(
                f"     at {recover['at']} on {event['host']}: {recover['command']}"
                f"  [{event['name']} recovery]"
            )
    return lines


def _describe_search(experiment) -> list[str]:
    """A search's runs are decided as it goes: show its bounds instead of a run list."""

    settings = experiment.search
    objective = settings["objective"]
    ladder = ", ".join(map(str, slo_search.qd_ladder(settings["max_iodepth"])))
    return [
        f"   latency-SLO search: highest IOPS with {objective['latency']} <= "
        f"{search.limit_label(objective['limit_ns'])}, tolerance {objective['tolerance']:.0%}",
        f"   closed loop: iodepth {ladder}; open loop: at most {settings['max_probes']} rates "
        f"({settings['arrivals']} arrivals); {settings['iterations']} "
        "confirmation run(s)",
        f"   at most {settings['probes']} probe jobs (p01..p{settings['probes']:02d}), each "
        f"with the job options {experiment.job}",
    ]


def _describe_run(campaign: Campaign, name: str, run: Run, tool) -> list[str]:
    experiment = campaign.experiments[name]
    hosts = plan.run_hosts(campaign, name, run)
    step = f" (step {run.step})" if run.step else ""
    lines = [f"-- run {run.run_id}{step} on {', '.join(h['name'] for h in hosts)}"]
    jobs = _job_texts(campaign, name, run, hosts)
    if experiment.execution == "service":
        port = tool.default_port
        endpoints = [with_port(Host.from_dict(_host_fields(h)).tool_address, port) for h in hosts]
        job_paths = [paths.host_job(name, run.run_id, h["name"], tool.job_suffix) for h in hosts]
        output = f"{paths.iteration_dir(name, run.run_id, '<k>')}/a<n>/controller.json"
        argv = tool.controller_command(job_paths, output, endpoints)
        lines.append(f"   controller: {shlex.join(argv)}")
    else:
        for host in hosts:
            spec = Host.from_dict(_host_fields(host))
            workdir = paths.remote_attempt_dir(
                spec.workdir, name, run.run_id, "<k>", spec.name, "<n>"
            )
            argv = tool.run_command(
                f"{workdir}/job{tool.job_suffix}",
                f"{workdir}/{tool.output_name(spec.name)}",
                spec.name,
                run.params,
            )
            lines.append(f"   {spec.name}: {shlex.join(argv)}")
    lines += _job_listing(jobs, tool.job_suffix)
    return lines


def _job_texts(campaign: Campaign, name: str, run: Run, hosts: list[dict]) -> dict:
    """{host name or None: job text}; None when every host gets the same file."""
    experiment = campaign.experiments[name]
    if not plan.per_host_jobs(experiment):
        return {None: render.render_job(plan.render_spec(campaign, name, run))}
    texts = {}
    for host in hosts:
        spec = plan.render_spec(campaign, name, run, host=host["name"])
        facts_file = Path(paths.telemetry(host["name"]))
        if facts_file.exists():
            spec = render.with_host_facts(spec, json.loads(facts_file.read_text()))
        texts[host["name"]] = render.render_job(spec)
    return texts


def _job_listing(jobs: dict, suffix: str) -> list[str]:
    lines = []
    for host, text in jobs.items():
        title = f"job file{suffix}" if host is None else f"job file of {host}"
        lines.append(f"   {title}:")
        lines += [f"     | {line}" for line in text.rstrip("\n").splitlines()]
        if "{" in text and host is not None:
            lines.append("     (host-fact expressions are resolved from its telemetry at run time)")
    return lines


def _host_fields(host: dict) -> dict:
    return {key: value for key, value in host.items() if key != "group"}
