"""While a service run's client runs: each host's service looked at for processes stuck for ever.

A tool's service can be left waiting for a job process that is gone (fio: a job process
SIGKILLed as it starts leaves its backend blocked for ever), and the tool's client then waits
for that host until the run's time limit. The tool's adapter says how to find and stop such
processes on a host (ToolAdapter.stuck_service_script); this asks every host, over the run's
own sessions, from LOOK_AFTER_S after the hosts' I/O should have ended (the release and the
run's runtime and ramp; the launch for a job without a runtime) and every LOOK_EVERY_S after
that, until the client ends: the hosts are not looked at while they measure, and a run that
ends in time never. A listening start (run/service_release) is looked at from its launch
on, as a stuck host holds the others' release, but not from its release, which comes once
every host waits, until LOOK_AFTER_S after its I/O should have ended. A host found stuck is
named in the run's failure, and its stopped pids with it. Standard library only: this is the
run path.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from storbench.hosts import services

LOOK_AFTER_S = 5.0  # the first look, after the hosts' I/O should have ended
LOOK_EVERY_S = 5.0  # then, on every host, one short session this often
LOOK_TIMEOUT_S = 20.0  # one look on a host, bounded there (its script pauses 1 s at most)


class StuckWatch:
    """Looks at every host's service in a thread of its own until stop(); stopped holds
    {host: the pids its look stopped}, the hosts found stuck, in the order found."""

    def __init__(self, scripts: dict[str, str], sessions, hosts: list[dict], on_stuck=None):
        self._scripts = scripts  # {host: its script}
        self._sessions = sessions
        self._hosts = [h for h in hosts if scripts.get(h["name"])]
        self._on_stuck = on_stuck or (lambda name: None)
        self._stop = threading.Event()
        self._first_look_s = LOOK_AFTER_S
        self._measuring: Callable[[], tuple[float, float]] | None = None
        self._lock = threading.Lock()
        self._stopped: dict[str, tuple[str, ...]] = {}
        self._thread = threading.Thread(target=self._watch, name="stuck-watch", daemon=True)

    @property
    def stopped(self) -> dict[str, tuple[str, ...]]:
        with self._lock:
            return dict(self._stopped)

    def start(
        self,
        first_look_s: float = 0.0,
        measuring: Callable[[], tuple[float, float]] | None = None,
    ) -> None:
        """first_look_s: from now until the hosts' I/O should have ended (LOOK_AFTER_S on top);
        measuring: when the hosts' I/O starts and should end, as epochs, as they are known at
        the moment (a listening start's release comes later): no look from the one until
        LOOK_AFTER_S after the other."""
        self._first_look_s = first_look_s + LOOK_AFTER_S
        self._measuring = measuring
        if self._hosts:
            self._thread.start()

    def stop(self) -> dict[str, tuple[str, ...]]:
        """End the looks (one under way finishes: it may be stopping a stuck process)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(LOOK_TIMEOUT_S + 5)
        return self.stopped

    def _watch(self) -> None:
        if self._stop.wait(self._first_look_s):
            return
        while True:
            if self._stopped_while_measuring():
                return
            with self._lock:
                left = [h for h in self._hosts if h["name"] not in self._stopped]
            if not left:
                return
            found, _ = services.each_host(left, self._look)  # a host not answering: next look
            for name in (h["name"] for h in left):
                if found.get(name):
                    with self._lock:
                        self._stopped[name] = found[name]
                    self._on_stuck(name)
            if self._stop.wait(LOOK_EVERY_S):
                return

    def _stopped_while_measuring(self) -> bool:
        """Waits while the hosts measure (their I/O's start moves, an early release); whether
        stop() came meanwhile."""
        while self._measuring is not None:
            io_start, io_end = self._measuring()
            now = time.time()
            if not io_start <= now < io_end + LOOK_AFTER_S:
                return False
            if self._stop.wait(min(io_end + LOOK_AFTER_S - now, 1.0)):
                return True
        return False

    def _look(self, host: dict) -> tuple[str, ...]:
        if self._stop.is_set():
            return ()
        code, out, _ = self._sessions.of(host).own_shell(
            self._scripts[host["name"]], timeout_s=LOOK_TIMEOUT_S
        )
        return tuple(out.split()) if code == 0 else ()
