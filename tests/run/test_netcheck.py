"""Network sanity check with real iperf3: server on 127.0.0.1 (local), clients over real SSH.

Expected numbers come from iperf3's own JSON (``end.sum_received``); the clients are the
two sshd hosts of the ``ssh_hosts`` fixture (127.0.0.2, 127.0.0.3).
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storbench.core import results
from storbench.hosts.transport import HostError
from storbench.run.netcheck import (
    NetcheckError,
    describe_slow_clients,
    run_network_check,
    slow_clients,
    write_results,
)

REPO = Path(__file__).resolve().parents[2]
SERVER = "127.0.0.1"
WAIT_S = 60


def free_port_pair() -> int:
    """A port p on 127.0.0.1 with p and p+1 both free right now."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind((SERVER, 0))
            port = probe.getsockname()[1]
        if port < 65535 and _bindable(port + 1):
            return port
    raise RuntimeError("no two consecutive free ports on 127.0.0.1")


def free_port_block(count: int) -> int:
    """A port p with p .. p+count-1 all free on 127.0.0.1 right now."""
    for _ in range(100):
        port = free_port_pair()
        if port + count <= 65536 and all(_bindable(p) for p in range(port, port + count)):
            return port
    raise RuntimeError(f"no {count} consecutive free ports on 127.0.0.1")


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((SERVER, port))
        except OSError:
            return False
    return True


def network_spec(ssh_hosts, server_workdir: Path, duration_s: float = 1) -> dict:
    server = {"name": SERVER, "transport": "local", "workdir": str(server_workdir)}
    clients = [{**host.to_dict(), "group": "netclients"} for host in ssh_hosts]
    return {
        "server": {**server, "group": "netserver"},
        "clients": clients,
        "port": free_port_pair(),
        "duration_s": duration_s,
        "parallel": 2,
    }


def our_iperf3(workdirs) -> list[str]:
    """iperf3 command lines (and their `timeout` wrappers) that use one of our workdirs."""
    found = subprocess.run(["pgrep", "-af", "iperf3"], capture_output=True, text=True)
    return [
        line
        for line in found.stdout.splitlines()
        if "pgrep" not in line and any(str(w) in line for w in workdirs)
    ]


def workdirs(spec: dict) -> list[str]:
    return [spec["server"]["workdir"]] + [client["workdir"] for client in spec["clients"]]


@pytest.fixture(scope="module")
def check(ssh_hosts, tmp_path_factory):
    """One real check (1 s per test), shared by the tests below."""
    base = tmp_path_factory.mktemp("netcheck")
    spec = network_spec(ssh_hosts, base / "server-workdir")
    out_dir = base / "out"
    rows = run_network_check(spec, out_dir)
    return {"spec": spec, "out_dir": out_dir, "rows": rows}


def rows_of(check, phase: str) -> dict:
    return {row["host"]: row for row in check["rows"] if row["run_id"] == phase}


def raw_json(out_dir: Path, phase: str, host: str) -> Path:
    """Where the run engine keeps a client's output (first attempt)."""
    iteration_dir = out_dir / phase / host if phase == "single" else out_dir / phase
    return iteration_dir / "a1" / f"{host}.json"


def client_json(check, phase: str, host: str) -> dict:
    return json.loads(raw_json(check["out_dir"], phase, host).read_text())


def test_each_phase_has_one_json_per_client(check):
    clients = [client["name"] for client in check["spec"]["clients"]]
    out_dir = check["out_dir"]
    for client in clients:
        assert [p.name for p in (out_dir / "single" / client / "a1").glob("127.*.json")] == [
            f"{client}.json"
        ]
    found = sorted(path.stem for path in (out_dir / "all" / "a1").glob("127.*.json"))
    assert found == sorted(clients)
    manifest = json.loads((out_dir / "all" / "run.json").read_text())
    assert [host["name"] for host in manifest["hosts"]] == clients


def test_each_client_used_its_own_server_port(check):
    port = check["spec"]["port"]
    for index, client in enumerate(check["spec"]["clients"]):
        for phase in ("single", "all"):
            document = client_json(check, phase, client["name"])
            connected = document["start"]["connected"]
            assert {c["remote_host"] for c in connected} == {SERVER}
            assert {c["remote_port"] for c in connected} == {port + index}
            assert document["start"]["test_start"]["num_streams"] == 2
            assert document["start"]["test_start"]["duration"] == 1


def test_rows_carry_the_receivers_figures_from_the_json(check):
    for phase in ("single", "all"):
        for host, row in rows_of(check, phase).items():
            if host == "all":
                continue
            received = client_json(check, phase, host)["end"]["sum_received"]
            assert row["bytes"] == received["bytes"] > 0
            assert row["bw_bytes_s"] == received["bits_per_second"] / 8
            assert row["duration_s"] == received["seconds"]
            assert (row["experiment"], row["tool"], row["op"]) == ("network", "iperf3", "send")
            assert row["numjobs"] == 2
            assert row["hosts_in_run"] == (1 if phase == "single" else 2)
            assert row["raw_path"] == str(raw_json(check["out_dir"], phase, host))


def test_the_all_row_sums_the_clients_of_phase_all(check):
    single, together = rows_of(check, "single"), rows_of(check, "all")
    assert "all" not in single  # one client at a time: a sum would mean nothing
    clients = [client["name"] for client in check["spec"]["clients"]]
    expected = sum(client_json(check, "all", c)["end"]["sum_received"]["bytes"] for c in clients)
    assert together["all"]["bytes"] == expected
    assert together["all"]["bw_bytes_s"] == pytest.approx(
        sum(together[c]["bw_bytes_s"] for c in clients)
    )


def test_no_iperf3_is_left_running_and_no_scratch_left(check):
    assert our_iperf3(workdirs(check["spec"])) == []
    for workdir in workdirs(check["spec"]):
        assert not list(Path(workdir).glob("netcheck-*"))
        assert not list(Path(workdir).glob("network/*"))


def test_server_logs_are_kept(check):
    port = check["spec"]["port"]
    for offset in range(len(check["spec"]["clients"])):
        log = (check["out_dir"] / "servers" / f"server-{port + offset}.log").read_text()
        assert f"Server listening on {port + offset}" in log


def test_rows_round_trip_through_parquet(check, tmp_path):
    path = tmp_path / "network.parquet"
    write_results(check["rows"], path)
    table = results.read_parquet(path).to_pylist()
    assert [(r["run_id"], r["host"], r["bytes"]) for r in table] == [
        (r["run_id"], r["host"], r["bytes"]) for r in check["rows"]
    ]
    assert len(table) == 2 + 2 + 1


def test_a_busy_port_is_an_error_naming_host_and_port(ssh_hosts, tmp_path):
    spec = network_spec(ssh_hosts, tmp_path / "server-workdir")
    with socket.socket() as squatter:
        squatter.bind((SERVER, spec["port"] + 1))
        squatter.listen()
        with pytest.raises(HostError, match=rf"host 127\.0\.0\.1: port\(s\) {spec['port'] + 1} "):
            run_network_check(spec, tmp_path / "out")
    assert our_iperf3(workdirs(spec)) == []


def test_an_unreachable_client_is_named_and_the_servers_stop(ssh_hosts, tmp_path):
    spec = network_spec(ssh_hosts, tmp_path / "server-workdir")
    dead = {**spec["clients"][1], "name": "dead-client", "port": free_port_pair()}
    spec["clients"][1] = dead  # nothing listens on its ssh port
    with pytest.raises(NetcheckError) as raised:
        run_network_check(spec, tmp_path / "out")
    message = str(raised.value)
    assert message.startswith("network check, phase single: 1 of 2 failed")
    assert "host dead-client: unreachable at 127.0.0.3:" in message
    assert raw_json(tmp_path / "out", "single", ssh_hosts[0].name).is_file()
    assert our_iperf3(workdirs(spec)) == []


def test_sigterm_stops_servers_and_clients_on_every_host(ssh_hosts, tmp_path):
    spec = network_spec(ssh_hosts, tmp_path / "server-workdir", duration_s=3)
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))
    script = (
        "import json, sys; from storbench.run.netcheck import run_network_check;"
        "run_network_check(json.load(open(sys.argv[1])), sys.argv[2])"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script, str(spec_path), str(tmp_path / "out")],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        # phase "all": both clients' iperf3 running at once
        clients = [client["workdir"] for client in spec["clients"]]
        wait_for(
            lambda: all(
                any("--client" in line and "/all/" in line for line in our_iperf3([w]))
                for w in clients
            ),
            "both iperf3 clients of phase all",
            process,
        )
        assert len([line for line in our_iperf3(workdirs(spec)) if "--server" in line]) >= 2
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=WAIT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode != 0
    assert "KeyboardInterrupt: signal 15" in output
    assert our_iperf3(workdirs(spec)) == []


def wait_for(predicate, what: str, process):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline and process.poll() is None:
        if predicate():
            return
        time.sleep(0.05)
    output = process.communicate()[0] if process.poll() is not None else "(still running)"
    raise AssertionError(f"gave up waiting for {what}; the check's output: {output}")


# --- slow clients (synthetic rows) --------------------------------------------------------


def row(phase: str, host: str, bw: float, op: str = "send") -> dict:
    return {"run_id": phase, "host": host, "op": op, "bw_bytes_s": bw}


def test_a_client_at_half_the_median_is_flagged():
    rows = [
        row("single", "c1", 1.0e9),
        row("single", "c2", 1.1e9),
        row("single", "c3", 0.5e9),
        row("single", "all", 2.6e9),  # the aggregate is not a client
        row("all", "c1", 0.4e9),
        row("all", "c2", 0.4e9),
        row("all", "c3", 0.4e9),
    ]
    assert slow_clients(rows, 0.8) == [
        {"host": "c3", "phase": "single", "bw_bytes_s": 0.5e9, "median": 1.0e9, "fraction": 0.5}
    ]
    assert slow_clients(rows, 0.4) == []
    text = describe_slow_clients(slow_clients(rows, 0.8), 0.8)
    assert text == "single: c3 at 4.00 Gbit/s is 50% of the median 8.00 Gbit/s (below 80%)"
    assert describe_slow_clients([], 0.8) == "no client below 80% of the median"


def test_the_receive_figure_wins_over_send():
    rows = [
        row("single", "c1", 10.0, "send"),
        row("single", "c1", 100.0, "receive"),
        row("single", "c2", 100.0, "receive"),
        row("single", "c3", 100.0, "send"),
    ]
    assert slow_clients(rows, 0.9) == []


def test_min_fraction_must_be_a_fraction():
    with pytest.raises(ValueError, match="network.min_fraction"):
        slow_clients([], 1.5)


# --- spec errors --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"duration_s": 1.5}, "network.duration: must be whole seconds"),
        ({"parallel": 0}, "network.parallel"),
        ({"port": 65535}, "network.port: 2 clients need ports 65535..65536"),
        ({"clients": []}, "network.clients: no client hosts"),
        ({"duraton_s": 5}, "unknown key\\(s\\) duraton_s"),
    ],
)
def test_bad_specs_name_the_key(change, message, tmp_path):
    spec = {
        "server": {"name": SERVER, "transport": "local", "workdir": str(tmp_path)},
        "clients": [
            {"name": "c1", "transport": "local", "workdir": str(tmp_path)},
            {"name": "c2", "transport": "local", "workdir": str(tmp_path)},
        ],
        "port": 5201,
        "duration_s": 1,
        "parallel": 1,
        **change,
    }
    with pytest.raises(ValueError, match=message):
        run_network_check(spec, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_server_cannot_be_its_own_client(tmp_path):
    server = {"name": SERVER, "transport": "local", "workdir": str(tmp_path), "group": "g"}
    spec = {"server": server, "clients": [server], "port": 5201, "duration_s": 1, "parallel": 1}
    with pytest.raises(ValueError, match="host 127.0.0.1 is the iperf3 server itself"):
        run_network_check(spec, tmp_path / "out")


def test_a_full_mesh_measures_every_link_alone_and_every_host_at_once(ssh_lab, tmp_path):
    """The Virtuozzo guide's network test: every node an iperf3 server, every node a client;
    streams per host group (here 2 for the first group, 1 for the others)."""
    hosts = ssh_lab.host_groups(3, lambda server: tmp_path / "remote" / server.address)
    nodes = [{**group_hosts, "name": group_hosts["nodes"], "group": name}
             for name, group_hosts in hosts.items()]  # fmt: skip
    for node in nodes:
        node.pop("nodes")
    names = [node["name"] for node in nodes]
    spec = {"mesh": nodes, "port": free_port_block(6), "duration_s": 1,
            "parallel": {"client1": 2}}  # fmt: skip
    out_dir = tmp_path / "out"
    rows = run_network_check(spec, out_dir)
    pairs = {(r["host"], r["target"]): r for r in rows if r["run_id"] == "pairs"}
    assert sorted(pairs) == sorted((a, b) for a in names for b in names if a != b)
    for (client, server), row in pairs.items():
        document = json.loads((out_dir / "pairs" / server / client / "a1" / f"{client}.json")
                              .read_text())  # fmt: skip
        assert {c["remote_host"] for c in document["start"]["connected"]} == {server}
        assert row["bytes"] == document["end"]["sum_received"]["bytes"] > 0
        streams = document["start"]["test_start"]["num_streams"]
        assert streams == (2 if client == names[0] else 1) and row["hosts_in_run"] == 1
    mesh = [r for r in rows if r["run_id"] == "mesh" and r["host"] != "all"]
    # rounds 1 and 2: host i sends to host i+1, then to i+2 (mod 3): every link once
    assert sorted((r["host"], r["target"]) for r in mesh) == sorted(pairs)
    totals = [r for r in rows if r["run_id"] == "mesh" and r["host"] == "all"]
    assert len(totals) == 2 and all(r["hosts_in_run"] == 3 for r in mesh)
    by_round = {}
    for row in mesh:
        by_round.setdefault(row["raw_path"].split("/mesh/")[1].split("/")[0], []).append(row)
    assert sorted(t["bytes"] for t in totals) == sorted(
        sum(r["bytes"] for r in group) for group in by_round.values()
    )
    assert slow_clients(rows, 0.01) == []
    # the report lists each link of a mesh phase as its own line
    from storbench.report.network import build_network_report

    write_results(rows, tmp_path / "network.parquet")
    written = build_network_report(tmp_path / "network.parquet", tmp_path / "report",
                                   min_fraction=0.8)  # fmt: skip
    table = written["network.csv"].read_text()
    assert f"pairs,{names[0]} → {names[1]}," in table and f"mesh,{names[2]} → {names[0]}," in table


def test_every_attempt_of_a_retried_network_check_keeps_its_log(tmp_path):
    """Snakemake deletes the check's log before each retry: every attempt's is kept beside it
    as network.log.attempt-<N>, also one that failed before any client ran (no raw folder)."""
    from tests.workflow.test_workflow import snakemake  # a workflow helper, in a run test

    port = free_port_pair()
    config = {
        "hosts": {
            "server": {"transport": "local", "nodes": SERVER},
            "client": {"transport": "local", "nodes": "127.0.0.2"},
        },
        "targets": {"scratch": {"type": "directory", "path": str(tmp_path / "target")}},
        "experiments": {
            "tiny": {"tool": "fio", "hosts": "client", "target": "scratch", "job": {"rw": "read"}}
        },
        "network": {"server": SERVER, "clients": ["client"], "port": port, "duration": "1s"},
    }
    logs = tmp_path / "results/network/logs"
    with socket.socket() as squatter:
        squatter.bind((SERVER, port))
        squatter.listen()
        assert snakemake(tmp_path, config, "network", "--retries", "1", check=False).returncode
    for attempt in (1, 2):
        text = (logs / f"network.log.attempt-{attempt}").read_text()
        assert text.startswith(f"storbench: network check attempt {attempt}; this log is kept as")
        assert f"host {SERVER}: port(s) {port} already in use" in text
    snakemake(tmp_path, config, "network")
    assert sorted(p.name for p in logs.iterdir()) == [
        "network.log", *(f"network.log.attempt-{n}" for n in (1, 2, 3)), "report.log",
    ]  # fmt: skip
    log = (logs / "network.log").read_text()
    assert log == (logs / "network.log.attempt-3").read_text()
    assert "already in use" not in log and "results/network/network.parquet: 3 rows\n" in log
