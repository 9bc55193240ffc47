"""Processes on this machine by pid and start time (a reused pid is not the same process):
the chain of programs that started a run, and whether one is still alive."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path

SHELL_NAMES = frozenset({"sh", "bash", "dash", "zsh", "ksh"})  # wrappers such as `bash -c cmd`


_START_TICKS = 22 - 2  # index of stat field 22 (starttime) in _stat_fields


@dataclass(frozen=True)
class Process:
    pid: int
    name: str
    start_ticks: str  # /proc stat field 22: tells a reused pid from the original


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat from field 2 on: [name, state, ppid, ...]; None if the process is gone.
    OSError if it cannot be read (no file descriptor left in this process: it may be alive)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    name = text[text.index("(") + 1 : text.rindex(")")]
    return [name, *text[text.rindex(")") + 2 :].split()]


def controller_chain(pid: int | None = None) -> list[Process]:
    """The parent of pid (default: this process), up through shell wrappers to the first
    other program: Snakemake's `bash -c 'storbench run ...'` gives [bash, snakemake]."""
    chain = []
    pid = os.getppid() if pid is None else _parent(pid)
    while pid and pid > 1 and (fields := _stat_fields(pid)) is not None:
        chain.append(Process(pid, fields[0], fields[_START_TICKS]))
        if fields[0] not in SHELL_NAMES:
            break
        pid = int(fields[2])
    return chain


def _parent(pid: int) -> int:
    fields = _stat_fields(pid)
    return int(fields[2]) if fields else 0


def is_alive(process: Process) -> bool:
    """Whether process still runs; one that cannot be looked at now counts as alive (a watcher
    short of file descriptors must not stop a run whose controller is there)."""
    try:
        fields = _stat_fields(process.pid)
    except OSError:
        return True
    if fields is None or fields[1] in ("Z", "X"):  # gone, or a zombie nobody reaped yet
        return False
    return fields[_START_TICKS] == process.start_ticks


def this_process() -> Process:
    """This process, as a lock file records its holder."""
    fields = _stat_fields(os.getpid())
    assert fields is not None  # this process is alive
    return Process(os.getpid(), fields[0], fields[_START_TICKS])


def descendants(pid: int) -> list[int]:
    """Every process below pid (children, their children ...)."""
    found, index = [pid], 0
    while index < len(found):
        # each thread lists the children it started (Snakemake starts jobs from a pool)
        with contextlib.suppress(OSError):  # the process or one of its threads gone meanwhile
            for children in Path(f"/proc/{found[index]}/task").glob("*/children"):
                with contextlib.suppress(OSError):
                    found += [int(child) for child in children.read_text().split()]
        index += 1
    return found[1:]


def is_storbench_step(pid: int) -> bool:
    """A `storbench <step>` process (the entry point, or python -m storbench)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    program = [os.path.basename(arg.decode(errors="replace")) for arg in argv[:3]]
    return program[:1] == ["storbench"] or (
        program[0].startswith("python") and "storbench" in program[1:]
    )


def forward_interrupt(signum, frame) -> None:
    """SIGINT handler for the Snakemake process: SIGINT sent to Snakemake alone (by a CI
    runner or a supervisor, not a terminal's Ctrl-C to the whole group) makes Snakemake wait
    for its running jobs; their storbench steps get SIGTERM so they stop their tools the way
    Ctrl-C does, then Snakemake goes on with its own KeyboardInterrupt."""
    for pid in descendants(os.getpid()):
        if is_storbench_step(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
    signal.default_int_handler(signum, frame)


def forward_sigint_to_steps() -> None:
    """Install forward_interrupt (the Snakefile calls this; only the main thread can)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, forward_interrupt)


DEFAULT_JOB_RATE = (100, 1)  # Snakemake's --max-jobs-per-timespan 100/1s


def drop_job_rate_limiter(workflow) -> bool:
    """Take Snakemake's job rate limiter out of a local campaign's scheduler; True if it did.

    Its limit (--max-jobs-per-timespan, 100 per 1 s by default) throttles submissions to a
    cluster. To apply it, each round of the scheduler starts a Timer that runs one more round
    a timespan later, and that round starts another: every job's end adds a chain that never
    ends. A campaign of 400 runs spent a core on those rounds while its runs ran (each round
    looks at every run waiting for its target), beside the benchmark. Without the limiter a
    round follows each job's end, as in a dry run. A limit other than Snakemake's default is
    kept: someone asked for it. The workflow's start (onstart) calls this.
    """
    scheduler = getattr(workflow, "scheduler", None)
    if not getattr(workflow, "local_exec", False) or scheduler is None:
        return False
    if getattr(scheduler, "job_rate_limiter", None) is None:
        return False
    limit = getattr(workflow.scheduling_settings, "max_jobs_per_timespan", None)
    if (getattr(limit, "max_jobs", None), getattr(limit, "timespan", None)) != DEFAULT_JOB_RATE:
        return False
    scheduler.job_rate_limiter = None
    return True


def cancel_pending_timers() -> int:
    """Cancel every threading.Timer still waiting; return how many.

    Snakemake's job rate limiter schedules a re-evaluation of its queue a timespan (1 s) after
    each round, on a non-daemon Timer: the last one keeps a finished workflow's process alive
    until it fires. The workflow's end (onsuccess, onerror) calls this: no round follows.
    """
    pending = [
        thread
        for thread in threading.enumerate()
        if isinstance(thread, threading.Timer) and not thread.finished.is_set()
    ]
    for timer in pending:
        timer.cancel()
    return len(pending)
