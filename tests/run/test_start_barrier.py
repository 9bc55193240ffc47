"""A standalone run's synchronized start: every host armed at a barrier, then released at one
instant; each host's own start stamp recorded, and the skew. Real fio, real shells; a host
that fails before the start makes the run fail without leaving the others waiting."""

from __future__ import annotations

import datetime
import functools
import json
import shlex
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from storbench.analysis import ingest
from storbench.core import start_hook
from storbench.core.model import Host
from storbench.core.specs import Manifest, RunSpec
from storbench.hosts.transport import LocalTransport
from storbench.run import engine, start, start_margin
from storbench.run.attempt import RunError
from storbench.tools import get_tool
from tests.sshd import lab_host

SPREAD_BOUND_S = 0.5  # a correctness bound (hosts start together), not a timing benchmark
RUN_BOUND_S = 60.0  # a run that waits longer than this for a failed host hangs
# leads long enough for a loaded 2-core machine to set up before the release: order, not speed
LEAD_S = 1.0
FIO_LEAD_S = 2.0
GO_AFTER_S = 0.3  # an early release's instant, after the line is sent


HOOK_LINE = f"exec_prerun={start_hook.COMMAND}\n"


def fio_run(tmp_path: Path, hosts: list[dict], *, held: bool = False) -> tuple[RunSpec, Path]:
    """A 1 MiB write; held: its job holds the start in exec_prerun, as rendered jobs do."""
    job = tmp_path / "job.fio"
    hook = HOOK_LINE if held else ""
    job.write_text(f"[w]\ndirectory={tmp_path / 'target'}\nrw=write\nbs=64k\nsize=1m\n{hook}")
    spec = RunSpec(
        experiment="e",
        run_id="r",
        tool="fio",
        target={"name": "t", "type": "directory", "path": str(tmp_path / "target")},
        params={},
        hosts=tuple(hosts),
        timeout_s=60,
    )
    return spec, job


def local_hosts(tmp_path: Path, names: list[str]) -> list[dict]:
    return [{"name": name, "transport": "local", "workdir": str(tmp_path / "w")} for name in names]


def moment(iso: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(iso)


def assert_started_together(manifest: Manifest) -> None:
    starts = [moment(h["start_time"]) for h in manifest.hosts]
    assert {h["start_time_source"] for h in manifest.hosts} == {"host"}
    assert manifest.release_time is not None
    release = moment(manifest.release_time)
    assert all(release <= started for started in starts)
    assert all(moment(h["launch_time"]) <= release for h in manifest.hosts)
    spread = (max(starts) - min(starts)).total_seconds()
    assert manifest.start_skew_s == pytest.approx(spread, abs=0.001)
    assert manifest.start_skew_s < SPREAD_BOUND_S


@pytest.mark.parametrize("held", [False, True], ids=["wrapper", "held-by-fio"])
def test_local_hosts_start_at_the_release_and_record_their_own_start(tmp_path, held):
    names = ["h1", "h2", "h3"]
    spec, job = fio_run(tmp_path, local_hosts(tmp_path, names), held=held)
    manifest_path = tmp_path / "results/e/raw/r/it1/run.json"
    manifest = engine.run_iteration(spec, 1, str(job), str(manifest_path))

    assert_started_together(manifest)
    if held:  # released the moment fio waited at its hook on every host, not at a deadline
        assert_released_when_all_waited(manifest)
    assert json.loads(manifest_path.read_text())["start_skew_s"] == manifest.start_skew_s
    raw = manifest_path.parent / "a1"
    for host in manifest.hosts:
        assert host["exit_code"] == 0
        assert host["command"][0] == "env"  # the tool's own command, not the start wrapper
        written = json.loads((raw / host["output"]).read_text())["jobs"][0]["write"]["io_bytes"]
        assert written == 1 << 20
        assert start.STAMP_PREFIX not in (raw / host["stderr"]).read_text()  # taken out
    assert not list(raw.glob("*.prerun.txt"))  # the hook's empty output files, removed
    rows, _ = ingest.manifest_rows(manifest, manifest_path.parent)
    assert {row["start_skew_s"] for row in rows} == {manifest.start_skew_s}
    host_starts = {row["host"]: row["start_time"] for row in rows if row["host"] in names}
    assert host_starts == {h["name"]: h["start_time"] for h in manifest.hosts}
    if held:
        assert_learns_the_set_up_time(spec, job, manifest, tmp_path)


def assert_released_when_all_waited(manifest: Manifest) -> None:
    """A held start on hosts with bash 5 goes when the last host's hooks wait (EarlyRelease),
    long before its deadline (first run: LISTENING_DEADLINE_S after the launch)."""
    release = moment(manifest.release_time)
    assert all(moment(h["armed_time"]) <= release for h in manifest.hosts)
    launched = max(moment(h["launch_time"]) for h in manifest.hosts)
    assert (release - launched).total_seconds() < start.LISTENING_DEADLINE_S / 4
    assert get_tool("fio").start_setup_s > 0  # the time-based release's guess, not used


def assert_learns_the_set_up_time(spec: RunSpec, job: Path, first: Manifest, tmp_path: Path):
    """Each host's arrival at fio's hook is recorded; the slowest host's set-up time is
    remembered for the experiment, and the next run is released at least that long after its
    launch (the launch stamps come a moment after the release is picked: 50 ms allowed)."""
    for host in first.hosts:
        assert moment(host["launch_time"]) < moment(host["armed_time"])
        assert moment(host["armed_time"]) <= moment(host["start_time"])
        assert host["setup_s"] > 0  # fio's exec and set-up, at least
    slowest = max(host["setup_s"] for host in first.hosts)
    (history,) = (tmp_path / "results/e/.start-setup").glob("fio-*.json")  # the experiment's
    assert json.loads(history.read_text()) == {"setup_s": [slowest]}
    learned = start_margin.learned_s(history)
    assert learned is not None and learned > slowest
    second_path = tmp_path / "results/e/raw/r/it2/run.json"
    second = engine.run_iteration(spec, 2, str(job), str(second_path))
    assert second.release_time is not None
    margin = moment(second.release_time) - max(moment(h["launch_time"]) for h in second.hosts)
    assert margin.total_seconds() >= learned - 0.05
    assert json.loads(history.read_text())["setup_s"][0] == slowest
    assert len(json.loads(history.read_text())["setup_s"]) == 2


@pytest.fixture
def silent_port():
    """A port that accepts connections and never speaks SSH (a hung host's banner)."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        yield silent.getsockname()[1]


@pytest.mark.parametrize("failing", ["silent", "nofolder"])
def test_a_host_failing_before_the_start_fails_the_run_without_hanging(
    tmp_path, silent_port, failing
):
    """'silent' fails while the others wait armed (its SSH banner times out after 1 s);
    'nofolder' fails at once (its lock folder cannot be made)."""
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    bad = {
        "silent": {"name": "silent", "transport": "ssh", "address": "127.0.0.1",
                   "port": silent_port, "connect_timeout": 1.0,
                   "workdir": str(tmp_path / "remote")},
        "nofolder": {"name": "nofolder", "transport": "local", "workdir": str(not_a_folder)},
    }[failing]  # fmt: skip
    spec, _ = fio_run(tmp_path, [*local_hosts(tmp_path, ["h1", "h2"]), bad])
    raw = tmp_path / "raw"
    message = str(run_standalone_bounded(spec, raw))
    assert f"host {failing}: " in message
    for waiting in ("h1", "h2"):
        assert (
            f"host {waiting}: not started: host {failing} failed before the synchronized start"
            in message
        )
        assert not (raw / f"{waiting}.json").exists()  # fio never ran
        if failing == "silent":  # prepared, so it waited armed until the abort
            assert (raw / f"{waiting}.version").exists()


def test_a_start_hook_that_fails_fails_the_run_though_fio_exits_0(tmp_path):
    """fio skips the I/O of a job whose exec_prerun fails, and exits 0: no stamp is a failure."""
    spec, job = fio_run(tmp_path, local_hosts(tmp_path, ["h1", "h2"]))
    job.write_text(job.read_text() + f'exec_prerun=test -z "${start_hook.VARIABLE}"\n')
    with pytest.raises(RunError) as failure:
        engine.run_iteration(spec, 1, str(job), str(tmp_path / "results/it1/run.json"))
    message = str(failure.value)
    for host in ("h1", "h2"):
        assert f"host {host}: the job's start hook ({start_hook.COMMAND}) left no start" in message
        output = json.loads((tmp_path / f"results/it1/a1/{host}.json").read_text())
        assert output["jobs"][0]["write"]["io_bytes"] == 0  # kept: what fio did, nothing


def run_standalone_bounded(spec: RunSpec, raw_dir: Path) -> BaseException:
    """The run's failure, from a thread that must end within RUN_BOUND_S."""
    raw_dir.mkdir(parents=True)
    job = f"[w]\ndirectory={raw_dir}\nrw=write\nsize=1m\n"
    texts = {host["name"]: job for host in spec.hosts}
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            engine._run_standalone(spec, 1, 1, raw_dir, texts, None)
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(RUN_BOUND_S)
    assert not thread.is_alive(), "the run still waits for a host that failed"
    (failure,) = outcome
    assert isinstance(failure, RunError)
    return failure


AWKWARD_ARGV = ["it's", 'a "quoted" word', "two  spaces", "$HOME", "back\\slash", "*", ""]


def test_the_start_wrapper_passes_every_argument_as_it_is_and_stamps_its_start(tmp_path):
    release = time.time() + LEAD_S
    wrapped = start.at_release(["printf", "%s\\n", *AWKWARD_ARGV], release)
    transport = LocalTransport(Host(name="local", transport="local"))
    # as the SSH transport sends it: one command line for the host's shell
    rc, out, err = transport.shell(shlex.join(wrapped), timeout_s=30)
    assert rc == 0
    assert out.split("\n")[:-1] == AWKWARD_ARGV
    armed_line, stamp_line = err.splitlines()
    stamp = float(stamp_line.removeprefix(start.STAMP_PREFIX))
    assert release <= stamp < release + SPREAD_BOUND_S
    assert float(armed_line.removeprefix(start.ARMED_PREFIX)) < release  # its wait began
    # as the local transport starts it: an argv (a release long past: at once)
    done = subprocess.run(
        start.at_release(["printf", "%s\\n", *AWKWARD_ARGV], 0), capture_output=True, text=True
    )
    assert done.stdout.split("\n")[:-1] == AWKWARD_ARGV


def host_programs(tmp_path: Path, programs: dict[str, str]) -> str:
    """A PATH of only these programs: {name: a path to link to, or a script's text}."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, program in programs.items():
        if program.startswith("#!"):
            (bin_dir / name).write_text(program)
            (bin_dir / name).chmod(0o755)
        else:
            (bin_dir / name).symlink_to(program)
    return str(bin_dir)


def started(path: str, release: float, argv: list[str]) -> tuple[str, str]:
    """(stdout, the stamp's digits) of argv run by the start wrapper on a host with PATH."""
    command = ["/usr/bin/env", f"PATH={path}", *start.at_release(argv, release)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    armed_line, stamp_line = done.stderr.splitlines()
    armed = armed_line.removeprefix(start.ARMED_PREFIX)
    stamp = stamp_line.removeprefix(start.STAMP_PREFIX)
    assert len(armed.partition(".")[2]) == len(stamp.partition(".")[2])  # the same clock
    assert float(armed) <= float(stamp)
    return done.stdout, stamp


def test_with_bash_5_the_host_waits_and_stamps_with_builtins_only(tmp_path):
    """No date, sleep or awk on the host: bash's clock and read -t do the wait, and the
    stamp has bash's microseconds."""
    path = host_programs(tmp_path, {"sh": "/bin/sh", "bash": "/bin/bash", "echo": "/bin/echo"})
    release = time.time() + LEAD_S
    out, stamp = started(path, release, ["echo", *AWKWARD_ARGV])
    assert out == " ".join(AWKWARD_ARGV) + "\n"
    assert len(stamp.partition(".")[2]) == 6
    assert release <= float(stamp) < release + SPREAD_BOUND_S
    # a release long past whose digits start with zeros (not octal to bash): at once
    assert started(path, 0.0008, ["echo", "ran"])[0] == "ran\n"


PORTABLE_TOOLS = {
    "sh": "/bin/sh", "awk": "/usr/bin/awk", "sleep": "/bin/sleep", "echo": "/bin/echo",
}  # fmt: skip
DATE_WITHOUT_NANOSECONDS = """#!/bin/sh
case "$1" in
  *%N*) echo "$(/bin/date +%s).N" ;;
  *) exec /bin/date "$@" ;;
esac
"""


def test_without_bash_the_host_waits_with_date_and_sleep(tmp_path):
    path = host_programs(tmp_path, {**PORTABLE_TOOLS, "date": "/bin/date"})
    release = time.time() + LEAD_S
    out, stamp = started(path, release, ["echo", *AWKWARD_ARGV])
    assert out == " ".join(AWKWARD_ARGV) + "\n"
    assert len(stamp.partition(".")[2]) == 9  # date's nanoseconds
    assert release <= float(stamp) < release + SPREAD_BOUND_S


def test_a_bash_without_its_clock_hands_over_to_the_portable_wait(tmp_path):
    """A `bash` that is not bash 5 (here dash under that name) runs the portable wait."""
    not_bash_5 = '#!/bin/sh\nexec /bin/dash "$@"\n'
    path = host_programs(tmp_path, {**PORTABLE_TOOLS, "date": "/bin/date", "bash": not_bash_5})
    release = time.time() + LEAD_S
    out, stamp = started(path, release, ["echo", "ran"])
    assert out == "ran\n"
    assert len(stamp.partition(".")[2]) == 9
    assert float(stamp) >= release


def test_without_nanoseconds_the_host_waits_in_whole_seconds(tmp_path):
    """A date without %N (it prints a literal N) still starts the tool, stamped in seconds."""
    path = host_programs(tmp_path, {**PORTABLE_TOOLS, "date": DATE_WITHOUT_NANOSECONDS})
    release = time.time() + LEAD_S
    out, stamp = started(path, release, ["echo", "ran"])
    assert out == "ran\n"
    assert float(stamp) == int(stamp) and float(stamp) >= int(release)


def test_the_probe_goes_through_the_start_wrapper_and_reads_the_hosts_clock(tmp_path, monkeypatch):
    """The probe runs the wrapper the tool will run. On the controller's own clock the
    offset is within half the round trip (plus the millisecond it is rounded to): the
    midpoint estimate's bound, whatever the machine's load."""
    transport = LocalTransport(Host(name="local", transport="local"))
    round_trip_s, offset_s, _ = start.probe(transport)
    assert round_trip_s > 0
    assert offset_s is not None and abs(offset_s) <= round_trip_s / 2 + 0.001
    programs = {**PORTABLE_TOOLS, "true": "/bin/true", "date": DATE_WITHOUT_NANOSECONDS}
    monkeypatch.setenv("PATH", host_programs(tmp_path, programs))
    assert start.probe(transport)[1] is None  # no nanoseconds, no offset


def test_every_stamp_is_taken_out_the_earliest_start_and_the_latest_arrival_count(tmp_path):
    stderr = tmp_path / "h.stderr"
    starts = [f"{start.STAMP_PREFIX}1700000000.{n}00000\n" for n in (7, 2, 5)]
    arrivals = [f"{start.ARMED_PREFIX}1699999999.{n}00000\n" for n in (1, 4, 3)]
    stderr.write_text(
        f"{arrivals[0]}{arrivals[1]}{starts[0]}{starts[1]}fio: a warning\n{arrivals[2]}"
        f"{starts[2]}storbench-not-a-stamp\n"
    )
    assert start.take_stamps(stderr) == (1700000000.2, 1699999999.4)
    assert stderr.read_text() == "fio: a warning\nstorbench-not-a-stamp\n"


def test_the_stamp_is_taken_out_of_the_stderr_file(tmp_path):
    stderr = tmp_path / "h.stderr"
    stderr.write_text(f"login noise\n{start.STAMP_PREFIX}1700000000.250000000\nfio: a warning\n")
    assert start.take_stamps(stderr) == (1700000000.25, None)
    assert stderr.read_text() == "login noise\nfio: a warning\n"
    assert start.take_stamps(stderr) == (None, None)  # nothing left to take
    assert stderr.read_text() == "login noise\nfio: a warning\n"
    assert start.iso(1700000000.25) == "2023-11-14T22:13:20.250+00:00"


@pytest.mark.parametrize(
    ("held", "connection"),
    [(False, "per-step"), (True, "per-step"), (True, "persistent")],
    ids=["wrapper", "held-by-fio", "held-by-fio-persistent"],
)
def test_three_ssh_hosts_start_together(ssh_lab, tmp_path, held, connection):
    """Held, each host's session guard passes the early release to its hooks (paramiko's
    channel per step, or the ssh client's stdin on the persistent connection)."""
    hosts = [
        {**lab_host(ssh_lab, server, tmp_path / "remote" / server.address).to_dict(),
         "keep_attempts": 1, "connection": connection}
        for server in ssh_lab.servers[:3]
    ]  # fmt: skip
    spec, job = fio_run(tmp_path, hosts, held=held)
    manifest_path = tmp_path / "results/it1/run.json"
    manifest = engine.run_iteration(spec, 1, str(job), str(manifest_path))
    assert_started_together(manifest)
    if held:
        assert_released_when_all_waited(manifest)
        assert "storbench-" not in (manifest_path.parent / "a1" / "127.0.0.2.stderr").read_text()
    assert all(h["exit_code"] == 0 for h in manifest.hosts)
    for host in manifest.hosts:
        output = json.loads((manifest_path.parent / "a1" / host["output"]).read_text())
        assert output["jobs"][0]["write"]["io_bytes"] == 1 << 20
    # the hook's output file is in the host's work folder (kept: keep_attempts), not its home
    hook_outputs = list((tmp_path / "remote").rglob("a1/w.prerun.txt"))
    assert len(hook_outputs) == (3 if held else 0)


def held_fio(
    path: str, tmp_path: Path, release: float, numjobs: int, fifo: str | None = None
) -> tuple[Path, Path]:
    """fio launched now on a host with PATH, its job held until release; (its json, stderr)."""
    job = tmp_path / "held.fio"
    job.write_text(
        f"[held]\ndirectory={tmp_path}\nrw=write\nbs=64k\nsize=256k\nnumjobs={numjobs}\n"
        + HOOK_LINE
    )
    output, stderr = tmp_path / "held.json", tmp_path / "held.stderr"
    argv = ["fio", str(job), "--output-format=json", f"--output={output}"]
    held = start.held_at_release(argv, release, str(tmp_path), fifo)
    command = ["/usr/bin/env", f"PATH={path}", *held]
    with open(stderr, "wb") as err:
        done = subprocess.run(command, stderr=err, timeout=60)
    assert done.returncode == 0, stderr.read_text()
    return output, stderr


@pytest.mark.parametrize("shell", ["bash", "portable"])
def test_fio_launched_at_once_holds_its_jobs_until_the_release(tmp_path, shell):
    """Every job process of fio stamps its start at or after the release, on fio's stderr;
    the stamps are taken out (the earliest counts) and fio's own output is whole."""
    programs = {**PORTABLE_TOOLS, "fio": "/usr/bin/fio", "date": "/bin/date"}
    if shell == "bash":
        programs = {"sh": "/bin/sh", "bash": "/bin/bash", "fio": "/usr/bin/fio"}
    release = time.time() + FIO_LEAD_S
    output, stderr = held_fio(host_programs(tmp_path, programs), tmp_path, release, numjobs=2)
    lines = stderr.read_text().splitlines()
    stamps = [line.removeprefix(start.STAMP_PREFIX) for line in lines if "start" in line]
    arrivals = [line.removeprefix(start.ARMED_PREFIX) for line in lines if "armed" in line]
    assert len(stamps) == len(arrivals) == 2  # one per job process
    assert max(float(arrived) for arrived in arrivals) < release  # set up before it
    assert {len(stamp.partition(".")[2]) for stamp in stamps} == {6 if shell == "bash" else 9}
    assert all(release <= float(stamp) < release + SPREAD_BOUND_S for stamp in stamps)
    assert start.take_stamps(stderr)[0] == min(float(stamp) for stamp in stamps)
    assert "storbench-" not in stderr.read_text()
    jobs = json.loads(output.read_text())["jobs"]
    assert [job["write"]["io_bytes"] for job in jobs] == [256 << 10] * 2
    assert (tmp_path / "held.prerun.txt").read_text() == ""  # the stamps went to stderr


@pytest.mark.parametrize("shell", ["bash", "portable"])
def test_fio_held_on_a_fifo_goes_when_released_and_not_before(tmp_path, shell):
    """Each of fio's job processes, waiting at its hook, says it listens (bash 5); released
    through the FIFO to go at an instant, all start at that instant (not when the line came),
    long before the release time. A portable wait cannot listen: it says nothing and goes
    at the time."""
    programs = {**PORTABLE_TOOLS, "fio": "/usr/bin/fio", "date": "/bin/date", "mkfifo":
                "/usr/bin/mkfifo", "rm": "/bin/rm"}  # fmt: skip
    if shell == "bash":
        programs = {"sh": "/bin/sh", "bash": "/bin/bash", "fio": "/usr/bin/fio",
                    "mkfifo": "/usr/bin/mkfifo", "rm": "/bin/rm"}  # fmt: skip
    fifo = start.release_fifo(str(tmp_path), "h1")
    release = time.time() + (30 if shell == "bash" else 1.0)
    stderr = tmp_path / "held.stderr"
    released_at: list[float] = []

    def release_when_listening() -> None:
        deadline = time.monotonic() + RUN_BOUND_S
        while time.monotonic() < deadline:
            if stderr.exists() and stderr.read_text().count(start.LISTENING_LINE) == 2:
                released_at.append(time.time() + GO_AFTER_S)  # the instant they go at
                LocalTransport(Host(name="h1", transport="local")).release(fifo, released_at[0])
                return
            time.sleep(0.01)

    releaser = threading.Thread(target=release_when_listening, daemon=True)
    if shell == "bash":
        releaser.start()
    output, stderr = held_fio(host_programs(tmp_path, programs), tmp_path, release, 2, fifo)
    if shell == "bash":
        releaser.join(RUN_BOUND_S)
    lines = stderr.read_text().splitlines()
    stamps = [float(line.removeprefix(start.STAMP_PREFIX)) for line in lines if "start" in line]
    assert len(stamps) == 2
    if shell == "bash":
        (released,) = released_at
        assert all(released <= stamp < released + SPREAD_BOUND_S for stamp in stamps)
        arrivals = [float(line.removeprefix(start.ARMED_PREFIX)) for line in lines
                    if "armed" in line]  # fmt: skip
        assert max(arrivals) < released - GO_AFTER_S  # listening before the line was sent
        assert max(stamps) < release - 20  # not the time: the FIFO
    else:
        assert start.LISTENING_LINE not in stderr.read_text()
        assert all(release <= stamp < release + SPREAD_BOUND_S for stamp in stamps)
    start.take_stamps(stderr)
    assert "storbench-" not in stderr.read_text()  # the listening lines are taken out too
    jobs = json.loads(output.read_text())["jobs"]
    assert [job["write"]["io_bytes"] for job in jobs] == [256 << 10] * 2


def arm_all(barrier: start.StartBarrier, probes: dict[str, object]) -> dict[str, float]:
    """Each host's release time, every host arming from its own thread with its probe."""
    released: dict[str, float] = {}

    def arm(host: str, probe) -> None:
        released[host] = barrier.arm(host, probe)

    threads = [threading.Thread(target=arm, args=item) for item in probes.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(RUN_BOUND_S)
    assert not any(thread.is_alive() for thread in threads)
    return released


def test_hosts_take_their_probe_together_once_every_host_is_prepared():
    barrier = start.StartBarrier(2)
    late_host_arrived = threading.Event()
    seen_by_early_probe: list[bool] = []

    def early_probe() -> float:
        seen_by_early_probe.append(late_host_arrived.is_set())
        return 0.01

    def late_probe() -> float:
        return 0.01

    def late_arm() -> float:
        time.sleep(0.3)  # still preparing while the early host waits
        late_host_arrived.set()
        return barrier.arm("late", late_probe)

    late = threading.Thread(target=late_arm)
    late.start()
    early = barrier.arm("early", early_probe)
    late.join(RUN_BOUND_S)
    assert seen_by_early_probe == [True]
    assert early == barrier.release_epoch


def test_the_margin_comes_from_the_slowest_probe_taken_together():
    barrier = start.StartBarrier(3)
    released = arm_all(barrier, {"a": lambda: 0.3, "b": lambda: 0.1, "c": lambda: 0.05})
    assert barrier.margin_s == pytest.approx(2 * 0.3 + start.MARGIN_FLOOR_S)
    assert set(released.values()) == {barrier.release_epoch}
    capped = start.StartBarrier(2)
    arm_all(capped, {"a": lambda: 30.0, "b": lambda: 0.1})
    assert capped.margin_s == start.MARGIN_CAP_S
    # a held start leaves the tool its set-up time on top, beyond the cap too
    held = start.StartBarrier(2, setup_s=0.5)
    arm_all(held, {"a": lambda: 30.0, "b": lambda: 0.1})
    assert held.margin_s == start.MARGIN_CAP_S + 0.5
    # a set-up time learned from the launch on includes the launch: the longer of the two
    for learned_s, margin_s in ((0.3, 2 * 0.1 + start.MARGIN_FLOOR_S), (9.0, 9.0)):
        learned = start.StartBarrier(2, setup_s=learned_s, learned=True)
        arm_all(learned, {"a": lambda: 0.1, "b": lambda: 0.05})
        assert learned.margin_s == pytest.approx(margin_s)
        assert not learned.listening


def test_a_listening_start_sets_its_time_as_a_deadline_unless_a_host_cannot_listen():
    """Released when every host waits, its time is only a deadline; a later run, with a
    set-up time learned, is released for the learned instant at the earliest. A host whose
    probe ran the portable wait (no bash 5) cannot be released early: then nobody is, and
    the time is the release."""
    first = start.StartBarrier(2, setup_s=0.5, listen=True)
    arm_all(first, {"a": lambda: 0.1, "b": lambda: 0.05})
    assert first.listening and first.margin_s == start.LISTENING_DEADLINE_S
    assert first.learned_epoch is None
    later = start.StartBarrier(2, setup_s=9.0, learned=True, listen=True)
    picked = time.time()
    arm_all(later, {"a": lambda: 0.1, "b": lambda: 0.05})
    assert later.listening and later.margin_s == start.LISTENING_DEADLINE_S
    assert later.learned_epoch is not None
    assert picked + 9.0 <= later.learned_epoch <= time.time() + 9.0  # the learned time
    # every host waits before it: the release is sent now, for the learned instant
    assert later.release_early() == later.learned_epoch == later.release_epoch
    assert later.release_early() is None  # not later than it already is
    slow = start.StartBarrier(2, setup_s=0.3, learned=True, listen=True)
    arm_all(slow, {"a": lambda: 0.1, "b": lambda: 0.05})
    assert slow.learned_epoch is not None
    time.sleep(0.35)  # a host arrives after the learned instant: the probes' margin from then
    before = time.time()
    at = slow.release_early()
    assert at is not None and at >= before + slow.delivery_s > slow.learned_epoch
    mixed = start.StartBarrier(2, setup_s=0.5, listen=True)

    def portable_probe() -> float:
        mixed.imprecise("b")
        return 0.05

    arm_all(mixed, {"a": lambda: 0.1, "b": portable_probe})
    assert not mixed.listening and mixed.margin_s == pytest.approx(2 * 0.1 + 0.2 + 0.5)
    assert mixed.release_early() is None  # nothing to release early
    # released early: the probes' margin from now, the time the release takes to get there
    assert first.delivery_s == pytest.approx(2 * 0.1 + start.MARGIN_FLOOR_S)
    before = time.time()
    at = first.release_early()
    assert at is not None and first.release_epoch == at
    assert before + first.delivery_s <= at <= time.time() + first.delivery_s
    assert first.release_early() is None  # not later than it already is


def test_an_interrupted_listening_start_releases_no_host_early():
    """Ctrl-C while the hooks wait: the early release must not send a start to the hosts
    the interrupt's kill has not reached yet."""
    barrier = start.StartBarrier(2, setup_s=0.5, listen=True)
    arm_all(barrier, {"a": lambda: 0.1, "b": lambda: 0.05})
    deadline = barrier.release_epoch
    assert barrier.listening and deadline is not None
    barrier.abort("the run was interrupted")
    assert barrier.release_early() is None and barrier.release_epoch == deadline


def test_the_probe_tells_the_precise_wait_from_the_portable_one(tmp_path, monkeypatch):
    transport = LocalTransport(Host(name="local", transport="local"))
    assert start.probe(transport)[2] is True  # this machine has bash 5
    monkeypatch.setenv("PATH", host_programs(tmp_path, {**PORTABLE_TOOLS, "true": "/bin/true",
                                                        "date": "/bin/date"}))  # fmt: skip
    assert start.probe(transport)[2] is False


def test_a_host_whose_probe_fails_stops_the_others_before_the_start():
    barrier = start.StartBarrier(2)

    def failing_probe() -> float:
        raise OSError("host b: connection lost")

    def arm_b() -> None:
        try:
            barrier.arm("b", failing_probe)
        except OSError:
            barrier.leave("b", "host b failed before the synchronized start")

    other = threading.Thread(target=arm_b)
    other.start()
    with pytest.raises(start.StartAborted, match="host b failed before the synchronized start"):
        barrier.arm("a", lambda: 0.01)
    other.join(RUN_BOUND_S)
    assert barrier.release_epoch is None


def test_a_service_job_holds_its_start_in_the_script_left_in_the_services_folder(tmp_path):
    """Service mode: fio runs `sh storbench-start.sh <release>` from its working folder (the
    service's); the stamps go to the hook's output file, which the run reads back."""
    (tmp_path / start_hook.SCRIPT_NAME).write_text(start.hook_file_text())
    release = time.time() + FIO_LEAD_S
    hook = start_hook.SERVICE_COMMAND.replace(start_hook.RELEASE, f"{release:.6f}")
    job = tmp_path / "service.fio"
    job.write_text(
        f"[held]\ndirectory={tmp_path}\nrw=write\nbs=64k\nsize=256k\nnumjobs=2\n"
        f"exec_prerun={hook}\n"
    )
    output = tmp_path / "held.json"
    command = ["fio", str(job), "--output-format=json", f"--output={output}"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    saved = (tmp_path / "held.prerun.txt").read_text()
    started_at, armed_at = start.stamps_in(saved)
    assert started_at is not None and armed_at is not None
    assert armed_at < release <= started_at < release + SPREAD_BOUND_S
    # both clones write held.prerun.txt (fio names it after the job), each truncating it
    assert saved.count(start.STAMP_PREFIX) in (1, 2)
    jobs = json.loads(output.read_text())["jobs"]
    assert [job["write"]["io_bytes"] for job in jobs] == [256 << 10] * 2


def test_the_early_release_waits_for_every_host_to_listen_or_be_gone(tmp_path):
    """Released (each host's release called once, with the instant to go at: the probes'
    margin from now) only once every host's stderr says it listens, or its tool has ended (a
    failed host no longer holds the others until the deadline)."""
    barrier = start.StartBarrier(3, setup_s=0.5, listen=True)
    arm_all(barrier, {"a": lambda: 0.01, "b": lambda: 0.01, "c": lambda: 0.01})
    deadline = barrier.release_epoch
    early = start.EarlyRelease(barrier, 3)
    calls: list[tuple[str, float]] = []
    for host in ("a", "b", "c"):
        release = functools.partial(lambda name, at: calls.append((name, at)), host)
        early.expect(host, tmp_path / f"{host}.stderr", release)
    watcher = threading.Thread(target=early.watch)
    watcher.start()
    (tmp_path / "a.stderr").write_text(f"fio: noise\n{start.LISTENING_LINE}\n")
    (tmp_path / "b.stderr").write_text(f"{start.ARMED_PREFIX}1.000000\n")  # armed, not yet
    time.sleep(10 * start.POLL_S)
    assert calls == [] and barrier.release_epoch == deadline
    (tmp_path / "b.stderr").write_text(f"{start.ARMED_PREFIX}1.000000\n{start.LISTENING_LINE}\n")
    time.sleep(10 * start.POLL_S)
    assert calls == []  # c neither listens nor is gone
    before = time.time()
    early.gone("c")
    watcher.join(RUN_BOUND_S)
    assert sorted(name for name, _ in calls) == ["a", "b", "c"] and early.released
    assert {at for _, at in calls} == {barrier.release_epoch}
    assert before + barrier.delivery_s <= barrier.release_epoch < deadline


def test_a_run_whose_set_up_outgrows_the_learned_time_waits_for_its_last_host(tmp_path):
    """A run with a set-up time learned is released for that instant only if every host's
    hook waits by then. Host b's fio reaches its hook 1.5 s later than the learned time
    allows (startdelay), as 256 loopback hosts' fio did (18 s later, the last run's parse on
    the same cores): b is waited for. Released at the learned time, b started 1.5 s late."""
    names = ["a", "b"]
    spec, job = fio_run(tmp_path, local_hosts(tmp_path, names), held=True)
    slow = tmp_path / "slow.fio"
    slow.write_text(job.read_text().replace("[w]\n", "[w]\nstartdelay=1500ms\n"))
    manifest_path = tmp_path / "results/e/raw/r/it1/run.json"
    history = start_margin.history_path(manifest_path.parent, "fio", names)
    start_margin.remember(history, 0.3)  # what fio's set-up took on the earlier runs
    learned = start_margin.learned_s(history)
    assert learned is not None and learned < 0.5
    jobs = {"a": str(job), "b": str(slow)}
    manifest = engine.run_iteration(spec, 1, jobs, str(manifest_path))
    assert_started_together(manifest)
    assert_released_when_all_waited(manifest)
    by_name = {host["name"]: host for host in manifest.hosts}
    assert by_name["b"]["setup_s"] > 1.5 > learned
    release = moment(manifest.release_time)
    assert (release - moment(by_name["b"]["launch_time"])).total_seconds() > 1.5
    assert json.loads(history.read_text())["setup_s"] == [0.3, by_name["b"]["setup_s"]]
