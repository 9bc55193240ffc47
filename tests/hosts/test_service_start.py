"""A service starts in one session per host: a stale one (an earlier start's, no longer
answering) is stopped first, in the same script."""

import shlex
import socket
import subprocess
import time
from pathlib import Path

import pytest

from storbench.hosts import services
from storbench.hosts.transport import HostError, open_transport
from storbench.run import ready
from storbench.tools import get_tool
from tests.sshd import SshLab, free_port, lab_host


def answers(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_a_stale_service_is_stopped_and_a_new_one_answers(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    port = free_port("127.0.0.1")
    host = {"name": "localhost", "address": "127.0.0.1", "workdir": str(tmp_path / "work")}
    marker = f"fio --server=ip:127.0.0.1,{port}"
    # an earlier start's service that no longer listens: its pid file, its command line
    # (`; :` keeps sh alive)
    stale = subprocess.Popen(["sh", "-c", "sleep 60; :", *marker.split()])
    folder = tmp_path / "work" / "services" / f"fio-127.0.0.1-{port}"
    folder.mkdir(parents=True)
    (folder / "service.pid").write_text(f"{stale.pid}\n")
    try:
        time.sleep(0.2)
        (started,) = services.start_services([host], "fio", port)
        assert started["endpoint"] == f"127.0.0.1:{port}"
        assert stale.wait(timeout=10) != 0  # stopped by the start's own script
        assert answers(port)
        log = tmp_path / "work" / "services" / f"fio-127.0.0.1-{port}" / "service.log"
        assert log.exists()
    finally:
        stale.kill()
        services.stop_services([host], "fio", port)
    assert not answers(port)


def test_a_pid_file_naming_another_program_leaves_that_program_alone(tmp_path, monkeypatch):
    """The pid may belong to another process by now: only the service's command line is
    stopped."""
    monkeypatch.chdir(tmp_path)
    port = free_port("127.0.0.1")
    host = {"name": "localhost", "address": "127.0.0.1", "workdir": str(tmp_path / "work")}
    other = subprocess.Popen(["sleep", "60"])
    folder = tmp_path / "work" / "services" / f"fio-127.0.0.1-{port}"
    folder.mkdir(parents=True)
    (folder / "service.pid").write_text(f"{other.pid}\n")
    try:
        services.start_services([host], "fio", port)
        assert other.poll() is None
        assert answers(port)
        assert (folder / "service.pid").read_text().strip() != str(other.pid)
    finally:
        other.kill()
        services.stop_services([host], "fio", port)
    assert not answers(port)


def test_a_service_another_work_folder_started_is_not_used(tmp_path, monkeypatch):
    """A service left by a campaign with another workdir answers on the port, but its runs
    write their start stamps in its own folder: named, not used; this folder's is used."""
    monkeypatch.chdir(tmp_path)
    port = free_port("127.0.0.1")
    first = {"name": "localhost", "address": "127.0.0.1", "workdir": str(tmp_path / "first")}
    other = {**first, "workdir": str(tmp_path / "other")}
    try:
        services.start_services([first], "fio", port)
        with pytest.raises(services.ServiceError) as refused:
            services.start_services([other], "fio", port)
        assert str(refused.value).endswith(
            f"host localhost: port {port} answers, but not with the fio service started from"
            f" {tmp_path}/other/services/fio-127.0.0.1-{port}: another campaign's (another"
            " workdir) or another program's; its runs would write where this campaign does"
            " not look. Stop it, or give this campaign other ports (service_ports)"
        )
        (again,) = services.start_services([first], "fio", port)  # its own: used again
        assert again["folder"] == f"{tmp_path}/first/services/fio-127.0.0.1-{port}"
    finally:
        services.stop_services([first], "fio", port)
    assert not answers(port)


def test_a_pid_file_naming_the_start_scripts_own_shell_leaves_it_running(tmp_path):
    """The pid may be the shell running the next start by now (at 256 hosts it was): that
    shell's command line is the start script, which must not hold the service's command
    line whole, or the start stops itself ('fio service did not start: Terminated')."""
    folder = tmp_path / "svc"
    folder.mkdir()
    argv = get_tool("fio").service_start_command("127.0.0.1", free_port("127.0.0.1"))
    argv = ["true", *argv[1:]]  # the service's words, a program that ends at once
    pid_file = shlex.quote(str(folder / "service.pid"))
    script = f"echo $$ > {pid_file}\n{services.start_script(str(folder), argv)}\necho started"
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "started\n", "")
    assert (folder / "service.pid").read_text().strip().isdigit()  # the new one's


def test_the_first_run_on_a_service_records_its_version_and_later_runs_read_it(
    tmp_path, monkeypatch
):
    """A run's preparation reads the service's version in shell builtins once the first run
    on it has recorded it; a service that starts forgets an earlier one's."""
    monkeypatch.chdir(tmp_path)
    port = free_port("127.0.0.1")
    host = {"name": "localhost", "address": "127.0.0.1", "workdir": str(tmp_path / "work")}
    folder = tmp_path / "work" / "services" / f"fio-127.0.0.1-{port}"
    folder.mkdir(parents=True)
    record = folder / "service.version"
    record.write_text("fio-0.1-an-earlier-service\n")
    fio = get_tool("fio")
    installed = subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout

    def prepared_version() -> str:
        preparation = ready.Preparation("localhost")
        preparation.version(fio, str(folder))
        with open_transport(services.host_spec(host)) as transport:
            return preparation.run(transport)[ready.STEP_VERSION].out

    try:
        services.start_services([host], "fio", port)
        assert installed.startswith("fio-")
        assert not record.exists()  # the earlier service's, forgotten
        assert prepared_version() == installed  # asked, and recorded
        assert record.read_text() == installed
        record.write_text("fio-9.9-recorded\n")
        assert prepared_version() == "fio-9.9-recorded\n"  # read, not asked again
        record.unlink()
        assert prepared_version() == installed
    finally:
        services.stop_services([host], "fio", port)


def test_a_service_behind_a_jump_host_the_controller_cannot_reach_says_so(monkeypatch):
    """Sessions go through the jump host; the tool's client connects from the controller."""
    monkeypatch.setattr(services, "READY_TIMEOUT_S", 0.3)
    port = free_port("127.0.0.1")  # nothing listens there
    spec = services.host_spec(
        {"name": "behind", "transport": "ssh", "address": "127.0.0.1", "jump": "ops@bastion:22"}
    )
    with pytest.raises(HostError) as caught:
        services._wait_ready(spec, port, "/w/services/fio")
    assert str(caught.value) == (
        f"host behind: service not answering on 127.0.0.1:{port} after 0 s (its log:"
        " /w/services/fio/service.log); the host is reached through jump host ops@bastion:22,"
        " but the tool's client connects from this controller: service mode needs a"
        " data_address it reaches, or run the experiment standalone (its sessions go through"
        " the jump host)"
    )


def test_a_service_whose_tool_is_not_on_the_hosts_path_fails_naming_its_log(tmp_path, monkeypatch):
    """fio missing on an SSH host (its shell start-up sets a PATH without it): the start
    names what the service's log says, not only 'not answering after 20 s'."""
    monkeypatch.chdir(tmp_path)
    without_fio = tmp_path / "bin-without-fio"
    without_fio.mkdir()
    for program in Path("/usr/bin").iterdir():
        if program.name != "fio":
            (without_fio / program.name).symlink_to(program)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text(f"export PATH={without_fio}\n")
    (tmp_path / "sshd").mkdir()
    lab = SshLab(tmp_path / "sshd", session_home=home)
    try:
        server = lab.start("127.0.0.34")
        host = lab_host(lab, server, tmp_path / "work").to_dict()
        port = free_port(server.address)
        with pytest.raises(services.ServiceError) as failed:
            services.start_services([host], "fio", port)
    finally:
        lab.stop_all()
    folder = tmp_path / f"work/services/fio-127.0.0.34-{port}"
    assert str(failed.value) == (
        "start of services failed on 1 host(s):\n"
        f"  - host 127.0.0.34: service exited before it answered on 127.0.0.34:{port};"
        f" its log ({folder}/service.log) ends: nohup: failed to run command 'fio':"
        " No such file or directory"
    )
