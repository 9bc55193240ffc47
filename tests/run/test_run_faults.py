"""Faults during runs, through real Snakemake, fio and sshd: a host lost mid-run, the tool
killed, the target full, Snakemake SIGKILLed. After each: the cause named, no tool left
running, nothing published, finished runs untouched, and a rerun completes what is missing.
Also: a forced rerun keeps the earlier raw output, and keys never show in process listings.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from storbench.core.model import Host
from storbench.core.specs import RunSpec
from storbench.hosts.base import TOOL_TAG_VARIABLE
from storbench.hosts.transport import open_transport
from storbench.run import engine as runner
from storbench.tools.base import ToolAdapter
from tests.mounts import tmpfs
from tests.run.test_interrupt import processes_matching, start_snakemake, stop_if_running, wait_for
from tests.sshd import SSHD, SshLab, SshServer, _wait_for_banner
from tests.workflow.test_workflow import planned_jobs, snakemake

RUN = "read_bs4k_nj1"  # the one run of each experiment
LOST_HOST_ADDRESS = "127.0.0.31"  # a private sshd: stopping it must not disturb other tests
# The experiment-level jobs of a rerun when only the long experiment's run is missing (its
# runtime is changed for the rerun, so its job file is rendered again); campaign-wide reports
# come on top.
RERUN_OF_LONG = {
    "preflight": 0,
    "telemetry_hosts": 0,
    "render_job": 1,
    "run_iteration": 1,
    "parse_iteration": 1,
    "gather_experiment": 1,
    "report_experiment": 1,
}


# -- campaign: one finished experiment, one that faults ----------------------------------


def campaign(tmp_path: Path, hosts: dict | None = None, long_job: dict | None = None) -> dict:
    """'done' (1 s, built first) and 'long' (120 s unless long_job says otherwise)."""
    hosts = hosts or {"localhost": {"transport": "local"}}
    group = next(iter(hosts))
    job = {"size": "4MiB", "ioengine": "psync", "numjobs": 1, "rw": "read", "bs": "4k"}

    def experiment(target: str, changes: dict) -> dict:
        return {"tool": "fio", "hosts": group, "target": target, "iterations": 1,
                "job": {**job, **changes}}  # fmt: skip

    return {
        "hosts": hosts,
        "targets": {
            "scratch": {"type": "directory", "path": str(tmp_path / "done-target")},
            "shared_scratch": {"type": "directory", "path": str(tmp_path / "long-target")},
        },
        "experiments": {
            "done": experiment("scratch", {"runtime": "1s"}),
            "long": experiment("shared_scratch", long_job or {"runtime": "120s"}),
        },
    }


def shortened(config: dict) -> dict:
    """The same campaign with a 1 s long run: the rerun then takes seconds, not minutes."""
    changed = json.loads(json.dumps(config))
    changed["experiments"]["long"]["job"]["runtime"] = "1s"
    return changed


def build_done_experiment(workdir: Path, config: dict) -> dict[str, int]:
    snakemake(workdir, config, "reports/done/index.html")
    return finished_outputs(workdir)


def finished_outputs(workdir: Path) -> dict[str, int]:
    """mtime (ns) of every file of the finished experiment and of the campaign's telemetry."""
    roots = [workdir / "results/done", workdir / "reports/done", workdir / "results/telemetry"]
    return {
        str(path.relative_to(workdir)): path.stat().st_mtime_ns
        for root in roots
        for path in root.rglob("*")
        if path.is_file()
    }


def assert_untouched(workdir: Path, finished: dict[str, int]) -> None:
    """Every file of the finished snapshot is still there with its mtime (new files may come)."""
    now = finished_outputs(workdir)
    assert {path: now.get(path) for path in finished} == finished


def parquet_files(workdir: Path) -> set[str]:
    return {str(path.relative_to(workdir)) for path in (workdir / "results").rglob("*.parquet")}


def long_iteration(workdir: Path, run_id: str = RUN) -> Path:
    return workdir / f"results/long/raw/{run_id}/it1"


def long_run_log_path(workdir: Path, run_id: str = RUN) -> Path:
    return workdir / f"results/long/logs/run/{run_id}.it1.log"


def long_run_log(workdir: Path, run_id: str = RUN) -> str:
    return long_run_log_path(workdir, run_id).read_text()


def run_to_failure(workdir: Path, config: dict, running_marker: str, inject) -> str:
    """Start the campaign, call inject(snakemake's process) once fio runs with running_marker;
    return the output."""
    process = start_snakemake(workdir, config)
    try:
        wait_for(lambda: processes_matching(f"fio.*{running_marker}"), "fio to start")
        inject(process)
        output, _ = process.communicate(timeout=300)
    finally:
        stop_if_running(process)
    assert process.returncode != 0, output
    return output


def assert_nothing_published(workdir: Path, parquet_before: set[str], run_id=RUN) -> None:
    assert not (long_iteration(workdir, run_id) / "run.json").exists()
    assert not (workdir / "results/long/parsed").exists()
    assert parquet_files(workdir) == parquet_before


def rerun_completes_the_long_run(workdir: Path, config: dict, finished: dict, *extra) -> None:
    """Rerun (shortened): only the long run's jobs; the finished files keep their mtimes."""
    config = shortened(config)
    planned = planned_jobs(snakemake(workdir, config, "-n", *extra))
    assert {rule: planned.get(rule, 0) for rule in RERUN_OF_LONG} == RERUN_OF_LONG
    snakemake(workdir, config, *extra)
    assert_untouched(workdir, finished)
    manifest = json.loads((long_iteration(workdir) / "run.json").read_text())
    assert (manifest["attempt"], manifest["raw_dir"]) == (2, "a2")
    rows = pq.read_table(workdir / "results/long/summary.parquet").to_pylist()
    assert {row["attempt"] for row in rows} == {2}
    log = long_run_log_path(workdir)
    # the failed attempt's log outlives Snakemake's deletion of the log before the rerun
    assert Path(f"{log}.attempt-1").read_text().startswith("storbench: attempt a1;")
    assert log.read_text().startswith("storbench: attempt a2;")


# -- a host lost mid-run -------------------------------------------------------------------


@pytest.fixture(scope="module")
def private_lab(tmp_path_factory):
    lab = SshLab(tmp_path_factory.mktemp("lost-sshd"))
    try:
        lab.start(LOST_HOST_ADDRESS)
        yield lab
    finally:
        lab.stop_all()


def restart_sshd(server: SshServer) -> SshServer:
    """The same sshd again: same address, port, host key and config."""
    with open(server.log_path, "ab") as log:
        process = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(server.directory / "sshd_config")],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
        )  # fmt: skip
    restarted = dataclasses.replace(server, process=process)
    _wait_for_banner(restarted)
    return restarted


def test_host_lost_mid_run_stops_its_tool_and_a_rerun_completes(private_lab, tmp_path):
    remote_workdir = tmp_path / "remote-workdir"
    hosts = private_lab.host_groups(1, lambda _: remote_workdir)
    config = campaign(tmp_path, hosts)
    finished = build_done_experiment(tmp_path, config)
    parquet_before = parquet_files(tmp_path)
    remote_attempt = remote_workdir / f"long/{RUN}/it1/{LOST_HOST_ADDRESS}/a1"
    server = private_lab.servers[0]

    run_to_failure(tmp_path, config, f"{remote_attempt}/job.fio", lambda _: server.stop())

    log = long_run_log(tmp_path)
    assert f"host {LOST_HOST_ADDRESS}: running fio: connection lost" in log
    # the lost session's guard stopped fio on the host; the run could not reach it to kill it
    wait_for(lambda: not processes_matching(f"fio.*{remote_attempt}"), "the remote fio to stop")
    assert "also failed to kill the tool" in log
    assert_nothing_published(tmp_path, parquet_before)
    assert_untouched(tmp_path, finished)

    private_lab.servers[0] = restart_sshd(server)
    rerun_completes_the_long_run(tmp_path, config, finished)
    failed = (long_iteration(tmp_path) / "a1/failed.txt").read_text()  # kept beside a2
    assert f"host {LOST_HOST_ADDRESS}: running fio: connection lost" in failed


# -- the tool killed -----------------------------------------------------------------------


def fio_processes(marker: str) -> dict[int, int]:
    """{pid: parent pid} of the fio processes whose command line contains marker."""
    listed = subprocess.run(["pgrep", "-x", "fio"], capture_output=True, text=True).stdout
    found = {}
    for pid in map(int, listed.split()):
        with contextlib.suppress(OSError):  # it may just have exited
            args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            if marker in args:
                found[pid] = parent_pid(pid)
    return found


def main_and_job(processes: dict[int, int]) -> dict[int, int] | None:
    """processes once fio's job process runs under its main process, else None."""
    has_job = any(parent in processes for parent in processes.values())
    return processes if has_job else None


def parent_pid(pid: int) -> int:
    stat_line = Path(f"/proc/{pid}/stat").read_text()
    return int(stat_line.rpartition(")")[2].split()[1])  # field 4, after "(name) state"


def test_tool_killed_mid_run_fails_kills_its_workers_and_keeps_the_attempt(tmp_path):
    config = campaign(tmp_path)
    finished = build_done_experiment(tmp_path, config)
    parquet_before = parquet_files(tmp_path)
    attempt_dir = long_iteration(tmp_path) / "a1"
    marker = str(attempt_dir / "job.fio")

    def kill_fio_main_process(_):
        # fio's main process and its job process; the main one dies, as in a crash
        processes = wait_for(lambda: main_and_job(fio_processes(marker)), "fio's job process")
        (main,) = [pid for pid, parent in processes.items() if parent not in processes]
        os.kill(main, signal.SIGKILL)

    run_to_failure(tmp_path, config, marker, kill_fio_main_process)

    log = long_run_log(tmp_path)
    assert "host localhost: fio killed by SIGKILL; stderr tail:" in log
    assert f"raw output kept in results/long/raw/{RUN}/it1/a1" in log
    assert not fio_processes(marker)  # the orphaned job process was stopped too
    assert_nothing_published(tmp_path, parquet_before)
    assert_untouched(tmp_path, finished)
    kept = {path.name for path in attempt_dir.iterdir()}
    assert {"job.fio", "localhost.stdout", "localhost.stderr", "localhost.version"} <= kept
    assert "fio killed by SIGKILL" in (attempt_dir / "failed.txt").read_text()

    rerun_completes_the_long_run(tmp_path, config, finished)
    assert {path.name for path in attempt_dir.iterdir()} == kept


# -- the target full -----------------------------------------------------------------------


@pytest.fixture
def tiny_filesystem(tmp_path):
    """A 2 MiB tmpfs (needs root), unmounted afterwards."""
    with tmpfs(tmp_path / "full", "size=2m") as mount_point:
        yield mount_point


def fill(path: Path) -> None:
    """Write until the file system is full (as another user's job would)."""
    with open(path, "wb", buffering=0) as handle:  # unbuffered: nothing left for close()
        try:
            while True:
                handle.write(b"x" * 4096)
        except OSError as error:
            assert error.errno == errno.ENOSPC


def test_full_target_fails_with_enospc_and_publishes_nothing(tmp_path, tiny_filesystem):
    # 1 MiB fits the empty 2 MiB target when the run starts; then something else fills it
    slow = {"rw": "write", "runtime": "10s", "size": "1MiB", "rate": "256k", "fallocate": "none"}
    config = campaign(tmp_path, long_job=slow)
    config["targets"]["shared_scratch"]["path"] = str(tiny_filesystem)
    finished = build_done_experiment(tmp_path, config)
    parquet_before = parquet_files(tmp_path)
    written = tiny_filesystem / "localhost"

    def fill_once_fio_writes(_):
        wait_for(
            lambda: any(f.stat().st_size >= 64 * 1024 for f in written.glob("*")),
            "fio to have written 64 KiB",
        )
        fill(tiny_filesystem / "someone-else")

    run_to_failure(tmp_path, config, f"{tmp_path}/results/long", fill_once_fio_writes)

    log = long_run_log(tmp_path, "write_bs4k_nj1")
    assert "host localhost: fio exited 1; stderr tail:" in log
    assert "No space left on device" in log
    attempt_dir = long_iteration(tmp_path, "write_bs4k_nj1") / "a1"
    assert "No space left on device" in (attempt_dir / "localhost.stderr").read_text()
    (job,) = json.loads((attempt_dir / "localhost.json").read_text())["jobs"]
    # fio stopped at the first failed write, having written less than its 1 MiB
    assert job["error"] == errno.ENOSPC and 0 < job["write"]["io_bytes"] < 1 << 20
    assert_nothing_published(tmp_path, parquet_before, "write_bs4k_nj1")
    assert_untouched(tmp_path, finished)


def test_a_job_larger_than_the_target_never_starts(tmp_path, tiny_filesystem):
    config = campaign(tmp_path, long_job={"rw": "write", "runtime": "10s"})  # 4 MiB into 2
    config["targets"]["shared_scratch"]["path"] = str(tiny_filesystem)
    result = snakemake(tmp_path, config, check=False)
    assert result.returncode != 0
    log = long_run_log(tmp_path, "write_bs4k_nj1")
    assert f"host localhost: not enough room in {tiny_filesystem}/localhost: run" in log
    assert "writes 4.0 MiB of files per host" in log  # in the unit the free space is in
    assert " MiB are free" in log
    assert not list(long_iteration(tmp_path, "write_bs4k_nj1").glob("a1/localhost.json"))


# -- Snakemake SIGKILLed -------------------------------------------------------------------


@pytest.mark.parametrize("victim", ["snakemake", "process group"])
def test_sigkill_to_snakemake_stops_fio_and_a_rerun_completes(tmp_path, victim):
    config = campaign(tmp_path)
    finished = build_done_experiment(tmp_path, config)
    parquet_before = parquet_files(tmp_path)
    marker = str(long_iteration(tmp_path) / "a1/job.fio")
    process = start_snakemake(tmp_path, config)
    try:
        wait_for(lambda: processes_matching(f"fio.*{marker}"), "fio to start")
        # 'snakemake' alone is an OOM kill; the group (snakemake, its shells and storbench run,
        # not fio: that runs in a session of its own) is a killed terminal session
        kill = os.kill if victim == "snakemake" else os.killpg
        kill(process.pid, signal.SIGKILL)
        process.communicate(timeout=60)
    finally:
        stop_if_running(process)

    wait_for(lambda: not processes_matching(f"fio.*{marker}"), "fio to stop")
    wait_for(lambda: not processes_matching(f"storbench run .*{tmp_path}"), "storbench to exit")
    if victim == "snakemake":  # storbench run saw its Snakemake go and stopped fio itself
        stopping = f"storbench: snakemake (pid {process.pid}), which started this run, has exited"
        assert stopping in long_run_log(tmp_path)
        failed = (long_iteration(tmp_path) / "a1/failed.txt").read_text()
        assert failed.endswith(f"interrupted (signal {signal.SIGTERM.value})\n")
    assert_nothing_published(tmp_path, parquet_before)
    assert_untouched(tmp_path, finished)

    snakemake(tmp_path, config, "--unlock")  # its SIGKILLed owner is gone: the lock is stale
    rerun_completes_the_long_run(tmp_path, config, finished, "--rerun-incomplete")
    if victim == "snakemake":  # the killed call's log, kept beside the rerun's
        assert stopping in Path(f"{long_run_log_path(tmp_path)}.attempt-1").read_text()
    if victim == "process group":  # storbench run was SIGKILLed too: a2 notes why a1 has nothing
        failed = (long_iteration(tmp_path) / "a1/failed.txt").read_text()
        assert "lost: this attempt never finished" in failed and "when attempt a2 started" in failed


# -- SIGINT to Snakemake alone ------------------------------------------------------------


def test_sigint_to_snakemake_alone_stops_fio_and_a_rerun_completes(tmp_path):
    """A CI runner or supervisor signals Snakemake's pid, not the terminal's process group:
    Snakemake would wait for the running benchmark; its storbench step stops fio instead."""
    config = campaign(tmp_path)
    finished = build_done_experiment(tmp_path, config)
    parquet_before = parquet_files(tmp_path)
    marker = str(long_iteration(tmp_path) / "a1/job.fio")
    # the pid only: its jobs get no signal from us
    output = run_to_failure(tmp_path, config, marker, lambda sm: os.kill(sm.pid, signal.SIGINT))
    assert "Terminating processes on user request" in output
    assert not processes_matching(f"fio.*{marker}")
    failed = (long_iteration(tmp_path) / "a1/failed.txt").read_text()
    assert failed.endswith(f"interrupted (signal {signal.SIGTERM.value})\n")
    assert_nothing_published(tmp_path, parquet_before)
    assert_untouched(tmp_path, finished)
    rerun_completes_the_long_run(tmp_path, config, finished)


# -- raw output never overwritten ----------------------------------------------------------


def test_forced_rerun_keeps_the_earlier_raw_output_and_rows_name_the_attempt(tmp_path):
    config = campaign(tmp_path)
    del config["experiments"]["long"]
    snakemake(tmp_path, config)
    it_dir = tmp_path / f"results/done/raw/{RUN}/it1"
    first = {path.name: path.read_bytes() for path in (it_dir / "a1").iterdir()}

    snakemake(tmp_path, config, "--forcerun", "run_iteration")

    assert {path.name: path.read_bytes() for path in (it_dir / "a1").iterdir()} == first
    manifest = json.loads((it_dir / "run.json").read_text())
    assert (manifest["attempt"], manifest["raw_dir"]) == (2, "a2")
    second = json.loads((it_dir / "a2/localhost.json").read_text())["jobs"][0]["read"]
    rows = pq.read_table(tmp_path / "results/done/summary.parquet").to_pylist()
    assert {(row["host"], row["attempt"], row["raw_path"]) for row in rows} == {
        (host, 2, f"results/done/raw/{RUN}/it1/a2") for host in ("localhost", "all")
    }
    (row,) = [r for r in rows if r["host"] == "localhost"]
    assert (row["iops"], row["bytes"]) == (second["iops"], second["io_bytes"])
    html = (tmp_path / "reports/done/index.html").read_text().replace("<wbr>", "")
    per_run = html.split('id="per-run"')[1]
    assert "<th>Iteration</th><th>Attempt</th>" in per_run  # the report says which one it used
    assert f"<td>{RUN}</td><td>1</td><td>a2</td><td>localhost</td>" in per_run


# -- keys never in process listings --------------------------------------------------------


class SleepyProbe(ToolAdapter):
    """A stand-in S3 tool (a real shell): takes its keys from the environment, runs a while."""

    name = "sleepyprobe"
    job_suffix = ".probe"
    secret_env = {"PROBE_ACCESS": "access_key", "PROBE_SECRET": "secret_key"}

    def version_command(self):
        return ["sh", "-c", "echo sleepyprobe 1.0"]

    def output_name(self, host):
        return f"{host}.out"

    def command(self, job_path, output_path, host):
        script = 'sleep 2; printf "%s|%s" "$PROBE_ACCESS" "$PROBE_SECRET" > "$2"'
        return ["sh", "-c", script, "sleepyprobe", job_path, output_path]


class ProcessWatcher:
    """Polls every process's command line (as `ps` shows them to any user) while a run goes."""

    def __init__(self, secrets: tuple[str, ...], marker: str):
        self.secrets, self.marker = secrets, marker
        self.leaks: list[str] = []
        self.saw_tool = False
        self.env_file_modes: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self._stop.set()
        self._thread.join()

    def _poll(self):
        while not self._stop.is_set():
            for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
                with contextlib.suppress(OSError):
                    args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
                    self.leaks += [args for secret in self.secrets if secret in args]
                    if self.marker in args and "sleepyprobe" in args:
                        self.saw_tool = True
                        self._note_env_file_mode(args)
            time.sleep(0.02)

    def _note_env_file_mode(self, args: str) -> None:
        env_file = next((a for a in args.split() if a.endswith(".env")), None)
        if env_file:
            with contextlib.suppress(OSError):
                self.env_file_modes.add(stat.S_IMODE(os.stat(env_file).st_mode))


@pytest.fixture(params=["local", "ssh"])
def probe_host(request, tmp_path) -> dict:
    if request.param == "local":
        return {"name": "localhost", "transport": "local", "workdir": str(tmp_path / "w")}
    spec = request.getfixturevalue("ssh_hosts")[0]
    return dataclasses.replace(spec, workdir=str(tmp_path / "w")).to_dict()


def test_keys_never_appear_in_any_process_listing(tmp_path, monkeypatch, probe_host):
    access, secret = f"AK{uuid.uuid4().hex}", f"SK{uuid.uuid4().hex}"
    monkeypatch.setattr(runner, "get_tool", lambda name: SleepyProbe())
    monkeypatch.setenv("SB_FAULTS_ACCESS", access)
    monkeypatch.setenv("SB_FAULTS_SECRET", secret)
    job = tmp_path / "job.probe"
    job.write_text("objects=1\n")
    target = {
        "name": "minio", "type": "s3", "endpoint": "http://127.0.0.1:9", "bucket_prefix": "sb",
        "credentials": {"access_key_env": "SB_FAULTS_ACCESS", "secret_key_env": "SB_FAULTS_SECRET"},
    }  # fmt: skip
    spec = {"experiment": "e", "run_id": "r", "tool": "sleepyprobe", "target": target,
            "params": {}, "hosts": [probe_host], "timeout_s": 30}  # fmt: skip
    manifest_path = tmp_path / "raw/it1/run.json"

    with ProcessWatcher((access, secret), marker=str(tmp_path / "w")) as watcher:
        manifest = runner.run_iteration(RunSpec.from_dict(spec), 1, str(job), str(manifest_path))

    assert watcher.saw_tool  # the poll did look while the tool ran
    assert watcher.leaks == []
    assert watcher.env_file_modes == {0o600}
    output = manifest_path.parent / "a1" / f"{probe_host['name']}.out"
    assert output.read_text() == "***|***"  # the tool got both and printed them: kept as ***
    assert not [p for p in (tmp_path / "w").rglob("*") if p.suffix in (".env", ".private")]
    kept = [p for p in manifest_path.parent.rglob("*") if p.is_file()]
    for path in kept:
        text = path.read_bytes().decode(errors="replace")
        assert access not in text and secret not in text, path
    assert secret not in manifest.to_json()


# -- transports: a killed storbench leaves no tool behind ------------------------------------


KILLABLE_CALLER = """
import sys, threading
from storbench.core.model import Host
from storbench.hosts.transport import open_transport
spec = Host.from_dict(__import__("json").loads(sys.argv[1]))
argv = ["sleep", sys.argv[2]]

def run():
    with open_transport(spec) as transport:
        out = sys.argv[3]
        transport.run(argv, timeout_s=900, stdout_path=out, stderr_path=out + ".err",
                      marker=" ".join(argv))

worker = threading.Thread(target=run, daemon=True)  # as the runner does: one thread a host
worker.start()
worker.join()
"""


@pytest.fixture(params=["local", "ssh"])
def any_host(request, tmp_path) -> Host:
    if request.param == "local":
        return Host(name="localhost", workdir=str(tmp_path / "w"))
    return request.getfixturevalue("ssh_hosts")[0]


def test_sigkilled_caller_leaves_no_tool_running(any_host, tmp_path):
    # far longer than wait_for waits, and a command line nobody else has
    seconds = f"600.{uuid.uuid4().int % 10**6:06d}"
    with open_transport(any_host) as transport:
        transport.check()  # fail here, not in the child, if the host is unusable
    caller = subprocess.Popen(
        [sys.executable, "-c", KILLABLE_CALLER, json.dumps(any_host.to_dict()), seconds,
         str(tmp_path / "out")],
    )  # fmt: skip
    try:
        wait_for(lambda: processes_matching(f"^sleep {seconds}"), "the tool to start")
        caller.kill()  # SIGKILL: no handler, no cleanup of its own
        caller.wait()
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.wait()
    try:
        # local: the parent-death signal; ssh: the session guard, when sshd sees the connection end
        wait_for(lambda: not processes_matching(f"sleep {seconds}"), "the tool to stop")
    finally:
        open_transport(Host("localhost")).kill_matching(f"sleep {seconds}")  # if it failed


# -- one host's tool killed: the others stopped with it --------------------------------------


def two_host_fio_run(ssh_hosts, tmp_path, runtime_s: int, timeout_s: int):
    """(spec, job file, victim, other) of a time-based fio read on two SSH hosts."""
    hosts = [
        dataclasses.replace(host, workdir=str(tmp_path / f"w-{host.name}")).to_dict()
        for host in ssh_hosts
    ]
    job = tmp_path / "job.fio"
    job.write_text(
        f"[r]\ndirectory={tmp_path / 'target'}\nrw=read\nbs=4k\nsize=1m\nioengine=psync\n"
        f"time_based=1\nruntime={runtime_s}\n"
    )
    spec = RunSpec(experiment="e", run_id="r", tool="fio", params={}, hosts=tuple(hosts),
                   target={"name": "t", "type": "directory", "path": str(tmp_path / "target")},
                   timeout_s=timeout_s)  # fmt: skip
    victim, other = (host["name"] for host in hosts)
    return spec, job, victim, other


def failed_with_victim_killed(spec, job, manifest_path, kill) -> list[str]:
    """The lines of the run's error, kill() run beside it; the run fails as fio's first."""
    killer = threading.Thread(target=kill, daemon=True)
    killer.start()
    with pytest.raises(runner.RunError) as failed:
        runner.run_iteration(spec, 1, str(job), str(manifest_path))
    killer.join()
    lines = str(failed.value).splitlines()
    assert lines[0] == "e/r: fio failed"
    return lines


def test_tool_killed_on_one_host_stops_the_other_hosts_tool(ssh_hosts, tmp_path):
    """fio SIGKILLed on one of two SSH hosts: the run has failed, so the other host's fio is
    stopped then, not after the rest of its 120 s (the target held, the storage loaded)."""
    spec, job, victim, other = two_host_fio_run(ssh_hosts, tmp_path, 120, 300)
    victim_job = f"{tmp_path}/w-{victim}/e/r/it1/{victim}/a1/job.fio"
    other_job = f"{tmp_path}/w-{other}/e/r/it1/{other}/a1/job.fio"

    def kill_the_victims_fio():  # its main and its job process, as an OOM kill of both
        processes = wait_for(lambda: main_and_job(fio_processes(victim_job)), "fio's job process")
        for pid in processes:
            os.kill(pid, signal.SIGKILL)

    manifest_path = tmp_path / "raw/r/it1/run.json"
    lines = failed_with_victim_killed(spec, job, manifest_path, kill_the_victims_fio)
    assert (
        f"host {victim}: fio exited 137 (as a tool killed by SIGKILL does); stderr tail:" in lines
    )
    assert f"host {other}: fio stopped, as host {victim} failed" in lines
    assert not fio_processes(other_job) and not fio_processes(victim_job)
    assert not manifest_path.exists()
    # what the stopped fio wrote is kept: it ran a part of its 120 s
    text = (manifest_path.parent / f"a1/{other}.json").read_text()
    assert text.startswith("\nfio: terminating on signal 15\n")
    report = json.loads(text[text.index("{") :])
    assert report["jobs"][0]["job_runtime"] < 120_000


def tagged_processes(text: str) -> list[int]:
    """Processes whose environment carries the session guard's tag and whose command line
    contains text (the SSH hosts are loopback addresses: their processes are visible here)."""
    tag = f"{TOOL_TAG_VARIABLE}=".encode()
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError):  # processes come and go while we look
            tagged = any(
                line.startswith(tag) for line in (entry / "environ").read_bytes().split(b"\0")
            )
            if tagged and text.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


def test_fios_main_process_killed_on_an_ssh_host_stops_its_job_process_and_the_run(
    ssh_hosts, tmp_path
):
    """fio's main process alone SIGKILLed on one of two SSH hosts: its job process, in a
    session of its own, held the SSH session's output open, so the run waited out the runtime,
    or, killed before it started the job, its time limit and 60 s (the job process waits for
    its main process for ever). The host's session guard now stops what carries its tag: the
    run fails then and stops the other host's fio."""
    spec, job, victim, other = two_host_fio_run(ssh_hosts, tmp_path, 30, 60)
    victim_job = f"{tmp_path}/w-{victim}/e/r/it1/{victim}/a1/job.fio"
    fio_seen: dict[int, int] = {}
    tagged: list[int] = []

    def kill_the_victims_main_process():  # as a crash of fio's main process alone
        processes = wait_for(lambda: main_and_job(fio_processes(victim_job)), "fio's job process")
        fio_seen.update(processes)
        tagged.extend(tagged_processes(victim_job))
        (main,) = [pid for pid, parent in processes.items() if parent not in processes]
        os.kill(main, signal.SIGKILL)

    manifest_path = tmp_path / "raw/r/it1/run.json"
    lines = failed_with_victim_killed(spec, job, manifest_path, kill_the_victims_main_process)
    assert (
        f"host {victim}: fio exited 137 (as a tool killed by SIGKILL does); stderr tail:" in lines
    )
    (main,) = [pid for pid, parent in fio_seen.items() if parent not in fio_seen]
    (job_process,) = set(fio_seen) - {main}
    assert {main, job_process} < set(tagged)  # and `timeout`, which started fio
    guard_said = f"storbench-session: the tool ended (exit 137) leaving processes {job_process};"
    assert f"    {guard_said} stopping them" in lines
    assert f"host {other}: fio stopped, as host {victim} failed" in lines
    assert not tagged_processes(str(tmp_path)) and not fio_processes(str(tmp_path))
    assert not manifest_path.exists()
    kept = manifest_path.parent / "a1"
    # the job process stopped by the guard said so: it did not run out its runtime
    assert (kept / f"{victim}.json").read_text() == "\nfio: terminating on signal 15\n"
    assert guard_said in (kept / f"{victim}.stderr").read_text()
    text = (kept / f"{other}.json").read_text()
    assert text.startswith("\nfio: terminating on signal 15\n")
    report = json.loads(text[text.index("{") :])
    assert report["jobs"][0]["job_runtime"] < 30_000
