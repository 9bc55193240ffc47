"""Preflight: every host reachable, the tool installed, free space, before the first run."""

from __future__ import annotations

import dataclasses
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
import yaml

from storbench.config import campaign as config
from storbench.core.model import Host
from storbench.hosts.transport import HostError, disconnect, open_transport
from storbench.plan import specs as plan
from storbench.run import preflight, room, start
from storbench.run.preflight import PreflightError, run_preflight
from storbench.tools import get_tool
from tests.minio import free_port
from tests.mounts import tmpfs
from tests.run.test_one_trip import CountingTransport
from tests.sshd import lab_host, start_sshd
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


def test_an_ioengine_fio_cannot_load_stops_at_preflight_naming_it(tmp_path):
    """fio --parse-only of a job file does not load its engine: `check` passes it, the run
    would fail. The hosts are asked for each engine of the job and the sweep, in one trip."""
    config = tiny_config(tmp_path / "target")
    config["experiments"]["tiny"]["job"]["ioengine"] = "psync"
    config["experiments"]["tiny"]["sweep"] = {"ioengine": ["libaio", "nosuchengine"]}
    result = snakemake(tmp_path, config, check=False)
    assert result.returncode != 0
    log = (tmp_path / "results/tiny/logs/preflight.log").read_text()
    assert log.splitlines()[1:] == [
        "  host localhost: fio cannot load ioengine 'nosuchengine' ('fio --parse-only"
        " --name=storbench-check --ioengine=nosuchengine' exited 1: fio: engine nosuchengine"
        " not loadable)"
    ]
    assert not (tmp_path / "results/tiny/raw").exists()


def test_the_engines_fio_loads_pass_and_add_nothing_to_a_spec_without_them(tmp_path):
    from storbench.tools import get_tool

    fio = get_tool("fio")
    requirements = fio.host_requirements({"ioengine": "libaio"}, {"ioengine": ["psync", "sync"]})
    assert [r["argv"][-1] for r in requirements] == [
        "--ioengine=libaio", "--ioengine=psync", "--ioengine=sync"
    ]  # fmt: skip
    report = run_preflight(
        {**spec("fio", [LOCAL], tmp_path), "requirements": requirements}, str(tmp_path / "p.json")
    )
    assert report["hosts"][0]["tool_version"].startswith("fio-")
    assert get_tool("vdbench").host_requirements({"ioengine": "libaio"}, {}) == []


def test_a_job_larger_than_the_free_space_stops_before_the_tool_starts(tmp_path):
    """100 TiB per host on a machine with far less (the case of the fault trial)."""
    config = tiny_config(tmp_path / "target")
    config["experiments"]["tiny"]["job"].update(size="100TiB", numjobs=1)
    config["experiments"]["tiny"].pop("sweep", None)
    result = snakemake(tmp_path, config, check=False)
    assert result.returncode != 0
    (log,) = (tmp_path / "results/tiny/logs/run").glob("*.log")
    text = log.read_text()
    assert f"host localhost: not enough room in {tmp_path}/target/localhost: run" in text
    assert "writes 102,400.0 GiB of files per host (size x numjobs), 0.0 GiB are there" in text
    assert not list((tmp_path / "results/tiny/raw").glob("*/it*/run.json"))
    assert not list((tmp_path / "results/tiny/raw").glob("*/it*/a1/localhost.json"))


def target_holding_4_mib(tmp_path: Path) -> Path:
    target = tmp_path / "target" / "localhost"
    target.mkdir(parents=True)
    (target / "existing.0.0").write_bytes(b"\0" * (4 << 20))
    return target


def test_files_already_there_count_as_room(tmp_path):
    target = target_holding_4_mib(tmp_path)
    with open_transport(Host("localhost")) as transport:
        free = room.free_bytes(transport, str(target))
        room.check_room(transport, str(target), free + (2 << 20), "r")  # 4 MiB are there
        with pytest.raises(HostError, match=f"not enough room in {target}: run r writes"):
            room.check_room(transport, str(target), free + (64 << 20), "r")


def test_the_files_there_are_only_counted_when_the_free_space_is_short(tmp_path):
    target = target_holding_4_mib(tmp_path)
    with open_transport(Host("localhost")) as transport:
        free = room.free_bytes(transport, str(target))
        _, fits, _ = transport.shell(room.room_script(str(target), 1 << 20), timeout_s=10)
        _, short, _ = transport.shell(room.room_script(str(target), free + (2 << 20)), timeout_s=10)
    # du reads every file of the target: not at each run of a target with room to spare
    assert len(fits.splitlines()) == 1
    (df_line, du_line) = short.splitlines()
    assert df_line.split()[5] == fits.split()[5]  # the mount point
    kib, where = du_line.split()
    assert where == str(target) and 4096 <= int(kib) <= 4096 + 64  # 4 MiB, and the folder


def test_an_ssh_host_without_sftp_fails_preflight_naming_it_only_per_step(ssh_lab, tmp_path):
    """The default persistent connection moves files through its sessions; paramiko's
    per-step connection needs the host's SFTP subsystem."""
    server = start_sshd("127.0.0.6", tmp_path / "sshd-nosftp", ssh_lab.authorized_keys, sftp=False)
    try:
        known_hosts = tmp_path / "known_hosts"
        known_hosts.write_text(server.known_hosts_line() + "\n")
        host = {"name": "nosftp", "address": "127.0.0.6", "transport": "ssh", "user": "root",
                "port": server.port, "identity": str(ssh_lab.client_key),
                "known_hosts": str(known_hosts), "workdir": str(tmp_path / "w")}  # fmt: skip
        checked = run_preflight(spec("fio", [LOCAL, host], tmp_path / "t"), str(tmp_path / "o"))
        per_step = {**host, "connection": "per-step"}
        with pytest.raises(PreflightError) as error:
            run_preflight(spec("fio", [LOCAL, per_step], tmp_path / "t"), str(tmp_path / "p.json"))
    finally:
        server.stop()
        disconnect([Host.from_dict(host)])
    by_name = {row["name"]: row for row in checked["hosts"]}
    expected_version = subprocess.run(["fio", "--version"], capture_output=True, text=True)
    assert by_name["nosftp"]["tool_version"] == expected_version.stdout.strip()
    message = str(error.value)
    assert message.startswith("exp: preflight failed on 1 of 2 host(s)")
    assert "host nosftp: opening SFTP (is the sftp Subsystem enabled in sshd?)" in message


def test_a_host_is_checked_in_one_round_trip(tmp_path, monkeypatch):
    """Clock, room and version in one shell: at 128 hosts each session costs a login shell."""
    transport = CountingTransport()
    monkeypatch.setattr(preflight, "open_transport", lambda spec: transport)
    report = run_preflight(spec("fio", [LOCAL], tmp_path), str(tmp_path / "p.json"))
    (host,) = report["hosts"]
    expected_version = subprocess.run(["fio", "--version"], capture_output=True, text=True)
    assert host["tool_version"] == expected_version.stdout.strip()
    free = shutil.disk_usage(tmp_path).free  # other jobs write meanwhile: within 256 MiB
    assert abs(host["free_bytes"] - free) < 256 << 20
    assert abs(host["clock_offset_s"]) < 1.0  # the same clock
    assert len(transport.scripts) == 1


def test_a_missing_tool_fails_its_host_from_the_one_round_trip(tmp_path, monkeypatch):
    transport = CountingTransport()
    monkeypatch.setattr(preflight, "open_transport", lambda spec: transport)
    with pytest.raises(PreflightError, match="host h1: vdbench is not installed; install it"):
        run_preflight(spec("vdbench", [LOCAL], tmp_path), str(tmp_path / "p.json"))
    assert len(transport.scripts) == 1


def test_the_clock_offset_leaves_out_the_time_the_checks_took():
    """A host 5 s ahead, a 0.2 s network round trip, and 1 s of checks between its stamps."""
    before = 1000.0
    first = before + 0.1 + 5.0  # our time at the host's first stamp, on its clock
    offset = start.clock_offset(f"{first:.6f}\n", f"{first + 1.0:.6f}\n", before, before + 1.2)
    assert offset == 5.0


def test_a_date_without_nanoseconds_gives_no_clock_offset():
    assert start.clock_offset("1700000000.N\n", "1700000000.N\n", 1.0, 2.0) is None


def test_room_below_a_gib_is_told_in_mib():
    """df -Pk's line for an 8 MiB file system, then du's 1 MiB there: a 16 MiB job."""
    out = "tmpfs 8192 1024 7168 13% /mnt/small\n1024\t/mnt/small/t\n"
    assert room.room_problem(0, out, "/mnt/small/t", 16 << 20, "r1") == (
        "not enough room in /mnt/small/t: run r1 writes 16.0 MiB of files per host (size x"
        " numjobs), 1.0 MiB are there already and 7.0 MiB are free; shrink size or free the target"
    )


def test_a_target_under_a_file_fails_preflight_naming_the_file(tmp_path):
    """It passed before (the free space shown was the parent file system's); the run failed."""
    (tmp_path / "afile").write_text("not a folder\n")
    target = tmp_path / "afile" / "bench"
    with pytest.raises(PreflightError) as failed:
        run_preflight(spec("fio", [LOCAL], target), str(tmp_path / "p.json"))
    assert str(failed.value).splitlines()[1:] == [
        f"  host localhost: target directory {target}/localhost: {tmp_path / 'afile'} is a file,"
        " not a folder"
    ]
    report = run_preflight(spec("fio", [LOCAL], tmp_path / "new" / "deeper"), str(tmp_path / "q"))
    assert report["hosts"][0]["free_bytes"] > 0  # a folder to be made under a writable one


@pytest.fixture
def read_only_filesystem(tmp_path):
    """A read-only tmpfs (needs root)."""
    with tmpfs(tmp_path / "ro", "ro,size=1m") as mount_point:
        yield mount_point


def test_a_target_on_a_read_only_file_system_fails_preflight(tmp_path, read_only_filesystem):
    """Root passes permission bits, not a read-only mount: the run would fail to write."""
    target = read_only_filesystem / "bench"
    with pytest.raises(PreflightError) as failed:
        run_preflight(spec("fio", [LOCAL], target), str(tmp_path / "p.json"))
    assert str(failed.value).splitlines()[1:] == [
        f"  host localhost: target directory {target}/localhost: {read_only_filesystem} is not"
        " writable here (a read-only file system, or its permissions)"
    ]


def test_a_workdir_on_a_read_only_file_system_fails_preflight(
    ssh_hosts, tmp_path, read_only_filesystem
):
    """It passed before, and every run then failed on that host ('cannot take the lock …:
    Read-only file system'), after the runs before it in the campaign."""
    host = dataclasses.replace(ssh_hosts[0], workdir=str(read_only_filesystem / "storbench"))
    with pytest.raises(PreflightError) as failed:
        run_preflight(spec("fio", [host.to_dict()], tmp_path / "target"), str(tmp_path / "p"))
    assert str(failed.value).splitlines()[1:] == [
        f"  host {host.name}: workdir {host.workdir}: {read_only_filesystem} is not writable"
        " here (a read-only file system, or its permissions)"
    ]
    assert not (tmp_path / "p").exists()


def test_a_service_experiment_checks_the_controller_for_what_runs_there(tmp_path, monkeypatch):
    """Service mode runs the tool's client on this machine: a missing one fails preflight,
    named, before any run (it failed the first run, after the hosts were prepared)."""
    raw = tiny_config(tmp_path)
    (name,) = raw["experiments"]
    raw["experiments"][name]["execution"] = "service"
    (tmp_path / "campaign.yaml").write_text(yaml.safe_dump(raw))
    checked = plan.preflight_spec(config.load_campaign_file(tmp_path / "campaign.yaml"), name)
    (requirement,) = checked["controller_requirements"]
    assert requirement["argv"] == ["fio", "--version"]
    assert "controller_port" not in checked  # fio's client dials the hosts, not they it
    good = run_preflight(checked, str(tmp_path / "good.json"))  # fio is here
    assert good["hosts"][0]["tool_version"].startswith("fio-")
    no_fio = tmp_path / "no-fio"
    no_fio.mkdir()
    monkeypatch.setenv("PATH", str(no_fio))  # this machine's, and the local host's
    with pytest.raises(PreflightError) as failed:
        run_preflight(checked, str(tmp_path / "bad.json"))
    lines = str(failed.value).splitlines()
    assert lines[0] == f"{name}: preflight failed on the controller and on 1 of 1 host(s)"
    assert lines[1].startswith("  the controller (") and lines[1].endswith(
        "): fio is not usable here (execution: service runs its client on this machine);"
        f" install it: {get_tool('fio').install_hint} ('fio --version' exited 127: fio: not found)"
    )
    assert not (tmp_path / "bad.json").exists()
    standalone = {**raw["experiments"][name], "execution": "standalone"}
    raw["experiments"][name] = standalone
    (tmp_path / "campaign.yaml").write_text(yaml.safe_dump(raw))
    alone = plan.preflight_spec(config.load_campaign_file(tmp_path / "campaign.yaml"), name)
    assert "controller_requirements" not in alone


def test_hosts_whose_workers_dial_the_controller_connect_to_it_at_preflight(ssh_lab, tmp_path):
    """Workers that dial the controller (GOSBench's) retried a wrong controller_address until
    the run's time limit. At preflight each host connects to its controller_address at the
    spec's controller_port while this machine listens there; a host that cannot is named,
    with its group's key. Real sshd hosts, real connections."""
    port = free_port()

    def host(server, controller_address: str) -> dict:
        found = lab_host(ssh_lab, server, tmp_path / "remote" / server.address).to_dict()
        return {**found, "group": f"g{server.address}", "controller_address": controller_address}

    good, wrong = ssh_lab.servers[:2]
    checked = {**spec("fio", [host(good, "127.0.0.1")], tmp_path / "t"), "controller_port": port}
    report = run_preflight(checked, str(tmp_path / "good.json"))
    assert report["hosts"][0]["reaches_controller"] == f"127.0.0.1:{port}"
    assert report["warnings"] == []
    hosts = [host(good, "127.0.0.1"), host(wrong, "controller.invalid")]
    with pytest.raises(PreflightError) as failed:
        run_preflight({**checked, "hosts": hosts}, str(tmp_path / "bad.json"))
    lines = str(failed.value).splitlines()
    assert lines[0] == "exp: preflight failed on 1 of 2 host(s)"
    assert lines[1].startswith(
        f"  host {wrong.address}: cannot reach the controller at controller.invalid:{port}"
        " (controller.invalid: "
    )  # then bash's own words for a name it cannot resolve
    assert lines[1].endswith(
        f"); fio workers dial it there in every run: set hosts.g{wrong.address}"
        ".controller_address to this machine's address as the host reaches it"
    )
    assert not (tmp_path / "bad.json").exists()


def test_a_controller_port_in_use_is_a_warning_and_no_host_dials_it(tmp_path):
    """Another run's server on the port (an experiment on another target): the hosts are not
    asked to connect to it, and the report says the check was not made."""
    with socket.create_server(("", 0)) as taken:
        port = taken.getsockname()[1]
        checked = {**spec("fio", [LOCAL], tmp_path / "t"), "controller_port": port}
        report = run_preflight(checked, str(tmp_path / "p.json"))
    assert "reaches_controller" not in report["hosts"][0]
    assert report["warnings"] == [
        f"the controller's port {port} could not be listened on for the check (in use): "
        "whether the hosts reach the controller was not checked"
    ]
