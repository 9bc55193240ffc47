"""A service run's first held start, released when every host's start hook waits.

Standalone, a held tool's hooks say they wait on the tool's own stderr, which the run reads
while the tool runs (run/start.EarlyRelease). In service mode the hooks run under the
services, whose output the run does not see until the end. So the host's preparation makes
a release FIFO in the service's folder (and runs the start wrapper's probe: which wait the
host has), the job as launched gives the hook that FIFO, and a watcher on the host's session
says LISTENING_LINE on its stderr once a hook has registered there. The release, an instant
the delivery margin ahead (start.delivery_margin of the slowest preparation), then reaches
the hooks through that session (Transport.release), as it does standalone, and the watcher
ends once it sees <fifo>.sent (every hook told: its end stops the session's guard). Only
where every host has bash 5 (the hooks' precise wait); the release time in the jobs is then
a deadline (start.LISTENING_DEADLINE_S).
Standard library only: this is the benchmark path.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
import threading
import time
from pathlib import Path

from storbench.hosts.transport import HostError, Transport
from storbench.run import start

WATCHER_NAME = "storbench-watch"  # $0 of the watcher shell, shown in ps
# how often a watcher looks for a registered hook and for the release: at 0.01 s, 128 hosts'
# watchers on one machine took a core (5.2 CPU-s in 5 s, 1.3 at 0.05 s)
TICK_S = 0.05
# bash 5. $1: the release FIFO; $2: the deadline, epoch microseconds (the locale's decimal
# point left out, as the hooks do). `read -t` on a pipe it holds both ends of: no child.
WATCH_SCRIPT = "\n".join([
    "fifo=$1 deadline=$2 said=",
    "exec {tick}<> <(:)",
    'while [ ! -e "$fifo.sent" ]; do',
    "  now=${EPOCHREALTIME//[!0-9]/}",
    "  ((10#$now < deadline)) || exit 0",
    '  if [ -z "$said" ] && [ -s "$fifo.hooks" ]; then',
    f"    echo {start.LISTENING_LINE} >&2; said=1",
    "  fi",
    f'  read -r -t {TICK_S} -u "$tick"',
    "done",
    "exit 0",  # not the last tick's timed-out read
])  # fmt: skip
END_GRACE_S = 10.0  # a watcher released at the end has this long to go


def prepare_script(fifo: str) -> str:
    """A new release FIFO at fifo, then the start wrapper's probe: its stderr says whether
    the host runs the precise wait (start.waits_precisely); a host that cannot make the FIFO
    runs no probe."""
    return (
        f"{start.fresh_fifo_script(shlex.quote(fifo))} 2>/dev/null && {start.wait_probe()}; exit 0"
    )


def hook_arguments(release_epoch: float, fifo: str | None) -> str:
    """What the job's hook command is given in place of start_hook.RELEASE: the release
    time, and where it listens for an early release, if it does."""
    epoch = f"{release_epoch:.6f}"
    return epoch if fifo is None else f"{epoch} {shlex.quote(fifo)}"


class Deadline:
    """A listening held start's release time: a deadline, until the early release, which
    comes delivery_s after every host waits (start.delivery_margin)."""

    def __init__(self, epoch: float, delivery_s: float):
        self.release_epoch = epoch
        self.delivery_s = delivery_s
        self._lock = threading.Lock()

    def release_early(self) -> float | None:
        """The release brought forward to delivery_s from now, if that is sooner: when."""
        with self._lock:
            at = time.time() + self.delivery_s
            if at >= self.release_epoch:
                return None
            self.release_epoch = at
            return at


class Watchers:
    """One watcher per host, each on its host's session in a thread of its own, with the
    early release that waits for all of them (close() ends them all)."""

    def __init__(self, deadline: Deadline, folder: Path, hosts: int):
        self.deadline = deadline
        self._until = deadline.release_epoch  # the watchers' own end: the deadline as set
        self._folder = folder
        self._early = start.EarlyRelease(deadline, hosts)
        self._running: dict[str, tuple[threading.Thread, Transport, str]] = {}

    def start(self, sessions, hosts: list[dict], fifos: dict[str, str]) -> None:
        self._folder.mkdir(parents=True, exist_ok=True)
        for host in hosts:
            name = host["name"]
            transport = sessions.of(host)
            stderr_path = self._folder / f"{name}.watch.stderr"
            release = functools.partial(transport.release, fifos[name])
            self._early.expect(name, stderr_path, release)
            thread = threading.Thread(
                target=self._watch, args=(name, transport, fifos[name], stderr_path),
                name=f"watch-{name}", daemon=True,
            )  # fmt: skip
            self._running[name] = (thread, transport, fifos[name])
            thread.start()
        threading.Thread(target=self._early.watch, name="early-release", daemon=True).start()

    def _watch(self, name: str, transport: Transport, fifo: str, stderr_path: Path) -> None:
        deadline_us = round(self._until * 1_000_000)
        try:
            with contextlib.suppress(HostError, OSError):
                transport.run(
                    ["bash", "-c", WATCH_SCRIPT, WATCHER_NAME, fifo, str(deadline_us)],
                    timeout_s=max(0.0, self._until - time.time()) + END_GRACE_S,
                    stdout_path=os.devnull,  # a watcher says nothing there
                    stderr_path=stderr_path,
                    marker=fifo,
                )
        finally:
            self._early.gone(name)  # a watcher that failed holds no one back

    def gone(self, name: str) -> None:
        """A host whose job is gone (service_stuck) no longer holds the early release."""
        self._early.gone(name)

    def close(self, sessions, hosts: list[dict]) -> None:
        """Stop the early release; release each watcher still waiting (its hooks are done or
        gone: the run has ended); a host whose watcher does not end loses its session."""
        self._early.stop()
        for thread, transport, fifo in self._running.values():
            if thread.is_alive():
                with contextlib.suppress(Exception):
                    transport.release(fifo, time.time())
        ends = time.monotonic() + END_GRACE_S
        for host in hosts:
            running = self._running.pop(host["name"], None)
            if running is None:
                continue
            running[0].join(max(0.0, ends - time.monotonic()))
            if running[0].is_alive():
                sessions.drop(host)
