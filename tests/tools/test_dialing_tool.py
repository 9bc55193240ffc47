"""Service mode for tools whose workers dial the controller (as GOSBench's do), with real
processes: a tool added from outside the package, run by real Snakemake on sshd lab hosts.

The controller's server (python3, on the controller) waits for one worker per host and hands
each the job's block count; each host's worker (started per run by storbench, dialing the
host group's controller_address) writes that many blocks with the real `dd` and logs dd's own
summary, which storbench keeps per run as <host>.service.log; the server writes the total.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from storbench.core.aggregate import aggregate_hosts
from storbench.core.specs import Manifest
from storbench.tools.base import Capabilities, ToolAdapter, ToolOutputError
from tests.tools.test_new_tool import register_tool
from tests.workflow.test_workflow import snakemake

pytestmark = pytest.mark.workflow

REPO = Path(__file__).resolve().parents[2]
TOOL = "dialbench"
SUMMARY = re.compile(r"^(?P<bytes>\d+) bytes .*copied, (?P<seconds>[0-9.eE+-]+) s,", re.M)
# $1 job file, $2 output file, $3 port, $4 workers: serve the count, collect the workers' bytes.
SERVER = """
import socket, sys
job, output, port, workers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
count = next(l.split("=")[1] for l in open(job).read().splitlines() if l.startswith("count="))
with socket.create_server(("127.0.0.1", port)) as server:
    server.settimeout(60)
    total = 0
    for _ in range(workers):
        connection, _ = server.accept()
        with connection:
            connection.sendall(f"{count}\\n".encode())
            total += int(connection.makefile().readline())
open(output, "w").write(f"total {total}\\n")
"""
# $1 controller, $2 port, $3 target directory: get the count, write it with dd, report.
WORKER = """
import socket, subprocess, sys, time
controller, port, directory = sys.argv[1], int(sys.argv[2]), sys.argv[3]
for _ in range(600):
    try:
        connection = socket.create_connection((controller, port), timeout=60)
        break
    except OSError:
        time.sleep(0.1)
with connection:
    count = connection.makefile().readline().strip()
    done = subprocess.run(["dd", "if=/dev/zero", f"of={directory}/worker.dd", "bs=64k",
                           f"count={count}", "conv=fsync"], capture_output=True, text=True)
    print(done.stderr, flush=True)
    connection.sendall(f"{int(count) * 65536}\\n".encode())
"""


def one_line(code: str) -> list[str]:
    """python3 -c with the code on one line: the command line is what stops the process."""
    return ["python3", "-c", f"exec(bytes.fromhex('{code.encode().hex()}'))"]


class DialAdapter(ToolAdapter):
    name = TOOL
    job_suffix = ".dial"
    default_template = str(REPO / "tests" / "fixtures" / "dialbench.dial.j2")
    install_hint = "python3 and coreutils"
    default_port = 18951
    capabilities = Capabilities(target_types=("directory",), execution=("standalone", "service"))
    service_job_shared = True
    service_log_results = True
    service_per_run = True
    workers_dial_controller = True

    def template_context(self, spec: dict) -> dict:
        return {"count": spec["params"]["count"], "directory": spec["target"]["path"]}

    def command(self, job_path: str, output_path: str, host: str) -> list[str]:
        raise NotImplementedError("service mode only")

    def version_command(self) -> list[str]:
        return ["dd", "--version"]

    def output_name(self, host: str) -> str:
        return f"{host}.dial.txt"

    def target_directory(self, target: dict, host: str) -> str | None:
        return target["path"]

    def worker_command(self, controller: str, port: int, own_port: int) -> list[str]:
        # own_port: its host's port, so that lab hosts on one machine differ by command line
        target = os.environ["DIAL_TARGET"]
        return [*one_line(WORKER), controller, str(port), target, str(own_port)]

    def controller_command(
        self, job_path: list[str], output_path: str, endpoints: list[str]
    ) -> list[str]:
        port = endpoints[0].rpartition(":")[2]
        return [*one_line(SERVER), job_path[0], output_path, port, str(len(endpoints))]

    def parse(self, manifest: Manifest, raw_dir: Path, base: dict) -> list[dict]:
        rows = []
        for host in manifest.hosts:
            text = (raw_dir / host["service_log"]).read_text()
            match = SUMMARY.search(text)
            if match is None:
                raise ToolOutputError(f"{host['name']}: no dd summary in its worker's log")
            rows.append({
                **base, "host": host["name"], "job": base["run_id"], "op": "write",
                "bytes": int(match["bytes"]), "duration_s": float(match["seconds"]),
            })  # fmt: skip
        total = int((raw_dir / manifest.controller["output"]).read_text().split()[1])
        summed = aggregate_hosts(rows)
        return rows + [{**row, "bytes": total} for row in summed]


ADAPTER = DialAdapter()


@pytest.fixture(scope="module")
def registered(tmp_path_factory) -> dict:
    site = tmp_path_factory.mktemp("site")
    return register_tool(site, TOOL, "tests.tools.test_dialing_tool:ADAPTER")


@pytest.mark.ssh
def test_workers_dial_the_controller_per_run_and_log_their_own_results(
    registered, ssh_lab, tmp_path
):
    target = tmp_path / "target"
    hosts = ssh_lab.host_groups(3, lambda server: tmp_path / "remote" / server.address)
    for index, group in enumerate(hosts.values()):
        group["controller_address"] = "127.0.0.1"
        group["service_ports"] = {TOOL: 19000 + index}
    config = {
        "hosts": hosts,
        "targets": {"scratch": {"type": "directory", "path": str(target)}},
        "report": {"pdf": False},
        "experiments": {
            "copy": {
                "tool": TOOL,
                "hosts": list(hosts),
                "target": "scratch",
                "execution": "service",
                "iterations": 2,
                "job": {"count": 8},
            }
        },
    }
    env = {**registered, "DIAL_TARGET": str(target)}
    snakemake(tmp_path, config, env=env)
    rows = pq.read_table(tmp_path / "results/copy/summary.parquet").to_pylist()
    addresses = [server.address for server in ssh_lab.servers[:3]]
    for iteration in (1, 2):
        manifest = Manifest.from_dict(
            json.loads((tmp_path / f"results/copy/raw/run/it{iteration}/run.json").read_text())
        )
        raw = tmp_path / f"results/copy/raw/run/it{iteration}/a1"
        assert [h["endpoint"] for h in manifest.hosts] == ["127.0.0.1:18951"] * 3
        assert [h["start_time_source"] for h in manifest.hosts] == ["controller"] * 3
        for address in addresses:
            log = (raw / f"{address}.service.log").read_text()
            assert log.count("copied") == 1  # this run's part of the worker's log only
            (row,) = [r for r in rows if r["host"] == address and r["iteration"] == iteration]
            assert row["bytes"] == int(SUMMARY.search(log)["bytes"]) == 8 * 65536
            assert row["hosts_in_run"] == 3
        (total,) = [r for r in rows if r["host"] == "all" and r["iteration"] == iteration]
        assert total["bytes"] == 3 * 8 * 65536  # the server's own total
    # each host kept the version its program printed (per the program file's identity): the
    # second run read it back instead of asking again
    printed = subprocess.run(["dd", "--version"], capture_output=True, text=True).stdout
    for address in addresses:
        (kept,) = (tmp_path / "remote" / address / "versions").iterdir()
        assert kept.name.startswith(f"{TOOL}.") and kept.read_text() == printed
    # no worker is left once the runs are done
    left = subprocess.run(["pgrep", "-f", "worker.dd"], capture_output=True, text=True)
    assert left.stdout == ""
    assert shutil.which("dd")
