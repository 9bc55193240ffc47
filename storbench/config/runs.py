"""Experiments -> runs: sweep points x target choices x client steps, each with its run id.

Part of validation: two points with one run id, or an id too long for a file name, are config
errors.
"""

from __future__ import annotations

from collections import Counter

from storbench.config.schedule import schedule_runs
from storbench.config.sweep import _UNSAFE, OPERATORS, WORDS, PlanError, run_id, sweep_points
from storbench.core import hostfacts
from storbench.core.model import Campaign, Run


def target_choices(
    target_set: tuple[str, ...], together_only: bool = False
) -> list[tuple[str | None, tuple[str, ...]]]:
    """(label, targets): each target of a set alone, then all of them at once (or only that)."""
    if not target_set:
        return [(None, ())]
    together = ("t-all", tuple(target_set))
    if together_only:
        return [together]
    alone = [(f"t-{_UNSAFE.sub('-', name)}", (name,)) for name in target_set]
    return [*alone, together]


def client_steps(steps: dict | None, hosts: list[str]) -> list[tuple[str | None, tuple[str, ...]]]:
    """(label, hosts) per client step; incremental steps of a size always end with every host,
    those of counts are the counts written."""
    if not steps:
        return [(None, tuple(hosts))]
    size = steps.get("size", 1)
    if steps["mode"] == "incremental":
        counts = list(steps.get("counts") or range(size, len(hosts) + 1, size))
        if "counts" not in steps and counts[-1] != len(hosts):
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
        for target_label, targets in target_choices(
            experiment.target_set, experiment.together_only
        ):
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
        for name, line_params in schedule_runs(experiment.schedule):
            yield name, {**experiment.job, **line_params}, line_params
        return
    points = [({**experiment.job, **point}, point) for point in sweep_points(experiment.sweep)]
    ids = [run_id(params, point) for params, point in points]
    # host-fact values of one option ('{cores}', '{cores * 2}') are written out only where
    # the plain 'host' label would give two points one id, and their operators only where
    # their words would ('{cores * 2}', '{cores // 2}'): every other id stays as it was
    for spelling in (WORDS, OPERATORS):
        counts = Counter(ids)
        shared = [
            index
            for index, (_, point) in enumerate(points)
            if counts[ids[index]] > 1 and any(hostfacts.has_expression(v) for v in point.values())
        ]
        for index in shared:
            ids[index] = run_id(*points[index], spell_expressions=spelling)
    for (params, point), point_id in zip(points, ids, strict=True):
        yield point_id, params, point
