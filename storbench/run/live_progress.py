"""One progress line per run started or finished while Snakemake runs a campaign.

Snakemake's own output counts steps (any job: render, parse, report), not runs. The
storbench logger plugin (plugins/snakemake-logger-plugin-storbench, `logger: [storbench]` in
the profile) hands every job event of the run rules to `LiveProgress`, which prints:

    storbench: runs done 12 of 48 (25%) · running demo/randread_bs4k_qd1_nj1 it2 · planned
    time left 14m 20s (finish about 14:32 UTC)

The counts and the time left start from `storbench progress` (the manifests published in the
results folder against the plan, planned runtime + ramp + wait of what is left), read once;
each run finished then counts as done and takes its planned time off, so a line never scans
the results folder again. A preflight that finds its hosts' tool versions differing adds its
warning (`storbench: warning: <experiment>: fio versions differ across hosts: …`), which
its log alone would keep out of sight. The plugin runs in the Snakemake process, so the
Snakefile hands it the parsed campaign (`follow`).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from storbench.core import paths
from storbench.core.model import Campaign
from storbench.plan.durations import hours_text, run_seconds
from storbench.run.progress import Progress, campaign_progress

RUN_RULES = ("run_iteration", "search_probe")
PREFLIGHT_RULE = "preflight"  # its warnings (hosts' tool versions differ) are printed too
_followed: dict[str, Campaign] = {}


def follow(campaign: Campaign) -> None:
    """Called by the Snakefile: this process's progress lines are about this campaign."""
    _followed["campaign"] = campaign


def followed() -> Campaign | None:
    return _followed.get("campaign")


@dataclass
class LiveProgress:
    write: Callable[[str], None]  # the plugin logs it through Snakemake's own stream handler
    workdir: Path = field(default_factory=Path.cwd)
    running: dict[int, tuple[str, float]] = field(default_factory=dict)  # job id -> label, s
    progress: Progress | None = None  # read from the results folder at the first run event
    planned: dict[tuple[str, str], float] = field(default_factory=dict)  # (exp, run) -> s
    preflights: dict[int, str] = field(default_factory=dict)  # job id -> experiment

    def job_started(self, job_id: int, rule: str, wildcards: dict) -> None:
        if rule == PREFLIGHT_RULE:
            self.preflights[job_id] = wildcards.get("experiment", "?")
            return
        campaign = followed()
        if rule not in RUN_RULES or campaign is None:
            return
        if self.progress is None:
            self.progress = campaign_progress(campaign, self.workdir)
            self.planned = planned_seconds(campaign)
        experiment = wildcards.get("experiment", "?")
        seconds = self.planned.get((experiment, wildcards.get("run_id", "")), 0.0)
        self.running[job_id] = (run_label(wildcards), seconds)
        self._print()

    def job_finished(self, job_id: int) -> None:
        if (experiment := self.preflights.pop(job_id, None)) is not None:
            for warning in preflight_warnings(self.workdir / paths.preflight(experiment)):
                self.write(f"storbench: warning: {experiment}: {warning}")
            return
        finished = self.running.pop(job_id, None)
        if finished is None or self.progress is None:
            return
        self.progress.done = min(self.progress.done + 1, self.progress.total)
        self.progress.remaining_s = max(self.progress.remaining_s - finished[1], 0.0)
        self._print()

    def _print(self) -> None:
        assert self.progress is not None  # set by the first run started
        running = [label for label, _ in self.running.values()]
        self.write(describe(self.progress, running))


def preflight_warnings(path: Path) -> list[str]:
    """The warnings of a finished preflight (its hosts' tool versions differ); none when its
    report is not there or not readable (a failed preflight's error is Snakemake's to show)."""
    try:
        return list(json.loads(path.read_text()).get("warnings", []))
    except (OSError, ValueError, AttributeError):
        return []


def planned_seconds(campaign: Campaign) -> dict[tuple[str, str], float]:
    """{(experiment, run id): runtime + ramp + wait}; a search's probes under run id ''."""
    planned = {}
    for name, experiment in campaign.experiments.items():
        wait = experiment.wait_s or 0.0
        runs = (
            [("", experiment.job)]
            if experiment.search
            else [(run.run_id, run.params) for run in campaign.experiment_runs(name)]
        )
        for run_id, params in runs:
            seconds = run_seconds(params)
            if seconds is not None:
                planned[(name, run_id)] = seconds + wait
    return planned


def run_label(wildcards: dict) -> str:
    experiment = wildcards.get("experiment", "?")
    if "probe" in wildcards:
        return f"{experiment}/{wildcards['probe']}"
    return f"{experiment}/{wildcards.get('run_id', '?')} it{wildcards.get('iteration', '?')}"


def progress_line(
    campaign: Campaign,
    workdir: Path,
    running: list[str],
    now: datetime.datetime | None = None,
) -> str:
    return describe(campaign_progress(campaign, workdir), running, now)


def describe(progress: Progress, running: list[str], now: datetime.datetime | None = None) -> str:
    """The one-line progress: runs done of the total, the running runs, the time left."""
    share = progress.done / progress.total if progress.total else 1.0
    parts = [f"storbench: runs done {progress.done} of {progress.total} ({share:.0%})"]
    if running:
        parts.append(f"running {', '.join(running)}")
    if progress.done < progress.total:
        now = now or datetime.datetime.now(datetime.UTC)
        finish = now + datetime.timedelta(seconds=progress.remaining_s)
        parts.append(
            f"planned time left {hours_text(progress.remaining_s)} "
            f"(finish about {finish:%H:%M} UTC)"
        )
    return " · ".join(parts)
