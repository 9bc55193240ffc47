"""Hosts reached over one persistent OpenSSH connection each (`connection: persistent`, what a
group that names no connection gets): a whole campaign (preflight, telemetry, standalone runs,
fio services, cleanup), and a second Snakemake invocation of it, authenticate once per host;
the results are fio's own numbers."""

import json

import pyarrow.parquet as pq
import pytest

from storbench.core.model import Host
from storbench.hosts.openssh import OpenSSHTransport
from tests.sshd import start_sshd
from tests.workflow.test_workflow import snakemake

ADDRESSES = ("127.0.0.11", "127.0.0.12")


@pytest.fixture
def own_servers(ssh_lab, tmp_path):
    """sshd of this test alone: their logs count only this campaign's logins."""
    servers = []
    try:
        for address in ADDRESSES:
            servers.append(
                start_sshd(address, tmp_path / f"sshd-{address}", ssh_lab.authorized_keys)
            )
        known_hosts = tmp_path / "known_hosts"
        known_hosts.write_text("".join(s.known_hosts_line() + "\n" for s in servers))
        yield servers, known_hosts
    finally:
        for server in servers:
            server.stop()


def campaign(ssh_lab, tmp_path, servers, known_hosts, sizes) -> dict:
    hosts = {
        f"client{index}": {
            "transport": "ssh", "nodes": server.address, "user": "root", "port": server.port,
            "identity": str(ssh_lab.client_key), "known_hosts": str(known_hosts),
            "workdir": str(tmp_path / "remote" / server.address),  # the default connection
        }
        for index, server in enumerate(servers, start=1)
    }  # fmt: skip
    job = {"size": "4MiB", "runtime": "1s", "ioengine": "psync", "rw": "randread"}
    experiment = {"tool": "fio", "hosts": list(hosts), "target": "scratch", "job": job}
    return {
        "hosts": hosts,
        "targets": {"scratch": {"type": "directory", "path": str(tmp_path / "shared")}},
        "experiments": {
            "standalone": {**experiment, "iterations": 2, "sweep": {"bs": sizes}},
            "served": {**experiment, "execution": "service", "sweep": {"bs": sizes}},
        },
    }


def host_of(ssh_lab, server, known_hosts) -> Host:
    return Host(name=server.address, transport="ssh", user="root", port=server.port,
                identity=str(ssh_lab.client_key), known_hosts=str(known_hosts),
                connection="persistent")  # fmt: skip


def logins(server) -> int:
    return server.log_path.read_text().count("Accepted publickey for root")


def test_a_campaign_logs_in_once_per_host(ssh_lab, tmp_path, own_servers):
    servers, known_hosts = own_servers
    snakemake(tmp_path, campaign(ssh_lab, tmp_path, servers, known_hosts, ["4k"]))
    assert [logins(server) for server in servers] == [1, 1]
    # a second invocation with one more run each: the same connections
    snakemake(tmp_path, campaign(ssh_lab, tmp_path, servers, known_hosts, ["4k", "64k"]))
    assert [logins(server) for server in servers] == [1, 1]

    rows = pq.read_table(tmp_path / "results/standalone/summary.parquet").to_pylist()
    for size in ("4k", "64k"):
        for iteration in (1, 2):
            it_dir = tmp_path / f"results/standalone/raw/randread_bs{size}/it{iteration}"
            manifest = json.loads((it_dir / "run.json").read_text())
            assert [h["name"] for h in manifest["hosts"]] == list(ADDRESSES)
            for address in ADDRESSES:
                raw = json.loads((it_dir / manifest["raw_dir"] / f"{address}.json").read_text())
                read = raw["jobs"][0]["read"]
                (row,) = [
                    r for r in rows
                    if (r["run_id"], r["iteration"], r["host"], r["op"])
                    == (f"randread_bs{size}", iteration, address, "read")
                ]  # fmt: skip
                assert (row["bytes"], row["iops"]) == (read["io_bytes"], read["iops"])
    served = pq.read_table(tmp_path / "results/served/summary.parquet").to_pylist()
    assert {r["run_id"] for r in served if r["host"] == "all"} == {
        "randread_bs4k",
        "randread_bs64k",
    }

    masters = [OpenSSHTransport(host_of(ssh_lab, server, known_hosts)) for server in servers]
    assert all(master.master_alive() for master in masters)
    snakemake(tmp_path, campaign(ssh_lab, tmp_path, servers, known_hosts, ["4k"]), "cleanup")
    assert not any(master.master_alive() for master in masters)


def test_disconnect_closes_the_master(ssh_lab, tmp_path, own_servers):
    servers, known_hosts = own_servers
    server = servers[0]
    spec = host_of(ssh_lab, server, known_hosts)
    transport = OpenSSHTransport(spec)
    assert transport.shell("echo $((6 * 7))", timeout_s=10)[:2] == (0, "42\n")
    again = OpenSSHTransport(spec)  # another step: the same master
    assert again.shell("echo again", timeout_s=10)[:2] == (0, "again\n")
    assert logins(server) == 1
    again.disconnect()
    assert not transport.master_alive()
    assert OpenSSHTransport(spec).shell("echo new", timeout_s=10)[:2] == (0, "new\n")
    assert logins(server) == 2
