"""`snakemake plan`: per run and host, the exact command lines and job files, touching nothing.

Job files are rendered in memory the way the render rules would. Host-fact expressions
are resolved from ``results/telemetry/<host>.json`` when a campaign already captured it;
otherwise the job shows the expression and says it is resolved at run time.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from storbench import plan, render
from storbench.config import Campaign
from storbench.hosts import HostSpec
from storbench.tools import get_tool

TELEMETRY_DIR = Path("results/telemetry")


def describe_campaign(campaign: Campaign, experiments: list[str] | None = None) -> str:
    lines: list[str] = []
    for name in experiments or list(campaign.experiments):
        lines += describe_experiment(campaign, name)
    return "\n".join(lines) + "\n"


def describe_experiment(campaign: Campaign, name: str) -> list[str]:
    experiment = campaign.experiments[name]
    tool = get_tool(experiment.tool)
    runs = plan.experiment_runs(campaign, name)
    lines = [
        f"== experiment {name}: {experiment.tool}, {experiment.execution}, "
        f"{len(runs)} run(s) x {experiment.iterations} iteration(s), "
        f"target {experiment.target_name}",
    ]
    if experiment.execution == "service":
        service = plan.service_spec(campaign, experiment.tool)
        lines.append(f"   services (started once per campaign, port {service['port']}):")
        for host in service["hosts"]:
            address = HostSpec.from_dict(_host_fields(host)).address
            argv = tool.service_start_command(address, service["port"])
            lines.append(f"     {host['name']}: {shlex.join(argv)}")
    for run in runs:
        lines += _describe_run(campaign, name, run, tool)
    return lines


def _describe_run(campaign: Campaign, name: str, run: plan.Run, tool) -> list[str]:
    experiment = campaign.experiments[name]
    hosts = plan.run_hosts(campaign, name, run)
    step = f" (step {run.step})" if run.step else ""
    lines = [f"-- run {run.run_id}{step} on {', '.join(h['name'] for h in hosts)}"]
    run_path = f"{name}/{run.run_id}/it<k>/a<n>"
    jobs = _job_texts(campaign, name, run, hosts)
    if experiment.execution == "service":
        port = tool.default_port
        endpoints = [f"{HostSpec.from_dict(_host_fields(h)).address}:{port}" for h in hosts]
        job_paths = [
            f"results/{name}/jobs/{run.run_id}/{h['name']}{tool.job_suffix}" for h in hosts
        ]
        output = f"results/{name}/raw/{run.run_id}/it<k>/a<n>/controller.json"
        argv = tool.controller_command(job_paths, output, endpoints)
        lines.append(f"   controller: {shlex.join(argv)}")
    else:
        for host in hosts:
            spec = HostSpec.from_dict(_host_fields(host))
            workdir = f"{spec.workdir.rstrip('/')}/{run_path}"
            argv = tool.run_command(
                f"{workdir}/job{tool.job_suffix}",
                f"{workdir}/{tool.output_name(spec.name)}",
                spec.name,
                run.params,
            )
            lines.append(f"   {spec.name}: {shlex.join(argv)}")
    lines += _job_listing(jobs, tool.job_suffix)
    return lines


def _job_texts(campaign: Campaign, name: str, run: plan.Run, hosts: list[dict]) -> dict:
    """{host name or None: job text}; None when every host gets the same file."""
    experiment = campaign.experiments[name]
    if not plan.per_host_jobs(experiment):
        return {None: render.render_job(plan.render_spec(campaign, name, run))}
    texts = {}
    for host in hosts:
        spec = plan.render_spec(campaign, name, run, host=host["name"])
        facts_file = TELEMETRY_DIR / f"{host['name']}.json"
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
