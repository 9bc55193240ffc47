"""Each step's spec from the model: render, run, preflight, services, telemetry, search,
network; JSON in the rules' ``params:``, so a changed spec reruns exactly its jobs."""

from __future__ import annotations

import dataclasses
import json
from typing import NamedTuple

from storbench.config.runs import client_steps, host_roles
from storbench.config.sweep import PlanError
from storbench.core import hostfacts, paths, units
from storbench.core.buckets import bucket_name
from storbench.core.model import Campaign, Experiment, Host, Run
from storbench.core.specs import (
    HostJobsSpec,
    ProbeSpec,
    RenderSpec,
    RunSpec,
    SetupSpec,
    StepSpec,
)
from storbench.plan import preparation as prepare_plan
from storbench.tools import get_tool

DEFAULT_ITERATION_TIMEOUT_S = 3600.0


def run_hosts(campaign: Campaign, name: str, run: Run) -> list[dict]:
    """Config host dicts of the hosts a run uses, in experiment order."""
    hosts = campaign.hosts_of(name)
    if not run.hosts:
        return hosts
    wanted = set(run.hosts)
    return [host for host in hosts if host["name"] in wanted]


def per_host_jobs(experiment) -> bool:
    """Each host gets its own job file: service mode, a host split, or host-fact expressions."""
    return (
        experiment.execution == "service"
        or experiment.rwmixreadhost is not None
        or uses_host_facts(experiment)
    )


def uses_host_facts(experiment) -> bool:
    """Whether any job or swept value is computed per host from its telemetry."""
    return experiment.uses_host_facts


def iteration_timeout(params: dict, configured: float | None) -> float:
    """Upper bound of one iteration: configured, else twice the planned time plus slack."""
    if configured:
        return configured
    try:
        planned = units.parse_duration(params["runtime"]) + units.parse_duration(
            params.get("ramp_time", 0)
        )
    except (KeyError, units.UnitError):  # no runtime, or one computed per host
        return DEFAULT_ITERATION_TIMEOUT_S
    return 2 * planned + 120.0


def _run_identity(campaign: Campaign, name: str, run: Run) -> dict:
    """What every step's spec says about the run: which, with what tool, on which target."""
    experiment = campaign.experiments[name]
    return {
        "experiment": name,
        "run_id": run.run_id,
        "tool": experiment.tool,
        "target": run_target(campaign, name, run),
        "params": run.params,
    }


def experiment_target(campaign: Campaign, name: str) -> dict:
    """The experiment's target as the steps see it; S3 targets gain the experiment's bucket."""
    experiment = campaign.experiments[name]
    target = {"name": experiment.target_name, **experiment.target}
    if target["type"] == "s3":
        target["bucket"] = bucket_name(target, name)
    return target


def run_target(campaign: Campaign, name: str, run: Run) -> dict:
    """The run's target; a run on several targets of a set gets them as ``members``."""
    if not run.targets:
        return experiment_target(campaign, name)
    members = [{"name": t, **campaign.raw["targets"][t]} for t in run.targets]
    if len(members) == 1:
        return members[0]
    return {"name": "+".join(run.targets), "type": members[0]["type"], "members": members}


def render_spec(campaign: Campaign, name: str, run: Run, host: str | None = None) -> RenderSpec:
    """What the render step needs; with host, that host's job (its role, its index)."""
    experiment = campaign.experiments[name]
    host_configs = run_hosts(campaign, name, run)
    hosts = [h["name"] for h in host_configs]
    spec = RenderSpec.from_dict(
        {
            **_run_identity(campaign, name, run),
            "hosts": hosts,
            "point": run.point,
            "template": experiment.template,
            "job_file": experiment.job_file,
            "execution": experiment.execution,
            "storage": _storage_names_used(campaign, run.params),
            **_named_hosts(experiment, run, host_configs),
        },
        planned=True,
    )
    if host is None:
        return spec
    if host not in hosts:
        raise PlanError(f"run {run.run_id} of {name} does not use host {host!r}")
    role = host_roles(hosts, experiment.rwmixreadhost).get(host)
    return dataclasses.replace(
        spec,
        params=role_params(experiment.tool, run.params, role),
        host=host,
        host_index=hosts.index(host),
        role=role,
    )


def host_jobs_spec(campaign: Campaign, name: str, run: Run) -> HostJobsSpec:
    """Every host's job of a run, for one render job: the shared spec and what differs."""
    experiment = campaign.experiments[name]
    shared = render_spec(campaign, name, run)
    roles = host_roles(list(shared.hosts), experiment.rwmixreadhost)
    facts = uses_host_facts(experiment)
    entries = []
    for host in shared.hosts:
        entry: dict = {"host": host, "role": roles.get(host)}
        if entry["role"] is not None:  # as render_spec gives that host alone
            entry["params"] = role_params(experiment.tool, run.params, entry["role"])
        if facts:
            entry["facts"] = paths.telemetry(host)
        entries.append(entry)
    suffix = get_tool(experiment.tool).job_suffix
    return HostJobsSpec(render=shared.to_dict(), hosts=tuple(entries), suffix=suffix)


def _named_hosts(experiment, run: Run, host_configs: list[dict]) -> dict:
    """For a job file that names its hosts (vdbench's hd=, whose master logs in to them):
    {host: where the tool reaches it} when one differs from the host's name, and {host: its
    group's SSH user} where that is not the user the tool logs in as anyway; each only then
    (the other specs stay as they were)."""
    tool = get_tool(experiment.tool)
    if not tool.job_names_hosts(run.params, experiment.execution):
        return {}
    addresses = {host["name"]: Host.from_dict(host).tool_address for host in host_configs}
    users = {
        host["name"]: host["user"]
        for host in host_configs
        if host.get("user") and host["user"] != tool.job_login_user
    }
    return {
        "addresses": None if all(a == name for name, a in addresses.items()) else addresses,
        "users": users or None,
    }


def _storage_names_used(campaign: Campaign, params: dict) -> dict | None:
    """The storage_* names, only for a job that uses one (other specs stay as they were)."""
    used = set().union(*(hostfacts.used_names(value) for value in params.values()))
    return campaign.storage if used & set(hostfacts.STORAGE_NAMES) else None


def role_params(tool: str, params: dict, role: str | None) -> dict:
    """The job options of a host with a read or write role (host-level read/write split)."""
    if role is None:
        return params
    return get_tool(tool).role_options(params, role)


def run_spec(campaign: Campaign, name: str, run: Run) -> RunSpec:
    experiment = campaign.experiments[name]
    return RunSpec.from_dict(
        {
            **_run_identity(campaign, name, run),
            "hosts": run_hosts(campaign, name, run),
            # the planned time's limit; a configured `timeout` comes beside the spec
            # (run_time_limit): a new limit is no reason to run finished runs again
            "timeout_s": iteration_timeout(run.params, None),
            "execution": experiment.execution,
            "step": run.step,
            "per_host_jobs": per_host_jobs(experiment),
            "service": (
                service_spec(campaign, experiment.tool)
                if experiment.execution == "service"
                else None
            ),
            "faults": experiment.faults,
            "preparation": preparation_spec(campaign, name),
            "wait_s": experiment.wait_s,
        },
        planned=True,
    )


def run_time_limit(campaign: Campaign, name: str, run: Run) -> float:
    """An iteration's time limit: the configured `timeout`, else twice the planned time and
    slack (the spec's own)."""
    return iteration_timeout(run.params, campaign.experiments[name].timeout)


def search_time_limit(campaign: Campaign, name: str) -> float:
    """A probe's time limit, as run_time_limit's."""
    experiment = campaign.experiments[name]
    return iteration_timeout(experiment.job, experiment.timeout)


def search_spec(campaign: Campaign, name: str) -> ProbeSpec:
    """What every probe job of a search experiment needs; the probe sets run id and options."""
    experiment = campaign.experiments[name]
    hosts = campaign.hosts_of(name)
    # one job for every host: only {hosts} and storage facts (the config refuses the others)
    names = {"hosts": len(hosts), **(_storage_names_used(campaign, experiment.job) or {})}
    return ProbeSpec(
        experiment=name,
        tool=experiment.tool,
        target=experiment_target(campaign, name),
        params=hostfacts.resolve(experiment.job, names),
        hosts=tuple(hosts),
        timeout_s=iteration_timeout(experiment.job, None),  # as run_spec's
        template=experiment.template,
        # the chain's length is the workflow's business: a larger budget keeps finished probes
        search={k: v for k, v in experiment.search.items() if k != "probes"},
        preparation=preparation_spec(campaign, name),
    )


def preparation_spec(campaign: Campaign, name: str) -> dict | None:
    """The state a run needs on its target: the tokens to check, the label it runs under."""

    experiment = campaign.experiments[name]
    specs = []
    prepared = None
    if experiment.dataset:
        specs.append(prepare_plan.dataset_spec(campaign.datasets[experiment.dataset]).to_dict())
    if experiment.precondition:
        recipe = campaign.recipes[experiment.precondition]
        full = prepare_plan.recipe_spec(recipe).to_dict()  # a run only checks the recipe's tokens
        specs.append(
            {key: full[key] for key in ("kind", "name", "target", "sha256", "dir", "tokens")}
        )
        prepared = prepare_plan.prepared_marker(recipe)
    if not specs:
        return None
    return {"state": experiment.prep_state, "specs": specs, "prepared": prepared}


def service_spec(campaign: Campaign, tool: str) -> dict:
    """Every host that runs this tool's service in the campaign, with the port."""

    hosts: dict[str, dict] = {}
    for name, experiment in campaign.experiments.items():
        if experiment.execution == "service" and experiment.tool == tool:
            hosts.update((host["name"], host) for host in campaign.hosts_of(name))
    return {"tool": tool, "port": get_tool(tool).default_port, "hosts": list(hosts.values())}


def steps_meta(campaign: Campaign, name: str) -> dict | None:
    """Client steps for the report: mode, size and the hosts (name, group) of each step."""
    experiment = campaign.experiments[name]
    if experiment.steps is None:
        return None
    hosts = campaign.hosts_of(name)
    by_name = {host["name"]: host for host in hosts}
    steps = client_steps(experiment.steps, [host["name"] for host in hosts])
    return {
        **experiment.steps,
        "hosts": {
            label: [{"name": h, "group": by_name[h]["group"]} for h in step_hosts]
            for label, step_hosts in steps
        },
    }


def telemetry_spec(campaign: Campaign, host: str) -> dict:
    """A host with the targets and tools of every experiment that uses it."""
    targets: dict[str, dict] = {}
    tools: set[str] = set()
    host_dict = None
    for name, experiment in campaign.experiments.items():
        for candidate in campaign.hosts_of(name):
            if candidate["name"] == host:
                host_dict = candidate
                targets[experiment.target_name] = experiment_target(campaign, name)
                tools.add(experiment.tool)
    if host_dict is None:
        raise PlanError(f"no experiment uses host {host!r}")
    return {"host": host_dict, "targets": list(targets.values()), "tools": sorted(tools)}


def network_spec(campaign: Campaign) -> dict | None:
    """The iperf3 network check of the config's `network:` section, or None."""
    network = campaign.raw.get("network")
    if not network:
        return None
    hosts = [host for group in campaign.host_groups.values() for host in group]
    checks: dict = {}
    if "server" in network:
        checks["server"] = next(host for host in hosts if host["name"] == network["server"])
        clients: dict[str, dict] = {}
        for group in network["clients"]:
            clients.update((host["name"], host) for host in campaign.host_groups[group])
        checks["clients"] = list(clients.values())
    if "mesh" in network:
        mesh: dict[str, dict] = {}
        for group in network["mesh"]:
            mesh.update((host["name"], host) for host in campaign.host_groups[group])
        checks["mesh"] = list(mesh.values())
    return {
        **checks,
        "port": network.get("port", 5201),
        "duration_s": units.parse_duration(network.get("duration", "10s")),
        "parallel": network.get("parallel", 1),
        "min_fraction": network.get("min_fraction", 0.8),
    }


def setup_spec(campaign: Campaign, step_name: str, host: str) -> SetupSpec:
    step = campaign.setups[step_name]
    hosts = [h["name"] for h in step.step_hosts()]
    if host not in hosts:
        raise PlanError(f"setup step {step_name!r} does not run on host {host!r}")
    return SetupSpec(
        step=step_name,
        host=step.step_hosts()[hosts.index(host)],
        host_index=hosts.index(host),
        hosts=len(hosts),
        command=step.command,
        timeout_s=step.timeout_s,
        check=step.check,
        undo=step.undo,
        storage=campaign.storage or None,
    )


def setup_markers(campaign: Campaign, experiment: str, hosts: list[str]) -> list[str]:
    """The set-up markers the experiment's runs on these hosts wait for: its own steps, and
    every other experiment's steps on these hosts, so that no step (a mount over a target
    path) changes a host while a run there measures it."""
    own = campaign.experiments[experiment].setup
    run_hosts = set(hosts)  # every step's hosts are looked up, per run: 128 x 128 at scale
    markers = []
    for name in used_setup_steps(campaign):
        step = campaign.setups[name]
        on = [h["name"] for h in step.step_hosts()]
        markers += [
            paths.setup_marker(name, host)
            for host in on
            if host in run_hosts or (step.once and name in own)
        ]
    return markers


def used_setup_steps(campaign: Campaign) -> list[str]:
    """The set-up steps some experiment names, in the config's order."""
    used = {name for e in campaign.experiments.values() for name in e.setup}
    return [name for name in campaign.setups if name in used]


def service_tools(campaign: Campaign) -> list[str]:
    """Tools whose services run for the whole campaign (workers started per run are not)."""
    tools = {e.tool for e in campaign.experiments.values() if e.execution == "service"}
    return sorted(tool for tool in tools if not get_tool(tool).service_per_run)


def dialed_port(experiment: Experiment) -> int:
    """The port of this machine the experiment's hosts' workers dial (a service run's server
    listens there), else 0."""
    tool = get_tool(experiment.tool)
    dials = experiment.execution == "service" and tool.workers_dial_controller
    return tool.default_port if dials else 0


def preflight_spec(campaign: Campaign, name: str) -> dict:
    experiment = campaign.experiments[name]
    tool = get_tool(experiment.tool)
    requirements = tool.host_requirements(experiment.job, experiment.sweep, experiment.execution)
    # a service run's client runs on this machine
    here = tool.controller_requirements() if experiment.execution == "service" else []
    dialed = dialed_port(experiment)  # each host connects to it at preflight
    return {
        "experiment": name,
        "tool": experiment.tool,
        "target": experiment_target(campaign, name),
        "hosts": campaign.hosts_of(name),
        # only when there are any: a spec without them stays the same and reruns nothing
        **({"requirements": requirements} if requirements else {}),
        **({"controller_requirements": here} if here else {}),
        **({"controller_port": dialed} if dialed else {}),
        **({"require_same_version": True} if experiment.require_same_version else {}),
    }


def to_json(spec: dict | StepSpec) -> str:
    if isinstance(spec, StepSpec):
        return spec.to_json()
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))


class SpecJson(NamedTuple):
    """A step's spec as JSON, and the part of it Snakemake's params trigger tracks."""

    full: str
    measured: str


def spec_json(spec: StepSpec) -> SpecJson:
    data = spec.to_dict()
    return SpecJson(to_json(data), to_json(measured(data)))


# how a host is reached, its limits, its group and what is kept on it: none changes what a
# step measures, so a change to them alone runs no finished step again
UNMEASURED_HOST_KEYS = frozenset(
    {
        "group", "user", "port", "identity", "jump", "gateway", "gateway_python",
        "connect_timeout", "host_key_check", "connection", "known_hosts", "workdir",
        "keep_attempts", "unresponsive_s", "service_ports", "controller_address",
    }
)  # fmt: skip
# of a run's preparation, what it ran on (the state's label and which dataset or recipe), not
# the tokens it checks: a changed dataset or recipe is prepared again, its finished runs stay
_MEASURED_PREPARATION = ("kind", "name", "target")


def measured(spec: dict) -> dict:
    """The part of a step's spec that Snakemake's params trigger tracks: every host without
    UNMEASURED_HOST_KEYS, a run's preparation without its tokens and digests."""
    return {key: _measured_value(key, value) for key, value in spec.items()}


def _measured_value(key: str, value):
    if key == "hosts" and isinstance(value, list):
        return [
            {k: v for k, v in host.items() if k not in UNMEASURED_HOST_KEYS}
            if isinstance(host, dict)
            else host
            for host in value
        ]
    if key == "preparation" and isinstance(value, dict):
        return {
            "state": value.get("state"),
            "specs": [{k: part.get(k) for k in _MEASURED_PREPARATION} for part in value["specs"]],
        }
    if isinstance(value, dict):
        return measured(value)
    return value
