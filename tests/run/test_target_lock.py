"""A lock file per host and target: a second storbench (another Snakemake session, another
folder) is refused while the first runs fio there; a SIGKILLed holder's lock is taken over."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from storbench.core.specs import RunSpec
from storbench.run import engine
from storbench.run.attempt import RunError
from storbench.run.target_lock import lock_key, lock_path
from tests.run.test_interrupt import processes_matching, wait_for

REPO = Path(__file__).resolve().parents[2]
RUN_IN_ANOTHER_PROCESS = """
import json, sys
from storbench.core.specs import RunSpec
from storbench.run import engine
spec, job, manifest = sys.argv[1:4]
engine.run_iteration(RunSpec.from_json(spec), 1, job, manifest)
"""


def fio_job(tmp_path: Path, name: str, seconds: int) -> Path:
    job = tmp_path / f"{name}.fio"
    job.write_text(
        f"[{name}]\ndirectory={tmp_path / 'target'}\nrw=write\nbs=4k\nsize=1m\nioengine=psync\n"
        f"time_based=1\nruntime={seconds}\n"
    )
    return job


def run_spec(tmp_path: Path, run_id: str, target_name: str = "scratch") -> RunSpec:
    host = {"name": "localhost", "transport": "local", "workdir": str(tmp_path / "workdir")}
    return RunSpec(
        experiment="e",
        run_id=run_id,
        tool="fio",
        target={"name": target_name, "type": "directory", "path": str(tmp_path / "target")},
        params={},
        hosts=(host,),
        timeout_s=120,
    )


def test_a_second_storbench_on_the_same_target_is_refused_until_the_holder_is_gone(tmp_path):
    """The second names the folder otherwise (another campaign's config): one folder, one lock."""
    (tmp_path / "target").mkdir()
    key = lock_key(run_spec(tmp_path, "first").target)
    lock = Path(lock_path(str(tmp_path / "workdir"), "localhost", key))
    first_job = fio_job(tmp_path, "first", 300)
    first = subprocess.Popen(
        [sys.executable, "-c", RUN_IN_ANOTHER_PROCESS, run_spec(tmp_path, "first").to_json(),
         str(first_job), str(tmp_path / "session1/run.json")],
        cwd=REPO,
    )  # fmt: skip
    try:
        wait_for(lambda: processes_matching(f"^fio .*{tmp_path}/session1"), "the first fio")
        holder = json.loads(lock.read_text())
        assert holder["pid"] == first.pid

        second = run_spec(tmp_path, "second", target_name="other")
        with pytest.raises(RunError) as refused:
            engine.run_iteration(second, 1, str(fio_job(tmp_path, "second", 1)),
                                 str(tmp_path / "session2/run.json"))  # fmt: skip
        message = str(refused.value)
        assert message.startswith("e/second: fio did not start\n")  # the lock came first
        assert f"host localhost: target other is in use by storbench pid {first.pid} on" in message
        assert f"lock file {lock}" in message
        assert not (tmp_path / "session2/run.json").exists()

        first.send_signal(signal.SIGKILL)  # no cleanup: its lock stays behind, stale
        first.wait()
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    open_fio = f"^fio .*{tmp_path}/session1"

    def kill_orphaned_fio() -> bool:  # SIGKILL left fio orphaned
        # again until none is left: a fio killed while forking its job leaves the job running
        subprocess.run(["pkill", "-KILL", "-f", open_fio], check=False)
        return not processes_matching(open_fio)

    wait_for(kill_orphaned_fio, "the first fio to go")
    assert json.loads(lock.read_text())["pid"] == first.pid  # still there ...

    manifest = engine.run_iteration(run_spec(tmp_path, "third"), 1,
                                    str(fio_job(tmp_path, "third", 1)),
                                    str(tmp_path / "session3/run.json"))  # fmt: skip
    assert manifest.hosts[0]["exit_code"] == 0  # ... and taken over: its holder is gone
    assert not lock.exists()  # released after the run


def test_a_target_is_locked_by_its_place_and_one_without_a_path_by_its_name():
    scratch = {"name": "scratch", "type": "directory", "path": "/mnt/nfs/bench/"}
    assert lock_key(scratch) == lock_key({**scratch, "name": "nfs", "path": "/mnt//nfs/bench"})
    assert lock_key(scratch).startswith("mnt_nfs_bench-")
    assert lock_key(scratch) != lock_key({**scratch, "path": "/mnt/nfs/other"})
    assert lock_key(scratch) != lock_key({**scratch, "type": "block"})
    assert lock_key({"name": "minio", "type": "s3"}) == "minio"
