"""Fault injection during a run: commands at offsets from the workload start, then recovery.

An experiment's ``faults:`` (allowed only with ``allow_faults: true``) lists events; each
runs ``command`` on one of the run's hosts, or on the controller (the machine running
storbench), ``at`` seconds after the workload started, and optionally ``recover.command`` at
``recover.at``. The workload keeps running; ``FaultSchedule`` runs the commands from a thread
beside it and records what happened (actual offsets, exit codes, output tails) for the
analysis (``storbench.analysis.fault_analysis``) and the report.

A command sees these variables:

- ``STORBENCH_JOB_FILE``: the path of the run's job file on that host; it is in the command
  line of the tool's processes, so ``pkill -STOP -f "$STORBENCH_JOB_FILE"`` pauses the
  workload on that host;
- ``STORBENCH_HOST``: the host's name (``controller`` for the controller);
- ``STORBENCH_FAULT``: the event's name.

The script sets them from split-quoted text ('/a/jo''b.fio'), so the shell's own command
line never holds the job file path and ``pkill -f`` of it never matches the fault command.
Every recovery of an injected fault runs even when the workload ends early or the run is
interrupted.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from storbench.core import units
from storbench.core.schema_names import CONTROLLER
from storbench.core.specs import RunSpec
from storbench.hosts.transport import open_transport

DEFAULT_TIMEOUT_S = 60.0
OUTPUT_TAIL_CHARS = 2000
START_POLL_S = 0.05


@dataclass(frozen=True)
class Action:
    """One command to run: an event's fault or its recovery."""

    event: str
    kind: str  # 'fault' or 'recover'
    host: str
    command: str
    at_s: float
    timeout_s: float


@dataclass
class Record:
    """What happened to one action: offsets from the workload start, exit code, output."""

    event: str
    kind: str
    host: str
    command: str
    planned_at_s: float
    started_at_s: float | None = None
    ended_at_s: float | None = None
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    skipped: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def actions(faults: Sequence[dict]) -> list[Action]:
    """The faults and recoveries of an experiment's ``faults:`` list, in time order."""
    planned = []
    for event in faults:
        timeout = units.parse_duration(event.get("timeout", DEFAULT_TIMEOUT_S))
        planned.append(
            Action(
                event["name"],
                "fault",
                event["host"],
                event["command"],
                units.parse_duration(event["at"]),
                timeout,
            )
        )
        recover = event.get("recover")
        if recover:
            planned.append(
                Action(
                    event["name"],
                    "recover",
                    event["host"],
                    recover["command"],
                    units.parse_duration(recover["at"]),
                    timeout,
                )
            )
    return sorted(planned, key=lambda action: (action.at_s, action.kind != "fault"))


@dataclass
class FaultSchedule:
    """Runs the actions in a thread once ``started()`` is true; ``finish()`` joins it.

    ``run_on_host(host, script, timeout_s) -> (exit code, stdout, stderr)`` runs a shell
    script on a client host; ``job_files`` maps host name to its job file path there.
    """

    planned: list[Action]
    run_on_host: Callable[[str, str, float], tuple[int, str, str]]
    job_files: dict[str, str]
    started: Callable[[], bool]
    workload_done: Callable[[], bool]
    records: list[Record] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _t0: float | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="faults", daemon=True)
        self._thread.start()

    def finish(self, *, interrupted: bool = False) -> list[dict]:
        """Stop waiting for later faults, run the recoveries still due, return the records."""
        if interrupted or self.workload_done():
            self._stop.set()
        if self._thread is not None:
            while self._thread.is_alive():
                self._thread.join(0.2)
        self._recover_the_rest()
        return [record.as_dict() for record in self.records]

    def _run(self) -> None:
        while not self.started():
            if self._stop.wait(START_POLL_S):
                return
        self._t0 = time.monotonic()
        for action in self.planned:
            if self._stop.wait(max(0.0, self._t0 + action.at_s - time.monotonic())):
                return
            if action.kind == "fault" and self.workload_done():
                self.records.append(self._skipped(action, "the workload had ended"))
                continue
            self.records.append(self._execute_or_skip(action))

    def _recover_the_rest(self) -> None:
        """Recoveries of injected faults that did not run yet: run them now."""
        injected = {r.event for r in self.records if r.kind == "fault" and r.skipped is None}
        done = {r.event for r in self.records if r.kind == "recover"}
        for action in self.planned:
            if action.kind == "recover" and action.event in injected - done:
                self.records.append(self._execute(action))

    def _skipped(self, action: Action, reason: str) -> Record:
        return Record(
            action.event, action.kind, action.host, action.command, action.at_s, skipped=reason
        )

    def _execute(self, action: Action) -> Record:
        record = Record(action.event, action.kind, action.host, action.command, action.at_s)
        record.started_at_s = self._elapsed()
        try:
            code, out, err = self._run_action(action)
        except Exception as error:  # recorded: a failing fault must not hide the workload's data
            code, out, err = None, "", f"{type(error).__name__}: {error}"
        record.ended_at_s = self._elapsed()
        record.exit_code = code
        record.stdout, record.stderr = out[-OUTPUT_TAIL_CHARS:], err[-OUTPUT_TAIL_CHARS:]
        return record

    def _elapsed(self) -> float | None:
        return None if self._t0 is None else round(time.monotonic() - self._t0, 3)

    def _execute_or_skip(self, action: Action) -> Record:
        if action.host != CONTROLLER and action.host not in self.job_files:
            return self._skipped(action, f"host {action.host} is not in this run")
        return self._execute(action)

    def _run_action(self, action: Action) -> tuple[int, str, str]:
        variables = {
            "STORBENCH_JOB_FILE": self.job_files.get(action.host, ""),
            "STORBENCH_HOST": action.host,
            "STORBENCH_FAULT": action.event,
        }
        if action.host == CONTROLLER:
            return run_on_controller(action.command, variables, action.timeout_s)
        return self.run_on_host(action.host, script(action.command, variables), action.timeout_s)


def script(command: str, variables: dict[str, str]) -> str:
    """A shell script that sets the variables without naming their values on a command line."""
    exports = "".join(
        f"{name}=$(printf '%s' {_split_quoted(value)}); export {name}; "
        for name, value in variables.items()
    )
    return exports + command


def _split_quoted(value: str) -> str:
    """The value quoted in two halves, so the script never holds it as one string."""
    middle = len(value) // 2
    return _single_quoted(value[:middle]) + _single_quoted(value[middle:])


def _single_quoted(text: str) -> str:
    """Always quoted (shlex.quote leaves plain words bare, which would join the halves)."""
    return "'" + text.replace("'", "'\"'\"'") + "'"


def run_on_controller(
    command: str, variables: dict[str, str], timeout_s: float
) -> tuple[int, str, str]:
    try:
        done = subprocess.run(
            ["sh", "-c", command],
            env={**os.environ, **variables},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired as expired:
        return (
            124,
            _text(expired.stdout),
            _text(expired.stderr) + f"\ntimed out after {timeout_s:g} s",
        )
    return done.returncode, done.stdout, done.stderr


def _text(value) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def schedule_for_run(
    spec: RunSpec, hosts: list, paths: list, started: Callable[[], bool], threads: list
):
    """Start the run's fault schedule beside its host threads; None without faults.

    ``hosts``/``paths``: the run's Host and HostPaths lists (in the same order); the
    workload counts as started when ``started()`` (the hosts' release instant has passed),
    and as done when every host thread has ended.
    """
    if not spec.faults:
        return None

    by_name = {host.name: host for host in hosts}

    def run_on_host(name: str, text: str, timeout_s: float) -> tuple[int, str, str]:
        with open_transport(by_name[name]) as transport:
            return transport.shell(text, timeout_s=timeout_s)

    schedule = FaultSchedule(
        planned=actions(spec.faults),
        run_on_host=run_on_host,
        job_files={host.name: path.job_path for host, path in zip(hosts, paths, strict=True)},
        started=started,
        workload_done=lambda: not any(thread.is_alive() for thread in threads),
    )
    schedule.start()
    return schedule
