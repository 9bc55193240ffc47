"""What every transport shares: the Transport interface, HostError, and the shell helpers
(time limits, markers, kill scripts) each transport builds its commands from.

Standard library only: the run path imports it.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import posixpath
import shlex
import shutil
import signal
import subprocess
import threading
from pathlib import Path

from storbench.core.model import Host

KILL_AFTER_S = 30  # `timeout -k`: SIGKILL this long after the SIGTERM
BACKSTOP_S = 30  # our own wait beyond timeout + KILL_AFTER_S, in case `timeout` itself hangs
TERM_GRACE_S = 5.0  # kill_matching / local group kill: wait this long for SIGTERM to work
KEEPALIVE_S = 30  # without keepalives a dead peer hangs a channel for about an hour
PROBE_EVERY_S = 5.0  # silence on a running tool's channel before the host is asked
SHELL_TIMEOUT_S = 60.0  # limit for small helper commands (mkdir, pkill)
SFTP_STALL_S = 300.0  # an SFTP read/write that gets no answer this long fails
CHUNK = 64 * 1024
# A line "release <at> <fifo>" on a held tool's session: <at>, the instant its start hooks go
# at (epoch microseconds), is written to <fifo>.released, where a hook arriving later finds
# it; then the hooks waiting on the FIFO (run/start) get a line each; then <fifo>.sent says
# all that is done (a service's watcher ends on it, and its end stops this guard: ending on
# .released left one host of 128 waiting for its deadline, 46 s). Builtins only.
RELEASE_LINE = "release "
RELEASE_ACTION = (
    f'r=${{line#{RELEASE_LINE}}}; at=${{r%% *}}; f=${{r#* }}; [ -p "$f" ] && '
    '{ echo "$at" > "$f.released"; exec 4<> "$f"; '
    '[ -f "$f.hooks" ] && while read -r _; do echo go >&4; done < "$f.hooks"; exec 4>&-; '
    ': > "$f.sent"; }'
)
SESSION_GUARD_NAME = "storbench-session"  # $0 of the guard shell, shown in ps
# The variable the guard tags a tool's processes with (in their environment, which fio's
# forked job processes inherit even in sessions of their own): its value is the session's tag.
TOOL_TAG_VARIABLE = "STORBENCH_TOOL_TAG"
# After a tool that failed: whatever still carries its tag is stopped (SIGTERM, up to
# TERM_GRACE_S, then SIGKILL), since a SIGKILLed fio's job processes hold the session's output
# open until their runtime ends. By environment, not command line: the controller's own ssh
# client (the same machine, in a lab) has the tag in its command line only. Linux's /proc.
TOOL_LEFTOVERS = "; ".join([
    "tagged() { for found in $(grep -l -a -F -e"
    f' "{TOOL_TAG_VARIABLE}=$tag" /proc/[0-9]*/environ 2>/dev/null); do'
    ' found=${found#/proc/}; printf " %s" "${found%/environ}"; done; }',
    'left=$(tagged); [ -z "$left" ] || {'
    f' echo "{SESSION_GUARD_NAME}: the tool ended (exit $rc) leaving processes$left;'
    ' stopping them" >&2',
    "kill -TERM $left 2>/dev/null; n=0",
    f'while [ -n "$(tagged)" ] && [ "$n" -lt {int(TERM_GRACE_S / 0.1)} ]; do sleep 0.1;'
    " n=$((n + 1)); done",
    'left=$(tagged); [ -z "$left" ] || kill -KILL $left 2>/dev/null; }',
])  # fmt: skip
# Runs "$2"... (after the tag, $1) with stdin from /dev/null and SIGTERMs it when the session's
# stdin ends (sshd closes it when the channel or the connection goes away); stops what a
# failed tool left (TOOL_LEFTOVERS); exits with the tool's status.
SESSION_GUARD = (
    f'exec 3<&0 </dev/null; tag=$1; shift; {TOOL_TAG_VARIABLE}=$tag "$@" 3<&- & tool=$!; '
    f'{{ while read -r line; do case $line in "{RELEASE_LINE}"?*) '
    + RELEASE_ACTION
    + ';; esac; done <&3; kill -TERM "$tool" 2>/dev/null; } & guard=$!; '
    'exec 3<&-; wait "$tool"; rc=$?; '
    + f'[ "$rc" -eq 0 ] || {{ {TOOL_LEFTOVERS}; }}; '
    + 'kill "$guard" 2>/dev/null; exit "$rc"'
)
MIN_MARKER_LEN = 8  # a short marker could match unrelated processes in pkill -f
_ERE_SPECIAL = set("\\.[]()*+?{}|^$")


class HostError(RuntimeError):
    """A host could not be reached or did not do what was asked.

    The message always starts with the host name: 'host 127.0.0.2: ssh authentication failed ...'
    """

    def __init__(self, host: str, reason: str):
        super().__init__(f"host {host}: {reason}")
        self.host = host
        self.reason = reason

    def __reduce__(self):  # keep picklable despite the two-argument constructor
        return (type(self), (self.host, self.reason))


def raise_interrupt(signum, frame):
    """SIGTERM handler: unwind like Ctrl-C, so every host's tool is stopped on the way out."""
    raise KeyboardInterrupt(f"signal {signum}")


def hold_signals() -> None:
    """While an interrupted run stops its tools: a second Ctrl-C or SIGTERM (Snakemake sends
    one after the terminal's) must not cut that cleanup short."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


class Transport:
    """Commands and files on one host. A context manager: closes on exit."""

    def __init__(self, spec: Host):
        self.spec = spec

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def check(self) -> None:
        """Raise HostError unless the host can be used (connects, for SSH)."""

    def check_file_transfer(self) -> None:
        """Raise HostError unless files can be copied to and from the host (SFTP, for SSH)."""

    def run(
        self, argv, *, timeout_s, stdout_path, stderr_path, marker, cwd=None, program=None
    ) -> int:
        """Run argv under `timeout`, streaming output to local files; return its exit code.

        124 means timed out. ``marker`` must occur in the command line: an interrupted
        run kills the processes matching it before re-raising. ``program``: the name errors
        give the command (argv's own program by default; a wrapper names what it runs).
        """
        raise NotImplementedError

    def put_text(self, text: str, path: str) -> None:
        raise NotImplementedError

    def fetch(self, path: str, local_path) -> None:
        raise NotImplementedError

    def mkdirs(self, path: str) -> None:
        raise NotImplementedError

    def put_private_text(self, text: str, path: str) -> None:
        """Write a file only its owner can read (mode 0600 before any content is written)."""
        raise NotImplementedError

    def fetch_tree(self, path: str, local_dir) -> None:
        """Copy a folder from the host, recursively, into local_dir."""
        raise NotImplementedError

    def shell(self, script: str, *, timeout_s: float) -> tuple[int, str, str]:
        """Run a small POSIX shell script (quote its arguments!): (exit code, stdout, stderr)."""
        return self._shell(script, timeout_s=timeout_s)

    def own_shell(self, script: str, *, timeout_s: float) -> tuple[int, str, str]:
        """``shell`` for a script of storbench's own, which leaves no process holding its
        output: through a shell the transport keeps open on the host, where it keeps one."""
        return self._shell(script, timeout_s=timeout_s)

    def fresh_dir(self, path: str) -> None:
        """An empty folder at path: what an earlier session left there is removed first."""
        quoted = shlex.quote(path)
        script = f"rm -rf -- {quoted} && {mkdir_script(path)}"
        rc, _, err = self._shell(script, timeout_s=SHELL_TIMEOUT_S)
        if rc != 0:
            raise self._error(f"cannot create an empty directory {path}: {_reason(rc, err)}")

    def remove(self, paths: list[str]) -> None:
        """Best effort rm -f of files on the host (private copies after a run)."""
        if paths:
            self._shell("rm -f -- " + " ".join(map(shlex.quote, paths)), timeout_s=SHELL_TIMEOUT_S)

    def release(self, fifo: str, at_epoch: float) -> None:
        """Release the held tool this transport runs now at at_epoch (the host's clock): its
        start hooks wait on fifo (a path on the host); best effort, the hooks' own deadline
        stands behind it."""
        self._send_to_session(release_line(fifo, at_epoch))

    def _send_to_session(self, line: bytes) -> None:
        raise NotImplementedError

    def kill_matching(self, marker: str) -> None:
        """SIGTERM the processes whose command line contains marker, SIGKILL leftovers."""
        _check_marker_text(marker)
        rc, _, err = self._shell(_kill_script(marker), timeout_s=SHELL_TIMEOUT_S)
        if rc != 0:
            raise self._error(f"could not kill processes matching {marker!r}: {err.strip()}")

    def close(self) -> None:
        pass

    def _shell(self, script: str, *, timeout_s: float) -> tuple[int, str, str]:
        """Run a small POSIX shell script on the host: (exit code, stdout, stderr)."""
        raise NotImplementedError

    def _error(self, reason: str) -> HostError:
        return HostError(self.spec.name, reason)

    def _kill_after_failure(self, marker: str, exc: BaseException) -> None:
        # Best effort: the original exception matters more than a failed cleanup.
        try:
            self.kill_matching(marker)
        except Exception as kill_exc:
            exc.add_note(f"also failed to kill the tool: {kill_exc}")


# -- helpers ----------------------------------------------------------------------------


def _timeout_argv(argv, timeout_s: float, marker: str) -> list[str]:
    if isinstance(argv, str) or not argv:
        raise ValueError(f"argv must be a non-empty list of strings, got {argv!r}")
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
    _check_marker_text(marker)
    if marker not in " ".join(argv):  # pkill -f sees the arguments joined by spaces
        raise ValueError(f"marker {marker!r} does not occur in the command line")
    seconds = str(math.ceil(timeout_s))
    return ["timeout", "-s", "TERM", "-k", str(KILL_AFTER_S), seconds, *map(str, argv)]


def guarded_command(argv, timeout_s: float, marker: str, cwd: str | None = None) -> str:
    """The shell command line of a remote tool: under `timeout`, in cwd, stopped by the session
    guard when its SSH session ends."""
    tag = os.urandom(8).hex()  # one session's: a rerun's leftovers are kill_matching's
    guarded = ["sh", "-c", SESSION_GUARD, SESSION_GUARD_NAME, tag]
    command = shlex.join(guarded + _timeout_argv(argv, timeout_s, marker))
    if cwd is not None:
        command = f"cd {shlex.quote(cwd)} && exec {command}"
    return command


def program_name(argv) -> str:
    """The program argv runs, looking through `env NAME=value ...`."""
    words = list(map(str, argv))
    if posixpath.basename(words[0]) == "env":
        words = [w for w in words[1:] if "=" not in w and not w.startswith("-")] or words
    return words[0]


@functools.cache
def _parent_death_argv() -> list[str]:
    """setpriv: the tool gets SIGTERM if the thread that started it dies (storbench killed)."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM", "--"] if setpriv else []


def _check_marker_text(marker: str) -> None:
    if len(marker) < MIN_MARKER_LEN or not any(c.isascii() and c.isalnum() for c in marker):
        raise ValueError(
            f"marker must be at least {MIN_MARKER_LEN} characters with a letter or digit,"
            f" got {marker!r}"
        )


def marker_pattern(marker: str) -> str:
    """An ERE matching marker literally whose own text does not contain marker.

    The first letter goes in brackets ('[s]leep'), so the shell running pkill,
    whose command line holds the pattern, does not match and kill itself.
    """
    parts, bracketed = [], False
    for char in marker:
        if not bracketed and char.isascii() and char.isalnum():
            parts.append(f"[{char}]")
            bracketed = True
        elif char in _ERE_SPECIAL:
            parts.append("\\" + char)
        else:
            parts.append(char)
    return "".join(parts)


def _kill_script(marker: str) -> str:
    """SIGTERM what matches marker, wait, SIGKILL leftovers (exit 0 when nothing ran)."""
    polls = int(TERM_GRACE_S / 0.1)
    return "\n".join([
        f"pattern={shlex.quote(marker_pattern(marker))}",
        'pkill -TERM -f -- "$pattern"; rc=$?',
        '[ "$rc" -eq 1 ] && exit 0',  # 1: nothing was running
        '[ "$rc" -eq 0 ] || exit "$rc"',
        "n=0",
        f'while pgrep -f -- "$pattern" >/dev/null && [ "$n" -lt {polls} ]; do',
        "  sleep 0.1; n=$((n + 1))",
        "done",
        'pkill -KILL -f -- "$pattern"; [ "$?" -le 1 ]',
    ])  # fmt: skip


def release_line(fifo: str, at_epoch: float) -> bytes:
    if "\n" in fifo or not fifo:
        raise ValueError(f"a release FIFO's path must be one non-empty line, got {fifo!r}")
    return f"{RELEASE_LINE}{round(at_epoch * 1_000_000)} {fifo}\n".encode()


def _kill_process_group(proc: subprocess.Popen) -> None:
    """SIGTERM the process group, wait a grace period, then SIGKILL what is left."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=TERM_GRACE_S)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # also stragglers that outlived the leader
    proc.wait()


def _local_pids_matching(marker: str) -> set[int]:
    """PIDs whose command line (arguments joined by spaces, as pkill -f sees it) has marker."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):  # processes come and go while we look
            args = Path(f"/proc/{entry}/cmdline").read_bytes().rstrip(b"\0").replace(b"\0", b" ")
            if marker in args.decode(errors="replace"):
                found.add(int(entry))
    return found


def _ancestry(pid: int) -> set[int]:
    """pid and its parents up to (not including) init."""
    chain = set()
    while pid > 1 and pid not in chain:
        chain.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rpartition(")")[2].split()[1])  # field 4 (ppid), after "(comm)"
    return chain


def _signal_pids(pids, sig) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


@contextlib.contextmanager
def _open_output(path):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb", buffering=0) as stream:  # unbuffered: readable while the tool runs
        yield stream


def _copy_chunk(ready, receive, sink) -> bool:
    if not ready():
        return False
    sink.write(receive(CHUNK))
    return True


def host_key_name(address: str, port: int | str) -> str:
    """How known_hosts names a host: its address, or [address]:port off port 22."""
    return address if int(port) == 22 else f"[{address}]:{port}"


def _describe(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def mkdir_script(path: str) -> str:
    """mkdir -p, tried again: on a work folder shared by hosts (an NFS home) two hosts making
    the same parent at once can see it fail, then exist. A folder already there costs no
    process (every run's preparation makes the same folders again)."""
    quoted = shlex.quote(path)
    return (
        f"{{ [ -d {quoted} ] || {{ for try in 1 2 3; do mkdir -p -- {quoted} 2>/dev/null && break;"
        f" sleep 0.2; done; mkdir -p -- {quoted}; }}; }}"
    )


def _reason(rc: int, err: str) -> str:
    return err.strip() or f"exit {rc} without a message"
