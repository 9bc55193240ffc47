"""What `storbench check` asks each adapter beyond the config's own checks: can it write the
job of every planned run (options it cannot render fail here, not at the run)."""

from __future__ import annotations

from storbench.core.model import Campaign
from storbench.plan import specs
from storbench.tools import get_tool
from storbench.tools.base import RenderError


def adapter_problems(campaign: Campaign) -> list[str]:
    """One problem per experiment whose adapter refuses a run's options (the first run, and
    how many more); experiments with host-fact values are checked per host at render time."""
    problems = []
    for name, experiment in campaign.experiments.items():
        if experiment.uses_host_facts or experiment.job_file:
            continue
        tool = get_tool(experiment.tool)
        refused = []
        for run in campaign.experiment_runs(name):
            spec = specs.render_spec(campaign, name, run)
            try:
                tool.template_context(spec.mapping())
            except (RenderError, ValueError, KeyError) as error:
                refused.append((run.run_id, str(error).strip("'\"")))
        if refused:
            run_id, reason = refused[0]
            more = f" (and {len(refused) - 1} more runs)" if len(refused) > 1 else ""
            problems.append(f"experiments.{name}: run {run_id}{more}: {reason}")
    return problems
