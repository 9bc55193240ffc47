"""Run one iteration of one run on every host of its group, and keep the raw output.

Raw files go to ``<raw>/<run_id>/it<k>/a<attempt>/`` (a new attempt folder each time, so a
rerun never overwrites earlier raw output); the manifest ``it<k>/run.json`` is published
last and only when every host succeeded. A failed attempt keeps its files and a
``failed.txt`` saying why. Imports stay light: this is the benchmark path.

A run stops its tools when the program that started it (Snakemake) dies, even by SIGKILL:
a watch thread sees it gone and interrupts the run like a SIGTERM would.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import shlex
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from storbench.core import atomic, start_hook
from storbench.core import paths as paths_of
from storbench.core.model import Host
from storbench.core.secrets import Credentials, scrub, scrub_files
from storbench.core.specs import Manifest, RunSpec, start_skew_s
from storbench.hosts import open_files
from storbench.hosts.transport import (
    KILL_AFTER_S,
    SHELL_TIMEOUT_S,
    HostError,
    hold_signals,
    open_transport,
    program_name,
    raise_interrupt,
)
from storbench.run import faults, one_trip, ready, room, start, start_margin, target_lock
from storbench.run.attempt import (
    RunError,
    exit_reason,
    keep_log,
    now,
    output_tail,
    run_credentials,
)
from storbench.run.processes import controller_chain, is_alive
from storbench.run.service import run_service_iteration
from storbench.tools import get_tool
from storbench.tools.base import ENV_FILE_SCRIPT, SECRET_PLACEHOLDERS

FAULTS_RECORD = "faults.json"  # the fault commands as they ran, beside the raw output
FAILED_NOTE = "failed.txt"
PUBLISHED_COPY = "manifest.json"  # the manifest as published, kept in its attempt folder
CONTROLLER_POLL_S = 0.5
_ATTEMPT = re.compile(r"^a(\d+)$")


@dataclass
class HostResult:
    name: str
    command: list[str] = field(default_factory=list)
    exit_code: int | None = None
    start_time: str | None = None  # the host's own start stamp, else launch_time
    start_time_source: str | None = None  # "host" (its stamp) or "controller"
    launch_time: str | None = None  # when the controller launched the command
    round_trip_s: float | None = None  # a trivial command on the host, timed when armed
    clock_offset_s: float | None = None  # the host's clock minus ours, ± round_trip_s / 2
    armed_time: str | None = None  # the host's own stamp when its wait began
    setup_s: float | None = None  # a held start: from the launch to the tool's start hook
    end_time: str | None = None
    tool_version: str | None = None
    error: str | None = None
    cleanup_error: str | None = None  # leftovers of a failed tool that could not be killed
    stopped_for: str | None = None  # the host whose failure had this host's tool stopped
    over_time: bool = False  # it ran past its time limit (then SIGTERM, SIGKILL if still there)


def next_attempt_dir(iteration_dir: Path) -> tuple[int, Path, list[Path]]:
    """The new attempt's number and folder, and the folders of the attempts found lost."""
    iteration_dir.mkdir(parents=True, exist_ok=True)
    used = [int(m.group(1)) for p in iteration_dir.iterdir() if (m := _ATTEMPT.match(p.name))]
    attempt = max(used, default=0) + 1
    lost = _note_lost_attempts(iteration_dir, used, attempt)
    path = iteration_dir / f"a{attempt}"
    path.mkdir()
    return attempt, path, lost


def _note_lost_attempts(iteration_dir: Path, used: list[int], attempt: int) -> list[Path]:
    """An earlier attempt with neither a manifest nor FAILED_NOTE was killed (SIGKILL, power):
    it gets its note now, when the next attempt starts; the folders noted."""
    lost = []
    for number in used:
        folder = iteration_dir / f"a{number}"
        if (folder / PUBLISHED_COPY).exists() or (folder / FAILED_NOTE).exists():
            continue
        lost.append(folder)
        with contextlib.suppress(OSError):
            atomic.write_text(
                folder / FAILED_NOTE,
                f"{now()} lost: this attempt never finished (storbench was killed, or the"
                f" machine stopped); noted when attempt a{attempt} started\n",
            )
    return lost


@dataclass(frozen=True)
class HostPaths:
    """Where a host's job file and tool output live on that host."""

    workdir: str
    job_path: str
    output_path: str


def host_paths(
    spec: Host,
    tool,
    local_dir: Path,
    remote_dir: str,
    *,
    private: bool = False,
    shared: bool = False,
) -> HostPaths:
    """Local runs work in the raw folder itself, unless private files (keys) are involved;
    shared: other local hosts of the run work there too, so each has a job file of its own
    (per-host jobs differ, and the job file's path is what finds a host's tool to stop it)."""
    local = spec.transport == "local" and not private
    workdir = str(local_dir.resolve()) if local else remote_dir
    job_name = f"job.{spec.name}" if local and shared else "job"
    return HostPaths(
        workdir=workdir,
        job_path=f"{workdir}/{job_name}{tool.job_suffix}",
        output_path=f"{workdir}/{tool.output_name(spec.name)}",
    )


def stale_attempts_marker(workdir: str) -> str:
    """Text in the command line of every attempt's tool of this iteration ('.../it1/a')."""
    return workdir[: workdir.rindex("/a") + 2]


def _run_on_host(spec: RunSpec, host: Host, paths: HostPaths, job_text: str, local_dir: Path,
                 result: HostResult, credentials: Credentials | None, attempt: int,
                 barrier: start.StartBarrier,
                 early: start.EarlyRelease | None = None):  # fmt: skip
    tool = get_tool(spec.tool)
    name = host.name
    try:
        with open_transport(host) as transport:
            transport.check()
            me = target_lock.holder(spec.timeout_s)
            preparation = ready.Preparation(name)
            locks = preparation.lock(host.workdir, spec.target, me)
            finished = False
            try:
                remote = _prepare_host(spec, tool, transport, host, paths, job_text, local_dir,
                                       attempt, preparation, result)  # fmt: skip
                private_files: list[str] = []
                try:
                    argv = _command_with_secrets(
                        transport, tool, paths, job_text, credentials, private_files, spec.params
                    )
                    result.command = tool.run_command(
                        paths.job_path, paths.output_path, name, spec.params
                    )

                    def probe() -> float:
                        round_trip_s, result.clock_offset_s, precise = start.probe(transport)
                        if not precise:
                            barrier.imprecise(name)
                        result.round_trip_s = round(round_trip_s, 3)
                        return round_trip_s

                    release_epoch = barrier.arm(name, probe)
                    held = start_hook.VARIABLE in job_text
                    listening = early if held and barrier.listening else None
                    result.exit_code = _run_at_release(
                        spec, transport, argv, paths, local_dir, result, release_epoch, held,
                        listening,
                    )  # fmt: skip
                    if held:
                        _check_hook(result)
                        # a local host works in the raw folder: empty files there
                        _drop_empty(local_dir, tool.hook_output_names(job_text))
                finally:
                    transport.remove(private_files)
                result.end_time = now()
                local_output = local_dir / tool.output_name(name)
                if result.exit_code == 0:
                    _fetch_output(transport, tool, paths, local_output)
                    if problem := tool.output_problem(local_output):
                        result.error = f"host {name}: {problem}"
                else:
                    _kill_leftovers(transport, paths.job_path, result)
                    _fetch_what_exists(transport, tool, paths, local_output)
                tidy = _tidy_script(paths.workdir, host.keep_attempts) if remote else None
                _finish_host(transport, tidy, locks, me)
                finished = True
            finally:
                if not finished:
                    target_lock.release(transport, locks, me)
    except start.StartAborted as error:
        result.error = f"host {name}: {error}"
    except HostError as error:
        result.error = "\n".join([str(error), *getattr(error, "__notes__", ())])
    except Exception as error:  # reported per host; the iteration fails as a whole below
        result.error = f"host {name}: {type(error).__name__}: {error}"
    finally:  # a host that failed before the start must not leave the others waiting
        barrier.leave(name, f"host {name} failed before the synchronized start")


def _prepare_host(spec: RunSpec, tool, transport, host: Host, paths: HostPaths, job_text: str,
                  local_dir: Path, attempt: int, preparation: ready.Preparation,
                  result: HostResult) -> bool:  # fmt: skip
    """Locks, folders, room on the target, the job file and the tool's version, in one round
    trip after the locks preparation holds; whether the work folder is remote."""
    remote = paths.workdir != str(local_dir.resolve())
    if remote:  # attempts are numbered locally: this folder is another session's
        preparation.fresh_dir("workdir", paths.workdir)
    else:
        preparation.mkdirs("workdir", paths.workdir)
    for index, target_directory in enumerate(tool.target_directories(spec.target, host.name)):
        preparation.mkdirs(f"target{index}", target_directory)
    needed = tool.bytes_per_host(spec.params)
    directory = tool.target_directory(spec.target, host.name)
    check_room = bool(needed and directory and spec.target.get("type") == "directory")
    if check_room:  # its verdict is read below; the step itself never fails
        preparation.add("room", f"{room.room_script(directory, needed)}; exit 0", lambda o: "")
    job_script = one_trip.write_file_script(job_text, paths.job_path)
    if job_script is not None:
        preparation.add("job", job_script,
                        lambda o: f"cannot write {paths.job_path}: {o.err.strip()}")  # fmt: skip
    if tool.output_is_folder:
        preparation.mkdirs("output", paths.output_path)
    preparation.version(tool, kept_in=paths_of.host_versions_dir(host.workdir))
    outcomes = preparation.run(transport)
    if check_room:
        problem = room.room_problem(0, outcomes["room"].out, directory, needed, spec.run_id)
        if problem:
            raise HostError(host.name, problem)
    result.tool_version = ready.keep_version(outcomes, local_dir, host.name)
    if job_script is None:  # too large for the script
        transport.put_text(job_text, paths.job_path)
    if attempt > 1:  # a SIGKILLed campaign can leave the last attempt's tool running
        transport.kill_matching(stale_attempts_marker(paths.workdir))
    return remote


def _run_at_release(spec: RunSpec, transport, argv: list[str], paths: HostPaths, local_dir: Path,
                    result: HostResult, release_epoch: float, held: bool,
                    early: start.EarlyRelease | None = None) -> int:  # fmt: skip
    """Launch argv to start at the release instant (held: launched now, its job's start hook
    waiting, released early once every host's is, given early); record when it started on
    the host."""
    stderr_path = local_dir / f"{result.name}.stderr"
    fifo = None
    if early is not None:
        fifo = start.release_fifo(paths.workdir, result.name)
        early.expect(result.name, stderr_path, functools.partial(transport.release, fifo))
    result.launch_time = now()
    launched = time.time()
    wait_s = max(0.0, release_epoch - launched)
    command = (
        start.held_at_release(argv, release_epoch, paths.workdir, fifo)
        if held
        else start.at_release(argv, release_epoch)
    )
    try:
        exit_code = transport.run(
            command,
            timeout_s=spec.timeout_s + wait_s,  # the tool keeps its whole time limit
            stdout_path=local_dir / f"{result.name}.stdout",
            stderr_path=stderr_path,
            marker=paths.job_path,  # unique to this attempt on this host
            program=program_name(argv),  # errors name the tool, not the start wrapper
        )
    finally:
        result.over_time = time.time() - launched >= spec.timeout_s + wait_s
        if early is not None:
            early.gone(result.name)
        if fifo is not None and Path(paths.workdir) == local_dir.resolve():
            _drop_release_files(fifo)  # the raw folder keeps what the tool wrote, no more
    stamp, armed = start.take_stamps(stderr_path)
    result.start_time = start.iso(stamp) if stamp is not None else result.launch_time
    result.start_time_source = "host" if stamp is not None else "controller"
    if armed is not None:
        result.armed_time = start.iso(armed)
        if held:  # on the host's clock: its offset from ours taken out
            result.setup_s = round(armed - (result.clock_offset_s or 0.0) - launched, 3)
    return exit_code


def _drop_release_files(fifo: str) -> None:
    for path in (f"{fifo}{suffix}" for suffix in start.RELEASE_SUFFIXES):
        with contextlib.suppress(OSError):
            os.unlink(path)


def _check_hook(result: HostResult) -> None:
    """A tool whose start hook fails may skip its workload and still exit 0 (fio does)."""
    if result.exit_code == 0 and result.start_time_source != "host":
        result.error = (
            f"host {result.name}: the job's start hook ({start_hook.COMMAND}) left no start"
            " stamp on stderr: it failed, and the tool may have skipped its workload"
        )


def _drop_empty(folder: Path, names: list[str]) -> None:
    for name in names:
        path = folder / name
        with contextlib.suppress(OSError):
            if path.stat().st_size == 0:
                path.unlink()


def _command_with_secrets(
    transport,
    tool,
    paths: HostPaths,
    job_text: str,
    credentials,
    private_files: list[str],
    params: dict,
) -> list[str]:
    """The argv to start; keys go into 0600 files whose names extend the job path (the marker)."""
    if credentials is None:
        return tool.run_command(paths.job_path, paths.output_path, transport.spec.name, params)
    job_path = paths.job_path
    if any(placeholder in job_text for placeholder in SECRET_PLACEHOLDERS.values()):
        job_path = f"{paths.job_path}.private"
        filled = job_text
        for field, placeholder in SECRET_PLACEHOLDERS.items():
            filled = filled.replace(placeholder, tool.job_file_secret(credentials.field(field)))
        private_files.append(job_path)
        transport.put_private_text(filled, job_path)
    argv = tool.run_command(job_path, paths.output_path, transport.spec.name, params)
    if not tool.secret_env:
        return argv
    env_file = f"{paths.job_path}.env"
    lines = [f"{var}={shlex.quote(credentials.field(key))}" for var, key in tool.secret_env.items()]
    private_files.append(env_file)
    transport.put_private_text("\n".join(lines) + "\n", env_file)
    return ["sh", "-c", ENV_FILE_SCRIPT, "env-file", env_file, *argv]


def _kill_leftovers(transport, marker: str, result: HostResult) -> None:
    """A tool that crashed can leave children running (fio's job processes); stop them."""
    try:
        transport.kill_matching(marker)
    except HostError as error:
        result.cleanup_error = f"could not stop what is left of the tool: {error}"


def _fetch_output(transport, tool, paths: HostPaths, local_path: Path) -> None:
    if tool.output_is_folder:
        transport.fetch_tree(paths.output_path, local_path)
    else:
        transport.fetch(paths.output_path, local_path)


def _fetch_what_exists(transport, tool, paths: HostPaths, local_path: Path) -> None:
    """What a failed or interrupted tool left (partial output helps to see why); best effort."""
    if local_path.exists() or paths.output_path == str(local_path.resolve()):
        return
    with contextlib.suppress(Exception):
        _fetch_output(transport, tool, paths, local_path)


def _tidy_script(workdir: str, keep: int) -> str:
    """Shell removing this iteration's attempt folders on the host but the newest ``keep``:
    their output is in results/ now (a host's work folder would otherwise only grow)."""
    parent = workdir.rsplit("/", 1)[0]
    quoted = shlex.quote(parent)
    return (
        f"cd -- {quoted} 2>/dev/null || exit 0; ls -1 | grep -E '^a[0-9]+$' | sort -k1.2n"
        f' | head -n -{int(keep)} | while read -r old; do rm -rf -- "$old"; done'
        if keep
        else f"rm -rf -- {quoted}"
    )


def _finish_host(transport, tidy: str | None, locks: list[str], me: str) -> None:
    """Old attempt folders tidied and the locks released, in one round trip; never fails a run."""
    parts = [f"(\n{tidy}\n)"] if tidy else []
    parts.append(target_lock.release_script(locks, me))
    with contextlib.suppress(Exception):
        transport.own_shell("\n".join(parts), timeout_s=SHELL_TIMEOUT_S)


def _kill_everywhere(hosts: list[Host], paths: list[HostPaths], local_dir: Path, tool) -> None:
    """Every host at once: one after another, each tool's grace to end on SIGTERM added up,
    and a host not reached yet could still start its workload."""

    def kill(host: Host, host_paths_: HostPaths) -> None:
        try:
            with open_transport(host) as transport:
                transport.kill_matching(host_paths_.job_path)
                _fetch_what_exists(
                    transport, tool, host_paths_, local_dir / tool.output_name(host.name)
                )
        except Exception:  # best effort while interrupted; the next run starts a new attempt
            pass

    threads = [
        threading.Thread(target=kill, args=pair, name=f"kill-{pair[0].name}", daemon=True)
        for pair in zip(hosts, paths, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _failure_message(spec: RunSpec, results: list[HostResult], local_dir: Path) -> str:
    # a lock, the room or a folder refused before the tool ran on any host: it did not fail
    started = any(result.launch_time is not None for result in results)
    verdict = "failed" if started else "did not start"
    lines = [f"{spec.experiment}/{spec.run_id}: {spec.tool} {verdict}"]
    for result in results:
        if result.stopped_for and not result.error and result.exit_code != 0:
            lines.append(f"host {result.name}: {spec.tool} stopped, as host"
                         f" {result.stopped_for} failed")  # fmt: skip
        elif result.error:
            lines.append(result.error)
        elif result.exit_code is not None and result.exit_code != 0:
            reason = exit_reason(result.exit_code, get_tool(spec.tool).exit_statuses)
            if result.over_time and reason != "timed out":  # a stopped (SIGSTOP) or hung tool
                reason = (
                    f"timed out after {spec.timeout_s:g} s and {reason}: it did not stop on"
                    f" SIGTERM within {KILL_AFTER_S} s"
                )
            lines.append(f"host {result.name}: {spec.tool} {reason}; stderr tail:")
            tail = output_tail(local_dir / f"{result.name}.stderr") or output_tail(
                local_dir / f"{result.name}.stdout"
            )
            lines.extend(f"    {line}" for line in (tail or "(empty)").splitlines())
        if result.cleanup_error:
            lines.append(f"host {result.name}: {result.cleanup_error}")
    lines.append(f"raw output kept in {local_dir}")
    return "\n".join(lines)


def run_iteration(
    spec: RunSpec,
    iteration: int,
    job_file: str | dict[str, str],
    manifest_path: str,
    log_path: str | None = None,
    kept_as: str | None = None,
) -> Manifest:
    """Run, wait for every host, then publish the manifest; raise RunError on any failure.

    job_file: one job file for every host, or {host: job file} for per-host job files.
    log_path: the log this step writes to, kept as the attempt's own (attempt.keep_log);
    kept_as: the run's own log name to keep it by, when the step's log is not (a search probe).
    """
    if spec.wait_s:  # the workflow holds the target meanwhile: nothing else runs on it
        print(f"storbench: waiting {spec.wait_s:g} s before the run (experiment wait)", flush=True)
        time.sleep(spec.wait_s)
    open_files.allow_for(len(spec.hosts))  # every host of a run is started at once
    host_jobs = job_file if isinstance(job_file, dict) else None
    job_texts = {
        host["name"]: Path(host_jobs[host["name"]] if host_jobs else str(job_file)).read_text()
        for host in spec.hosts
    }
    iteration_dir = Path(manifest_path).parent
    attempt, local_dir, lost_dirs = next_attempt_dir(iteration_dir)
    keep_log(log_path, attempt, kept_as)
    watch = ControllerWatch()
    previous_term = signal.signal(signal.SIGTERM, raise_interrupt)  # Snakemake stops jobs so
    credentials: Credentials | None = None
    try:
        watch.start()
        credentials = run_credentials(spec)  # once: the tool's and the kept files' scrub
        if credentials is not None:  # a killed attempt never reached its own scrub
            for lost_dir in lost_dirs:
                scrub_files(lost_dir, credentials.values())
        if spec.execution == "service":
            placement = run_service_iteration(
                spec, local_dir, host_jobs or {}, job_texts, credentials
            )
        else:
            placement = _run_standalone(spec, iteration, attempt, local_dir, job_texts, credentials)
    except BaseException as error:
        shown = _without_keys(error, credentials)
        _note_failure(local_dir, shown)
        if shown is not error:
            raise shown from None
        raise
    finally:
        watch.stop()
        signal.signal(signal.SIGTERM, previous_term)
        if credentials is not None:  # the keys where the tool printed them: *** instead
            scrub_files(local_dir, credentials.values())
    if host_jobs:
        for host in placement["hosts"]:
            host["job_file"] = os.path.relpath(host_jobs[host["name"]], iteration_dir)
            host["job_file_sha256"] = _sha256(job_texts[host["name"]])
    first_job = host_jobs[spec.hosts[0]["name"]] if host_jobs else str(job_file)
    manifest = Manifest.from_dict(
        {
            "experiment": spec.experiment,
            "run_id": spec.run_id,
            "iteration": iteration,
            "attempt": attempt,
            "tool": spec.tool,
            "raw_dir": f"a{attempt}",
            "job_file": os.path.relpath(first_job, iteration_dir),
            "job_file_sha256": _sha256("".join(job_texts[h] for h in sorted(job_texts))),
            "params": spec.params,
            "target": spec.target,
            "step": spec.step,
            "prep_state": spec.prep_state,
            "reprepared": spec.reprepared,
            **placement,
        }
    )
    try:
        atomic.write_json(local_dir / PUBLISHED_COPY, manifest.to_dict())
        atomic.write_json(manifest_path, manifest.to_dict())
    except BaseException as error:  # a full disk: this attempt is not published after all
        with contextlib.suppress(OSError):
            (local_dir / PUBLISHED_COPY).unlink()
        _note_failure(local_dir, error)
        raise
    return manifest


def _without_keys(error: BaseException, credentials: Credentials | None) -> BaseException:
    """error, or a RunError of its text with *** for each key: a failure quotes the tool's
    output tail (standalone or a service's controller), and tools may print their keys."""
    text = str(error)
    if credentials is None or scrub(text, credentials.values()) == text:
        return error
    return RunError(scrub(text, credentials.values()))


def _note_failure(local_dir: Path, error: BaseException) -> None:
    """FAILED_NOTE in the attempt folder says why it has no manifest."""
    reason = str(error) or type(error).__name__
    if isinstance(error, KeyboardInterrupt):
        reason = f"interrupted ({reason})"
    with contextlib.suppress(OSError):
        atomic.write_text(local_dir / FAILED_NOTE, f"{now()} {reason}\n")


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _run_standalone(
    spec: RunSpec,
    iteration: int,
    attempt: int,
    local_dir: Path,
    job_texts: dict[str, str],
    credentials: Credentials | None,
) -> dict:
    """{'hosts': what ran on each host, 'faults': the fault commands as they ran (if any)}."""
    tool = get_tool(spec.tool)

    def remote_dir(host: Host) -> str:
        return paths_of.remote_attempt_dir(
            host.workdir, spec.experiment, spec.run_id, iteration, host.name, attempt
        )

    hosts = [Host.from_dict(h) for h in spec.hosts]
    private = credentials is not None
    shared = sum(host.transport == "local" for host in hosts) > 1
    paths = [
        host_paths(host, tool, local_dir, remote_dir(host), private=private, shared=shared)
        for host in hosts
    ]
    results = [HostResult(name=host.name) for host in hosts]
    held = any(start_hook.VARIABLE in text for text in job_texts.values())
    setup_history = start_margin.history_path(local_dir.parent, spec.tool, [h.name for h in hosts])
    learned = start_margin.learned_s(setup_history) if held else None
    own = tool.start_setup_s if held else 0.0
    listen = held and len(hosts) > 1
    barrier = start.StartBarrier(
        len(hosts), setup_s=learned or own, learned=learned is not None, listen=listen
    )
    early = start.EarlyRelease(barrier, len(hosts)) if listen else None
    threads = [
        threading.Thread(
            target=_run_on_host,
            args=(spec, host, host_paths_, job_texts[host.name], local_dir, result, credentials),
            kwargs={"attempt": attempt, "barrier": barrier, "early": early},
            name=f"run-{host.name}",
            daemon=True,
        )
        for host, host_paths_, result in zip(hosts, paths, results, strict=True)
    ]
    schedule = None
    try:
        for thread in threads:
            thread.start()
        if early is not None:
            threading.Thread(target=early.watch, name="early-release", daemon=True).start()
        schedule = faults.schedule_for_run(spec, hosts, paths, barrier.released, threads)
        stopping: list[threading.Thread] | None = None
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)
                if stopping is None and (failed := _first_failed(results)):
                    stopping = _stop_the_others(failed, hosts, paths, results, threads, barrier)
        for thread in stopping or ():
            thread.join()
    except KeyboardInterrupt:
        hold_signals()
        if early is not None:  # no host is released from here on
            early.stop()
        barrier.abort("the run was interrupted")  # a host still preparing never starts
        _kill_everywhere(hosts, paths, local_dir, tool)
        if schedule is not None:  # a paused or cut-off device is restored even now
            atomic.write_json(local_dir / FAULTS_RECORD, schedule.finish(interrupted=True))
        raise
    finally:
        if early is not None:
            early.stop()
    set_up = [result.setup_s for result in results if result.setup_s is not None]
    if held and set_up:  # failed runs too: a late host is what the next run must allow for
        start_margin.remember(setup_history, max(set_up))
    placement: dict = {}
    if schedule is not None:
        placement["faults"] = schedule.finish()
        atomic.write_json(local_dir / FAULTS_RECORD, placement["faults"])
    if any(r.error or r.exit_code != 0 for r in results):
        raise RunError(_failure_message(spec, results, local_dir))
    placement["hosts"] = [_host_record(tool, r) for r in results]
    if barrier.release_epoch is not None:
        placement["release_time"] = start.iso(barrier.release_epoch)
    placement["start_skew_s"] = start_skew_s(placement["hosts"])
    return placement


def _first_failed(results: list[HostResult]) -> str | None:
    """The first host whose launched tool failed, or whose session was lost, while it ran: the
    run has failed with it. (A problem found after a tool exited 0, such as its output, is
    found as the others end too: their own causes are worth more than a stop.)"""
    for result in results:
        ended_badly = result.exit_code not in (None, 0)
        lost = result.exit_code is None and result.error is not None
        if result.launch_time is not None and (ended_badly or lost):
            return result.name
    return None


def _stop_the_others(failed: str, hosts: list[Host], paths: list[HostPaths],
                     results: list[HostResult], threads: list[threading.Thread],
                     barrier: start.StartBarrier) -> list[threading.Thread]:  # fmt: skip
    """The tool on every host still running, stopped now rather than at the end of its
    runtime (an hour's run would hold the target and load the storage for nothing); each
    host's own thread then fetches what it wrote and releases its lock."""
    barrier.abort(f"host {failed} failed")  # a host not started yet never starts

    def stop(host: Host, host_paths_: HostPaths) -> None:
        # best effort: the tool's time limit stands behind it
        with contextlib.suppress(Exception), open_transport(host) as transport:
            transport.kill_matching(host_paths_.job_path)

    stoppers = []
    for host, host_paths_, result, thread in zip(hosts, paths, results, threads, strict=True):
        if thread.is_alive() and result.name != failed and result.exit_code is None:
            result.stopped_for = failed
            stoppers.append(
                threading.Thread(
                    target=stop, args=(host, host_paths_), daemon=True, name=f"stop-{host.name}"
                )
            )
    for stopper in stoppers:
        stopper.start()
    return stoppers


def _host_record(tool, result: HostResult) -> dict:
    record = {
        "name": result.name,
        "command": result.command,
        "exit_code": result.exit_code,
        "start_time": result.start_time,
        "start_time_source": result.start_time_source,
        "launch_time": result.launch_time,
        "end_time": result.end_time,
        "tool_version": result.tool_version,
        "output": tool.output_name(result.name),
        "stdout": f"{result.name}.stdout",
        "stderr": f"{result.name}.stderr",
    }
    if result.round_trip_s is not None:
        record["round_trip_s"] = result.round_trip_s
    if result.clock_offset_s is not None:
        record["clock_offset_s"] = result.clock_offset_s
    if result.armed_time is not None:
        record["armed_time"] = result.armed_time
    if result.setup_s is not None:
        record["setup_s"] = result.setup_s
    return record


# -- the controller watch ------------------------------------------------------------------


class ControllerWatch:
    """A thread that SIGTERMs this process (see hosts.base.raise_interrupt) when a process of
    controller_chain() is gone: a SIGKILLed Snakemake must not leave its tools running."""

    def __init__(self, poll_s: float = CONTROLLER_POLL_S):
        self._chain = controller_chain()
        self._poll_s = poll_s
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="controller-watch", daemon=True)

    def start(self) -> None:
        if self._chain:
            self._thread.start()

    def stop(self) -> None:
        self._stopped.set()

    def _watch(self) -> None:
        while not self._stopped.wait(self._poll_s):
            gone = next((p for p in self._chain if not is_alive(p)), None)
            if gone is not None:
                print(
                    f"storbench: {gone.name} (pid {gone.pid}), which started this run, has exited;"
                    " stopping the tool on every host",
                    file=sys.stderr,
                    flush=True,
                )
                os.kill(os.getpid(), signal.SIGTERM)
                return
