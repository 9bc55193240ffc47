"""Preflight: every host reachable, the tool installed, free space, before the first run."""

from __future__ import annotations

import pytest

from storbench.run.preflight import PreflightError, run_preflight
from tests.minio import free_port
from tests.workflow.test_workflow import snakemake, tiny_config


def spec(tool: str, hosts: list[dict], target_dir) -> dict:
    return {
        "experiment": "exp",
        "tool": tool,
        "target": {"name": "scratch", "type": "directory", "path": str(target_dir)},
        "hosts": hosts,
    }


LOCAL = {"name": "localhost", "transport": "local"}


def test_a_good_host_reports_tool_version_free_space_and_clock(tmp_path):
    output = tmp_path / "preflight.json"
    report = run_preflight(spec("fio", [LOCAL], tmp_path / "not/yet/there"), str(output))
    (host,) = report["hosts"]
    assert host["tool_version"].startswith("fio-")
    assert host["free_bytes"] > 0
    assert isinstance(host["clock_offset_s"], float)
    assert output.exists()


def test_every_bad_host_is_listed_with_its_reason(tmp_path):
    closed_port = free_port()  # nothing listens there
    unreachable = {"name": "127.0.0.9", "transport": "ssh", "port": closed_port,
                   "connect_timeout": 3.0}  # fmt: skip
    output = tmp_path / "preflight.json"
    with pytest.raises(PreflightError) as error:
        run_preflight(spec("vdbench", [LOCAL, unreachable], tmp_path), str(output))
    message = str(error.value)
    assert message.startswith("exp: preflight failed on 2 of 2 host(s)")
    assert "host localhost: vdbench is not installed; install it: " in message
    assert "oracle.com" in message
    assert "host 127.0.0.9:" in message
    assert not output.exists()


def test_workflow_stops_at_preflight_before_any_run(tmp_path):
    config = tiny_config(tmp_path / "target")
    config["experiments"]["tiny"]["tool"] = "vdbench"
    config["experiments"]["tiny"]["job"] = {"size": "4MiB", "runtime": "2s"}
    result = snakemake(tmp_path, config, check=False)
    assert result.returncode != 0
    log = (tmp_path / "results/tiny/logs/preflight.log").read_text()
    assert "host localhost: vdbench is not installed; install it:" in log
    assert not (tmp_path / "results/tiny/raw").exists()
