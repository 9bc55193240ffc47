"""One iteration in service mode: one controller (here) drives the services on every host.

The services were started once for the campaign (``storbench services start``); each
iteration checks they answer, prepares the hosts (target directory, tool version), runs
the tool's client locally with each host's own job file, and reads back every host's
actual start time. On Ctrl-C or SIGTERM the client and every service of the campaign
are stopped, so no tool process is left on any host.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from storbench.core import atomic, start_hook
from storbench.core import paths as paths_of
from storbench.core.addresses import with_port
from storbench.core.model import Host
from storbench.core.schema_names import CONTROLLER
from storbench.core.secrets import Credentials
from storbench.core.specs import RunSpec
from storbench.hosts import services
from storbench.hosts.transport import HostError, Transport, hold_signals, open_transport
from storbench.plan.durations import run_seconds
from storbench.run import (
    one_trip,
    ready,
    service_release,
    service_stuck,
    start_margin,
    target_lock,
)
from storbench.run.attempt import (
    RunError,
    exit_reason,
    now,
    output_tail,
)
from storbench.run.start import (
    LISTENING_DEADLINE_S,
    MARGIN_FLOOR_S,
    delivery_margin,
    hook_file_text,
    iso,
    release_fifo,
    stamps_in,
    waits_precisely,
)
from storbench.tools import get_tool
from storbench.tools.base import ENV_FILE_SCRIPT, SECRET_PLACEHOLDERS

# a host whose service was found waiting for ever for its job (service_stuck), with results
STUCK = "its job ended early (its job process killed as it started?)"


def run_service_iteration(
    spec: RunSpec,
    local_dir: Path,
    job_files: dict[str, str],
    job_texts: dict[str, str],
    credentials: Credentials | None,
) -> dict:
    """Run the controller; return the manifest part {controller, hosts} (raises on failure).

    job_files: each host's job file; job_texts: their texts, as the engine read them."""
    tool = get_tool(spec.tool)
    port = (spec.service or {})["port"]
    hosts = list(spec.hosts)
    missing = [h["name"] for h in hosts if h["name"] not in job_files]
    if missing:
        raise RunError(f"no job file for host(s) {', '.join(missing)}")
    if tool.service_job_shared:
        _check_one_job(spec, hosts, job_texts)
    if not tool.service_per_run:
        services.ensure_services(hosts, spec.tool, port)
    holder = target_lock.holder(spec.timeout_s)
    workers: dict[str, list[str]] = {}
    sessions = Sessions()
    released: set[str] = set()
    held = any(start_hook.RELEASE in text for text in job_texts.values())
    history = start_margin.history_path(
        local_dir.parent, f"{spec.tool}-service", [h["name"] for h in hosts]
    )
    learned = start_margin.learned_s(history) if held else None
    # no set-up learned yet: the hooks may go when all of them wait (run/service_release)
    fifos = _release_fifos(spec, hosts, port) if held and learned is None and len(hosts) > 1 else {}
    watchers: service_release.Watchers | None = None
    stuck: service_stuck.StuckWatch | None = None
    try:
        prepared = _prepare_hosts(spec, tool, hosts, port, local_dir, holder, sessions, held, fifos)
        if not all(prepared[name].precise for name in fifos):
            fifos = {}  # the portable wait cannot be released early: the time is the release
        if tool.service_per_run:
            workers = _start_workers(spec, tool, hosts, port, sessions)
            endpoints = [_controller_endpoint(host, port) for host in hosts]
        else:
            endpoints = [services.endpoint(host, port, spec.tool) for host in hosts]
        output_path = (local_dir / tool.output_name(CONTROLLER)).resolve()  # a unique marker
        if tool.output_is_folder:
            output_path.mkdir(parents=True, exist_ok=True)
        jobs = [str(Path(job_files[h["name"]]).resolve()) for h in hosts]
        wait_s = release = 0.0
        # the release and each host's set-up count from here: writing 128 hosts' jobs takes
        # tens of ms, which a set-up counted from after it would leave out of the next margin
        launched = time.time()
        if held:
            # the set-up learned from the launch on, else the tool's own on top of the floor;
            # listening, a deadline
            wait_s = (
                LISTENING_DEADLINE_S if fifos else learned or MARGIN_FLOOR_S + tool.start_setup_s
            )
            release = launched + wait_s
            jobs = _launch_jobs(hosts, job_texts, local_dir, release, fifos)
        argv = tool.controller_command(jobs, str(output_path), endpoints)
        start = now()
        if fifos:
            slowest = max(prepared[host["name"]].round_trip_s for host in hosts)
            deadline = service_release.Deadline(release, delivery_margin(slowest))
            watchers = service_release.Watchers(deadline, local_dir / "launch", len(hosts))
            watchers.start(sessions, hosts, fifos)
        stuck = _stuck_watch(spec, tool, hosts, port, sessions, watchers)
        # no look while the hosts measure: from when their I/O should have ended; a listening
        # start's wait_s is its deadline, not its release, which comes when every host waits
        # (a stuck host holds it): looked at until then, and again once its I/O should be over
        run_s = run_seconds(spec.params) or 0.0
        measuring = _io_window(watchers.deadline, run_s) if watchers is not None else None
        stuck.start(first_look_s=(0.0 if fifos else wait_s) + run_s, measuring=measuring)
        try:
            exit_code = _run_controller(
                spec, tool, jobs, endpoints, local_dir, str(output_path), wait_s, credentials
            )
        except KeyboardInterrupt:
            hold_signals()
            if workers:
                _stop_workers(hosts, workers, sessions)
            else:
                _stop_campaign_services(spec)
            raise
        end = now()
        stuck_pids = stuck.stop()
        stuck = None
        if watchers is not None:
            watchers.close(sessions, hosts)
            release = watchers.deadline.release_epoch
            watchers = None
        if workers:  # they end with the server; a worker left over has lost it
            _stop_workers(hosts, workers, sessions)
        cut_short = None if exit_code else tool.output_problem(output_path)
        # fio's client exits 0 without a host whose server's job was killed
        without_results = (
            {}
            if exit_code or cut_short
            else tool.hosts_without_results(
                output_path, {h["name"]: e for h, e in zip(hosts, endpoints, strict=True)}
            )
        )
        if not exit_code and not cut_short:  # a stuck host's job is gone, results or not
            without_results.update(
                {name: STUCK for name in stuck_pids if name not in without_results}
            )
        orphaned = set() if tool.service_per_run else set(without_results)
        finished = _finish_hosts(
            spec, tool, hosts, port, local_dir, prepared, holder, sessions, orphaned
        )
        released.update(finished)
        logs = {name: done.log for name, done in finished.items() if done.log}
        stamps = {name: iso(done.stamp) for name, done in finished.items() if done.stamp}
        set_up = {
            name: round(done.armed - launched, 3)  # the clocks' offset not known here
            for name, done in finished.items()
            if held and done.armed is not None
        }
        if set_up:  # failed runs too: a late host is what the next run must allow for
            start_margin.remember(history, max(set_up.values()))
        if exit_code != 0:
            raise RunError(
                client_failure(spec, tool, exit_code, local_dir, output_path.name, stuck_pids)
            )
        if cut_short:
            raise RunError(
                f"{spec.experiment}/{spec.run_id}: {spec.tool} client: {cut_short}"
                f"{''.join(f'; {line}' for line in stuck_lines(hosts, stuck_pids))}"
                f"\nraw output kept in {local_dir}"
            )
        if without_results:
            raise RunError(
                _without_results(spec, hosts, without_results, finished, stuck_pids, local_dir)
            )
        unstamped = [name for name in finished if held and name not in stamps]
        if unstamped:  # fio skips the I/O of a job whose exec_prerun fails, and exits 0
            raise RunError(
                f"{spec.experiment}/{spec.run_id}: the start hook ({start_hook.SCRIPT_NAME})"
                f" left no start stamp on {', '.join(unstamped)}: it failed, and {spec.tool}"
                f" may have skipped the workload there\nraw output kept in {local_dir}"
            )
        return {
            "execution": "service",
            **({"release_time": iso(release)} if held else {}),
            "controller": {
                "command": argv,
                "exit_code": exit_code,
                "start_time": start,
                "end_time": end,
                "output": output_path.name,
                "stdout": f"{CONTROLLER}.stdout",
                "stderr": f"{CONTROLLER}.stderr",
            },
            "hosts": [
                {
                    "name": host["name"],
                    "endpoint": endpoint,
                    "job_file": job_files[host["name"]],
                    "exit_code": exit_code,
                    # the host's own start (its job's exec_prerun), else when the client started
                    "start_time": stamps.get(host["name"]) or start,
                    "start_time_source": "host" if host["name"] in stamps else "controller",
                    **_arrival(finished.get(host["name"]), set_up.get(host["name"])),
                    "end_time": end,
                    "tool_version": prepared[host["name"]].version,
                    "output": output_path.name,
                    **({"service_log": logs[host["name"]]} if host["name"] in logs else {}),
                }
                for host, endpoint in zip(hosts, endpoints, strict=True)
            ],
        }
    finally:
        if stuck is not None:
            stuck.stop()
        if watchers is not None:
            watchers.close(sessions, hosts)
        _release_locks(spec, [h for h in hosts if h["name"] not in released], holder, sessions)
        sessions.close()


def _launch_jobs(
    hosts: list[dict], job_texts: dict[str, str], local_dir: Path, release_epoch: float,
    fifos: dict[str, str],
) -> list[str]:  # fmt: skip
    """Each host's job as launched, its start hook given the release and the FIFO it listens
    on, if any (kept in raw/launch/)."""
    folder = local_dir / "launch"
    folder.mkdir(exist_ok=True)
    jobs = []
    for host in hosts:
        path = folder / f"{host['name']}.job"
        arguments = service_release.hook_arguments(release_epoch, fifos.get(host["name"]))
        text = job_texts[host["name"]].replace(start_hook.RELEASE, arguments)
        atomic.write_text(path, text)
        jobs.append(str(path.resolve()))
    return jobs


def _arrival(done: Finished | None, setup_s: float | None) -> dict:
    """A host record's armed_time and setup_s, where its hook stamped its arrival."""
    if done is None or done.armed is None:
        return {}
    record: dict = {"armed_time": iso(done.armed)}
    if setup_s is not None:
        record["setup_s"] = setup_s
    return record


def _controller_endpoint(host: dict, port: int) -> str:
    return with_port(services.controller_address(services.host_spec(host)), port)


def _start_workers(
    spec: RunSpec, tool, hosts: list[dict], port: int, sessions: Sessions
) -> dict[str, list[str]]:
    """{host: argv} of each host's worker, started detached; it dials the controller's server
    (and retries until it is up), so nothing here waits for it."""

    def start(host: dict) -> list[str]:
        host_spec = services.host_spec(host)
        controller = services.controller_address(host_spec)
        own_port = services.port_of(host_spec, spec.tool, tool.worker_port)
        argv = tool.worker_command(controller, port, own_port)
        if not argv:  # the tool's client starts what runs on the hosts itself
            return argv
        folder = services.service_dir(host_spec, spec.tool, port)
        transport = sessions.of(host)
        transport.kill_matching(" ".join(argv))  # a worker an interrupted run left
        code, _, err = transport.shell(services.detached_script(folder, argv), timeout_s=60)
        if code != 0:
            raise HostError(host_spec.name, f"{spec.tool} worker did not start: {err.strip()}")
        return argv

    return services.on_every_host(hosts, start, "starting the workers")


def _stop_workers(hosts: list[dict], workers: dict[str, list[str]], sessions: Sessions) -> None:
    def stop(host: dict) -> None:
        sessions.of(host).kill_matching(" ".join(workers[host["name"]]))

    started = [h for h in hosts if workers.get(h["name"])]
    with contextlib.suppress(Exception):  # best effort; `snakemake cleanup` is the backstop
        services.on_every_host(started, stop, "stopping")


def _check_one_job(spec: RunSpec, hosts: list[dict], texts: dict[str, str]) -> None:
    """The tool sends one job to every service: host-fact values must not differ by host."""
    first = hosts[0]["name"]
    differ = [h["name"] for h in hosts if texts[h["name"]] != texts[first]]
    if differ:
        raise RunError(
            f"{spec.experiment}/{spec.run_id}: {spec.tool} services all run the controller's "
            f"one job, but the job files of {', '.join(differ)} differ from {first}'s (host "
            "facts with different values); use standalone execution or equal values"
        )


def _run_controller(
    spec: RunSpec, tool, jobs: list[str], endpoints: list[str], local_dir: Path, output: str,
    wait_s: float, credentials: Credentials | None,
) -> int:  # fmt: skip
    """The tool's client here, its time limit extended by the held start's wait. S3 keys
    reach it through private files (a job file with the keys filled in, an environment
    file) in a folder of its own, never through its argv."""
    controller = Host(name=CONTROLLER, transport="local")
    with contextlib.ExitStack() as stack:
        argv = tool.controller_command(jobs, output, endpoints)
        if credentials is not None:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="storbench-")))
            jobs = [_private_job(folder, index, job, tool, credentials) for index, job in
                    enumerate(jobs)]  # fmt: skip
            argv = tool.controller_command(jobs, output, endpoints)
            if tool.secret_env:
                lines = [
                    f"{var}={shlex.quote(credentials.field(key))}"
                    for var, key in tool.secret_env.items()
                ]
                env_file = _private_file(folder / "controller.env", "\n".join(lines) + "\n")
                argv = ["sh", "-c", ENV_FILE_SCRIPT, "env-file", env_file, *argv]
        with open_transport(controller) as transport:
            return transport.run(
                argv,
                timeout_s=spec.timeout_s + wait_s,
                stdout_path=local_dir / f"{CONTROLLER}.stdout",
                stderr_path=local_dir / f"{CONTROLLER}.stderr",
                marker=output,  # absolute and unique: stops exactly this client
            )


def _private_job(folder: Path, index: int, job: str, tool, credentials) -> str:
    """The job file itself, or a private copy with the keys in place of the placeholders."""
    text = Path(job).read_text()
    if not any(placeholder in text for placeholder in SECRET_PLACEHOLDERS.values()):
        return job
    for field, placeholder in SECRET_PLACEHOLDERS.items():
        text = text.replace(placeholder, tool.job_file_secret(credentials.field(field)))
    return _private_file(folder / f"{index}-{Path(job).name}", text)


def _private_file(path: Path, text: str) -> str:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    return str(path)


@dataclass
class Prepared:
    version: str | None
    log_offset: int | None  # bytes in the service's log before the run
    round_trip_s: float  # the preparation's, all hosts at once
    precise: bool = False  # its release FIFO made, and the hooks' precise wait there


class Sessions:
    """One open transport per host for the whole iteration (each phase uses it from its own
    thread, one phase after another): a host is connected to once per run."""

    def __init__(self) -> None:
        self._open: dict[str, Transport] = {}
        self._lock = threading.Lock()

    def of(self, host: dict) -> Transport:
        spec = services.host_spec(host)
        with self._lock:
            transport = self._open.get(spec.name)
        if transport is None:
            transport = open_transport(spec)
            with self._lock:
                self._open[spec.name] = transport
        return transport

    def drop(self, host: dict) -> None:
        """Close a host's transport after an error: its next use connects afresh."""
        with self._lock:
            transport = self._open.pop(host["name"], None)
        if transport is not None:
            with contextlib.suppress(Exception):
                transport.close()

    def close(self) -> None:
        with self._lock:
            opened, self._open = list(self._open.values()), {}
        for transport in opened:
            with contextlib.suppress(Exception):
                transport.close()


def _prepare_hosts(
    spec: RunSpec, tool, hosts: list[dict], port: int, local_dir: Path, holder: str, sessions,
    held: bool, fifos: dict[str, str],
) -> dict:  # fmt: skip
    """Target locks taken, target directories made, old start stamps removed, the start
    hook's script left (held) and its release FIFO made (fifos), tool version and the
    service log's size read: per host, at once, in one round trip each."""

    def prepare(host: dict) -> Prepared:
        host_spec = services.host_spec(host)
        preparation = ready.Preparation(host_spec.name)
        preparation.lock(host_spec.workdir, spec.target, holder)
        for index, directory in enumerate(tool.target_directories(spec.target, host_spec.name)):
            preparation.mkdirs(f"target{index}", directory)
        stamps = " ".join(map(shlex.quote, _stamp_paths(host_spec, spec, tool, port)))
        if stamps:  # best effort, like Transport.remove; no rm where there is none
            preparation.add(
                "stamps",
                f'for f in {stamps}; do if [ -e "$f" ] || [ -h "$f" ]; then rm -f -- "$f"; fi;'
                " done; exit 0",
                lambda o: "",
            )
        folder = services.service_dir(host_spec, spec.tool, port)
        if held:
            hook = one_trip.write_file_script(
                hook_file_text(), f"{folder}/{start_hook.SCRIPT_NAME}"
            )
            assert hook is not None  # a small text
            preparation.add("hook", hook, lambda o: f"cannot write the start hook: {o.err.strip()}")
        if host_spec.name in fifos:
            preparation.add("fifo", service_release.prepare_script(fifos[host_spec.name]),
                            lambda o: "")  # fmt: skip
        if tool.service_per_run:  # the binary on disk starts with the run: kept per its file
            preparation.version(tool, kept_in=paths_of.host_versions_dir(host_spec.workdir))
        else:
            preparation.version(tool, folder)
        if tool.service_log_results:
            log = shlex.quote(_log_path(host_spec, spec, port))
            preparation.add("log_size", f"wc -c < {log} 2>/dev/null; exit 0", lambda o: "")
        began = time.monotonic()
        outcomes = preparation.run(sessions.of(host))
        round_trip_s = time.monotonic() - began
        version = ready.keep_version(outcomes, local_dir, host_spec.name)
        offset = None
        if tool.service_log_results:
            size = outcomes["log_size"].out.strip()
            offset = int(size) if size.isdigit() else 0
        precise = "fifo" in outcomes and waits_precisely(outcomes["fifo"].err)
        return Prepared(version, offset, round_trip_s, precise)

    return services.on_every_host(hosts, prepare, "preparing the hosts")


@dataclass
class Finished:
    log: str | None  # the file with what the host's service logged during the run
    stamp: float | None  # the host's own start (epoch seconds), from the stamps its job left
    armed: float | None = None  # when its start hook began to wait (the host's clock)
    stopped: tuple[str, ...] = ()  # pids its service's killed job left, stopped


def _finish_hosts(spec: RunSpec, tool, hosts: list[dict], port: int, local_dir: Path,
                  prepared: dict, holder: str, sessions,
                  orphaned: set[str]) -> dict[str, Finished]:  # fmt: skip
    """After the run, per host in one round trip: the processes its service's killed job
    left (orphaned hosts), stopped first, as they still work on the target; what its service
    logged during the run (kept as a file), its start stamp, and its target locks released.
    A host that could not be read is absent (its rows then come from the run's totals, its
    start from the controller's, and its locks are released once more at the end)."""

    def finish(host: dict) -> Finished | None:
        host_spec = services.host_spec(host)
        steps = one_trip.Steps()
        if host_spec.name in orphaned:
            folder = services.service_dir(host_spec, spec.tool, port)
            argv = services.service_argv(host_spec, spec.tool, port)
            steps.add("orphans", services.orphans_script(folder, argv))
        if tool.service_log_results:
            offset = prepared[host_spec.name].log_offset or 0
            log = shlex.quote(_log_path(host_spec, spec, port))
            steps.add("log", f"tail -c +{offset + 1} {log}; exit 0")
        paths = " ".join(map(shlex.quote, _stamp_paths(host_spec, spec, tool, port)))
        if paths:
            steps.add("stamps", f"cat {paths} 2>/dev/null; exit 0")
        locks = [
            path
            for _, path in target_lock.target_locks(host_spec.workdir, host_spec.name, spec.target)
        ]
        steps.add("release", target_lock.release_script(locks, holder))
        try:
            outcomes = one_trip.run(sessions.of(host), steps, timeout_s=60)
        except (HostError, one_trip.ScriptFailed):  # the run's totals stand
            sessions.drop(host)  # the locks are released once more, on a new connection
            return None
        log_name = None
        if "log" in outcomes:
            log_name = tool.service_log_name(host_spec.name)
            atomic.write_text(local_dir / log_name, outcomes["log"].out)
        stamp, armed = (
            _host_stamps(outcomes["stamps"].out) if "stamps" in outcomes else (None, None)
        )
        stopped = tuple(outcomes["orphans"].out.split()) if "orphans" in outcomes else ()
        return Finished(log_name, stamp, armed, stopped)

    results = services.on_every_host(hosts, finish, "finishing the run")
    return {name: done for name, done in results.items() if done is not None}


def _host_stamps(text: str) -> tuple[float | None, float | None]:
    """(start, armed) from the start hook's stamps; numjobs clones each stamp, and the host
    started when its first clone did. A job's own exec_prerun may print bare epoch times."""
    start, armed = stamps_in(text)
    if start is None:
        bare = []
        for word in text.split():
            try:
                bare.append(float(word))
            except ValueError:
                continue
        start = min(bare) if bare else None
    return start, armed


def _without_results(spec: RunSpec, hosts: list[dict], problems: dict[str, str],
                     finished: dict[str, Finished], stuck: dict[str, tuple[str, ...]],
                     local_dir: Path) -> str:  # fmt: skip
    """Why a run whose client exited 0 fails: each host without results, in the run's order,
    the service's processes found waiting for ever for its job, and those its service's
    killed job left, stopped."""
    lines = [
        f"{spec.experiment}/{spec.run_id}: {spec.tool} client exited 0 without every host's results"
    ]
    for host in (h["name"] for h in hosts if h["name"] in problems):
        done = finished.get(host)
        stopped = (
            f"; stopped the processes it left: {' '.join(done.stopped)}"
            if done is not None and done.stopped
            else ""
        )
        waited = (
            f"; stopped its service's processes left waiting for it for ever: {' '.join(pids)}"
            if (pids := stuck.get(host))
            else ""
        )
        lines.append(f"host {host}: {problems[host]}{waited}{stopped}")
    return "\n".join([*lines, f"raw output kept in {local_dir}"])


def _io_window(deadline: service_release.Deadline, run_s: float):
    """When a listening start's hosts measure, as known at the moment (an early release moves
    it): (start, end) epochs."""
    return lambda: (deadline.release_epoch, deadline.release_epoch + run_s)


def _stuck_watch(
    spec: RunSpec, tool, hosts: list[dict], port: int, sessions: Sessions,
    watchers: service_release.Watchers | None,
) -> service_stuck.StuckWatch:  # fmt: skip
    """The looks at each host's service while the client runs (none where the tool has no
    script); a host found stuck no longer holds the others' listening start."""
    scripts = {}
    if not tool.service_per_run:  # a per-run worker ends with the client's server
        for host in hosts:
            host_spec = services.host_spec(host)
            folder = services.service_dir(host_spec, spec.tool, port)
            argv = services.service_argv(host_spec, spec.tool, port)
            scripts[host_spec.name] = tool.stuck_service_script(folder, argv)
    on_stuck = watchers.gone if watchers is not None else None
    return service_stuck.StuckWatch(scripts, sessions, hosts, on_stuck)


def _release_locks(spec: RunSpec, hosts: list[dict], holder: str, sessions) -> None:
    """The locks of hosts whose run did not finish (failed, interrupted), best effort."""

    def release(host: dict) -> None:
        host_spec = services.host_spec(host)
        paths = [
            path
            for _, path in target_lock.target_locks(host_spec.workdir, host_spec.name, spec.target)
        ]
        target_lock.release(sessions.of(host), paths, holder)

    with contextlib.suppress(Exception):  # never hide the run's own error behind this
        services.on_every_host(hosts, release, "releasing the target locks")


def _release_fifos(spec: RunSpec, hosts: list[dict], port: int) -> dict[str, str]:
    """Each host's release FIFO, in its service's folder (where the hook runs)."""
    fifos = {}
    for host in hosts:
        host_spec = services.host_spec(host)
        folder = services.service_dir(host_spec, spec.tool, port)
        fifos[host_spec.name] = release_fifo(folder, host_spec.name)
    return fifos


def _stamp_paths(host_spec: Host, spec: RunSpec, tool, port: int) -> list[str]:
    folder = services.service_dir(host_spec, spec.tool, port)
    return [f"{folder}/{name}" for name in tool.start_stamp_names(spec.to_dict())]


def _log_path(host_spec: Host, spec: RunSpec, port: int) -> str:
    return f"{services.service_dir(host_spec, spec.tool, port)}/{services.LOG_NAME}"


def _stop_campaign_services(spec: RunSpec) -> None:
    service = spec.service or {}
    # best effort while interrupted; `snakemake cleanup` stops the rest
    with contextlib.suppress(Exception):
        services.stop_services(service["hosts"], service["tool"], service["port"])


def stuck_lines(hosts: list[dict], stuck: dict[str, tuple[str, ...]]) -> list[str]:
    """Each host, in the run's order, whose service the stuck watch found waiting for ever for
    its job, with the processes it stopped there."""
    return [
        f"host {host}: its service waited for ever for its job; stopped its processes:"
        f" {' '.join(stuck[host])}"
        for host in (h["name"] for h in hosts)
        if stuck.get(host)
    ]


def client_failure(spec: RunSpec, tool, exit_code: int, local_dir: Path, output_name: str,
                   stuck: dict[str, tuple[str, ...]] | None = None) -> str:  # fmt: skip
    """Why the controller failed: each host it says it lost first, then each host whose service
    the stuck watch stopped, then the tail of what it wrote (a tool's client may write its
    clients' errors into its output file, not stderr)."""
    reason = exit_reason(exit_code, tool.exit_statuses)
    sources = (f"{CONTROLLER}.stderr", f"{CONTROLLER}.stdout", output_name)
    source, tail = next(
        ((name, text) for name in sources if (text := output_tail(local_dir / name))),
        ("stderr", None),
    )
    lost = "".join(
        f"host {host}: lost mid-run (its service or the host went away); "
        for host in tool.lost_hosts(_text(local_dir / output_name))
    )
    lost += "".join(f"{line}; " for line in stuck_lines(list(spec.hosts), stuck or {}))
    return (
        f"{spec.experiment}/{spec.run_id}: {spec.tool} client {reason}; {lost}{source} tail:\n    "
        + "\n    ".join((tail or "(empty)").splitlines())
        + f"\nraw output kept in {local_dir}"
    )


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
