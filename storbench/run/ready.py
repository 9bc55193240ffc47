"""A host made ready for a run in one shell round trip: its target locks taken, then the
run's own steps (folders, room, job file, tool version), each failure named as before.

Both run paths (standalone and service) compose their steps here; a lock held by a gone
storbench is removed and the whole script run once more (like target_lock.acquire).
Standard library only: this is the benchmark path.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

from storbench.hosts import services
from storbench.hosts.transport import HostError
from storbench.run import one_trip, target_lock
from storbench.run.attempt import STDERR_TAIL_LINES

READY_TIMEOUT_S = 180.0  # the whole script: small commands, and the tool's version (60 s)
STEP_VERSION = "version"


class Preparation:
    """The steps of one host's preparation, each with what its failure says."""

    def __init__(self, host: str):
        self.host = host
        self.steps = one_trip.Steps()
        self._failures: dict[str, Callable[[one_trip.Outcome], str]] = {}
        self._locks: list[tuple[str, str, str]] = []  # (step, target, lock path)
        self._me = ""

    def add(self, name: str, script: str, failure: Callable[[one_trip.Outcome], str]) -> None:
        self.steps.add(name, script)
        self._failures[name] = failure

    def lock(self, workdir: str, target: dict, me: str) -> list[str]:
        """Take each of the run's target locks first; their paths (to release later)."""
        self._me = me
        paths = []
        for index, (name, path) in enumerate(target_lock.target_locks(workdir, self.host, target)):
            step = f"lock{index}"
            self.steps.add(step, target_lock.take_script(path, me))
            self._locks.append((step, name, path))
            paths.append(path)
        return paths

    def mkdirs(self, name: str, path: str) -> None:
        self.add(name, one_trip.mkdir_script(path),
                 lambda o: f"cannot create directory {path}: {_reason(o)}")  # fmt: skip

    def fresh_dir(self, name: str, path: str) -> None:
        """An empty folder at path: what an earlier session left there is removed first."""
        self.add(name, f"rm -rf -- {shlex.quote(path)} && {one_trip.mkdir_script(path)}",
                 lambda o: f"cannot create an empty directory {path}: {_reason(o)}")  # fmt: skip

    def version(self, tool, service_folder: str | None = None, kept_in: str | None = None) -> None:
        """The tool's version; with the folder of a running service, the one the first run on
        it recorded (the binary that runs the workload), read without starting the tool; with
        kept_in, the one kept there for the same program file (services.kept_version_script)."""
        if service_folder is not None:
            script = services.recorded_version_script(service_folder, tool)
        elif kept_in is not None:
            script = services.kept_version_script(kept_in, tool)
        else:
            script = services.version_script(tool)
        self.add(STEP_VERSION, script, lambda o: tool.unusable(o.rc, _tail(o.err)))

    def run(self, transport) -> dict[str, one_trip.Outcome]:
        """Run the script (once more after each stale lock removed); HostError naming the host
        and the failed step, TargetBusy naming the holder."""
        stale = ("", "")
        for _ in range(len(self._locks) + 1):  # each stale lock removed once
            try:
                outcomes = one_trip.run(transport, self.steps, timeout_s=READY_TIMEOUT_S)
            except one_trip.ScriptFailed as error:
                raise HostError(self.host, f"preparing the host failed: {error}") from None
            taken_over = self._take_over_stale_lock(transport, outcomes)
            if taken_over is not None:
                stale = taken_over
                continue
            failed = next((n for n, o in outcomes.items() if o.rc != 0), None)
            if failed is not None:
                raise HostError(self.host, self._failures[failed](outcomes[failed]))
            return outcomes
        name, path = stale
        raise target_lock.TargetBusy(self.host, f"target {name}: could not take {path}")

    def _take_over_stale_lock(self, transport, outcomes) -> tuple[str, str] | None:
        """(target, lock path) of a stale lock that stopped the script (it was removed);
        raise if the lock is held; None when every lock was taken."""
        for step, name, path in self._locks:
            outcome = outcomes.get(step)
            if outcome is None:
                return None
            other = target_lock.holder_of(self.host, path, outcome.rc, outcome.out, outcome.err)
            if other is None:
                continue
            if not target_lock.is_stale(other):
                raise target_lock.TargetBusy(self.host, target_lock.busy_message(name, path, other))
            target_lock.remove_if_unchanged(transport, path, other)
            return name, path
        return None


def keep_version(outcomes: dict[str, one_trip.Outcome], local_dir: Path, host: str) -> str:
    """The version step's output, kept as <host>.version (and .version.stderr) like a run's."""
    outcome = outcomes[STEP_VERSION]
    (local_dir / f"{host}.version").write_text(outcome.out)
    (local_dir / f"{host}.version.stderr").write_text(outcome.err)
    return outcome.out.strip()


def _tail(text: str) -> str:
    lines = text.strip().splitlines()
    return "\n".join(lines[-STDERR_TAIL_LINES:])


def _reason(outcome: one_trip.Outcome) -> str:
    return outcome.err.strip() or f"exit {outcome.rc} without a message"
