"""The workflow over SSH: two real sshd on loopback addresses, fio on both, one aggregate."""

import json

import pyarrow.parquet as pq

from storbench.core import histogram
from tests.workflow.test_workflow import snakemake


def ssh_config(ssh_lab, tmp_path, known_hosts=None) -> dict:
    hosts = ssh_lab.host_groups(2, lambda _: tmp_path / "remote-workdir", known_hosts)
    return {
        "hosts": hosts,
        "targets": {"shared_scratch": {"type": "directory", "path": str(tmp_path / "shared")}},
        "experiments": {
            "pair": {
                "tool": "fio",
                "hosts": list(hosts),
                "target": "shared_scratch",
                "iterations": 1,
                "job": {"size": "4MiB", "runtime": "1s", "ioengine": "psync", "rw": "randread"},
                "sweep": {"bs": ["4k"]},
            }
        },
    }


def test_fio_runs_on_both_ssh_hosts_and_aggregates(ssh_lab, tmp_path):
    snakemake(tmp_path, ssh_config(ssh_lab, tmp_path))
    addresses = [server.address for server in ssh_lab.servers[:2]]
    it_dir = tmp_path / "results/pair/raw/randread_bs4k/it1"
    manifest = json.loads((it_dir / "run.json").read_text())
    assert [h["name"] for h in manifest["hosts"]] == addresses
    rows = pq.read_table(tmp_path / "results/pair/summary.parquet").to_pylist()
    raw_reads = {}
    for address in addresses:
        raw = json.loads((it_dir / manifest["raw_dir"] / f"{address}.json").read_text())
        read = raw["jobs"][0]["read"]
        raw_reads[address] = read
        # per-host directories under the shared target: hosts never share files
        assert raw["global options"]["directory"] == str(tmp_path / "shared" / address)
        (row,) = [r for r in rows if r["host"] == address and r["op"] == "read"]
        assert row["bytes"] == read["io_bytes"] and row["iops"] == read["iops"]
    (total,) = [r for r in rows if r["host"] == "all" and r["op"] == "read"]
    assert total["bytes"] == sum(r["io_bytes"] for r in raw_reads.values())
    assert total["ios"] == sum(r["total_ios"] for r in raw_reads.values())
    merged = histogram.merge(
        histogram.from_mapping(r["lat_ns"]["bins"]) for r in raw_reads.values()
    )
    assert total["p99_ns"] == histogram.percentiles(*merged, [99.0])[0]
    assert (tmp_path / "reports/pair/index.html").exists()


def test_unknown_host_key_is_refused_and_publishes_nothing(ssh_lab, tmp_path):
    empty_known_hosts = tmp_path / "empty_known_hosts"
    empty_known_hosts.write_text("")
    result = snakemake(tmp_path, ssh_config(ssh_lab, tmp_path, empty_known_hosts), check=False)
    assert result.returncode != 0
    log = (tmp_path / "results/pair/logs/preflight.log").read_text()
    for server in ssh_lab.servers[:2]:  # preflight names every refused host at once
        assert f"host {server.address}" in log
    assert "unknown" in log and "2 of 2 host(s)" in log
    assert not (tmp_path / "results/pair/raw").exists()
