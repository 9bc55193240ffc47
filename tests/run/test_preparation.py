"""Datasets and preconditioning through real Snakemake and real fio on a local directory."""

import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from storbench.config.campaign import load_campaign
from storbench.plan import preparation as prepare_plan
from storbench.plan import specs as plan_specs
from tests.report.exported import pipe_table_rows
from tests.run.test_interrupt import processes_matching, stop_if_running, wait_for
from tests.workflow.test_workflow import REPO, SNAKEMAKE, converge, planned_jobs, snakemake

MIB = 1 << 20


def dataset_config(target_dir: Path) -> dict:
    run_job = {"runtime": "1s", "ioengine": "psync", "bs": "4k"}
    return {
        "hosts": {"localhost": {"transport": "local"}},
        "targets": {"scratch": {"type": "directory", "path": str(target_dir)}},
        "datasets": {
            "files": {
                "target": "scratch",
                "method": "write",
                "job": {"size": "8MiB", "nrfiles": 2, "numjobs": 2},
            }
        },
        "experiments": {
            "reader": {"tool": "fio", "hosts": "localhost", "target": "scratch",
                       "dataset": "files", "job": {**run_job, "rw": "randread"}},
            "writer": {"tool": "fio", "hosts": "localhost", "target": "scratch",
                       "dataset": "files", "job": {**run_job, "rw": "randwrite", "numjobs": 1}},
        },
    }  # fmt: skip


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def attempts(raw_dir: Path) -> list[str]:
    return sorted(p.name for p in raw_dir.iterdir() if p.name.startswith("a"))


@pytest.fixture(scope="module")
def dataset_campaign(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("dataset")
    config = dataset_config(workdir / "target")
    result = snakemake(workdir, config)
    return workdir, config, result


def test_a_dataset_used_by_two_experiments_is_prepared_once(dataset_campaign):
    workdir, _, result = dataset_campaign
    log = result.stdout + result.stderr
    assert log.count("rule prepare_dataset:") == 1
    marker = read_json(workdir / "results/targets/scratch/datasets/files.json")
    assert marker["bytes_written"] == 2 * 8 * MIB  # two jobs of 8 MiB each, from fio's JSON
    assert attempts(workdir / "results/targets/scratch/datasets/files/raw/prepare") == ["a1"]
    for experiment, run_id in (("reader", "randread_bs4k_nj2"), ("writer", "randwrite_bs4k_nj1")):
        manifest = read_json(workdir / f"results/{experiment}/raw/{run_id}/it1/run.json")
        assert manifest["prep_state"] == "dataset files"
        assert min(h["start_time"] for h in manifest["hosts"]) > marker["finished"]
    # both experiments used the dataset's files: no other file was laid out
    files = sorted(p.name for p in (workdir / "target/localhost").iterdir() if p.is_file())
    assert files == ["files.0.0", "files.0.1", "files.1.0", "files.1.1"]
    assert all((workdir / "target/localhost" / f).stat().st_size == 4 * MIB for f in files)


def test_a_new_time_limit_prepares_nothing_again(dataset_campaign):
    """A dataset's timeout bounds its layout, it is not part of it: set after the dataset is
    there, it reaches the next layout's command and lays out nothing now."""
    workdir, config, _ = dataset_campaign
    limited = copy.deepcopy(config)
    limited["datasets"]["files"]["timeout"] = "2h"
    jobs = planned_jobs(snakemake(workdir, limited, "-n"))
    assert "prepare_dataset" not in jobs and "run_iteration" not in jobs
    forced = snakemake(workdir, limited, "-n", "-p", "--forcerun", "prepare_dataset")
    assert """--limits '{"timeout_s":7200.0}'""" in forced.stdout
    snakemake(workdir, config, "-n")  # leave the original config in place for other tests


def test_a_flush_stops_at_the_limit_it_is_given(tmp_path):
    raw = chunked_config(tmp_path / "target")
    raw["preconditioning"]["fill"]["flush"] = {"command": "echo dirty=1", "done": "dirty=0"}
    found = load_campaign(raw).recipes["fill"]
    spec = plan_specs.to_json(prepare_plan.recipe_spec(found))
    assert json.loads(spec)["flush"]["timeout_s"] == 3600.0  # the spec's own: an hour
    limits = {"timeout_s": None, "flush_poll_s": 0.2, "flush_timeout_s": 1}
    marker = tmp_path / "flushed.json"
    result = subprocess.run(
        [sys.executable, "-m", "storbench", "prepare", "flush", "--spec", spec,
         "--limits", json.dumps(limits), "--output", str(marker)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "cache flush on localhost not done after 1s" in result.stderr
    assert not marker.exists()


def test_runs_are_tagged_with_the_preparation_state(dataset_campaign):
    workdir, _, _ = dataset_campaign
    rows = pq.read_table(workdir / "results/reader/summary.parquet").to_pylist()
    assert {row["prep_state"] for row in rows} == {"dataset files"}
    summary_rows = pipe_table_rows((workdir / "reports/reader/summary.md").read_text())
    assert any("dataset files" in row for row in summary_rows)


def test_a_deleted_state_token_prepares_the_dataset_again(dataset_campaign):
    workdir, config, _ = dataset_campaign
    token = workdir / "target/localhost/.storbench/dataset-files.json"
    assert read_json(token)["sha256"]
    token.unlink()
    (workdir / "target/localhost/files.1.1").unlink()
    manifest_path = "results/reader/raw/randread_bs4k_nj2/it1/run.json"
    snakemake(workdir, config, "--force", manifest_path)
    manifest = read_json(workdir / manifest_path)
    assert manifest["reprepared"] == ["localhost"]
    assert read_json(token)["kind"] == "dataset"
    raw = workdir / "results/targets/scratch/datasets/files/raw/prepare"
    assert attempts(raw) == ["a1", "a2"]  # the first preparation's raw output is kept
    assert (workdir / "target/localhost/files.1.1").stat().st_size == 4 * MIB
    log = (workdir / "results/reader/logs/run/randread_bs4k_nj2.it1.log").read_text()
    assert "dataset files token missing or different on localhost" in log


def test_a_changed_dataset_is_laid_out_again_and_its_finished_runs_stay(dataset_campaign):
    """The dataset's own write block size changes how it is written, not the runs that read
    it: one call lays it out again, and no later call runs a finished run again."""
    workdir, config, _ = dataset_campaign
    rewritten = copy.deepcopy(config)
    rewritten["datasets"]["files"]["job"]["bs"] = "128k"
    assert planned_jobs(snakemake(workdir, rewritten, "-n")) == {"prepare_dataset": 1}
    manifest = workdir / "results/reader/raw/randread_bs4k_nj2/it1/run.json"
    finished = manifest.stat().st_mtime_ns
    ran = converge(workdir, rewritten)
    assert ran["prepare_dataset"] == 1 and "run_iteration" not in ran
    assert manifest.stat().st_mtime_ns == finished
    token = read_json(workdir / "target/localhost/.storbench/dataset-files.json")
    assert token["sha256"] == load_campaign(rewritten).datasets["files"].sha256


def test_a_changed_dataset_is_laid_out_in_the_call_that_reruns_its_preflight(dataset_campaign):
    """Attempts kept on the host (preflight again) and the dataset's block size changed in
    one edit: Snakemake alone looked at the dataset, behind its ancient link to the
    preflight, only in the next call."""
    workdir, config, _ = dataset_campaign
    changed = copy.deepcopy(config)
    changed["hosts"]["localhost"]["keep_attempts"] = 2
    changed["datasets"]["files"]["job"]["bs"] = "64k"
    jobs = planned_jobs(snakemake(workdir, changed, "-n"))
    assert jobs["preflight"] == 2 and jobs["prepare_dataset"] == 1
    assert "run_iteration" not in jobs
    converge(workdir, config)  # the original config again for other tests


def chunked_config(target_dir: Path) -> dict:
    """One pass of 24 MiB in 3 chunks of 8 MiB, each about 2 s at 4 MiB/s."""
    return {
        "hosts": {"localhost": {"transport": "local"}},
        "targets": {"scratch": {"type": "directory", "path": str(target_dir),
                                "capacity": "24MiB"}},
        "preconditioning": {
            "fill": {
                "target": "scratch",
                "job": {"ioengine": "psync", "rate": "4m"},
                "passes": [{"name": "fill", "fraction": "100%", "bs": "128k"}],
                "chunk": "8MiB",
            }
        },
        "experiments": {
            "after": {"tool": "fio", "hosts": "localhost", "target": "scratch",
                      "precondition": "fill",
                      "job": {"runtime": "1s", "ioengine": "psync", "rw": "randread", "bs": "4k"}},
        },
    }  # fmt: skip


def start_campaign(workdir: Path, config: dict, target: str) -> subprocess.Popen:
    (workdir / "campaign.yaml").write_text(yaml.safe_dump(config))
    command = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--configfile", "campaign.yaml",
               "-c2", target]  # fmt: skip
    return subprocess.Popen(
        command, cwd=workdir, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


@pytest.mark.parametrize("kill_signal", [signal.SIGKILL, signal.SIGINT])
def test_an_interrupted_precondition_resumes_at_its_chunk(tmp_path, kill_signal):
    config = chunked_config(tmp_path / "target")
    recipe_dir = tmp_path / "results/targets/scratch/precondition/fill"
    prepared = "results/targets/scratch/precondition/fill/prepared.json"
    first = recipe_dir / "stages/p1-fill-r1-c1.json"
    process = start_campaign(tmp_path, config, prepared)
    try:
        wait_for(first.exists, "the first chunk's marker")
        wait_for(lambda: processes_matching("fio.*p1-fill-r1-c2"), "the second chunk's fio")
        os.killpg(process.pid, kill_signal)  # the whole session: snakemake, storbench, fio
        process.communicate(timeout=60)
    finally:
        stop_if_running(process)
    assert not (recipe_dir / "stages/p1-fill-r1-c2.json").exists()
    first_marker, first_mtime = first.read_text(), first.stat().st_mtime_ns
    if kill_signal == signal.SIGKILL:  # Snakemake could not release its lock
        snakemake(tmp_path, config, "--unlock")
    result = snakemake(tmp_path, config, "--rerun-incomplete", prepared)
    log = result.stdout + result.stderr
    assert "stage=p1-fill-r1-c1" not in log  # the finished chunk did not run again
    assert "stage=p1-fill-r1-c2" in log
    assert first.read_text() == first_marker and first.stat().st_mtime_ns == first_mtime
    assert attempts(recipe_dir / "raw/p1-fill-r1-c1") == ["a1"]
    assert attempts(recipe_dir / "raw/p1-fill-r1-c2") == ["a1", "a2"]
    summary = read_json(tmp_path / prepared)
    assert summary["passes"][0]["bytes_written"] == 24 * MIB  # each byte once, from fio's JSON
    assert (tmp_path / "target/localhost/storbench-region").stat().st_size == 24 * MIB
    time.sleep(0.5)
    assert not processes_matching(f"fio.*{tmp_path}")  # no fio left from the killed attempt


def test_plan_shows_every_stage_and_the_purge_command_before_anything_runs(tmp_path):
    from storbench.config import campaign as config
    from storbench.run import show_plan

    raw = chunked_config(tmp_path / "target")
    raw["preconditioning"]["fill"]["purge"] = "blkdiscard /dev/does-not-matter"
    text = show_plan.describe_campaign(config.load_campaign(raw))
    assert "purge command on every host: blkdiscard /dev/does-not-matter" in text
    assert "stages in order (4): purge, p1-fill-r1-c1, p1-fill-r1-c2, p1-fill-r1-c3" in text
    assert "     | offset=0\n     | size=8m" in text  # the first chunk: the first 8 MiB
    assert not (tmp_path / "target").exists()  # nothing touched


def test_a_pass_of_mixed_block_sizes_and_a_flush_only_recipe(tmp_path):
    """The IDC plan's 4k-16k aging (fio bsrange) writes the pass's bytes exactly; a recipe
    with only a flush writes nothing and tags the runs before/after it."""
    from storbench.config import campaign as config
    from storbench.run import show_plan

    raw = chunked_config(tmp_path / "target")
    recipe = raw["preconditioning"]["fill"]
    recipe["job"] = {"ioengine": "psync"}
    recipe["passes"] = [
        {"name": "aging", "fraction": "50%", "bs": "4k-16k", "pattern": "random"},
        {"name": "mix", "fraction": "25%", "bs": "4k/50:16k/50"},
    ]
    recipe.pop("chunk")
    raw["preconditioning"]["drain"] = {"target": "scratch", "flush": {"wait": "1s"}}
    raw["experiments"]["drained"] = {
        "tool": "fio", "hosts": "localhost", "target": "scratch", "precondition": "drain",
        "flush": "after", "job": {"runtime": "1s", "ioengine": "psync", "rw": "write",
                                  "bs": "4k", "size": "1MiB"},
    }  # fmt: skip
    campaign = config.load_campaign(raw)
    assert campaign.recipes["drain"].stages() == []  # nothing to write
    text = show_plan.describe_campaign(campaign)
    assert "| bsrange=4k-16k" in text and "| bssplit=4k/50:16k/50" in text
    snakemake(tmp_path, raw)
    summary = read_json(tmp_path / "results/targets/scratch/precondition/fill/prepared.json")
    written = {p["name"]: p["bytes_written"] for p in summary["passes"]}
    # fio's own byte counts: a random pass of mixed sizes may end one block past its bytes
    assert 12 * MIB <= written["aging"] < 12 * MIB + 16 * 1024
    assert written["mix"] == 6 * MIB
    rows = pq.read_table(tmp_path / "results/drained/summary.parquet").to_pylist()
    assert {row["prep_state"] for row in rows} == {"drain, after flush"}
    assert not (tmp_path / "target/localhost/storbench-region").stat().st_size > 24 * MIB
    with pytest.raises(config.ConfigError, match=r"passes\[1\]\.bs: the split's percentages"):
        recipe["passes"][1]["bs"] = "4k/50:16k/40"
        config.load_campaign(raw)


def test_dataset_and_recipe_sizes_from_host_and_storage_facts(ssh_lab, tmp_path):
    """Virtuozzo's prepare-set (size from each client's RAM and cores) and Elastifile's
    threads = cluster cores / 2, as a dataset and a recipe over two SSH hosts."""
    groups = ssh_lab.host_groups(2, lambda server: tmp_path / "work" / server.address)
    addresses = [group["nodes"] for group in groups.values()]
    config = {
        "hosts": groups,
        "storage": {"nodes": 2, "cores": 3},
        "targets": {
            "share": {"type": "directory", "path": str(tmp_path / "share")},
            "region": {"type": "directory", "path": str(tmp_path / "region"),
                       "capacity": "4MiB"},
        },
        "datasets": {
            "prepare_set": {
                "target": "share",
                "method": "write",
                "job": {"numjobs": "{min(cores, 2)}", "nrfiles": 1,
                        "filesize": "{host_index + 1}MiB"},
            }
        },
        "preconditioning": {
            "fill": {
                "target": "region",
                "job": {"ioengine": "psync", "iodepth": "{storage_cores // 2}"},
                "passes": [{"name": "fill", "fraction": "100%", "bs": "128k"}],
            }
        },
        "experiments": {
            "reader": {"tool": "fio", "hosts": list(groups), "target": "share",
                       "dataset": "prepare_set",
                       "job": {"runtime": "1s", "ioengine": "psync", "rw": "randread",
                               "bs": "4k"}},
            "after_fill": {"tool": "fio", "hosts": list(groups), "target": "region",
                           "precondition": "fill",
                           "job": {"runtime": "1s", "ioengine": "psync", "rw": "randread",
                                   "bs": "4k"}},
        },
    }  # fmt: skip
    snakemake(tmp_path, config)
    cores = read_json(tmp_path / f"results/telemetry/{addresses[0]}.json")["cores"]
    jobs = min(cores, 2)
    for index, address in enumerate(addresses):
        files = sorted((tmp_path / "share" / address).glob("prepare_set.*"))
        assert [f.name for f in files] == [f"prepare_set.{j}.0" for j in range(jobs)]
        assert {f.stat().st_size for f in files} == {(index + 1) * MIB}
    marker = read_json(tmp_path / "results/targets/share/datasets/prepare_set.json")
    assert marker["bytes_written"] == jobs * (1 + 2) * MIB  # fio's own count, both hosts
    stage_jobs = tmp_path / "results/targets/region/precondition/fill/jobs"
    for address in addresses:
        (job,) = stage_jobs.glob(f"*/{address}.fio")
        assert "iodepth=3" in job.read_text()  # 2 nodes x 3 cores / 2
    manifest = read_json(tmp_path / "results/reader/raw/randread_bs4k_njhost/it1/run.json")
    assert manifest["prep_state"] == "dataset prepare_set"


def test_a_pass_on_another_target_set(tmp_path):
    """The IDC plan's order: precondition every LUN, then age another set of them; each
    pass writes its own targets' regions together (one fio group: fio's bytes add up)."""
    from storbench.config import campaign as config
    from storbench.run import show_plan

    raw = chunked_config(tmp_path / "lun1")
    raw["targets"] = {
        name: {"type": "directory", "path": str(tmp_path / name), "capacity": "8MiB"}
        for name in ("lun1", "lun2", "lun3")
    }
    recipe = raw["preconditioning"]["fill"]
    recipe.update(target="lun1", job={"ioengine": "psync"}, capacity="8MiB")
    recipe.pop("chunk")
    recipe["passes"] = [
        {"name": "precondition", "fraction": "100%", "bs": "128k",
         "target": ["lun1", "lun2", "lun3"]},
        {"name": "aging", "fraction": "50%", "bs": "4k-16k", "pattern": "random", "target": "lun3"},
    ]  # fmt: skip
    raw["experiments"]["after"]["target"] = "lun1"
    campaign = config.load_campaign(raw)
    assert campaign.recipes["fill"].target_names == ("lun1", "lun2", "lun3")
    text = show_plan.describe_campaign(campaign)
    assert "stage p1-precondition-r1 on lun1, lun2, lun3:" in text
    assert "stage p2-aging-r1 on lun3:" in text
    snakemake(tmp_path, raw)
    prepared = read_json(tmp_path / "results/targets/lun1/precondition/fill/prepared.json")
    written = {p["name"]: p["bytes_written"] for p in prepared["passes"]}
    assert written["precondition"] == 3 * 8 * MIB  # fio's own count over the three regions
    assert 4 * MIB <= written["aging"] < 4 * MIB + 16 * 1024
    for name in ("lun1", "lun2", "lun3"):
        assert (tmp_path / name / "localhost/storbench-region").stat().st_size == 8 * MIB
    bad = {**raw["preconditioning"]["fill"]}
    bad["passes"] = [{"name": "x", "fraction": "10%", "bs": "4k", "target": ["lun9"]}]
    raw["preconditioning"]["fill"] = bad
    with pytest.raises(
        config.ConfigError, match=r"passes\[0\]\.target\[0\]: unknown target 'lun9'"
    ):
        config.load_campaign(raw)
