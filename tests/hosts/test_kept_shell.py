"""The shell an OpenSSH host keeps for a step's short scripts, on a real sshd (127.0.0.2)."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import signal

import pytest

from storbench.hosts.kept_shell import KeptShell, ShellGone
from storbench.hosts.openssh import OpenSSHTransport
from storbench.hosts.transport import HostError

pytestmark = pytest.mark.ssh


@pytest.fixture
def transport(ssh_hosts):
    opened = OpenSSHTransport(dataclasses.replace(ssh_hosts[0], connection="persistent"))
    opened.check()
    yield opened
    opened.close()


def shell_pid(transport) -> str:
    """The pid of the shell that ran the script ($$ is the shell's, not its subshell's)."""
    rc, out, err = transport.own_shell("echo $$", timeout_s=30)
    assert (rc, err) == (0, "")
    return out.strip()


def test_a_steps_scripts_run_in_one_shell_with_their_own_output_and_exit_code(transport):
    first = shell_pid(transport)
    home = transport.own_shell("pwd", timeout_s=30)[1]
    assert transport.own_shell("printf out; printf err >&2; exit 3", timeout_s=30) == (
        3,
        "out",
        "err",
    )
    # an exit, a cd or a variable ends with its script's subshell
    assert transport.own_shell("cd /tmp; x=1; exit", timeout_s=30) == (0, "", "")
    assert transport.own_shell('pwd; echo "[$x]"', timeout_s=30) == (0, f"{home}[]\n", "")
    assert shell_pid(transport) == first
    assert transport.own_shell("cat; echo read-nothing", timeout_s=30) == (0, "read-nothing\n", "")
    # what a script prints without a last newline, and a mark-like line, stay its own
    text = "line\n@@storbench-kept-0@@ rc 0\nlast"
    assert transport.own_shell(f"printf '%s' '{text}'", timeout_s=30) == (0, text, "")


def test_closing_the_transport_ends_its_shell_and_the_next_script_opens_another(transport):
    first = shell_pid(transport)
    transport.close()
    assert shell_pid(transport) != first


def test_a_shell_gone_between_scripts_is_replaced_and_the_script_runs_once(transport, tmp_path):
    first = shell_pid(transport)
    kept = transport._kept
    assert kept is not None
    os.killpg(kept._proc.pid, signal.SIGKILL)
    kept._proc.wait()
    counter = tmp_path / "runs"
    assert transport.own_shell(f"echo x >> {counter}; echo $$", timeout_s=30)[0] == 0
    assert counter.read_text() == "x\n"  # the loopback host shares this file system
    assert shell_pid(transport) not in ("", first)


def test_a_script_past_its_time_ends_its_shell_and_the_host_is_still_reached(transport):
    first = shell_pid(transport)
    with pytest.raises(HostError, match="still running past its deadline"):
        transport.own_shell("sleep 20", timeout_s=0.5)
    assert shell_pid(transport) not in ("", first)


def test_a_command_from_the_config_has_a_session_of_its_own(transport):
    """It may leave a process holding its output (a late line): its session waits for it."""
    kept = shell_pid(transport)
    rc, out, _ = transport.shell("(sleep 0.5; echo late) & echo $$", timeout_s=30)
    assert rc == 0 and out.split()[0] != kept and out.split()[1] == "late"
    assert shell_pid(transport) == kept


def test_scripts_from_two_threads_at_once_both_run(transport):
    """A busy kept shell is passed by: the other script gets a session of its own."""
    shell_pid(transport)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda n: transport.own_shell(f"sleep 0.3; echo {n}", timeout_s=30),
                                [1, 2]))  # fmt: skip
    assert results == [(0, "1\n", ""), (0, "2\n", "")]


def test_a_shell_that_cannot_start_says_so_and_runs_nothing():
    shell = KeptShell(["sh", "-c", "echo cannot start >&2; exit 255"])
    with pytest.raises(ShellGone, match="cannot start"):
        shell.run("echo never", timeout_s=10)
    assert not shell.alive()


def test_a_shell_lost_while_its_script_runs_is_exit_255_with_the_output_so_far():
    shell = KeptShell(["sh"])
    rc, out, _ = shell.run("echo before; kill -KILL 0; echo after", timeout_s=10)
    assert rc == 255 and out in ("", "before\n")  # what was on its way when it went
    assert not shell.alive()


def test_scripts_see_the_environment_a_session_has(transport):
    """The kept shell is sh started by the account's shell, which has read its start-up files:
    the same variables (PATH, where an account adds its tools) as a session's command."""
    probe = 'echo "$HOME|$PATH|$USER"'
    assert transport.own_shell(probe, timeout_s=30) == transport.shell(probe, timeout_s=30)


def test_a_large_output_arrives_whole(transport):
    rc, out, err = transport.own_shell(
        "head -c 3000000 /dev/zero | tr '\\0' x; echo; head -c 200000 /dev/zero | tr '\\0' y >&2",
        timeout_s=60,
    )
    assert (rc, len(out), out.count("x"), len(err), err.count("y")) == (
        0,
        3000001,
        3000000,
        200000,
        200000,
    )
