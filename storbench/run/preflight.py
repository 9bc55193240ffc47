"""Before an experiment's first run: every host reachable, the tool there, room on the target.

Hosts whose tool versions differ are a warning ('warnings' in the report, printed), or an
error with the experiment's ``require_same_version``. Where the hosts' workers dial the
controller (``controller_port`` in the spec), each host opens a connection to its
``controller_address`` at that port, which this machine listens on meanwhile: a wrong
address fails here, named, where a run would wait for its workers until its time limit.

All hosts are checked at once; the error lists each bad host and why, so a 100-client
campaign does not fail one host at a time. Light imports: this is on the run path.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import re
import shlex
import socket
import subprocess
import time
from collections.abc import Sequence

from storbench.core import atomic
from storbench.core.model import Host
from storbench.core.versions import differ_across_hosts, hosts_by_version
from storbench.hosts import open_files, services
from storbench.hosts.transport import HostError, open_transport
from storbench.run import one_trip, room
from storbench.run.start import CLOCK, clock_offset
from storbench.tools import get_tool

CHECK_TIMEOUT_S = 60.0
REACH_TIMEOUT_S = 5  # a connection to the controller not made by then: a wrong address
REACH_NAME = "storbench-reach"  # $0 of the host's connecting shell


class PreflightError(RuntimeError):
    pass


def check_host(
    host: dict, tool, target: dict, requirements: Sequence[dict] = (), controller_port: int = 0
) -> dict:
    """The host's facts, or its 'error'; with controller_port, whether it reaches this
    machine at its controller_address there."""
    spec = Host.from_dict(host)
    report: dict = {"name": spec.name}
    try:
        with open_transport(spec) as transport:
            transport.check()
            transport.check_file_transfer()  # job files go up, outputs come back
            directory = tool.target_directory(target, spec.name) or target.get("path")
            if target.get("type") == "s3":
                directory = None
            writable = directory if target.get("type") == "directory" else None
            reach = (services.controller_address(spec), controller_port)
            report.update(
                _facts(transport, tool, directory, requirements, writable, spec.workdir,
                       reach if controller_port else None)
            )  # fmt: skip
    except HostError as error:
        report["error"] = str(error)
    except Exception as error:  # reported per host, like the runner
        report["error"] = f"host {spec.name}: {type(error).__name__}: {error}"
    return report


def _facts(
    transport,
    tool,
    directory: str | None,
    requirements: Sequence[dict] = (),
    writable: str | None = None,
    workdir: str | None = None,
    reach: tuple[str, int] | None = None,
) -> dict:
    """Clock, room, tool version and the experiment's requirements in one round trip; the
    clock is read at the script's start and end, so its offset does not count the time the
    other steps took."""
    steps = one_trip.Steps()
    steps.add("clock_start", CLOCK)
    steps.add("version", shlex.join(tool.version_command()))  # a failure stops the script
    if directory:
        steps.add("room", room.free_bytes_script(directory))
    steps.add("clock_end", CLOCK)
    for index, requirement in enumerate(requirements):
        steps.add(f"requirement{index}", shlex.join(requirement["argv"]))
    if writable:  # last: a failing step ends the script
        steps.add("writable", room.writable_script(writable))
    if workdir:  # the runs' locks, job files and outputs
        steps.add("workdir", room.writable_script(workdir))
    if reach:
        steps.add("reach", reach_script(*reach))
    before = time.time()
    try:
        outcomes = one_trip.run(transport, steps, timeout_s=CHECK_TIMEOUT_S)
    except one_trip.ScriptFailed as error:
        raise HostError(transport.spec.name, f"checking the host: {error}") from None
    after = time.time()
    version = outcomes.get("version")
    if version is None:  # the clock's step failed
        raise HostError(transport.spec.name, f"checking the host: {CLOCK!r} failed")
    if version.rc != 0:
        detail = (version.err.strip() or version.out.strip()).splitlines()[-1:] or [""]
        raise HostError(transport.spec.name, tool.unusable(version.rc, detail[0]))
    text = version.out.strip() or version.err.strip()
    facts: dict = {"tool_version": text.splitlines()[0] if text else ""}
    if (found_version := tool.version_of(text)) is not None:
        facts["version"] = found_version  # what the hosts' versions are compared by
    if "clock_end" in outcomes:  # else the room's step failed: room and clock unknown
        start, end = outcomes["clock_start"].out, outcomes["clock_end"].out
        offset = clock_offset(start, end, before, after)
        if offset is not None:
            facts["clock_offset_s"] = offset
    if "room" in outcomes:
        facts["free_bytes"] = room.free_bytes_from(outcomes["room"].rc, outcomes["room"].out)
    if (found := outcomes.get("writable")) and (
        problem := room.writable_problem(found.rc, found.out, writable or "")
    ):
        raise HostError(transport.spec.name, problem)
    if (found := outcomes.get("workdir")) and (
        problem := room.writable_problem(found.rc, found.out, workdir or "", "workdir")
    ):
        raise HostError(transport.spec.name, problem)
    for index, requirement in enumerate(requirements):
        outcome = outcomes.get(f"requirement{index}")
        if outcome is not None and outcome.rc != 0:
            raise HostError(transport.spec.name, requirement_failed(requirement, outcome))
    if reach and (found := outcomes.get("reach")):
        if found.rc != 0:
            raise HostError(transport.spec.name, unreached(tool, transport.spec, reach, found))
        facts["reaches_controller"] = f"{reach[0]}:{reach[1]}"
    return facts


def reach_script(address: str, port: int) -> str:
    """A TCP connection to address:port from the host (bash's /dev/tcp), time-bounded; a
    host without bash or timeout is not checked."""
    connect = shlex.quote('exec 3<>"/dev/tcp/$1/$2"')
    return (
        "command -v bash >/dev/null 2>&1 && command -v timeout >/dev/null 2>&1 || exit 0; "
        f"timeout {REACH_TIMEOUT_S} bash -c {connect} {REACH_NAME} {shlex.quote(address)} "
        f"{int(port)}"
    )


def unreached(tool, host: Host, reach: tuple[str, int], outcome: one_trip.Outcome) -> str:
    """Why a host did not reach the controller, and the key that says where it is."""
    address, port = reach
    if outcome.rc == 124:
        detail = f"no connection within {REACH_TIMEOUT_S} s"
    else:
        # bash names its script first: "storbench-reach: line 1: <address>: <why>"
        said = re.sub(rf"^{REACH_NAME}: (line \d+: )?", "", first_line_said(outcome))
        detail = said or f"exit {outcome.rc}"
    key = f"hosts.{host.group}.controller_address" if host.group else "controller_address"
    return (
        f"cannot reach the controller at {address}:{port} ({detail}); {tool.name} workers "
        f"dial it there in every run: set {key} to this machine's address as the host "
        "reaches it"
    )


@contextlib.contextmanager
def controller_listening(port: int, backlog: int):
    """This machine listening on port (every address) while the hosts connect, unaccepted:
    the kernel completes each handshake. Yields a warning instead when the port cannot be
    had (another run's server on it): the hosts are then not asked to connect. Port 0:
    nothing to listen on."""
    if not port:
        yield None
        return
    family = socket.AF_INET6 if socket.has_dualstack_ipv6() else socket.AF_INET
    try:
        listener = socket.create_server(
            ("", port), family=family, backlog=max(128, backlog),
            dualstack_ipv6=family == socket.AF_INET6,
        )  # fmt: skip
    except OSError as error:
        why = "in use" if error.errno == errno.EADDRINUSE else (error.strerror or str(error))
        yield (
            f"the controller's port {port} could not be listened on for the check ({why}): "
            "whether the hosts reach the controller was not checked"
        )
        return
    with listener:
        yield None


def requirement_failed(requirement: dict, outcome: one_trip.Outcome) -> str:
    """A requirement's problem, with its command, exit code and first line of what it said."""
    command = shlex.join(requirement["argv"])
    return f"{requirement['problem']} ('{command}' exited {outcome.rc}: {first_line_said(outcome)})"


def first_line_said(outcome: one_trip.Outcome) -> str:
    """The first line of a step's stderr, else of its stdout; empty when it said nothing."""
    return next(iter((outcome.err.strip() or outcome.out.strip()).splitlines()), "")


def controller_problems(requirements: Sequence[dict]) -> list[str]:
    """Each requirement this machine (a service run's controller) fails, as a line naming it."""
    problems = []
    for requirement in requirements:
        try:
            done = subprocess.run(
                requirement["argv"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                timeout=CHECK_TIMEOUT_S,
            )  # fmt: skip
            outcome = one_trip.Outcome(done.returncode, done.stdout, done.stderr)
        except FileNotFoundError:
            outcome = one_trip.Outcome(127, "", f"{requirement['argv'][0]}: not found")
        except subprocess.TimeoutExpired:
            outcome = one_trip.Outcome(124, "", f"no answer within {CHECK_TIMEOUT_S:g} s")
        if outcome.rc != 0:
            where = f"the controller ({socket.gethostname()})"
            problems.append(f"{where}: {requirement_failed(requirement, outcome)}")
    return problems


def run_preflight(spec: dict, output_path: str) -> dict:
    """Check every host in parallel; publish the report, or raise naming every bad host."""
    tool = get_tool(spec["tool"])
    hosts = spec["hosts"]
    open_files.allow_for(len(hosts))  # before any host: the runs will start them all at once
    requirements = spec.get("requirements", [])
    port = int(spec.get("controller_port", 0))
    workers = services.workers(hosts)
    with (
        controller_listening(port, len(hosts)) as unchecked,
        concurrent.futures.ThreadPoolExecutor(workers) as pool,
    ):
        port = 0 if unchecked else port

        def check(host: dict) -> dict:
            return check_host(host, tool, spec["target"], requirements, port)

        reports = list(pool.map(check, hosts))
    here = controller_problems(spec.get("controller_requirements", []))
    bad = [r for r in reports if "error" in r]
    if bad or here:
        where = [*(["the controller"] if here else []),
                 *([f"{len(bad)} of {len(hosts)} host(s)"] if bad else [])]  # fmt: skip
        lines = [f"{spec['experiment']}: preflight failed on {' and on '.join(where)}"]
        lines += [f"  {line}" for line in here] + [f"  {r['error']}" for r in bad]
        raise PreflightError("\n".join(lines))
    versions = hosts_by_version((r["name"], r.get("version")) for r in reports)
    warning = differ_across_hosts(spec["tool"], versions)
    if warning and spec.get("require_same_version"):
        raise PreflightError(
            f"{spec['experiment']}: preflight failed: {warning} (require_same_version: true)"
        )
    report = {"experiment": spec["experiment"], "tool": spec["tool"], "hosts": reports}
    report["versions"] = versions
    report["warnings"] = [w for w in (unchecked, warning) if w]
    atomic.write_json(output_path, report)
    return report
