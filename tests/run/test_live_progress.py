"""The progress lines the storbench logger plugin prints while Snakemake runs a campaign."""

from __future__ import annotations

import datetime
from pathlib import Path

from storbench.config.campaign import load_campaign
from storbench.core import paths
from storbench.run import live_progress
from storbench.run.live_progress import LiveProgress, progress_line

NOW = datetime.datetime(2026, 11, 25, 12, 0, tzinfo=datetime.UTC)


def campaign(tmp_path: Path):
    return load_campaign(
        {
            "hosts": {"localhost": {"transport": "local"}},
            "targets": {"scratch": {"type": "directory", "path": str(tmp_path / "t")}},
            "experiments": {
                "tiny": {
                    "tool": "fio",
                    "hosts": "localhost",
                    "target": "scratch",
                    "iterations": 2,
                    "wait": "10s",
                    "job": {"size": "4MiB", "runtime": "60s", "ramp_time": "5s"},
                    "sweep": {"rw": ["read", "write"]},
                }
            },
        }
    )


def publish(tmp_path: Path, run_id: str, iteration: int) -> None:
    manifest = tmp_path / paths.manifest("tiny", run_id, iteration)
    manifest.parent.mkdir(parents=True)
    manifest.write_text("{}")


def test_the_line_counts_published_runs_and_the_planned_time_of_the_rest(tmp_path):
    publish(tmp_path, "read", 1)
    line = progress_line(campaign(tmp_path), tmp_path, ["tiny/read it2"], now=NOW)
    # three runs left, each 60 s + 5 s ramp + 10 s wait: 225 s
    assert line == (
        "storbench: runs done 1 of 4 (25%) · running tiny/read it2 · "
        "planned time left 3m 45s (finish about 12:03 UTC)"
    )


def test_job_events_of_run_rules_print_a_line_other_rules_none(tmp_path):
    lines: list[str] = []
    progress = LiveProgress(lines.append, workdir=tmp_path)
    live_progress.follow(campaign(tmp_path))
    progress.job_started(7, "parse_iteration", {"experiment": "tiny", "run_id": "x"})
    progress.job_started(
        8, "run_iteration", {"experiment": "tiny", "run_id": "write", "iteration": "2"}
    )
    publish(tmp_path, "write", 2)
    progress.job_finished(8)
    progress.job_finished(7)
    assert [line.split(" · ")[:2] for line in lines] == [
        ["storbench: runs done 0 of 4 (0%)", "running tiny/write it2"],
        [
            "storbench: runs done 1 of 4 (25%)",
            "planned time left 3m 45s (finish about " + lines[1].split("about ")[1],
        ],
    ]


def test_a_search_probe_is_named_by_its_probe():
    assert live_progress.run_label({"experiment": "slo", "probe": "p3"}) == "slo/p3"
