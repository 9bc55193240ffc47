"""A step on many hosts raises this process's open-files limit as far as it needs and names a
hard limit too low before it touches a host; a run on many hosts under a low soft limit (real
fio on local hosts) finishes, and a watcher short of file descriptors keeps the run going."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

from storbench.core.specs import RunSpec
from storbench.hosts import open_files
from storbench.plan import specs
from tests.sshd import lab_host

STORBENCH = str(Path(sys.executable).with_name("storbench"))


def with_limits(soft: int, hard: int | None = None):
    """A preexec_fn: the child's open-files limit (soft, hard); hard unchanged if None."""

    def limit() -> None:
        _, current_hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, current_hard if hard is None else hard))

    return limit


def python_with_limits(code: str, soft: int, hard: int | None = None) -> list[str]:
    """The lines a Python child prints, run under the open-files limit (soft, hard)."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        preexec_fn=with_limits(soft, hard),
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.splitlines()


ALLOW = """
    import resource
    from storbench.hosts import open_files
    try:
        print(open_files.allow_for({hosts}, in_turns={in_turns}))
    except open_files.OpenFilesError as error:
        print(error)
    print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
"""


def test_the_soft_limit_is_raised_as_far_as_the_hosts_need():
    needed = open_files.RESERVE + 100 * open_files.FILES_PER_HOST
    assert needed == 1056
    lines = python_with_limits(ALLOW.format(hosts=100, in_turns=False), soft=64, hard=4096)
    assert lines == ["1056", "1056"]


def test_a_soft_limit_above_the_need_is_left_as_it_is():
    lines = python_with_limits(ALLOW.format(hosts=10, in_turns=False), soft=2000, hard=4096)
    assert lines == ["2000", "2000"]


def test_a_hard_limit_below_the_need_is_named_and_nothing_changes():
    run = python_with_limits(ALLOW.format(hosts=48, in_turns=False), soft=64, hard=300)
    assert run == [
        "48 hosts at once need about 640 open files in this process, and its hard limit is 300"
        " (`ulimit -Hn`): raise it (`nofile` in /etc/security/limits.conf, LimitNOFILE= of a"
        " systemd unit) (a run starts all its hosts together)",
        "64",
    ]
    # a step that takes hosts in turns says how many fit: (300 - 256) // 8
    in_turns = python_with_limits(ALLOW.format(hosts=48, in_turns=True), soft=64, hard=300)
    assert in_turns[0].endswith("or take at most 5 hosts at a time (STORBENCH_FANOUT=5)")


def test_preflight_names_a_hard_limit_too_low_for_its_runs_before_any_host(tmp_path):
    """A preflight takes its hosts STORBENCH_FANOUT at a time, but the runs after it start all
    of them together: it fails on what the runs will need, before it checks a host."""
    hosts = [
        {"name": f"h{n}", "transport": "local", "workdir": str(tmp_path / "w")} for n in range(48)
    ]
    spec = {"experiment": "e", "tool": "fio", "hosts": hosts, "target": directory(tmp_path)}
    output = tmp_path / "preflight.json"
    result = subprocess.run(
        [STORBENCH, "preflight", "--spec", json.dumps(spec), "--output", str(output)],
        preexec_fn=with_limits(64, 300),
        capture_output=True,
        text=True,
        env={**os.environ, "STORBENCH_FANOUT": "4"},
    )
    assert result.returncode == 1
    assert result.stderr.startswith(
        "storbench: error: 48 hosts at once need about 640 open files in this process"
    )
    assert not output.exists()
    assert not (tmp_path / "w").exists()  # no host was checked


def directory(tmp_path: Path) -> dict:
    return {"name": "t", "type": "directory", "path": str(tmp_path / "target")}


def test_a_run_on_24_hosts_finishes_under_a_soft_limit_of_48_open_files(tmp_path):
    """24 local hosts each run real fio from this run's process; with the soft limit as it
    was given (48) the hosts' launches failed with 'Too many open files'."""
    job = tmp_path / "job.fio"
    job.write_text(f"[w]\ndirectory={tmp_path / 'target'}\nrw=write\nbs=64k\nsize=1m\n")
    names = [f"h{n}" for n in range(24)]
    spec = RunSpec(
        experiment="e",
        run_id="r",
        tool="fio",
        target=directory(tmp_path),
        params={},
        hosts=tuple(
            {"name": name, "transport": "local", "workdir": str(tmp_path / "w")} for name in names
        ),
        timeout_s=60,
    )
    manifest_path = tmp_path / "results/it1/run.json"
    result = subprocess.run(
        [STORBENCH, "run", "--spec", specs.to_json(spec), "--iteration", "1", "--job", str(job),
         "--manifest", str(manifest_path)],
        preexec_fn=with_limits(48),
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    manifest = json.loads(manifest_path.read_text())
    assert sorted(host["name"] for host in manifest["hosts"]) == sorted(names)
    for host in manifest["hosts"]:
        assert host["exit_code"] == 0
        output = json.loads((manifest_path.parent / "a1" / host["output"]).read_text())
        assert output["jobs"][0]["write"]["io_bytes"] == 1 << 20


def test_a_process_that_cannot_be_looked_at_for_want_of_descriptors_counts_as_alive():
    """The run's watcher reads its controller's /proc entry every few seconds: out of file
    descriptors, that read fails, and the run must not take it for its controller's exit."""
    lines = python_with_limits(
        """
        import os
        from storbench.run import processes
        me = processes.this_process()
        held = []
        try:
            while True:
                held.append(os.open("/dev/null", os.O_RDONLY))
        except OSError as error:
            print(error.strerror)
        print(processes.is_alive(me))
        os.close(held.pop())
        print(processes.is_alive(processes.Process(me.pid, me.name, "0")))
        """,
        soft=32,
    )
    assert lines == ["Too many open files", "True", "False"]


def test_a_paramiko_session_past_1024_open_files_reads_its_command_output(ssh_lab, tmp_path):
    """Past 1,024 open files a channel's descriptor is beyond what select() takes."""
    host = lab_host(ssh_lab, ssh_lab.servers[0], tmp_path / "remote").to_dict()
    lines = python_with_limits(
        f"""
        import os
        from storbench.core.model import Host
        from storbench.hosts.transport import open_transport
        held = [os.open("/dev/null", os.O_RDONLY) for _ in range(1100)]
        with open_transport(Host.from_dict({host!r})) as transport:
            rc, out, err = transport.shell("echo $((6 * 7))", timeout_s=30)
        print(rc, out.strip(), max(held) > 1024)
        """,
        soft=2048,
    )
    assert lines == ["0 42 True"]
