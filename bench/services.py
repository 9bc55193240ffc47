"""Benchmark: start fio services on 32 loopback sshd hosts; storbench vs clush vs fabric.

Three ways to do the same work on the same 32 hosts (real sshd on 127.0.0.10..41):
storbench.hosts.services.start_services (connect, mkdir, stop a stale service, start detached,
wait until the port answers), ClusterShell's clush (system ssh) and a fabric ThreadingGroup
running one equivalent detached start command per host, each followed by the same TCP
readiness poll. Every variant runs REPETITIONS times, interleaved, and every service is
stopped (and checked gone with pgrep) between runs. Writes bench/out/services.json.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import os
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO)]  # tests.sshd: the same throwaway sshd the tests use

from storbench.core.atomic import write_json  # noqa: E402
from storbench.hosts import services as storbench_services  # noqa: E402
from tests.sshd import SshLab  # noqa: E402

OUT = REPO / "bench" / "out"
WORK = OUT / "services-work"
CLUSH = str(Path(sys.executable).with_name("clush"))
ADDRESSES = [f"127.0.0.{last}" for last in range(10, 42)]
PORT = 8765
TOOL = "fio"
REPETITIONS = 5
READY_TIMEOUT_S = 20.0
COMMAND_TIMEOUT_S = 60


# -- the lab: sshd hosts and the processes they run -----------------------------------------


def lab_hosts(lab: SshLab, work: Path) -> list[dict]:
    """storbench host dicts for every sshd of the lab (as test_scale_out makes them), reached
    with paramiko, a connection per step: the variants add persistent and tree themselves."""
    return [
        {
            "name": server.address,
            "transport": "ssh",
            "connection": "per-step",
            "user": "root",
            "port": server.port,
            "identity": str(lab.client_key),
            "known_hosts": str(lab.known_hosts),
            "workdir": str(work / "remote" / server.address),
            "group": "bench",
        }
        for server in lab.servers
    ]


def service_pattern(addresses: list[str], port: int) -> str:
    """ERE for the fio servers on these addresses only (pgrep -f); any IPv4 addresses."""
    alternatives = "|".join(address.replace(".", r"\.") for address in addresses)
    return rf"fio --server=ip:({alternatives}),{port}$"


def running_services(addresses: list[str], port: int) -> dict[int, str]:
    """{pid: address} of the fio servers (a server forks a child per connection it serves)."""
    done = subprocess.run(
        ["pgrep", "-af", "--", service_pattern(addresses, port)], capture_output=True, text=True
    )
    found = {}
    for line in done.stdout.splitlines():
        pid, command = line.split(" ", 1)
        found[int(pid)] = command.split("ip:", 1)[1].split(",", 1)[0]
    return found


def answering(addresses: list[str], port: int) -> list[str]:
    return [address for address in addresses if accepts(address, port, timeout_s=0.5)]


def accepts(address: str, port: int, *, timeout_s: float) -> bool:
    try:
        with socket.create_connection((address, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def wait_ready(addresses: list[str], port: int) -> None:
    """Poll each port until it accepts a connection, all hosts at once (as storbench does)."""

    def one(address: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not accepts(address, port, timeout_s=1):
            if time.monotonic() > deadline:
                raise RuntimeError(f"no service answering on {address}:{port}")
            time.sleep(0.1)

    with concurrent.futures.ThreadPoolExecutor(len(addresses)) as pool:
        list(pool.map(one, addresses))


def stop_all_services(hosts: list[dict], port: int) -> None:
    """Stop through storbench, then wait until pgrep finds none and no port answers."""
    storbench_services.stop_services(hosts, TOOL, port)
    wait_stopped([host["name"] for host in hosts], port)


def stop_locally(addresses: list[str], port: int) -> None:
    """Between repetitions: the lab's servers run on this machine; SIGTERM them by pid."""
    for pid in running_services(addresses, port):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    wait_stopped(addresses, port)


def wait_stopped(addresses: list[str], port: int) -> None:
    deadline = time.monotonic() + 10
    while running_services(addresses, port) or answering(addresses, port):
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"services still running after stop: {running_services(addresses, port)}"
            )
        time.sleep(0.1)


def kill_leftovers(addresses: list[str], port: int) -> None:
    """Last resort (sshd gone, Ctrl-C): the lab's fio servers run on this machine; by pid."""
    for pid in running_services(addresses, port):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def sshd_lab(work: Path, addresses: list[str], port: int, ssh_port: int | None = None):
    """Start one sshd per address (on ssh_port, or each on a free one); on exit (also Ctrl-C,
    SIGTERM) no service or sshd is left.

    Sessions get an empty HOME (see session_home()) unless BENCH_ACCOUNT_HOME=1.
    """
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    lab = SshLab(work, session_home=session_home(work))
    hosts: list[dict] = []
    try:
        for address in addresses:
            lab.start(address, ssh_port)
        hosts = lab_hosts(lab, work)
        yield lab, hosts
    finally:
        if hosts:
            with contextlib.suppress(Exception):
                storbench_services.stop_services(hosts, TOOL, port)
        lab.stop_all()  # after this no SSH session can start another service
        join_workers(timeout_s=30)  # starts still in flight when interrupted
        kill_leftovers(addresses, port)
        signal.signal(signal.SIGTERM, previous)


def session_home(work: Path) -> Path | None:
    """The lab sessions' HOME: empty, so a session's shell reads no ~/.bashrc. This machine's
    root ~/.bashrc runs `pyenv init` (0.4 CPU-s a session), which is not what a client fleet's
    service account runs and would be measured instead of the orchestrators."""
    return None if os.environ.get("BENCH_ACCOUNT_HOME") else work / "session-home"


def join_workers(timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


# -- the same start command for clush and fabric --------------------------------------------


def remote_start_script(work: Path, port: int) -> str:
    """One host's detached start; the host's address is sshd's own end of the connection.

    The braces keep `echo $!` in the service folder (without them, as in storbench's own
    script, the pid file lands in the login directory: `cd` ran in the background subshell).
    """
    root = shlex.quote(str(work / "remote"))
    return (
        "a=$(echo \"$SSH_CONNECTION\" | cut -d' ' -f3) && "
        f'd={root}/"$a"/services/{TOOL}-{port} && mkdir -p "$d" && cd "$d" && '
        f'{{ nohup fio --server=ip:"$a",{port} > service.log 2>&1 < /dev/null & '
        "echo $! > service.pid; }"
    )


def ssh_config(lab: SshLab, path: Path) -> Path:
    """One Host block per sshd (ports differ), for clush's system ssh client."""
    blocks = [
        f"Host {server.address}\n"
        f"  Port {server.port}\n"
        "  User root\n"
        f"  IdentityFile {lab.client_key}\n"
        "  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {lab.known_hosts}\n"
        "  StrictHostKeyChecking yes\n"
        "  BatchMode yes\n"
        for server in lab.servers
    ]
    path.write_text("\n".join(blocks))
    return path


# -- the three variants: each returns (start command done, all ready) in seconds -------------


def start_storbench(hosts: list[dict], port: int) -> tuple[float | None, float]:
    begin = time.monotonic()
    storbench_services.start_services(hosts, TOOL, port)
    return None, time.monotonic() - begin


def start_storbench_without_wait(hosts: list[dict], port: int) -> tuple[float, float]:
    """storbench's own per-host steps with its readiness wait left out, then the same poll."""
    original = storbench_services._wait_ready
    storbench_services._wait_ready = lambda spec, port, folder: None
    try:
        begin = time.monotonic()
        storbench_services.start_services(hosts, TOOL, port)
        started = time.monotonic() - begin
    finally:
        storbench_services._wait_ready = original
    wait_ready([host["name"] for host in hosts], port)
    return started, time.monotonic() - begin


def start_clush(lab: SshLab, work: Path, port: int, config: Path) -> tuple[float, float]:
    addresses = [server.address for server in lab.servers]
    command = [
        CLUSH, "-q", "-S", "-f", str(len(addresses)), "-t", "10", "-u", str(COMMAND_TIMEOUT_S),
        "-w", ",".join(addresses), "-o", f"-F {config}", remote_start_script(work, port),
    ]  # fmt: skip
    begin = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S + 30)
    started = time.monotonic() - begin
    if done.returncode != 0:
        raise RuntimeError(f"clush exited {done.returncode}: {done.stdout}{done.stderr}")
    wait_ready(addresses, port)
    return started, time.monotonic() - begin


def fabric_connection(host: dict):
    import paramiko
    from fabric import Connection

    conn = Connection(
        host["name"], user=host["user"], port=host["port"], connect_timeout=10,
        connect_kwargs={
            "key_filename": host["identity"], "look_for_keys": False, "allow_agent": False,
        },
    )  # fmt: skip
    conn.client.load_host_keys(host["known_hosts"])
    conn.client.set_missing_host_key_policy(paramiko.RejectPolicy())
    return conn


def storbench_like_scripts(work: Path, port: int) -> list[str]:
    """storbench's three steps per host as three commands: mkdir, stop a stale one, start."""
    address = "a=$(echo \"$SSH_CONNECTION\" | cut -d' ' -f3)"
    folder = f'{shlex.quote(str(work / "remote"))}/"$a"/services/{TOOL}-{port}'
    return [
        f"{address} && mkdir -p -- {folder}",
        f'{address} && pkill -TERM -f -- "[f]io --server=ip:$a,{port}"; [ "$?" -le 1 ]',
        remote_start_script(work, port),
    ]


def start_fabric(hosts: list[dict], scripts: list[str], port: int) -> tuple[float, float]:
    from fabric import ThreadingGroup

    begin = time.monotonic()
    group = ThreadingGroup.from_connections([fabric_connection(host) for host in hosts])
    try:
        for script in scripts:
            results = group.run(script, hide=True, warn=True, timeout=COMMAND_TIMEOUT_S)
            failed = {conn.host: res.stderr for conn, res in results.items() if not res.ok}
            if failed:
                raise RuntimeError(f"fabric start failed on {failed}")
    finally:
        group.close()
    started = time.monotonic() - begin
    wait_ready([host["name"] for host in hosts], port)
    return started, time.monotonic() - begin


# -- measurement ----------------------------------------------------------------------------


def measure(repetitions: int = REPETITIONS) -> dict:
    with sshd_lab(WORK, ADDRESSES, PORT) as (lab, hosts):
        config = ssh_config(lab, WORK / "ssh_config")
        variants = {
            "storbench": lambda: start_storbench(hosts, PORT),
            "storbench_no_ready_wait": lambda: start_storbench_without_wait(hosts, PORT),
            "clush": lambda: start_clush(lab, WORK, PORT, config),
            "fabric_threadinggroup": lambda: start_fabric(
                hosts, [remote_start_script(WORK, PORT)], PORT
            ),
            "fabric_threadinggroup_3_commands": lambda: start_fabric(
                hosts, storbench_like_scripts(WORK, PORT), PORT
            ),
        }
        samples = {name: {"start_s": [], "start_ready_s": []} for name in variants}
        load = {"before": os.getloadavg()}
        stop_all_services(hosts, PORT)
        for repetition in range(repetitions):
            for name, start in variants.items():
                started, ready = start()
                count = len(set(running_services(ADDRESSES, PORT).values()))
                up = len(answering(ADDRESSES, PORT))
                if count != len(ADDRESSES) or up != len(ADDRESSES):
                    raise RuntimeError(f"{name}: fio servers on {count} hosts, {up} answering")
                if started is not None:
                    samples[name]["start_s"].append(round(started, 3))
                samples[name]["start_ready_s"].append(round(ready, 3))
                print(f"  rep {repetition + 1} {name:34s} start {_fmt(started)} ready {ready:.2f}")
                stop_locally(ADDRESSES, PORT)
        stop_all_services(hosts, PORT)  # storbench's own stop once, on an idle lab
    return report(samples, repetitions, load)


def report(samples: dict, repetitions: int, load: dict) -> dict:
    summary = {
        name: {
            f"{kind}_{stat}": round(function(values), 3)
            for kind, values in series.items()
            if values
            for stat, function in (("median", statistics.median), ("min", min))
        }
        for name, series in samples.items()
    }

    def ratio(a: str, b: str, key: str) -> float:
        return round(summary[a][key] / summary[b][key], 3)

    return {
        "hosts": len(ADDRESSES),
        "addresses": f"{ADDRESSES[0]}..{ADDRESSES[-1]}",
        "tool": TOOL,
        "port": PORT,
        "repetitions": repetitions,
        "cores": os.cpu_count(),
        "loadavg_1_5_15": {**load, "after": os.getloadavg()},
        "versions": versions(),
        "samples": samples,
        "summary": summary,
        "ratios": {
            "storbench_to_clush_start_ready": ratio("storbench", "clush", "start_ready_s_median"),
            "storbench_to_fabric_start_ready": ratio(
                "storbench", "fabric_threadinggroup", "start_ready_s_median"
            ),
            "storbench_to_clush_start_only": ratio(
                "storbench_no_ready_wait", "clush", "start_s_median"
            ),
            "storbench_to_fabric_3_commands_start_ready": ratio(
                "storbench", "fabric_threadinggroup_3_commands", "start_ready_s_median"
            ),
            "storbench_to_fabric_start_only": ratio(
                "storbench_no_ready_wait", "fabric_threadinggroup", "start_s_median"
            ),
        },
        "notes": [
            "start_ready_s: wall time until every host's port accepts TCP (the same poll for "
            "all); start_s: until the start command returned on every host",
            "storbench_no_ready_wait: start_services with its per-host readiness wait "
            "replaced by nothing; its start_s is storbench's start-only time",
            "storbench runs 3 commands per host (mkdir, stop a stale service, start); clush "
            "and fabric_threadinggroup run one command (mkdir + start) per host; "
            "fabric_threadinggroup_3_commands runs storbench's three as three group.run calls",
            "between repetitions the services are stopped by pid (SIGTERM) and checked gone "
            "with pgrep and a refused TCP connect; storbench.hosts.services.stop_services runs "
            "once before and once after the measurements",
            "ratios use medians; every variant ran once per repetition, interleaved",
        ],
    }


def versions() -> dict:
    import fabric
    import paramiko

    def first_line(command: list[str]) -> str:
        done = subprocess.run(command, capture_output=True, text=True)
        return (done.stdout or done.stderr).strip().splitlines()[0]

    return {
        "fio": first_line(["fio", "--version"]),
        "clush": first_line([CLUSH, "--version"]),
        "ssh": first_line(["ssh", "-V"]),
        "fabric": fabric.__version__,
        "paramiko": paramiko.__version__,
    }


def _fmt(seconds: float | None) -> str:
    return "   -  " if seconds is None else f"{seconds:6.2f}"


def print_table(results: dict) -> None:
    print(f"\n{results['hosts']} hosts, {results['repetitions']} repetitions (median / min, s)")
    print(f"{'variant':34s} {'start only':>15s} {'start + ready':>15s}")
    for name, row in results["summary"].items():
        start = (
            f"{row['start_s_median']:.2f} / {row['start_s_min']:.2f}" if "start_s_median" in row
            else "-"
        )  # fmt: skip
        ready = f"{row['start_ready_s_median']:.2f} / {row['start_ready_s_min']:.2f}"
        print(f"{name:34s} {start:>15s} {ready:>15s}")
    for name, value in results["ratios"].items():
        print(f"{name:44s} {value:.3f}")


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    results = measure(int(os.environ.get("BENCH_REPETITIONS", REPETITIONS)))
    write_json(OUT / "services.json", results)
    print_table(results)
    if not os.environ.get("BENCH_KEEP"):  # BENCH_KEEP=1 keeps the lab and campaign folders
        shutil.rmtree(WORK, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
