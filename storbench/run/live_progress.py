"""One progress line per run started or finished while Snakemake runs a campaign.

Snakemake's own output counts steps (any job: render, parse, report), not runs. The
storbench logger plugin (plugins/snakemake-logger-plugin-storbench, `logger: [storbench]` in
the profile) hands every job event of the run rules to `LiveProgress`, which prints:

    storbench: runs done 12 of 48 (25%) · running demo/randread_bs4k_qd1_nj1 it2 · planned
    time left 14m 20s (finish about 14:32 UTC)

The counts and the time left come from `storbench progress` (the manifests published in the
results folder against the plan, planned runtime + ramp + wait of what is left). The plugin
runs in the Snakemake process, so the Snakefile hands it the parsed campaign (`follow`).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from storbench.core.model import Campaign
from storbench.run.progress import campaign_progress
from storbench.run.show_plan import hours_text

RUN_RULES = ("run_iteration", "search_probe")
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
    running: dict[int, str] = field(default_factory=dict)  # Snakemake job id -> run label

    def job_started(self, job_id: int, rule: str, wildcards: dict) -> None:
        if rule not in RUN_RULES:
            return
        self.running[job_id] = run_label(wildcards)
        self._print()

    def job_finished(self, job_id: int) -> None:
        if self.running.pop(job_id, None) is not None:
            self._print()

    def _print(self) -> None:
        campaign = followed()
        if campaign is None:
            return
        line = progress_line(campaign, self.workdir, list(self.running.values()))
        self.write(line)


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
    progress = campaign_progress(campaign, workdir)
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
