"""Ctrl-C during a run: the tool stops on every host, nothing is published, a rerun resumes."""

import os
import signal
import subprocess
import time
from pathlib import Path

import yaml

from tests.workflow.test_workflow import REPO, SNAKEMAKE, tiny_config
from tests.workflow.test_workflow_ssh import ssh_config

WAIT_S = 60


def start_snakemake(workdir: Path, config: dict) -> subprocess.Popen:
    (workdir / "campaign.yaml").write_text(yaml.safe_dump(config))
    command = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--configfile", "campaign.yaml", "-c2"]
    # Its own process group, so SIGINT reaches it the way a terminal's Ctrl-C does.
    return subprocess.Popen(
        command, cwd=workdir, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def stop_if_running(process: subprocess.Popen) -> None:
    """Kill what an interrupted test left of a start_snakemake session."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def processes_matching(pattern: str) -> list[str]:
    found = subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True)
    return [line for line in found.stdout.splitlines() if "pgrep" not in line]


def wait_for(predicate, what: str):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"gave up waiting for {what}")


def interrupt_while_fio_runs(workdir: Path, config: dict, job_marker: str) -> str:
    process = start_snakemake(workdir, config)
    try:
        wait_for(lambda: processes_matching(f"fio.*{job_marker}"), "fio to start")
        os.killpg(process.pid, signal.SIGINT)
        output, _ = process.communicate(timeout=WAIT_S)
    finally:
        stop_if_running(process)
    assert process.returncode != 0
    return output


def long_config(config: dict, experiment: str) -> dict:
    config["experiments"][experiment]["job"]["runtime"] = "120s"
    config["experiments"][experiment]["iterations"] = 1
    return config


def test_ctrl_c_stops_local_fio_and_publishes_nothing(tmp_path):
    config = long_config(tiny_config(tmp_path / "target", rw=("read",)), "tiny")
    it_dir = tmp_path / "results/tiny/raw/read_bs4k_nj1/it1"
    interrupt_while_fio_runs(tmp_path, config, str(it_dir / "a1" / "job.fio"))
    wait_for(lambda: not processes_matching(f"fio.*{it_dir}"), "fio to exit")
    assert not (it_dir / "run.json").exists()
    assert not (tmp_path / "results/tiny/parsed").exists()


def test_ctrl_c_stops_fio_on_ssh_hosts(ssh_lab, tmp_path):
    config = long_config(ssh_config(ssh_lab, tmp_path), "pair")
    remote_run = f"{tmp_path}/remote-workdir/pair/randread_bs4k/it1/[^/ ]+/a1"  # per host
    interrupt_while_fio_runs(tmp_path, config, f"{remote_run}/job.fio")
    # the ssh "hosts" are this machine, so the remote fio is visible here
    wait_for(lambda: not processes_matching(f"fio.*{remote_run}"), "remote fio to exit")
    assert not (tmp_path / "results/pair/raw/randread_bs4k/it1/run.json").exists()
