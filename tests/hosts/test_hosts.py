"""Host transports against the local machine and real sshd on 127.0.0.2 / 127.0.0.3."""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

from storbench.core.model import Host, parse_jump
from storbench.hosts.openssh import OpenSSHTransport
from storbench.hosts.transport import HostError, open_transport
from tests.mounts import tmpfs
from tests.sshd import free_port, generate_key, lab_host, start_sshd


@pytest.fixture(params=["local", "per-step", "persistent", "tree"])
def host(request, tmp_path) -> Host:
    """The same tests against the local transport and the first SSH host, reached with
    paramiko (a connection per step), over a persistent OpenSSH connection, and through a
    ClusterShell gateway."""
    if request.param == "local":
        return Host(name="localhost", workdir=str(tmp_path / "workdir"))
    ssh_host = request.getfixturevalue("ssh_hosts")[0]
    if request.param == "tree":
        gateway = request.getfixturevalue("tree_gateway")
        return dataclasses.replace(
            ssh_host, connection="tree", gateway=gateway, gateway_python=sys.executable
        )
    return dataclasses.replace(ssh_host, connection=request.param)


@pytest.fixture(params=["per-step", "persistent"])
def connection(request) -> str:
    return request.param


@pytest.fixture
def transport(host):
    with open_transport(host) as opened:
        opened.check()
        yield opened


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def unique_sleep_seconds() -> str:
    """A sleep duration nobody else uses, so pgrep -f finds only our process."""
    return f"20.{uuid.uuid4().int % 10**6:06d}"


def is_running(pattern: str, *, whole_line: bool = False) -> bool:
    # The SSH hosts are loopback addresses: their processes are visible here too.
    exact = ["-x"] if whole_line else []
    found = subprocess.run(["pgrep", *exact, "-f", "--", pattern], capture_output=True)
    return found.returncode == 0


def wait_until_running(pattern: str) -> None:
    """Until a process's whole command line is pattern: the tool itself, not the ssh client or
    the shells whose command lines carry it."""
    deadline = time.monotonic() + 10
    while not is_running(pattern, whole_line=True):
        assert time.monotonic() < deadline, f"no process matching {pattern!r} appeared"
        time.sleep(0.02)


def run(transport, argv, tmp_path, *, timeout_s=30.0, marker=None, cwd=None):
    """transport.run with output files in tmp_path: (rc, stdout bytes, stderr bytes)."""
    name = unique("cmd")
    out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
    rc = transport.run(
        argv, timeout_s=timeout_s, stdout_path=out, stderr_path=err,
        marker=marker or " ".join(argv), cwd=cwd,
    )  # fmt: skip
    return rc, out.read_bytes(), err.read_bytes()


def ssh_spec(ssh_hosts, connection="per-step", **changes) -> Host:
    return dataclasses.replace(ssh_hosts[0], connection=connection, **changes)


def connect_error(spec: Host) -> str:
    with pytest.raises(HostError) as caught, open_transport(spec) as transport:
        transport.check()
    message = str(caught.value)
    assert message.startswith(f"host {spec.name}: ")
    return message


# -- Host ---------------------------------------------------------------------------


def test_hostspec_from_dict_ignores_none_and_round_trips():
    spec = Host.from_dict(
        {"name": "client01", "transport": "ssh", "user": None, "identity": "~/.ssh/id_x"}
    )
    assert spec.address == "client01"
    assert spec.user is None
    assert spec.identity == os.path.expanduser("~/.ssh/id_x")
    assert Host.from_dict(spec.to_dict()) == spec


def test_hostspec_from_dict_names_unknown_keys():
    with pytest.raises(ValueError, match="unknown host setting.*hostname.*prot"):
        Host.from_dict({"name": "a", "hostname": "b", "prot": 22})


@pytest.mark.parametrize(
    "changes",
    [{"transport": "rsh"}, {"port": 0}, {"port": "22"}, {"workdir": "rel"}, {"jump": "u@h:x"}],
)
def test_hostspec_rejects_bad_values(changes):
    with pytest.raises(ValueError):
        Host(name="h", **changes)


def test_parse_jump():
    assert parse_jump("bastion") == (None, "bastion", 22)
    assert parse_jump("ops@bastion:2222") == ("ops", "bastion", 2222)
    assert parse_jump("[::1]:2200") == (None, "::1", 2200)


def test_host_error_is_picklable():
    error = pickle.loads(pickle.dumps(HostError("h1", "gone")))
    assert (str(error), error.host, error.reason) == ("host h1: gone", "h1", "gone")


def test_local_transport_does_not_import_fabric():
    code = (
        "import sys\nfrom storbench.core.model import Host\n"
        "from storbench.hosts.transport import open_transport\n"
        "with open_transport(Host('localhost')) as t: t.check(); t.mkdirs('/tmp')\n"
        "assert not {'fabric', 'paramiko', 'invoke'} & set(sys.modules), 'imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- both transports --------------------------------------------------------------------


def test_run_returns_exit_code_and_streams_output(transport, tmp_path):
    rc, out, err = run(transport, ["sh", "-c", "echo out; echo err >&2; exit 3"], tmp_path)
    assert (rc, out, err) == (3, b"out\n", b"err\n")


def test_a_shell_keeps_output_that_arrives_after_its_exit_status(transport):
    """sshd sends the exit status when the shell ends, and may send output still in its pipes
    after it (a preflight under load lost its last lines so)."""
    assert transport.shell("(sleep 0.5; echo late) & echo early", timeout_s=30) == (
        0,
        "early\nlate\n",
        "",
    )


def test_arguments_arrive_verbatim(transport, tmp_path):
    pwned = f"/tmp/{unique('storbench-pwned')}"
    argument = (
        f"a  b; $(touch {pwned}) `touch {pwned}` 'single' \"double\" \\back $HOME"
        f" & | > < * ? ~ #\nsecond line; touch {pwned}"
    )
    rc, out, _ = run(transport, ["printf", "%s", argument], tmp_path, marker=pwned)
    assert rc == 0
    assert out == argument.encode()
    assert not os.path.exists(pwned)


def test_run_in_cwd(transport, tmp_path, host):
    transport.mkdirs(host.workdir)
    rc, out, _ = run(transport, ["sh", "-c", "pwd"], tmp_path, cwd=host.workdir)
    assert (rc, out.decode().strip()) == (0, host.workdir)


def test_put_text_fetch_round_trip(transport, tmp_path, host):
    text = "[global]\nname=\u00e9t\u00e9 \u2713\n" * 1000
    remote = f"{host.workdir}/{unique('put')}/deeper/job.fio"
    transport.put_text(text, remote)
    transport.put_text(text, remote)  # replacing an existing file works too
    local = tmp_path / "fetched" / "job.fio"
    transport.fetch(remote, local)
    assert local.read_text() == text
    assert os.listdir(os.path.dirname(remote)) == ["job.fio"]  # no temp file left behind


def test_fetch_missing_file_raises(transport, tmp_path, host):
    local = tmp_path / "never"
    with pytest.raises(HostError, match=f"^host {host.name}: .*fetch"):
        transport.fetch(f"{host.workdir}/does-not-exist", local)
    assert os.listdir(tmp_path) == []


def test_mkdirs(transport, tmp_path, host):
    path = f"{host.workdir}/{unique('dirs')}/a/b/c"
    transport.mkdirs(path)
    transport.mkdirs(path)  # idempotent
    rc, _, _ = run(transport, ["test", "-d", path], tmp_path)
    assert rc == 0


def test_timeout_returns_124_and_leaves_nothing_running(transport, tmp_path):
    seconds = unique_sleep_seconds()
    rc, _, _ = run(transport, ["sleep", seconds], tmp_path, timeout_s=1)
    assert rc == 124
    assert not is_running(f"sleep {seconds}")


def test_interrupt_kills_the_tool(transport, tmp_path):
    seconds = unique_sleep_seconds()
    # Ctrl-C raises KeyboardInterrupt also when pytest runs in the background, where the
    # shell started it with SIGINT ignored
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        watcher = interrupt_main_thread_when_running(f"sleep {seconds}")
        with pytest.raises(KeyboardInterrupt):
            run(transport, ["sleep", seconds], tmp_path, timeout_s=25)
        watcher.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert not is_running(f"sleep {seconds}")


def interrupt_main_thread_when_running(pattern: str) -> threading.Thread:
    """SIGINT the main thread (like Ctrl-C) as soon as a process matches pattern."""
    main_thread = threading.main_thread().ident

    def watch():
        wait_until_running(pattern)
        signal.pthread_kill(main_thread, signal.SIGINT)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    return watcher


def test_kill_matching(transport, tmp_path):
    seconds = unique_sleep_seconds()
    victim = subprocess.Popen(["sleep", seconds])
    wait_until_running(f"sleep {seconds}")  # /proc shows the arguments a moment after exec
    transport.kill_matching(f"sleep {seconds}")
    assert victim.wait(timeout=10) == -signal.SIGTERM
    transport.kill_matching(f"sleep {seconds}")  # nothing left to kill is fine


def test_local_kill_matching_spares_the_caller():
    marker = unique("storbench-kill-test")
    caller = (
        "import subprocess, sys\nfrom storbench.core.model import Host\n"
        "from storbench.hosts.transport import open_transport\n"
        "sleeper = 'import time; print(flush=True); time.sleep(20)'\n"
        "victim = subprocess.Popen([sys.executable, '-c', sleeper, sys.argv[1]], stdout=-1)\n"
        "victim.stdout.readline()\n"  # it runs: its arguments are visible in /proc
        "open_transport(Host('localhost')).kill_matching(sys.argv[1])\n"
        "print(victim.wait())"
    )
    done = subprocess.run(
        [sys.executable, "-c", caller, marker], capture_output=True, text=True, timeout=30
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{-signal.SIGTERM}\n", "")


@pytest.mark.parametrize("host", ["per-step", "persistent", "tree"], indirect=True)
def test_a_tool_killed_by_a_signal_leaves_nothing_running_and_its_session_ends(transport, tmp_path):
    """A tool SIGKILLed whose child runs on in a session of its own, holding the SSH session's
    output open (fio's job processes do): the host's session guard stops the child by the tag
    in its environment; the session ended with the tool, not when the child would have."""
    seconds = unique_sleep_seconds()
    ran_out = tmp_path / "ran-out"  # the SSH hosts are loopback: the same file system
    tool = f"setsid sh -c 'sleep {seconds}; touch {ran_out}' & kill -KILL $$"
    rc, _, err = run(transport, ["sh", "-c", tool, "storbench-tool"], tmp_path, marker=seconds)
    assert rc == 137
    assert not is_running(f"sleep {seconds}") and not ran_out.exists()
    assert b"storbench-session: the tool ended (exit 137) leaving processes " in err


def test_run_rejects_marker_not_in_command(transport, tmp_path):
    with pytest.raises(ValueError, match="marker"):
        run(transport, ["true"], tmp_path, marker="not-in-the-command")


# -- SSH only ---------------------------------------------------------------------------


def test_unknown_host_key_is_refused(ssh_hosts, connection, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    assert "host key unknown" in connect_error(
        ssh_spec(ssh_hosts, connection, known_hosts=str(empty))
    )


def test_changed_host_key_is_refused(ssh_hosts, connection, tmp_path):
    spec = ssh_hosts[0]
    impostor_type, impostor_blob = generate_key(tmp_path / "impostor").split()[:2]
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(f"[{spec.address}]:{spec.port} {impostor_type} {impostor_blob}\n")
    message = connect_error(ssh_spec(ssh_hosts, connection, known_hosts=str(known_hosts)))
    assert "host key CHANGED" in message
    assert str(known_hosts) in message


def test_host_key_check_off_accepts_unknown_key(ssh_hosts, connection, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    spec = ssh_spec(ssh_hosts, connection, known_hosts=str(empty), host_key_check=False)
    with open_transport(spec) as transport:
        assert run(transport, ["echo", "accepted"], tmp_path)[:2] == (0, b"accepted\n")
    assert empty.read_text() == ""  # accepting does not write to known_hosts


def test_wrong_identity_fails_authentication(ssh_hosts, connection, tmp_path):
    generate_key(tmp_path / "stranger")
    message = connect_error(ssh_spec(ssh_hosts, connection, identity=str(tmp_path / "stranger")))
    assert "ssh authentication failed for user root" in message


def test_unreachable_host(ssh_hosts, connection):
    port = free_port("127.0.0.9")
    spec = ssh_spec(
        ssh_hosts, connection, name="127.0.0.9", address=None, port=port, connect_timeout=5
    )
    assert spec.address == "127.0.0.9"
    message = connect_error(spec)
    assert f"unreachable at 127.0.0.9:{port}" in message


def test_jump_host(ssh_hosts, connection, tmp_path):
    first, second = ssh_hosts
    second = dataclasses.replace(second, connection=connection)
    spec = dataclasses.replace(second, jump=f"root@{first.address}:{first.port}")
    with open_transport(spec) as transport:
        assert run(transport, ["echo", "via-jump"], tmp_path)[:2] == (0, b"via-jump\n")
    dead_jump = dataclasses.replace(second, jump=f"127.0.0.9:{free_port('127.0.0.9')}")
    assert "(jump host)" in connect_error(dead_jump)


JUMP_ADDRESS = "127.0.0.6"
HOSTS_BEHIND_THE_JUMP = 12


def test_hosts_behind_one_jump_host_share_one_connection_to_it(ssh_lab, connection, tmp_path):
    """A bastion's sshd refuses connections arriving together past its MaxStartups (10 by
    default; this one 1): 12 hosts connecting at once through it all answer, over the one
    connection of this process (paramiko) or of the jump host's master (OpenSSH)."""
    jump = start_sshd(JUMP_ADDRESS, tmp_path / "jump", ssh_lab.authorized_keys,
                      extra_config="MaxStartups 1")  # fmt: skip
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(ssh_lab.known_hosts.read_text() + jump.known_hosts_line() + "\n")
    hosts = [
        dataclasses.replace(
            lab_host(ssh_lab, ssh_lab.servers[index % 4], tmp_path / "remote"),
            name=f"behind{index}", connection=connection, known_hosts=str(known_hosts),
            jump=f"root@{JUMP_ADDRESS}:{jump.port}",
        )
        for index in range(HOSTS_BEHIND_THE_JUMP)
    ]  # fmt: skip
    try:
        together = threading.Barrier(len(hosts))

        def answer(spec: Host) -> str:
            with open_transport(spec) as transport:
                together.wait()
                # stderr is left out: the login shell's own start-up may write to it
                rc, out, _ = transport._shell("echo $((6 * 7))", timeout_s=30)
                return f"{rc} {out.strip()}"

        with concurrent.futures.ThreadPoolExecutor(len(hosts)) as pool:
            answers = list(pool.map(answer, hosts))
        assert answers == ["0 42"] * len(hosts)
        logins = (jump.directory / "sshd.log").read_text().count("Accepted publickey")
        assert logins == 1
    finally:
        if connection == "persistent":  # the masters (and the jump host's) end now
            for spec in hosts:
                with contextlib.suppress(Exception):
                    OpenSSHTransport(spec).disconnect()
        jump.stop()


def test_fio_runs_on_both_ssh_hosts(ssh_hosts, tmp_path):
    for spec in ssh_hosts:
        data_file = f"{spec.workdir}/{unique('fio')}"
        argv = ["fio", "--name=t", f"--filename={data_file}", "--size=1m", "--rw=write",
                "--bs=4k", "--output-format=json"]  # fmt: skip
        with open_transport(spec) as transport:
            transport.mkdirs(spec.workdir)
            rc, out, err = run(transport, argv, tmp_path, marker=data_file)
        assert rc == 0, err.decode()
        assert json.loads(out)["jobs"][0]["write"]["io_bytes"] == 1048576


def test_fetch_onto_a_full_disk_fails_naming_the_host_and_keeps_nothing(transport, tmp_path, host):
    """The controller's disk fills while a tool's output arrives: ssh writes what fits and
    exits 0, so a fetch that only trusted its exit status published a cut-off copy."""
    remote = f"{host.workdir}/{unique('big')}/out.json"
    transport.put_text("x" * 65536, remote)
    with tmpfs(tmp_path / "full", "size=16k") as full:
        with pytest.raises(HostError) as caught:
            transport.fetch(remote, full / "out.json")
        assert os.listdir(full) == []  # no cut-off copy, no temp file
    message = str(caught.value)
    assert message.startswith(f"host {host.name}: ")
    assert "No space left on device" in message or "bytes could be written to" in message, message
