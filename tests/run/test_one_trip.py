"""A host's preparation in one shell round trip: each step's outcome read back apart, the
first failure stops the script and is reported naming the host and what failed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from storbench.core.model import Host
from storbench.hosts.transport import HostError, LocalTransport
from storbench.run import engine, one_trip, ready, target_lock
from storbench.tools import get_tool
from tests.run.test_start_barrier import fio_run, local_hosts


class CountingTransport(LocalTransport):
    """A local host that counts its shell round trips."""

    def __init__(self) -> None:
        super().__init__(Host(name="h1", transport="local"))
        self.scripts: list[str] = []

    def _shell(self, script: str, *, timeout_s: float):
        self.scripts.append(script)
        return super()._shell(script, timeout_s=timeout_s)


def test_steps_report_their_own_output_and_stop_at_the_first_failure():
    steps = one_trip.Steps()
    steps.add("first", "echo one; echo warned >&2; printf 'no newline'")
    steps.add("second", "echo two; exit 3")
    steps.add("third", "echo never")
    transport = CountingTransport()

    outcomes = one_trip.run(transport, steps, timeout_s=30)

    assert outcomes == {
        "first": one_trip.Outcome(0, "one\nno newline", "warned\n"),
        "second": one_trip.Outcome(3, "two\n", ""),
    }
    assert len(transport.scripts) == 1


def test_a_file_written_by_the_script_keeps_its_text_exactly(tmp_path):
    text = "[job]\nname='it''s' \"$HOME\" `date` \\n back\\slash\n\ttab\nlast line, no newline"
    path = tmp_path / "new/folder/job.fio"
    steps = one_trip.Steps()
    script = one_trip.write_file_script(text, str(path))
    assert script is not None
    assert str(path) not in script  # a job path is the marker of the tool's processes
    steps.add("job", script)

    assert one_trip.run(CountingTransport(), steps, timeout_s=30)["job"].rc == 0
    assert path.read_text() == text
    assert os.listdir(path.parent) == ["job.fio"]  # the temporary file was renamed
    assert one_trip.write_file_script("x" * (one_trip.MAX_INLINE_TEXT + 1), str(path)) is None


def test_a_script_that_does_not_finish_is_an_error():
    steps = one_trip.Steps()
    steps.add("gone", "kill -KILL $$")  # the script's own shell ($$ even in the subshell)
    with pytest.raises(one_trip.ScriptFailed, match=r"^exit -9: no message$"):
        one_trip.run(CountingTransport(), steps, timeout_s=30)


def test_a_run_preparation_is_one_round_trip_with_the_version_kept(tmp_path):
    transport = CountingTransport()
    preparation = ready.Preparation("h1")
    me = target_lock.holder(60)
    (lock,) = preparation.lock(str(tmp_path / "work"), {"name": "scratch"}, me)
    preparation.fresh_dir("workdir", str(tmp_path / "work/a1"))
    preparation.version(get_tool("fio"))

    outcomes = preparation.run(transport)

    assert len(transport.scripts) == 1
    assert json.loads(Path(lock).read_text())["pid"] == os.getpid()
    assert os.listdir(tmp_path / "work/a1") == []
    version = ready.keep_version(outcomes, tmp_path, "h1")
    assert version.startswith("fio-")
    assert (tmp_path / "h1.version").read_text().strip() == version
    target_lock.release(transport, [lock], me)
    assert not os.path.exists(lock)


def test_a_host_keeps_the_version_its_fio_printed_until_the_program_changes(tmp_path, monkeypatch):
    """A standalone run's preparation reads the version the host kept for the same program
    file (device, inode, size, mtime) in shell builtins; another fio file is asked again."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fio = bin_dir / "fio"
    shutil.copy(shutil.which("fio") or "fio", fio)  # the installed fio, in a file of its own
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    installed = subprocess.run([fio, "--version"], capture_output=True, text=True).stdout
    kept = tmp_path / "work" / "versions"

    def prepared_version() -> str:
        preparation = ready.Preparation("h1")
        preparation.version(get_tool("fio"), kept_in=str(kept))
        return preparation.run(CountingTransport())[ready.STEP_VERSION].out

    assert installed.startswith("fio-3.")
    assert prepared_version() == installed  # asked, and kept
    (entry,) = kept.iterdir()
    assert entry.name.startswith("fio.") and entry.read_text() == installed
    entry.write_text("fio-9.9-kept\n")
    assert prepared_version() == "fio-9.9-kept\n"  # read, not asked again
    fio.unlink()  # another fio installed in its place
    fio.write_text("#!/bin/sh\necho fio-10.0-new\n")
    fio.chmod(0o755)
    assert prepared_version() == "fio-10.0-new\n"
    assert len(list(kept.iterdir())) == 2


def test_a_host_keeps_gosbenchs_hashes_until_either_binary_changes(tmp_path, monkeypatch):
    """GOSBench's version is the sha256 of its two binaries (of the bytes written here): kept
    per identity of both files, so a run reads it back instead of hashing them again, and a
    new worker binary alone is hashed again."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("gosbench-server", "gosbench-worker"):
        (bin_dir / name).write_bytes(f"{name} build A\n".encode())
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    kept = tmp_path / "work" / "versions"

    def prepared_version() -> str:
        preparation = ready.Preparation("h1")
        preparation.version(get_tool("gosbench"), kept_in=str(kept))
        return preparation.run(CountingTransport())[ready.STEP_VERSION].out

    built_a = "gosbench server sha256:28bb79294424 worker sha256:18086daa2cb0\n"
    assert prepared_version() == built_a  # hashed, and kept
    (entry,) = kept.iterdir()
    assert entry.name.startswith("gosbench.") and entry.read_text() == built_a
    entry.write_text("gosbench kept\n")
    assert prepared_version() == "gosbench kept\n"  # read, not hashed again
    build_b = tmp_path / "gosbench-worker.new"  # another worker build moved in (go install)
    build_b.write_bytes(b"gosbench-worker build B\n")
    build_b.chmod(0o755)
    build_b.replace(bin_dir / "gosbench-worker")
    assert prepared_version() == "gosbench server sha256:28bb79294424 worker sha256:a74a002bed96\n"
    assert len(list(kept.iterdir())) == 2


def test_a_failed_step_names_the_host_and_what_failed(tmp_path):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    preparation = ready.Preparation("h1")
    preparation.mkdirs("target0", f"{not_a_folder}/target")
    preparation.version(get_tool("fio"))
    with pytest.raises(HostError) as caught:
        preparation.run(CountingTransport())
    assert str(caught.value).startswith(
        f"host h1: cannot create directory {not_a_folder}/target: mkdir: cannot create directory"
    )


def test_a_missing_tool_says_how_to_install_it(monkeypatch):
    tool = get_tool("fio")
    monkeypatch.setattr(type(tool), "version_command", lambda self: ["no-such-fio", "--version"])
    preparation = ready.Preparation("h1")
    preparation.version(tool)
    with pytest.raises(HostError) as caught:
        preparation.run(CountingTransport())
    message = str(caught.value)
    assert message.startswith("host h1: fio is not installed; install it: ")
    assert "('no-such-fio --version' exited 127: " in message


def test_a_lock_held_by_a_live_storbench_is_refused_and_a_gone_ones_taken_over(tmp_path):
    workdir = str(tmp_path / "work")
    lock = target_lock.lock_path(workdir, "h1", "scratch")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        os.makedirs(os.path.dirname(lock))
        held = json.loads(target_lock.holder(60))
        held |= {"pid": other.pid, "start_ticks": _start_ticks(other.pid)}
        with open(lock, "w") as handle:
            handle.write(json.dumps(held, sort_keys=True) + "\n")
        preparation = ready.Preparation("h1")
        preparation.lock(workdir, {"name": "scratch"}, target_lock.holder(60))
        preparation.mkdirs("workdir", f"{workdir}/a1")
        with pytest.raises(target_lock.TargetBusy) as caught:
            preparation.run(CountingTransport())
        assert f"host h1: target scratch is in use by storbench pid {other.pid} on" in str(
            caught.value
        )
        assert not os.path.exists(f"{workdir}/a1")  # nothing after the lock ran
    finally:
        other.kill()
        other.wait()
    transport = CountingTransport()
    me = target_lock.holder(60)
    preparation = ready.Preparation("h1")
    preparation.lock(workdir, {"name": "scratch"}, me)
    preparation.mkdirs("workdir", f"{workdir}/a1")
    preparation.run(transport)
    assert Path(lock).read_text() == me + "\n"
    assert os.path.isdir(f"{workdir}/a1")
    assert len(transport.scripts) == 3  # refused, the stale lock removed, run again


def _start_ticks(pid: int) -> str:
    """/proc stat field 22 (the fields after the name start at field 3)."""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rpartition(")")[2].split()[22 - 3]


def test_a_standalone_run_makes_three_shell_round_trips_per_host(tmp_path, monkeypatch):
    """Preparation, the start probe and the finish (lock release); fio itself is the run."""
    scripts: dict[str, list[str]] = {}
    shell = LocalTransport._shell

    def counted(self, script: str, *, timeout_s: float):
        scripts.setdefault(self.spec.name, []).append(script)
        return shell(self, script, timeout_s=timeout_s)

    monkeypatch.setattr(LocalTransport, "_shell", counted)
    spec, job = fio_run(tmp_path, local_hosts(tmp_path, ["h1", "h2"]))
    manifest = engine.run_iteration(spec, 1, str(job), str(tmp_path / "results/it1/run.json"))

    assert {name: len(sent) for name, sent in scripts.items()} == {"h1": 3, "h2": 3}
    assert all(host["tool_version"].startswith("fio-") for host in manifest.hosts)
    assert not list((tmp_path / "w/locks").rglob("*.lock"))  # released
