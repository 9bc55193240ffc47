"""Expand experiments into runs: sweep points, run ids, and the specs the rules pass on.

Run id format: the workload's ``rw``, then ``bs<size>``, ``qd<iodepth>``, ``nj<numjobs>``
(each only when the option is set; ``host`` when its value is a host-fact expression, e.g.
``njhost``), then every other swept option as ``<option>-<value>``
in sweep order; e.g. ``randread_bs4k_qd16_nj1`` or ``randrw_bs4k_qd1_nj1_mix70``.
Sizes are written short (4096 -> 4k); characters other than letters, digits, '.' and '-'
become '-'. An experiment without any of these options has the single run id ``run``.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass

from storbench.config.campaign import DURATION_OPTIONS, SIZE_OPTIONS, Campaign
from storbench.core import units

RUN_ID_PARTS = (
    ("rw", ""),
    ("bs", "bs"),
    ("iodepth", "qd"),
    ("numjobs", "nj"),
    ("rwmixread", "mix"),
)
DEFAULT_ITERATION_TIMEOUT_S = 3600.0
_UNSAFE = re.compile(r"[^A-Za-z0-9.-]")


class PlanError(ValueError):
    pass


@dataclass(frozen=True)
class Run:
    run_id: str
    params: dict  # job options with this sweep point applied, in config order
    point: dict  # only the swept options
    hosts: tuple[str, ...] = ()  # the hosts this run uses; empty: every host of the experiment
    step: str | None = None  # client step label: 'h4' (incremental), 'host-<name>' (constant)
    targets: tuple[str, ...] = ()  # a target set's members this run uses; empty: the target


def target_choices(target_set: tuple[str, ...]) -> list[tuple[str | None, tuple[str, ...]]]:
    """(label, targets): each target of a set alone, then all of them at once."""
    if not target_set:
        return [(None, ())]
    alone = [(f"t-{_UNSAFE.sub('-', name)}", (name,)) for name in target_set]
    return [*alone, ("t-all", tuple(target_set))]


def client_steps(steps: dict | None, hosts: list[str]) -> list[tuple[str | None, tuple[str, ...]]]:
    """(label, hosts) per client step; incremental steps always end with every host."""
    if not steps:
        return [(None, tuple(hosts))]
    size = steps["size"]
    if steps["mode"] == "incremental":
        counts = list(range(size, len(hosts) + 1, size))
        if counts[-1] != len(hosts):
            counts.append(len(hosts))
        return [(f"h{n}", tuple(hosts[:n])) for n in counts]
    groups = [tuple(hosts[i : i + size]) for i in range(0, len(hosts), size)]
    if size == 1:
        return [(f"host-{_UNSAFE.sub('-', group[0])}", group) for group in groups]
    return [(f"g{index}", group) for index, group in enumerate(groups, start=1)]


def host_roles(hosts: list[str], rwmixreadhost: int | None) -> dict[str, str]:
    """'read' or 'write' per host: the first rwmixreadhost percent of the hosts read."""
    if rwmixreadhost is None:
        return {}
    readers = round(len(hosts) * rwmixreadhost / 100)
    return {host: ("read" if i < readers else "write") for i, host in enumerate(hosts)}


def sweep_points(sweep: dict) -> list[dict]:
    """Cross product of the lists; lists under ``zip`` are paired element-wise first."""
    zipped = sweep.get("zip") or {}
    lengths = {key: len(values) for key, values in zipped.items()}
    if len(set(lengths.values())) > 1:
        detail = ", ".join(f"{k}={n}" for k, n in lengths.items())
        raise PlanError(f"zip lists must have equal lengths ({detail})")
    axes: list[list[dict]] = []
    if zipped:
        keys = list(zipped)
        rows = zip(*zipped.values(), strict=True)
        axes.append([dict(zip(keys, values, strict=True)) for values in rows])
    for key, values in sweep.items():
        if key != "zip":
            axes.append([{key: value} for value in values])
    points = []
    for combination in itertools.product(*axes):
        point: dict = {}
        for part in combination:
            point.update(part)
        points.append(point)
    return points


def _label(option: str, value) -> str:
    from storbench.core import hostfacts

    if hostfacts.has_expression(value):
        return "host"  # computed per host from its facts: 'njhost'
    if option in SIZE_OPTIONS and "-" not in str(value) and "," not in str(value):
        try:
            return units.size_label(value)
        except units.UnitError:
            pass
    return _UNSAFE.sub("-", str(value))


def run_id(params: dict, point: dict) -> str:
    parts = []
    named = {option for option, _ in RUN_ID_PARTS}
    for option, prefix in RUN_ID_PARTS:
        if option in params:
            parts.append(prefix + _label(option, params[option]))
    for option, value in point.items():
        if option not in named:
            parts.append(f"{option}-{_label(option, value)}")
    return "_".join(parts) or "run"


def experiment_runs(campaign: Campaign, name: str) -> list[Run]:
    """The planned runs; a search experiment has none: its probes are decided as it goes."""
    experiment = campaign.experiments[name]
    if experiment.search:
        return []
    hosts = [host["name"] for host in campaign.hosts_of(name)]
    steps = client_steps(experiment.steps, hosts)
    runs: list[Run] = []
    seen: dict[str, dict] = {}
    for base_id, params, point in _workloads(experiment):
        if base_id in seen:
            raise PlanError(f"sweep points {seen[base_id]} and {point} both get run id {base_id!r}")
        seen[base_id] = point
        for target_label, targets in target_choices(experiment.target_set):
            for step, step_hosts in steps:
                labels = [base_id, target_label, step]
                runs.append(
                    Run(
                        run_id="_".join(label for label in labels if label),
                        params=params,
                        point=point,
                        hosts=step_hosts,
                        step=step,
                        targets=targets,
                    )
                )
    return runs


def _workloads(experiment):
    """(run id, params, point) of each workload: a schedule file's lines, or the sweep."""
    if experiment.schedule:
        from storbench.config.schedule import schedule_runs

        for name, line_params in schedule_runs(experiment.schedule):
            yield name, {**experiment.job, **line_params}, line_params
        return
    for point in sweep_points(experiment.sweep):
        params = {**experiment.job, **point}
        yield run_id(params, point), params, point


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


def normalized_options(params: dict) -> dict:
    """Option values as the tool reads them unambiguously (sizes binary, durations with units)."""
    options = {}
    for option, value in params.items():
        text = str(value)
        if (
            option in SIZE_OPTIONS
            and not text.endswith("%")
            and "-" not in text
            and "," not in text
        ):
            options[option] = units.fio_size(value)
        elif option in DURATION_OPTIONS:
            options[option] = units.fio_duration(value)
        elif isinstance(value, bool):
            options[option] = int(value)
        else:
            options[option] = value
    return options


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
        from storbench.run.s3 import bucket_name

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


def render_spec(campaign: Campaign, name: str, run: Run, host: str | None = None) -> dict:
    """What the render step needs; with host, that host's job (its role, its index)."""
    experiment = campaign.experiments[name]
    hosts = [h["name"] for h in run_hosts(campaign, name, run)]
    spec = {
        **_run_identity(campaign, name, run),
        "hosts": hosts,
        "point": run.point,
        "template": experiment.template,
        "job_file": experiment.job_file,
        "execution": experiment.execution,
    }
    if host is not None:
        if host not in hosts:
            raise PlanError(f"run {run.run_id} of {name} does not use host {host!r}")
        role = host_roles(hosts, experiment.rwmixreadhost).get(host)
        spec["params"] = role_params(run.params, role)
        spec.update(host=host, host_index=hosts.index(host), role=role)
    return spec


def role_params(params: dict, role: str | None) -> dict:
    """The job options of a host with a read or write role (host-level read/write split)."""
    if role is None:
        return params
    from storbench.config.campaign import READ_PATTERNS, WRITE_PATTERNS

    patterns = READ_PATTERNS if role == "read" else WRITE_PATTERNS
    return {**params, "rw": patterns[params["rw"]]}


def run_spec(campaign: Campaign, name: str, run: Run) -> dict:
    experiment = campaign.experiments[name]
    spec = {
        **_run_identity(campaign, name, run),
        "hosts": run_hosts(campaign, name, run),
        "timeout_s": iteration_timeout(run.params, experiment.timeout),
        "execution": experiment.execution,
        "step": run.step,
        "per_host_jobs": per_host_jobs(experiment),
    }
    if experiment.execution == "service":
        spec["service"] = service_spec(campaign, experiment.tool)
    if experiment.faults:
        spec["faults"] = list(experiment.faults)
    preparation = preparation_spec(campaign, name)
    if preparation:
        spec["preparation"] = preparation
    return spec


def search_spec(campaign: Campaign, name: str) -> dict:
    """What every probe job of a search experiment needs; the probe sets run id and options."""
    experiment = campaign.experiments[name]
    spec = {
        "experiment": name,
        "run_id": None,
        "tool": experiment.tool,
        "target": experiment_target(campaign, name),
        "params": experiment.job,
        "hosts": campaign.hosts_of(name),
        "timeout_s": iteration_timeout(experiment.job, experiment.timeout),
        "execution": "standalone",
        "step": None,
        "per_host_jobs": False,
        "template": experiment.template,
        "job_file": None,
        # the chain's length is the workflow's business: a larger budget keeps finished probes
        "search": {k: v for k, v in experiment.search.items() if k != "probes"},
    }
    preparation = preparation_spec(campaign, name)
    if preparation:
        spec["preparation"] = preparation
    return spec


def preparation_spec(campaign: Campaign, name: str) -> dict | None:
    """The state a run needs on its target: the tokens to check, the label it runs under."""
    from storbench.plan import preparation as prepare_plan

    experiment = campaign.experiments[name]
    specs = []
    prepared = None
    if experiment.dataset:
        specs.append(prepare_plan.dataset_spec(campaign.datasets[experiment.dataset]))
    if experiment.precondition:
        recipe = campaign.recipes[experiment.precondition]
        full = prepare_plan.recipe_spec(recipe)  # a run only checks the recipe's tokens
        specs.append(
            {key: full[key] for key in ("kind", "name", "target", "sha256", "dir", "tokens")}
        )
        prepared = prepare_plan.prepared_marker(recipe)
    if not specs:
        return None
    return {"state": experiment.prep_state, "specs": specs, "prepared": prepared}


def service_spec(campaign: Campaign, tool: str) -> dict:
    """Every host that runs this tool's service in the campaign, with the port."""
    from storbench.tools import get_tool

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
    server = next(host for host in hosts if host["name"] == network["server"])
    clients: dict[str, dict] = {}
    for group in network["clients"]:
        clients.update((host["name"], host) for host in campaign.host_groups[group])
    return {
        "server": server,
        "clients": list(clients.values()),
        "port": network.get("port", 5201),
        "duration_s": units.parse_duration(network.get("duration", "10s")),
        "parallel": network.get("parallel", 1),
        "min_fraction": network.get("min_fraction", 0.8),
    }


def service_tools(campaign: Campaign) -> list[str]:
    return sorted({e.tool for e in campaign.experiments.values() if e.execution == "service"})


def preflight_spec(campaign: Campaign, name: str) -> dict:
    experiment = campaign.experiments[name]
    return {
        "experiment": name,
        "tool": experiment.tool,
        "target": experiment_target(campaign, name),
        "hosts": campaign.hosts_of(name),
    }


def to_json(spec: dict) -> str:
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))
