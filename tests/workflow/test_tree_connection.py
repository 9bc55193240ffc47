"""Hosts reached through a ClusterShell gateway (`connection: tree`): a whole campaign
(preflight, telemetry, standalone runs with their start barrier, fio services) goes through
ClusterShell's tree mode, with a real gateway (ClusterShell.Gateway on an sshd host) opening
the hosts' sessions; the results are fio's own numbers."""

import base64
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from storbench.core.model import Host
from storbench.hosts.base import HostError
from storbench.hosts.transport import open_transport
from tests.sshd import start_sshd
from tests.workflow.test_workflow import snakemake

GATEWAY = "127.0.0.21"
ADDRESSES = ("127.0.0.22", "127.0.0.23")


@pytest.fixture
def tree_lab(ssh_lab, tmp_path):
    """A gateway and two hosts, sshd of this test alone, all on one port."""
    servers = []
    try:
        servers.append(start_sshd(GATEWAY, tmp_path / "sshd-gateway", ssh_lab.authorized_keys))
        port = servers[0].port
        for address in ADDRESSES:
            servers.append(
                start_sshd(address, tmp_path / f"sshd-{address}", ssh_lab.authorized_keys, port)
            )
        known_hosts = tmp_path / "known_hosts"
        known_hosts.write_text("".join(s.known_hosts_line() + "\n" for s in servers))
        yield servers, known_hosts
    finally:
        for server in servers:
            server.stop()


def group(ssh_lab, tmp_path, port, known_hosts, nodes: str) -> dict:
    return {
        "transport": "ssh", "nodes": nodes, "user": "root", "port": port,
        "identity": str(ssh_lab.client_key), "known_hosts": str(known_hosts),
        "workdir": str(tmp_path / "remote"), "connection": "tree", "gateway": GATEWAY,
        "gateway_python": sys.executable,
    }  # fmt: skip


def campaign(ssh_lab, tmp_path, servers, known_hosts) -> dict:
    nodes = "127.0.0.[22-23]"
    hosts = {"clients": group(ssh_lab, tmp_path, servers[0].port, known_hosts, nodes)}
    job = {"size": "4MiB", "runtime": "1s", "ioengine": "psync", "rw": "randread", "bs": "4k"}
    experiment = {"tool": "fio", "hosts": ["clients"], "target": "scratch", "job": job}
    return {
        "hosts": hosts,
        "targets": {"scratch": {"type": "directory", "path": str(tmp_path / "shared")}},
        "experiments": {
            "standalone": {**experiment, "iterations": 2},
            "served": {**experiment, "execution": "service"},
        },
    }


def logins(server) -> int:
    return server.log_path.read_text().count("Accepted publickey for root")


def test_a_campaign_runs_through_a_clustershell_gateway(ssh_lab, tmp_path, tree_lab):
    servers, known_hosts = tree_lab
    gateway_log = tmp_path / "gateway-log"
    gateway_log.mkdir()
    env = {
        **os.environ,
        "CLUSTERSHELL_GW_LOG_DIR": str(gateway_log),
        "CLUSTERSHELL_GW_LOG_LEVEL": "DEBUG",
    }
    snakemake(tmp_path, campaign(ssh_lab, tmp_path, servers, known_hosts), env=env)

    rows = pq.read_table(tmp_path / "results/standalone/summary.parquet").to_pylist()
    for iteration in (1, 2):
        it_dir = tmp_path / f"results/standalone/raw/randread_bs4k/it{iteration}"
        manifest = json.loads((it_dir / "run.json").read_text())
        assert [h["name"] for h in manifest["hosts"]] == list(ADDRESSES)
        # each host's start hook stamped its start: the barrier's release got through
        assert [h["start_time_source"] for h in manifest["hosts"]] == ["host", "host"]
        for address in ADDRESSES:
            raw = json.loads((it_dir / manifest["raw_dir"] / f"{address}.json").read_text())
            read = raw["jobs"][0]["read"]
            (row,) = [
                r for r in rows
                if (r["iteration"], r["host"], r["op"]) == (iteration, address, "read")
            ]  # fmt: skip
            assert read["io_bytes"] > 0
            assert (row["bytes"], row["iops"]) == (read["io_bytes"], read["iops"])
    served = pq.read_table(tmp_path / "results/served/summary.parquet").to_pylist()
    (total,) = [r for r in served if r["host"] == "all" and r["op"] == "read"]
    assert total["bytes"] > 0

    # the gateway ran the hosts' commands: its own log names them and fio
    (log,) = gateway_log.glob("*.gw.log")
    text = log.read_text()
    assert all(address in text for address in ADDRESSES)
    assert "fio" in text
    # every step's channel and every session went over persistent connections: to the gateway
    # from here, to each host from the gateway (two when the first sessions raced to open it)
    assert all(1 <= logins(server) <= 2 for server in servers)

    # `snakemake cleanup` closes them, on the gateway and here: the next session logs in anew
    snakemake(tmp_path, campaign(ssh_lab, tmp_path, servers, known_hosts), "cleanup")
    cleanup_log = (tmp_path / "results/logs/cleanup.log").read_text()
    assert f"host {ADDRESSES[1]}: connection via gateway {GATEWAY} closed" in cleanup_log
    before = [logins(server) for server in servers]
    spec = host(ssh_lab, servers[0].port, known_hosts, ADDRESSES[0])
    with open_transport(spec) as transport:
        assert transport.shell("echo $((6 * 7))", timeout_s=30)[:2] == (0, "42\n")
    assert [logins(server) for server in servers] == [before[0] + 1, before[1] + 1, before[2]]


def host(ssh_lab, port, known_hosts, address: str) -> Host:
    return Host(name=address, transport="ssh", user="root", port=port,
                identity=str(ssh_lab.client_key), known_hosts=str(known_hosts),
                connection="tree", gateway=GATEWAY, gateway_python=sys.executable)  # fmt: skip


def test_files_and_commands_through_the_gateway(ssh_lab, tmp_path, tree_lab, monkeypatch):
    servers, known_hosts = tree_lab
    gateway_log = tmp_path / "gateway-log"
    gateway_log.mkdir()
    monkeypatch.setenv("CLUSTERSHELL_GW_LOG_DIR", str(gateway_log))
    monkeypatch.setenv("CLUSTERSHELL_GW_LOG_LEVEL", "DEBUG")
    folder = tmp_path / "remote-files"
    text = "line one\n" + "x" * 150_000 + "\nno newline at the end"
    secret = f"secret-{os.urandom(8).hex()}\n"
    with open_transport(host(ssh_lab, servers[0].port, known_hosts, ADDRESSES[0])) as transport:
        transport.put_text(text, str(folder / "a" / "big.txt"))
        transport.put_private_text(secret, str(folder / "a" / "private.txt"))
        script = f"stat -c %a {folder}/a/private.txt; wc -c < {folder}/a/big.txt"
        rc, out, err = transport.shell(f"{script}; echo warn >&2; exit 3", timeout_s=30)
        assert (rc, out, err) == (3, f"600\n{len(text)}\n", "warn\n")
        transport.fetch(str(folder / "a" / "big.txt"), tmp_path / "back.txt")
        assert (tmp_path / "back.txt").read_text() == text
        transport.put_text("", str(folder / "empty.txt"))
        transport.fetch(str(folder / "empty.txt"), tmp_path / "empty.txt")
        assert (tmp_path / "empty.txt").read_bytes() == b""
        assert not [p.name for p in (folder / "a").iterdir() if p.name.endswith(".tmp")]
        transport.fetch_tree(str(folder / "a"), tmp_path / "tree")
        assert (tmp_path / "tree" / "private.txt").read_text() == secret
        status = transport.run(
            ["sh", "-c", "echo out; echo err >&2; exit 5", "storbench-tree-test"],
            timeout_s=30, stdout_path=tmp_path / "out", stderr_path=tmp_path / "err",
            marker="storbench-tree-test",
        )  # fmt: skip
        assert (status, (tmp_path / "out").read_text(), (tmp_path / "err").read_text()) == (
            5,
            "out\n",
            "err\n",
        )
    # the gateway was sent the commands, not the private file's content (on the session's
    # input: a command is in the process listings of the gateway and the host)
    (log,) = gateway_log.glob("*.gw.log")
    assert "stat -c %a" in log.read_text()
    # one gateway for all the commands (ClusterShell would start one per command), and one
    # for the private file's channel of its own
    assert log.read_text().count("got channel configuration") == 2
    # lines not grouped: the gateway keeps none of them (ClusterShell's MsgTree, walked whole
    # for every session of a channel that lives as long as its step)
    assert "TreeWorkerResponder initialized grooming=0.000000" in log.read_text()
    assert "grooming=0.2" not in log.read_text()
    assert secret.strip() not in log.read_text()
    assert base64.b64encode(secret.encode()).decode()[:16] not in log.read_text()


def test_a_host_known_later_gets_a_channel_and_the_older_one_closes(
    ssh_lab, tmp_path, tree_lab, monkeypatch
):
    """A channel routes the hosts known when it opened: a host that comes later gets a new
    one, and the older channel, held open between its sessions, is let go."""
    servers, known_hosts = tree_lab
    gateway_log = tmp_path / "gateway-log"
    gateway_log.mkdir()
    monkeypatch.setenv("CLUSTERSHELL_GW_LOG_DIR", str(gateway_log))
    monkeypatch.setenv("CLUSTERSHELL_GW_LOG_LEVEL", "DEBUG")
    first, later = (host(ssh_lab, servers[0].port, known_hosts, a) for a in ADDRESSES)
    with open_transport(first) as one:
        assert one.shell("echo one", timeout_s=30)[:2] == (0, "one\n")
        assert one.shell("echo again", timeout_s=30)[:2] == (0, "again\n")
        with open_transport(later) as two:
            assert two.shell("echo two", timeout_s=30)[:2] == (0, "two\n")
            assert one.shell("echo one more", timeout_s=30)[:2] == (0, "one more\n")
            (log,) = gateway_log.glob("*.gw.log")
            deadline = time.monotonic() + 60
            while "The End" not in log.read_text() and time.monotonic() < deadline:
                time.sleep(0.1)
            text = log.read_text()
            # two channels in all, the first one ended while this process goes on
            assert text.count("got channel configuration") == 2
            assert text.count("-------- The End --------") == 1


def test_a_host_the_gateway_cannot_reach_is_named(ssh_lab, tmp_path, tree_lab):
    servers, known_hosts = tree_lab
    nobody = "127.0.0.24"  # no sshd there
    transport = open_transport(host(ssh_lab, servers[0].port, known_hosts, nobody))
    with transport, pytest.raises(HostError) as raised:
        transport.check()
    message = str(raised.value)
    assert message.startswith(f"host {nobody}: ")
    assert f"gateway {GATEWAY}" in message
    assert "Connection refused" in message


CHILD = """
import sys
from storbench.core.model import Host
from storbench.hosts.transport import open_transport
host = Host.from_dict(json.loads(sys.argv[1]))
with open_transport(host) as transport:
    transport.run(["sleep", sys.argv[2]], timeout_s=120, stdout_path=sys.argv[3] + ".out",
                  stderr_path=sys.argv[3] + ".err", marker=sys.argv[2])
"""


def test_a_killed_controller_leaves_no_tool_running(ssh_lab, tmp_path, tree_lab):
    """SIGKILL gives storbench no chance to clean up: the gateway's channel ends, so do the
    sessions it opened, and the session guard on the host stops the tool."""
    servers, known_hosts = tree_lab
    spec = host(ssh_lab, servers[0].port, known_hosts, ADDRESSES[0])
    seconds = f"97.{os.getpid() % 1000:03d}{int(time.time() * 1000) % 1000:03d}"
    child = subprocess.Popen(
        [sys.executable, "-c", "import json\n" + CHILD, json.dumps(dataclasses.asdict(spec)),
         seconds, str(tmp_path / "sleep")],
    )  # fmt: skip
    try:
        wait_for(lambda: running(f"sleep {seconds}"), "the tool to start on the host")
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    wait_for(lambda: not running(f"sleep {seconds}"), "the tool to stop")


def running(command: str) -> bool:
    return subprocess.run(["pgrep", "-x", "-f", command], capture_output=True).returncode == 0


def wait_for(condition, what: str, limit_s: float = 60) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, f"waited {limit_s:g} s for {what}"
        time.sleep(0.1)


@pytest.mark.parametrize(
    ("gateway", "python", "reason"),
    [
        ("127.0.0.24", sys.executable, "ssh: connect to host 127.0.0.24 port {port}: Connection"),
        (GATEWAY, "/nonexistent/python3", "/nonexistent/python3: No such file or directory"),
    ],
)
def test_a_gateway_that_fails_is_named_with_its_reason(
    ssh_lab, tmp_path, tree_lab, gateway, python, reason
):
    """Its sessions fail at once, not at their deadline (ClusterShell gave up on the gateway
    by raising in its own thread, which stopped every session of the step)."""
    servers, known_hosts = tree_lab
    spec = dataclasses.replace(
        host(ssh_lab, servers[0].port, known_hosts, ADDRESSES[0]),
        gateway=gateway, gateway_python=python,
    )  # fmt: skip
    for _ in range(2):  # and the next command tries the gateway again
        transport = open_transport(spec)
        with transport, pytest.raises(HostError) as raised:
            transport.check()
        message = str(raised.value)
        assert message.startswith(f"host {ADDRESSES[0]}: running a shell command: gateway")
        assert f"gateway {gateway} failed: " in message
        assert reason.format(port=servers[0].port) in message
