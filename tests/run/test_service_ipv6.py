"""A host's IPv6 data address, run for real over ::1: fio in service mode through Snakemake,
and an iperf3 network check. Before, fio's server was started as ``--server=ip:[::1],8765``
(``fio: failed to resolve <[::1]>``: the start failed after 20 s) and iperf3 was bound to
``[::1]``; the expected values are the tools' own figures in their JSON outputs.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from storbench.run.netcheck import run_network_check
from tests.workflow.test_workflow import snakemake


def ipv6_loopback_port() -> int:
    """A free port on ::1; skip where this machine has no IPv6 loopback."""
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
            return probe.getsockname()[1]
    except OSError as error:
        pytest.skip(f"no IPv6 loopback here (::1: {error.strerror})")


def test_fio_service_mode_over_an_ipv6_data_address(tmp_path):
    port = ipv6_loopback_port()
    config = {
        "hosts": {
            "localhost": {
                "transport": "local",
                "data_address": "[::1]",
                "service_ports": {"fio": port},
                "workdir": str(tmp_path / "workdir"),
            }
        },
        "targets": {"scratch": {"type": "directory", "path": str(tmp_path / "target")}},
        "experiments": {
            "v6": {
                "tool": "fio",
                "execution": "service",
                "hosts": "localhost",
                "target": "scratch",
                "iterations": 1,
                "job": {"rw": "read", "bs": "4k", "size": "1MiB", "runtime": "1s"},
            }
        },
    }
    snakemake(tmp_path, config, "results/v6/summary.parquet")
    (attempt,) = (tmp_path / "results/v6/raw").glob("*/it1/a1")
    manifest = json.loads((attempt / "manifest.json").read_text())
    assert manifest["hosts"][0]["endpoint"] == f"[::1]:{port}"
    assert f"--client=ip6:::1,{port}" in manifest["controller"]["command"]
    text = (attempt / "controller.json").read_text()  # the clients' job lines, then the JSON
    output, _ = json.JSONDecoder().raw_decode(text, text.index("\n{") + 1)
    (client,) = [e for e in output["client_stats"] if e["jobname"] != "All clients"]
    assert (client["hostname"], client["port"]) == ("::1", port)
    rows = pq.read_table(tmp_path / "results/v6/summary.parquet").to_pylist()
    by_host = {row["host"]: row for row in rows}
    assert set(by_host) == {"localhost", "all"}  # fio's ::1 named as the configured host
    assert client["read"]["iops"] > 0
    assert by_host["localhost"]["iops"] == pytest.approx(client["read"]["iops"])


def test_iperf3_network_check_over_an_ipv6_server_address(tmp_path: Path):
    port = ipv6_loopback_port()
    spec = {
        "server": {"name": "srv", "transport": "local", "group": "servers",
                   "workdir": str(tmp_path / "server"), "data_address": "[::1]"},
        "clients": [{"name": "c1", "transport": "local", "group": "clients",
                     "workdir": str(tmp_path / "client")}],
        "port": port,
        "duration_s": 1,
        "parallel": 1,
    }  # fmt: skip
    rows = run_network_check(spec, tmp_path / "out")
    output = json.loads((tmp_path / "out/single/c1/a1/c1.json").read_text())
    assert {c["remote_host"] for c in output["start"]["connected"]} == {"::1"}
    received = output["end"]["sum_received"]
    single = next(row for row in rows if row["run_id"] == "single" and row["host"] == "c1")
    assert single["bw_bytes_s"] == received["bits_per_second"] / 8 > 0
