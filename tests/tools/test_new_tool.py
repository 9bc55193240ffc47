"""A tool added from outside the package: an adapter defined here, wrapping the real `dd`,
registered as a `storbench.tools` entry point, runs standalone and in service mode through
real Snakemake workflows without any change to storbench's core.

Standalone: each host runs `dd if=/dev/zero of=<target>/<run>.dd bs=<bs> count=<count>` and
the adapter parses dd's own summary line. Service mode: each host's service is
`python3 -m http.server` serving a blob that dd wrote when the service started; the controller
reads every host's blob through `dd of=/dev/null` and the adapter parses each summary.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from storbench.core.aggregate import aggregate_hosts
from storbench.core.specs import Manifest
from storbench.core.units import parse_size
from storbench.tools import get_tool
from storbench.tools.base import Capabilities, ToolAdapter, ToolOutputError
from tests.workflow.test_workflow import snakemake

pytestmark = pytest.mark.workflow

REPO = Path(__file__).resolve().parents[2]
TOOL = "ddbench"
BLOB = "blob.dd"
# dd's last line on stderr, e.g. "16777216 bytes (17 MB, 16 MiB) copied, 0.0123 s, 1.4 GB/s"
SUMMARY = re.compile(r"^(?P<bytes>\d+) bytes .*copied, (?P<seconds>[0-9.eE+-]+) s,", re.M)
# Standalone: $1 the job file, $2 the output file. Job lines are key=value, read as data.
RUN_SCRIPT = (
    'bs=$(sed -n "s/^bs=//p" "$1"); count=$(sed -n "s/^count=//p" "$1"); '
    'of=$(sed -n "s/^of=//p" "$1"); '
    'exec dd if=/dev/zero of="$of" bs="$bs" count="$count" conv=fsync 2> "$2"'
)
# Service: write the blob, then serve the service's own folder over HTTP. No exec: the shell
# keeps the command line storbench stops the service by, and takes the server down with it.
SERVICE_SCRIPT = (
    f'dd if=/dev/zero of={BLOB} bs=1M count="$3" 2>/dev/null || exit 1; '
    'python3 -m http.server "$2" --bind "$1" & server=$!; '
    'trap \'kill "$server"\' TERM INT; wait "$server"'
)
# Controller: $1 the output marker, then (endpoint, job file) pairs; one dd block per host.
CONTROLLER_SCRIPT = (
    'out="${1#--output=}"; shift; : > "$out"; '
    "while [ $# -gt 0 ]; do "
    'count=$(sed -n "s/^count=//p" "$2"); echo "host $1" >> "$out"; '
    "python3 -c 'import shutil, sys, urllib.request; "
    "shutil.copyfileobj(urllib.request.urlopen(sys.argv[1]), sys.stdout.buffer)' "
    f'"http://$1/{BLOB}" | dd of=/dev/null bs=1M count="$count" iflag=fullblock 2>> "$out" '
    "|| exit 1; shift 2; done"
)
BLOB_MIB = 4


class DdAdapter(ToolAdapter):
    name = TOOL
    job_suffix = ".dd"
    default_template = str(Path(__file__).resolve().parents[1] / "fixtures" / "ddbench.dd.j2")
    install_hint = "apt-get install coreutils"
    default_port = 18931
    capabilities = Capabilities(target_types=("directory",), execution=("standalone", "service"))

    def template_context(self, spec: dict) -> dict:
        return {
            "experiment": spec["experiment"],
            "run_id": spec["run_id"],
            "options": {**spec["params"], "bs": parse_size(spec["params"]["bs"])},
            "directory": spec["target"]["path"],
        }

    def command(self, job_path: str, output_path: str, host: str) -> list[str]:
        return ["sh", "-c", RUN_SCRIPT, "ddbench", job_path, output_path]

    def version_command(self) -> list[str]:
        return ["dd", "--version"]

    def output_name(self, host: str) -> str:
        return f"{host}.dd.txt"

    def target_directory(self, target: dict, host: str) -> str | None:
        return target["path"]

    def service_start_command(self, host: str, port: int) -> list[str]:
        return ["sh", "-c", SERVICE_SCRIPT, "ddbench-service", host, str(port), str(BLOB_MIB)]

    def controller_command(
        self, job_path: list[str], output_path: str, endpoints: list[str]
    ) -> list[str]:
        pairs = [arg for pair in zip(endpoints, job_path, strict=True) for arg in pair]
        return ["sh", "-c", CONTROLLER_SCRIPT, "ddbench", f"--output={output_path}", *pairs]

    def parse(self, manifest: Manifest, raw_dir: Path, base: dict) -> list[dict]:
        if manifest.execution == "service":
            text = (raw_dir / manifest.controller["output"]).read_text()
            blocks = dict(re.findall(r"^host (\S+)\n(.*?)(?=^host |\Z)", text, re.M | re.S))
            summaries = {
                host["name"]: (blocks.get(host["endpoint"], ""), "read") for host in manifest.hosts
            }
        else:
            summaries = {
                host["name"]: ((raw_dir / host["output"]).read_text(), "write")
                for host in manifest.hosts
            }
        rows = [dd_row(text, host, op, base) for host, (text, op) in summaries.items()]
        return rows + aggregate_hosts(rows)


def dd_row(text: str, host: str, op: str, base: dict) -> dict:
    match = SUMMARY.search(text)
    if match is None:
        raise ToolOutputError(f"{host}: no dd summary line in {text[-200:]!r}")
    moved, seconds = int(match["bytes"]), float(match["seconds"])
    return {
        **base,
        "host": host,
        "job": base["run_id"],
        "op": op,
        "bytes": moved,
        "duration_s": seconds,
        "bw_bytes_s": moved / seconds if seconds > 0 else None,
    }


ADAPTER = DdAdapter()


def register_tool(site: Path, tool: str, adapter: str) -> dict:
    """The environment in which an adapter is registered as another distribution would do
    it: a storbench.tools entry point in a dist-info folder on the path."""
    dist = site / f"storbench_{tool}-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: storbench-{tool}\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[storbench.tools]\n{tool} = {adapter}\n")
    path = os.pathsep.join([str(site), str(REPO), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path.rstrip(os.pathsep)}


@pytest.fixture(scope="module")
def registered(tmp_path_factory) -> dict:
    """The adapter as another distribution would register it: an entry point on the path."""
    return register_tool(tmp_path_factory.mktemp("site"), TOOL, "tests.tools.test_new_tool:ADAPTER")


def dd_config(hosts: dict, target: Path, execution: str) -> dict:
    return {
        "hosts": hosts,
        "targets": {"scratch": {"type": "directory", "path": str(target)}},
        "report": {"pdf": False},
        "experiments": {
            "copy": {
                "tool": TOOL,
                "hosts": list(hosts),
                "target": "scratch",
                "execution": execution,
                "iterations": 2,
                "job": {"count": 4},
                "sweep": {"bs": ["64k", "1m"]},
            }
        },
    }


def summary_rows(workdir: Path) -> list[dict]:
    return pq.read_table(workdir / "results/copy/summary.parquet").to_pylist()


def test_the_entry_point_registers_the_tool(registered):
    code = (
        "from storbench.tools import get_tool, known_tools; "
        f"print('{TOOL}' in known_tools(), type(get_tool('{TOOL}')).__name__)"
    )
    import subprocess

    result = subprocess.run(
        [sys.executable, "-c", code], env=registered, capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == ["True", "DdAdapter"]


def test_standalone_runs_dd_and_parses_its_own_numbers(registered, tmp_path):
    config = dd_config({"local": {"transport": "local"}}, tmp_path / "target", "standalone")
    snakemake(tmp_path, config, env=registered)
    rows = summary_rows(tmp_path)
    for run_id, bs in (("bs64k", 64 * 1024), ("bs1m", 1024 * 1024)):
        host_rows = [r for r in rows if r["run_id"] == run_id and r["host"] == "local"]
        assert sorted(r["iteration"] for r in host_rows) == [1, 2]
        for row in host_rows:
            raw = (
                tmp_path / f"results/copy/raw/{run_id}/it{row['iteration']}/a1/local.dd.txt"
            ).read_text()
            match = SUMMARY.search(raw)
            assert row["bytes"] == int(match["bytes"]) == 4 * bs
            assert row["duration_s"] == float(match["seconds"])
            assert row["op"] == "write" and row["tool"] == TOOL
        assert (tmp_path / "target" / f"{run_id}.dd").stat().st_size == 4 * bs
    assert (tmp_path / "reports/copy/index.html").exists()


@pytest.mark.ssh
def test_service_mode_drives_every_hosts_service_from_one_controller(registered, ssh_lab, tmp_path):
    hosts = ssh_lab.host_groups(2, lambda server: tmp_path / "remote" / server.address)
    config = dd_config(hosts, tmp_path / "target", "service")
    config["experiments"]["copy"]["sweep"] = {"bs": ["1m"]}
    snakemake(tmp_path, config, env=registered)
    rows = summary_rows(tmp_path)
    addresses = [server.address for server in ssh_lab.servers[:2]]
    manifest = json.loads((tmp_path / "results/copy/raw/bs1m/it1/run.json").read_text())
    assert manifest["execution"] == "service"
    assert [h["endpoint"] for h in manifest["hosts"]] == [
        f"{address}:{DdAdapter.default_port}" for address in addresses
    ]
    output = (
        tmp_path / "results/copy/raw/bs1m/it1/a1" / manifest["controller"]["output"]
    ).read_text()
    blocks = dict(re.findall(r"^host (\S+)\n(.*?)(?=^host |\Z)", output, re.M | re.S))
    for address in addresses:
        (row,) = [r for r in rows if r["host"] == address and r["iteration"] == 1]
        match = SUMMARY.search(blocks[f"{address}:{DdAdapter.default_port}"])
        assert row["bytes"] == int(match["bytes"]) == 4 * 1024 * 1024
        assert row["op"] == "read"
    (total,) = [r for r in rows if r["host"] == "all" and r["iteration"] == 1]
    assert total["bytes"] == 2 * 4 * 1024 * 1024
    # the workflow stopped every service when it ended
    servers = [" ".join(p) for p in _processes() if "http.server" in " ".join(p)]
    assert not [s for s in servers if str(DdAdapter.default_port) in s]


def _processes() -> list[list[str]]:
    commands = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                commands.append((entry / "cmdline").read_bytes().decode().split("\0"))
            except OSError:
                continue
    return commands


def test_the_adapter_refuses_a_file_without_dd_numbers(tmp_path):
    with pytest.raises(ToolOutputError, match="no dd summary"):
        dd_row("dd: failed to open 'x': Permission denied\n", "h1", "write", {"run_id": "r"})
    assert get_tool("fio").name == "fio"  # built-in tools are untouched by the plugin
