"""Scale-out over four real sshd hosts: fio client/server, client stepping, host split, facts."""

import json
import os
import signal
import subprocess

import pyarrow.parquet as pq
import pytest

from storbench.run.start import LISTENING_DEADLINE_S, LISTENING_LINE
from tests.run.test_interrupt import processes_matching, start_snakemake, stop_if_running, wait_for
from tests.workflow.test_workflow import snakemake

FIO_SERVERS = "fio --server=ip:127.0.0"


def lab_hosts(ssh_lab, tmp_path, count=4) -> dict:
    return ssh_lab.host_groups(count, lambda server: tmp_path / "remote" / server.address)


def scale_config(ssh_lab, tmp_path) -> dict:
    hosts = lab_hosts(ssh_lab, tmp_path)
    job = {"size": "4MiB", "runtime": "1s", "ioengine": "psync", "bs": "4k"}
    return {
        "hosts": hosts,
        "targets": {"shared_scratch": {"type": "directory", "path": str(tmp_path / "shared")}},
        "data_path": {
            "client_link": "10Gbit/s",
            "limits": [{"name": "cluster", "rate": "2GB/s"}],
        },
        "experiments": {
            "scale": {
                "tool": "fio",
                "hosts": list(hosts),
                "target": "shared_scratch",
                "execution": "service",
                "steps": {"mode": "incremental", "size": 2},
                "job": {**job, "rw": "randread"},
            },
            "split": {
                "tool": "fio",
                "hosts": list(hosts),
                "target": "shared_scratch",
                "execution": "service",
                "rwmixreadhost": 50,
                "job": {**job, "rw": "randread", "numjobs": "{max(1, cores // 2)}"},
            },
        },
    }


def manifest_of(tmp_path, experiment, run_id) -> dict:
    path = tmp_path / f"results/{experiment}/raw/{run_id}/it1/run.json"
    return json.loads(path.read_text())


def controller_output(tmp_path, experiment, run_id) -> dict:
    manifest = manifest_of(tmp_path, experiment, run_id)
    raw = tmp_path / f"results/{experiment}/raw/{run_id}/it1" / manifest["raw_dir"]
    text = (raw / manifest["controller"]["output"]).read_text()
    return json.loads(text[text.index("{") :])  # fio prints server notes before the JSON


@pytest.fixture(scope="module")
def scale_campaign(ssh_lab, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("scale")
    config = scale_config(ssh_lab, tmp_path)
    # one client step alone first: each step is its own target
    snakemake(tmp_path, config, "results/scale/steps/h2.parquet")
    only_h2 = sorted(p.name for p in (tmp_path / "results/scale/raw").iterdir())
    snakemake(tmp_path, config)
    return tmp_path, config, only_h2


def test_a_step_is_its_own_target(scale_campaign):
    tmp_path, _, only_h2 = scale_campaign
    assert only_h2 == ["randread_bs4k_h2"]
    step = pq.read_table(tmp_path / "results/scale/steps/h2.parquet").to_pylist()
    assert {row["run_id"] for row in step} == {"randread_bs4k_h2"}


def test_steps_run_on_two_then_four_hosts_through_one_client(ssh_lab, scale_campaign):
    tmp_path, _, _ = scale_campaign
    addresses = [server.address for server in ssh_lab.servers[:4]]
    rows = pq.read_table(tmp_path / "results/scale/summary.parquet").to_pylist()
    for run_id, hosts in (("randread_bs4k_h2", addresses[:2]), ("randread_bs4k_h4", addresses)):
        manifest = manifest_of(tmp_path, "scale", run_id)
        assert [h["name"] for h in manifest["hosts"]] == hosts
        assert manifest["execution"] == "service"
        command = manifest["controller"]["command"]
        assert [arg for arg in command if arg.startswith("--client=")] == [
            f"--client=ip:{address},8765" for address in hosts
        ]
        # the hosts share that one command: it is kept once, not once per host (O(hosts²))
        assert not [h["name"] for h in manifest["hosts"] if "command" in h]
        stats = controller_output(tmp_path, "scale", run_id)["client_stats"]
        run_rows = [r for r in rows if r["run_id"] == run_id]
        for entry in stats:
            if entry["jobname"] == "All clients":
                (total,) = [r for r in run_rows if r["host"] == "all"]
                assert total["bytes"] == entry["read"]["io_bytes"]
                assert total["ios"] == entry["read"]["total_ios"]
                continue
            (row,) = [r for r in run_rows if r["host"] == entry["hostname"]]
            assert row["bytes"] == entry["read"]["io_bytes"]
            assert row["iops"] == entry["read"]["iops"]
        assert {r["step"] for r in run_rows} == {run_id.rsplit("_", 1)[1]}
        assert {r["hosts_in_run"] for r in run_rows} == {len(hosts)}
        assert {r["command"] for r in run_rows} == {" ".join(command)}


def test_each_host_records_its_own_start_and_the_skew(scale_campaign):
    tmp_path, _, _ = scale_campaign
    manifest = manifest_of(tmp_path, "scale", "randread_bs4k_h4")
    assert {h["start_time_source"] for h in manifest["hosts"]} == {"host"}
    rows = pq.read_table(tmp_path / "results/scale/summary.parquet").to_pylist()
    h4 = [r for r in rows if r["run_id"] == "randread_bs4k_h4"]
    starts = {r["host"]: r["start_time"] for r in h4 if r["host"] != "all"}
    assert starts == {h["name"]: h["start_time"] for h in manifest["hosts"]}
    from datetime import datetime

    moments = [datetime.fromisoformat(value) for value in starts.values()]
    skew = (max(moments) - min(moments)).total_seconds()
    assert {r["start_skew_s"] for r in h4} == {skew}
    # each host's fio held its start in the hook the run left in the service's folder; the
    # first run on these hosts: until every host's hook waited (its watcher said so), long
    # before the deadline the run wrote into the job it launched, with the FIFO to listen on
    release = datetime.fromisoformat(manifest["release_time"])
    assert all(moment >= release for moment in moments)
    raw = tmp_path / "results/scale/raw/randread_bs4k_h4/it1/a1"
    for host in manifest["hosts"]:
        launched = (raw / "launch" / f"{host['name']}.job").read_text()
        (hook,) = [line for line in launched.splitlines() if line.startswith("exec_prerun=")]
        deadline, fifo = hook.removeprefix("exec_prerun=sh storbench-start.sh ").split(" ")
        assert fifo.endswith(f"/services/fio-{host['name']}-8765/.storbench-release.{host['name']}")
        assert float(deadline) - release.timestamp() > LISTENING_DEADLINE_S - 10
        armed = datetime.fromisoformat(host["armed_time"])
        assert armed <= release <= datetime.fromisoformat(host["start_time"])
        assert host["setup_s"] > 0
        # counted from the instant the deadline was (LISTENING_DEADLINE_S before it), not from
        # after the jobs were written: the next run's release counts from there too
        reference = float(deadline) - LISTENING_DEADLINE_S
        assert -0.0006 <= host["setup_s"] - (armed.timestamp() - reference) <= 0.0016
        # the host's login shell may print its own noise first (a profile's pyenv rehash)
        watched = (raw / "launch" / f"{host['name']}.watch.stderr").read_text().splitlines()
        assert watched[-1:] == [LISTENING_LINE] and watched.count(LISTENING_LINE) == 1


def test_per_host_job_files_use_their_own_directory(ssh_lab, scale_campaign):
    tmp_path, _, _ = scale_campaign
    for server in ssh_lab.servers[:4]:
        job = (tmp_path / f"results/scale/jobs/randread_bs4k_h4/{server.address}.fio").read_text()
        assert f"directory={tmp_path / 'shared' / server.address}\n" in job


def test_host_split_reads_on_half_the_hosts_and_writes_on_the_rest(ssh_lab, scale_campaign):
    tmp_path, _, _ = scale_campaign
    addresses = [server.address for server in ssh_lab.servers[:4]]
    rows = pq.read_table(tmp_path / "results/split/summary.parquet").to_pylist()
    ops = {r["host"]: r["op"] for r in rows if r["host"] != "all"}
    assert ops == dict(zip(addresses, ["read", "read", "write", "write"], strict=True))
    stats = controller_output(tmp_path, "split", "randread_bs4k_njhost")["client_stats"]
    (everything,) = [e for e in stats if e["jobname"] == "All clients"]
    for op in ("read", "write"):
        (total,) = [r for r in rows if r["host"] == "all" and r["op"] == op]
        assert total["bytes"] == everything[op]["io_bytes"]
        assert total["rw"] == {"read": "randread", "write": "randwrite"}[op]


def test_numjobs_from_host_facts_is_resolved_in_the_job_files(ssh_lab, scale_campaign):
    tmp_path, _, _ = scale_campaign
    expected = max(1, os.cpu_count() // 2)  # the lab hosts are this machine
    for server in ssh_lab.servers[:4]:
        facts = json.loads((tmp_path / f"results/telemetry/{server.address}.json").read_text())
        assert facts["cores"] == os.cpu_count()
        job = (
            tmp_path / f"results/split/jobs/randread_bs4k_njhost/{server.address}.fio"
        ).read_text()
        assert f"\nnumjobs={expected}\n" in job
    rows = pq.read_table(tmp_path / "results/split/summary.parquet").to_pylist()
    assert {r["numjobs"] for r in rows if r["host"] != "all"} == {expected}


def test_every_hosts_facts_come_from_one_telemetry_job(ssh_lab, scale_campaign):
    tmp_path, _, _ = scale_campaign
    addresses = sorted(server.address for server in ssh_lab.servers[:4])
    lines = (tmp_path / "results/logs/telemetry.log").read_text().splitlines()
    assert sorted(line.split(":")[0] for line in lines) == addresses
    assert not (tmp_path / "results/telemetry/logs").exists()  # no job of a host's own


def test_no_fio_service_outlives_the_campaign(scale_campaign):
    assert processes_matching(FIO_SERVERS) == []


def test_ctrl_c_stops_the_client_and_every_service(ssh_lab, tmp_path):
    config = scale_config(ssh_lab, tmp_path)
    config["experiments"] = {"scale": config["experiments"]["scale"]}
    config["experiments"]["scale"]["job"]["runtime"] = "120s"
    process = start_snakemake(tmp_path, config)
    raw = tmp_path / "results/scale/raw"
    try:
        wait_for(lambda: processes_matching(f"fio.*--output={raw}/"), "fio client")
        assert len(processes_matching(FIO_SERVERS)) >= 4  # the services run on every host
        os.killpg(process.pid, signal.SIGINT)
        process.communicate(timeout=60)
    finally:
        stop_if_running(process)
    assert process.returncode != 0
    wait_for(lambda: not processes_matching("fio --"), "every fio to exit")
    assert list(raw.glob("*/it1/run.json")) == []


def test_network_check_runs_iperf3_from_every_client(ssh_lab, tmp_path):
    config = scale_config(ssh_lab, tmp_path)
    config["hosts"] = {
        "server": {"transport": "local", "nodes": "127.0.0.1"},
        **lab_hosts(ssh_lab, tmp_path, count=2),
    }
    config["experiments"] = {"scale": {**config["experiments"]["scale"], "steps": None}}
    del config["experiments"]["scale"]["steps"]
    config["experiments"]["scale"]["hosts"] = ["client1", "client2"]
    config["network"] = {
        "server": "127.0.0.1",
        "clients": ["client1", "client2"],
        "port": 5301,
        "duration": "1s",
    }
    snakemake(tmp_path, config, "network")
    rows = pq.read_table(tmp_path / "results/network/network.parquet").to_pylist()
    for server in ssh_lab.servers[:2]:
        for phase in ("single", "all"):
            folder = f"single/{server.address}" if phase == "single" else phase
            raw_path = tmp_path / f"results/network/raw/{folder}/a1/{server.address}.json"
            received = json.loads(raw_path.read_text())["end"]["sum_received"]["bytes"]
            (row,) = [r for r in rows if r["run_id"] == phase and r["host"] == server.address]
            assert row["bytes"] == received
            assert tmp_path / row["raw_path"] == raw_path
    (everything,) = [r for r in rows if r["run_id"] == "all" and r["host"] == "all"]
    assert everything["bytes"] == sum(
        r["bytes"] for r in rows if r["run_id"] == "all" and r["host"] != "all"
    )
    assert "127.0.0.2" in (tmp_path / "reports/network/index.html").read_text()
    assert processes_matching("iperf3 --server .*--port 530[12]") == []


def test_scaling_table_has_theoretical_and_efficiency(scale_campaign):
    import csv

    tmp_path, _, _ = scale_campaign
    rows = pq.read_table(tmp_path / "results/scale/summary.parquet").to_pylist()
    with open(tmp_path / "reports/scale/scaling.csv") as handle:
        table = {row["step"]: row for row in csv.DictReader(handle)}
    # 2 x 10 Gbit/s = 2.5 GB/s of client links, above the 2 GB/s cluster: 2 GB/s at both steps
    for step in ("h2", "h4"):
        (total,) = [r for r in rows if r["step"] == step and r["host"] == "all"]
        assert float(table[step]["theoretical_bytes_s"]) == 2e9
        assert table[step]["bottleneck"] == "cluster"
        assert float(table[step]["efficiency"]) == pytest.approx(total["bw_bytes_s"] / 2e9)
    assert "Efficiency" in (tmp_path / "reports/scale/index.html").read_text()


MAX_ARG_STRLEN = 32 * 4096  # Linux's limit on one argument of a command


def test_a_spec_longer_than_one_argument_may_be_reaches_its_step(tmp_path):
    """A step's spec names every host: 300 hosts (local ones here, each with a long work
    folder) make a preflight spec past what one argument may hold; it goes on stdin. Passed as
    an argument, the step failed: 'storbench: Argument list too long'."""
    workdir = "/tmp/storbench-" + "w" * 400
    names = [f"h{n:03d}" for n in range(300)]
    config = {
        "hosts": {name: {"transport": "local", "workdir": workdir} for name in names},
        "targets": {"scratch": {"type": "directory", "path": str(tmp_path / "target")}},
        "experiments": {
            "wide": {
                "tool": "fio",
                "hosts": names,
                "target": "scratch",
                "job": {"size": "64KiB", "runtime": "1s", "ioengine": "psync"},
                "sweep": {"rw": ["read"]},
            }
        },
    }
    planned = snakemake(tmp_path, config, "-n", "-p", "results/wide/preflight.json")
    (command,) = [line for line in planned.stdout.splitlines() if "storbench preflight" in line]
    (spec,) = [line for line in planned.stdout.splitlines() if line.startswith('{"experiment"')]
    assert len(spec) > MAX_ARG_STRLEN and "--spec -" in command
    snakemake(tmp_path, config, "results/wide/preflight.json")
    report = json.loads((tmp_path / "results/wide/preflight.json").read_text())
    version = subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip()
    assert [host["name"] for host in report["hosts"]] == names
    assert {host["tool_version"] for host in report["hosts"]} == {version}
