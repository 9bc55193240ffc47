"""Fault injection and soak runs: config safety, the schedule, and real runs through Snakemake.

The fault is real: fio on a local directory at a steady 2,000 IOPS is paused with SIGSTOP
and resumed with SIGCONT by the experiment's own fault commands; the report must show the
dip and a recovery time matching the injected window within one interval. A soak split in
chunks is interrupted with Ctrl-C in its second chunk and resumed; its merged series holds
every interval of every chunk exactly once.
"""

from __future__ import annotations

import copy
import csv
import json
import os
import signal
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from storbench.analysis import anomaly
from storbench.config import campaign as config
from storbench.run import faults
from tests.run.test_interrupt import start_snakemake, stop_if_running, wait_for
from tests.workflow.test_workflow import snakemake

INTERVAL_S = 1.0
PAUSE_AT_S, RESUME_AT_S = 6.0, 10.0


def fault_config(target: Path) -> dict:
    return {
        "hosts": {"localhost": {"transport": "local"}},
        "targets": {"scratch": {"type": "directory", "path": str(target)}},
        "report": {"pdf": False},
        "experiments": {
            "pause": {
                "tool": "fio",
                "hosts": "localhost",
                "target": "scratch",
                "iterations": 1,
                "allow_faults": True,
                "job": {
                    "rw": "randread",
                    "bs": "4k",
                    "size": "16MiB",
                    "ioengine": "psync",
                    "rate_iops": 2000,
                    "runtime": "18s",
                    "status_interval": "1s",
                },
                "faults": [
                    {
                        "name": "pause-io",
                        "host": "localhost",
                        "command": 'pkill -STOP -f "$STORBENCH_JOB_FILE"',
                        "at": f"{PAUSE_AT_S:g}s",
                        "recover": {
                            "command": 'pkill -CONT -f "$STORBENCH_JOB_FILE"',
                            "at": f"{RESUME_AT_S:g}s",
                        },
                    },
                    {
                        "name": "controller-note",
                        "host": "controller",
                        "command": 'echo "$STORBENCH_FAULT on $STORBENCH_HOST"',
                        "at": "15s",
                    },
                ],
                "fault_analysis": {"baseline": "5s", "band": "10%", "hold": 2},
            }
        },
    }


def problems_of(raw: dict) -> str:
    with pytest.raises(config.ConfigError) as error:
        config.load_campaign(raw)
    return str(error.value)


# --- config and plan ------------------------------------------------------------------------


def test_faults_need_allow_faults(tmp_path):
    raw = fault_config(tmp_path)
    del raw["experiments"]["pause"]["allow_faults"]
    assert "experiments.pause.allow_faults: faults run commands" in problems_of(raw)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda f: f.update(host="nosuch"), "faults[0].host: 'nosuch' is not a host"),
        (lambda f: f.update(at="18s"), "faults[0].at: 18s is not before the end"),
        (lambda f: f["recover"].update(at="5s"), "faults[0].recover.at: must be after at"),
        (lambda f: f.update(at="soon"), "faults[0].at: not a duration"),
        (lambda f: f.update(name="controller-note"), "faults[0].name: 'controller-note' is used"),
    ],
)
def test_bad_fault_names_its_key(tmp_path, change, expected):
    raw = fault_config(tmp_path)
    change(raw["experiments"]["pause"]["faults"][0])
    assert f"experiments.pause.{expected}" in problems_of(raw)


def test_plan_shows_the_fault_commands_before_anything_runs(tmp_path):
    result = snakemake(tmp_path, fault_config(tmp_path / "target"), "plan")
    output = result.stdout
    assert "FAULT COMMANDS (allow_faults: true)" in output
    assert 'at 6s on localhost: pkill -STOP -f "$STORBENCH_JOB_FILE"  [pause-io]' in output
    assert (
        'at 10s on localhost: pkill -CONT -f "$STORBENCH_JOB_FILE"  [pause-io recovery]' in output
    )
    assert not (tmp_path / "results" / "pause" / "raw").exists()


def test_soak_chunks_are_iterations(tmp_path):
    raw = soak_config(tmp_path)
    experiment = config.load_campaign(raw).experiments["soak"]
    assert experiment.iterations == 3 and experiment.job["runtime"] == "5s"
    raw["experiments"]["soak"]["iterations"] = 2
    assert "experiments.soak.iterations: a soak's chunks are its iterations" in problems_of(raw)


# --- the schedule -----------------------------------------------------------------------------


def test_script_never_holds_the_job_path_as_one_string():
    text = faults.script("true", {"STORBENCH_JOB_FILE": "/var/tmp/run/a1/job.fio"})
    assert "/var/tmp/run/a1/job.fio" not in text
    done = faults.run_on_controller(text + '; printf %s "$STORBENCH_JOB_FILE"', {}, 10)
    assert done == (0, "/var/tmp/run/a1/job.fio", "")


def test_recovery_runs_even_when_interrupted(tmp_path):
    log = tmp_path / "log"
    planned = faults.actions(
        [
            {
                "name": "f",
                "host": "controller",
                "command": f"echo fault >> {log}",
                "at": 0,
                "recover": {"command": f"echo recover >> {log}", "at": 60},
            }
        ]
    )
    schedule = faults.FaultSchedule(
        planned, run_on_host=None, job_files={}, started=lambda: True, workload_done=lambda: False
    )
    schedule.start()
    wait_for(lambda: log.exists(), "the fault command")
    records = schedule.finish(interrupted=True)
    assert log.read_text() == "fault\nrecover\n"
    assert [(r["kind"], r["exit_code"]) for r in records] == [("fault", 0), ("recover", 0)]
    assert records[1]["started_at_s"] < 60  # run at once, not at its planned offset


# --- a real fault ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def paused_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("faults")
    snakemake(workdir, fault_config(workdir / "target"))
    return workdir


def test_fault_commands_ran_at_their_offsets(paused_run):
    (manifest_path,) = (paused_run / "results" / "pause" / "raw").glob("*/it1/run.json")
    records = {(r["event"], r["kind"]): r for r in json.loads(manifest_path.read_text())["faults"]}
    assert set(records) == {
        ("pause-io", "fault"),
        ("pause-io", "recover"),
        ("controller-note", "fault"),
    }
    for record in records.values():
        assert record["exit_code"] == 0
        assert record["planned_at_s"] <= record["started_at_s"] < record["planned_at_s"] + 0.5
    assert records[("controller-note", "fault")]["stdout"] == "controller-note on controller\n"


def test_report_shows_the_dip_and_the_recovery_within_one_interval(paused_run):
    folder = paused_run / "reports" / "pause"
    with open(folder / "tables" / "faults.csv") as handle:
        rows = {(r["Event"], r["Metric"]): r for r in csv.DictReader(handle)}
    iops = rows[("pause-io", "IOPS")]
    assert float(iops["Baseline"].replace(",", "")) == pytest.approx(2000, rel=0.05)
    assert float(iops["Depth %"]) > 50  # paused: the interval spanning the stop is far below
    window = RESUME_AT_S - PAUSE_AT_S
    assert abs(float(iops["Recovery s"]) - window) <= INTERVAL_S
    assert abs(float(iops["After restore s"])) <= INTERVAL_S
    assert iops["Survived"] == "yes"
    html = (folder / "index.html").read_text()
    assert '<section id="faults">' in html and "pkill -STOP -f" in html
    assert (folder / "faults.svg").stat().st_size > 0


def test_fault_rows_match_the_series(paused_run):
    """The table's baseline is the median of the IOPS intervals before the fault."""
    from storbench.analysis import fault_analysis
    from storbench.report import faults as fault_report

    series = pq.read_table(paused_run / "results" / "pause" / "timeseries.parquet").to_pandas()
    (manifest_path,) = (paused_run / "results" / "pause" / "raw").glob("*/it1/run.json")
    manifest = json.loads(manifest_path.read_text())
    iops = fault_analysis.aggregate_series(series)["iops"]
    (pause,) = [e for e in fault_report.injected_events(manifest["faults"]) if e.name == "pause-io"]
    before = sorted(v for t, v in iops if pause.at_s - 5.0 < t <= pause.at_s)
    middle = len(before) // 2
    median = before[middle] if len(before) % 2 else (before[middle - 1] + before[middle]) / 2
    with open(paused_run / "reports" / "pause" / "tables" / "faults.csv") as handle:
        row = next(r for r in csv.DictReader(handle) if r["Metric"] == "IOPS")
    assert float(row["Baseline"].replace(",", "")) == pytest.approx(median, abs=0.05)


# --- soak ---------------------------------------------------------------------------------------


def soak_config(target: Path) -> dict:
    return {
        "hosts": {"localhost": {"transport": "local"}},
        "targets": {"scratch": {"type": "directory", "path": str(target)}},
        "report": {"pdf": False},
        "experiments": {
            "soak": {
                "tool": "fio",
                "hosts": "localhost",
                "target": "scratch",
                "soak": {"duration": "15s", "chunk": "5s", "window": 3, "k": 5},
                "job": {
                    "rw": "randread",
                    "bs": "4k",
                    "size": "8MiB",
                    "ioengine": "psync",
                    "rate_iops": 1000,
                },
            }
        },
    }


def test_interrupted_soak_resumes_without_losing_or_repeating_intervals(tmp_path):
    raw_config = soak_config(tmp_path / "target")
    process = start_snakemake(tmp_path, copy.deepcopy(raw_config))
    try:
        results = tmp_path / "results" / "soak"
        # Chunk 1 parsed and chunk 2 running (both are ready at once; -c2 runs them together).
        second = wait_for(
            lambda: (
                list(results.glob("raw/*/it2/a1")) and list(results.glob("parsed/*/it1.parquet"))
            ),
            "chunk 1 parsed while chunk 2 runs",
        )
        assert not list(results.glob("raw/*/it2/run.json")), "chunk 2 ended before the interrupt"
        time.sleep(0.5)
        os.killpg(process.pid, signal.SIGINT)
        process.communicate(timeout=60)
    finally:
        stop_if_running(process)
    assert second
    first_chunk = next((tmp_path / "results" / "soak" / "parsed").glob("*/it1.parquet"))
    first_mtime = first_chunk.stat().st_mtime_ns
    snakemake(tmp_path, raw_config, "--rerun-incomplete")
    assert first_chunk.stat().st_mtime_ns == first_mtime  # the finished chunk was kept
    (run_folder,) = (tmp_path / "results" / "soak" / "raw").iterdir()
    assert sorted(p.name for p in (run_folder / "it2").glob("a*")) == ["a1", "a2"]
    series = pq.read_table(tmp_path / "results" / "soak" / "timeseries.parquet").to_pandas()
    per_chunk = {
        int(it): len(group[group["host"] != "all"]) for it, group in series.groupby("iteration")
    }
    assert sorted(per_chunk) == [1, 2, 3]
    for iteration in (1, 2, 3):
        parsed = pq.read_table(
            tmp_path
            / "results"
            / "soak"
            / "parsed"
            / run_folder.name
            / f"it{iteration}.timeseries.parquet"
        ).to_pandas()
        assert per_chunk[iteration] == len(parsed[parsed["host"] != "all"])
    rows = series[series["host"] != "all"].sort_values(["iteration", "t_s"])
    merged = anomaly.merge_chunks(
        [anomaly.Chunk(it, None, group) for it, group in rows.groupby("iteration")]
    )
    times = [row["t_s"] for row in merged]
    assert len(times) == sum(per_chunk.values())
    assert all(earlier < later for earlier, later in zip(times, times[1:], strict=False))
    html = (tmp_path / "reports" / "soak" / "index.html").read_text()
    assert '<section id="soak">' in html
    with open(tmp_path / "reports" / "soak" / "tables" / "soak_drift.csv") as handle:
        drift_rows = list(csv.DictReader(handle))
    assert {row["Metric"] for row in drift_rows} == {"IOPS", "mean latency ms"}
    assert float(drift_rows[0]["Mean"].replace(",", "")) == pytest.approx(1000, rel=0.1)
