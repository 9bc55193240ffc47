"""`storbench progress`: how far a campaign is, read from its results folder (touches no host).

Counts run iterations (and search probes) done against the plan, names the iterations that
have started (an attempt folder without a published manifest: running now, or failed), and
estimates the time left from the planned durations of what is not done yet (runtime +
ramp_time + wait, as `snakemake plan` does). Run it beside a campaign, e.g. `watch -n 30
storbench progress --config my.yaml`.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from pathlib import Path

from storbench.config import search as search_config
from storbench.core import paths
from storbench.core.model import Campaign
from storbench.plan.durations import hours_text, run_seconds


@dataclass
class Progress:
    done: int = 0
    total: int = 0
    remaining_s: float = 0.0
    started: list[str] = field(default_factory=list)  # 'exp/run it<k>' begun, not published
    unestimated: list[str] = field(default_factory=list)  # experiments without a runtime

    def describe(self, now: datetime.datetime | None = None) -> str:
        now = now or datetime.datetime.now(datetime.UTC)
        share = self.done / self.total if self.total else 1.0
        lines = [f"runs done: {self.done} of {self.total} ({share:.0%})"]
        for item in self.started:
            lines.append(f"started, no result yet (running or failed): {item}")
        if self.done < self.total:
            finish = now + datetime.timedelta(seconds=self.remaining_s)
            lines.append(
                f"planned time left: {hours_text(self.remaining_s)} (finish about "
                f"{finish:%Y-%m-%d %H:%M} UTC; tool start-up and parsing not counted)"
            )
        if self.unestimated:
            lines.append(f"not estimated (no runtime): {', '.join(self.unestimated)}")
        return "\n".join(lines)


def campaign_progress(campaign: Campaign, workdir: Path) -> Progress:
    progress = Progress()
    for name, experiment in campaign.experiments.items():
        wait = experiment.wait_s or 0.0
        if experiment.search:
            probes = search_config.probe_ids(experiment.search)
            markers = [workdir / paths.probe_marker(name, probe) for probe in probes]
            done = sum(marker.exists() for marker in markers)
            progress.done += done
            progress.total += len(probes)
            seconds = run_seconds(experiment.job)
            if seconds is None:
                progress.unestimated.append(name)
            elif not (workdir / paths.search_result(name)).exists():
                progress.remaining_s += (len(probes) - done) * (seconds + wait)
            continue
        for run in campaign.experiment_runs(name):
            seconds = run_seconds(run.params)
            for iteration in range(1, experiment.iterations + 1):
                manifest = workdir / paths.manifest(name, run.run_id, iteration)
                progress.total += 1
                if manifest.exists():
                    progress.done += 1
                    continue
                if any(manifest.parent.glob("a*")):
                    progress.started.append(f"{name}/{run.run_id} it{iteration}")
                if seconds is None:
                    if name not in progress.unestimated:
                        progress.unestimated.append(name)
                else:
                    progress.remaining_s += seconds + wait
    return progress
