"""What `storbench check` asks each adapter beyond the config's own checks: can it write the
job of every planned run (options it cannot render fail here, not at the run)."""

from __future__ import annotations

import dataclasses
from typing import Any

from storbench.core import hostfacts
from storbench.core.model import Campaign
from storbench.core.specs import RenderSpec
from storbench.plan import specs
from storbench.tools import get_tool
from storbench.tools.base import REFUSALS, ToolAdapter, refusal_text

# Host-fact values are computed per host at render time, from telemetry `check` does not
# have: a small and a large client stand in, and a value both refuse is refused on any host.
SAMPLE_HOSTS: tuple[dict[str, Any], ...] = (
    {"cores": 4, "sockets": 1, "mem_bytes": 16 * 2**30, "nics": [{"speed_mbps": 10_000}]},
    {"cores": 128, "sockets": 2, "mem_bytes": 1024 * 2**30, "nics": [{"speed_mbps": 200_000}]},
)


def adapter_problems(campaign: Campaign) -> list[str]:
    """One problem per experiment whose adapter refuses a run's options (the first run, and
    how many more). Host-fact values are computed for each of SAMPLE_HOSTS; a run is refused
    when the adapter refuses it on every one of them."""
    problems = []
    for name, experiment in campaign.experiments.items():
        if experiment.job_file:
            continue
        tool = get_tool(experiment.tool)
        refused = []
        for run in campaign.experiment_runs(name):
            spec = specs.render_spec(campaign, name, run)
            if experiment.uses_host_facts:
                reasons = [_sample_host_refusal(tool, spec, facts) for facts in SAMPLE_HOSTS]
                why, option = reasons[0] or ("", None)
                refusal = (f"{why} ({_samples()})", option) if all(reasons) else None
            else:
                refusal = _refusal(tool, spec)
            if refusal:
                refused.append((run.run_id, refusal))
        if refused:
            run_id, (reason, option) = refused[0]
            more = f" (and {len(refused) - 1} more runs)" if len(refused) > 1 else ""
            problems.append(f"{experiment.option_key(option)}: run {run_id}{more}: {reason}")
    return problems


Refusal = tuple[str, str | None]  # why, and the job option refused where the adapter named one


def _refusal(tool: ToolAdapter, spec: RenderSpec) -> Refusal | None:
    """Why the adapter cannot write this spec's job, or None."""
    try:
        tool.template_context(spec.mapping())
    except REFUSALS as error:
        return refusal_text(error), getattr(error, "option", None)
    return None


def _sample_host_refusal(tool: ToolAdapter, spec: RenderSpec, facts: dict) -> Refusal | None:
    """_refusal of the spec with its host-fact values computed for a host of these facts."""
    names = {
        **hostfacts.expression_names(facts, hosts_in_run=len(spec.hosts), host_index=0),
        **(spec.storage or {}),
    }
    try:
        params = hostfacts.resolve(spec.params, names)
    except hostfacts.HostFactError as error:
        return str(error), None
    return _refusal(tool, dataclasses.replace(spec, params=params))


def _samples() -> str:
    clients = " and ".join(
        f"{facts['cores']} cores, {facts['mem_bytes'] // 2**30} GiB" for facts in SAMPLE_HOSTS
    )
    return f"with the host facts of clients of {clients}"
