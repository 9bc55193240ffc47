"""Tool services on the client hosts (fio --server): start once, check readiness, stop.

Each service runs detached in ``<workdir>/services/<tool>-<address>-<port>/`` on its host (its log
and pid there); its own command line is the marker that finds and stops it. Readiness is
checked from the controller (where the tool's client runs): the service's port accepts a
TCP connection. Imports stay light: this is the benchmark path.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import shlex
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from storbench.core import paths
from storbench.core.addresses import bare, with_port
from storbench.core.model import DEFAULT_CONNECTION, Host
from storbench.hosts import open_files
from storbench.hosts.base import TERM_GRACE_S
from storbench.hosts.transport import HostError, open_transport
from storbench.tools import get_tool

READY_TIMEOUT_S = 20.0
EXITED_CHECK_S = 1.0  # a service not answering yet: how often to ask whether it has exited
LOG_LINES = 5  # of an exited service's log, in its error
START_TIMEOUT_S = 60.0
FANOUT_VARIABLE = "STORBENCH_FANOUT"
DEFAULT_FANOUT = 512  # hosts handled at once over persistent (OpenSSH) connections
# paramiko does its cryptography in this process: 128 handshakes at once on 2 busy cores
# outlived the 60 s command limit (bench/scale.py), 64 at a time did not
PER_STEP_FANOUT = 64
LOG_NAME = "service.log"
# the running service's version (stdout, stderr), recorded by the first run on it
VERSION_NAMES = ("service.version", "service.version.stderr")
VERSION_TIMEOUT_S = 60
QUIT_TIMEOUT_S = 30.0


class ServiceError(RuntimeError):
    """One line per host whose service could not be started or stopped."""

    def __init__(self, action: str, problems: dict[str, str]):
        self.problems = problems
        lines = "\n".join(f"  - host {host}: {why}" for host, why in sorted(problems.items()))
        super().__init__(f"{action} failed on {len(problems)} host(s):\n{lines}")


def fanout(hosts: Sequence[dict] = ()) -> int:
    """How many hosts a step works on at once: $STORBENCH_FANOUT, else DEFAULT_FANOUT, or
    PER_STEP_FANOUT when a host opens its own paramiko connection (connection: per-step)."""
    text = os.environ.get(FANOUT_VARIABLE, "").strip()
    if text:
        if not text.isdigit() or int(text) < 1:
            raise ValueError(f"{FANOUT_VARIABLE} must be a whole number >= 1, got {text!r}")
        return int(text)
    per_step = any(
        host.get("transport") == "ssh" and host.get("connection", DEFAULT_CONNECTION) == "per-step"
        for host in hosts
    )
    return PER_STEP_FANOUT if per_step else DEFAULT_FANOUT


def workers(hosts: Sequence[dict]) -> int:
    """Threads for a step on ``hosts``: the fan-out, with the open files they need allowed."""
    count = max(1, min(fanout(hosts), len(hosts)))
    open_files.allow_for(count, in_turns=True)
    return count


def host_spec(host: dict) -> Host:
    return Host.from_dict(host)


def controller_address(spec: Host) -> str:
    """This machine's address as the host reaches it (hosts on this machine: loopback)."""
    return spec.controller_address or "127.0.0.1"


def port_of(spec: Host, tool: str, default: int) -> int:
    """The host's own port for the tool's service (service_ports), else the campaign's."""
    return int(spec.service_ports.get(tool, default))


def service_dir(spec: Host, tool: str, port: int) -> str:
    """Named after the host too: a workdir on a shared file system must not mix hosts' files."""
    port = port_of(spec, tool, port)
    return f"{spec.workdir.rstrip('/')}/services/{tool}-{spec.address}-{port}"


def service_argv(spec: Host, tool_name: str, port: int) -> list[str]:
    """The command line the host's service runs (and is found by)."""
    return get_tool(tool_name).service_start_command(
        spec.tool_address, port_of(spec, tool_name, port)
    )


def service_marker(spec: Host, tool_name: str, port: int) -> str:
    return " ".join(service_argv(spec, tool_name, port))


def endpoint(host: dict, port: int, tool: str = "") -> str:
    spec = host_spec(host)
    return with_port(spec.tool_address, port_of(spec, tool, port))


def start_services(hosts: list[dict], tool_name: str, port: int) -> list[dict]:
    """Start (or keep) the service on every host, wait until each accepts connections."""
    _running_flag(tool_name).parent.mkdir(parents=True, exist_ok=True)
    _running_flag(tool_name).touch()  # first: a service that starts must be stopped later
    started = on_every_host(hosts, lambda host: _start_one(host, tool_name, port), "start")
    return [started[host["name"]] for host in hosts]


def stop_services(hosts: list[dict], tool_name: str, port: int) -> None:
    """Ask the services to quit (the tool's own way), then stop what is left on every host."""
    _ask_to_quit(hosts, tool_name, port)
    on_every_host(hosts, lambda host: _stop_one(host, tool_name, port), "stop")
    _running_flag(tool_name).unlink(missing_ok=True)


def _ask_to_quit(hosts: list[dict], tool_name: str, port: int) -> None:
    tool = get_tool(tool_name)
    if not tool.service_stop_command([endpoint(host, port, tool_name) for host in hosts]):
        return  # no hosts, or the tool has no quit command: the kill below stops its services

    def answers(host: dict) -> bool:
        return _accepts(host_spec(host).tool_address, _port(host, tool_name, port), 2)

    with concurrent.futures.ThreadPoolExecutor(workers(hosts), thread_name_prefix="quit") as pool:
        up = list(pool.map(answers, hosts))
    answering = [host for host, answered in zip(hosts, up, strict=True) if answered]
    argv = tool.service_stop_command([endpoint(host, port, tool_name) for host in answering])
    if not answering or not argv:
        return
    with contextlib.suppress(OSError, subprocess.SubprocessError):  # the kill below stops them
        subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=QUIT_TIMEOUT_S, check=False
        )


def _port(host: dict, tool_name: str, port: int) -> int:
    return port_of(host_spec(host), tool_name, port)


def maybe_running(tool_name: str) -> bool:
    """Whether this working directory may have left services running (nothing to stop else)."""
    return _running_flag(tool_name).exists()


def _running_flag(tool_name: str) -> Path:
    # <tool>.running: this working directory (campaign) started services
    return Path(paths.services_dir()) / f"{tool_name}.running"


def ensure_services(hosts: list[dict], tool_name: str, port: int) -> None:
    """Restart services that are not answering (host rebooted, service killed, cleanup ran)."""
    down = [
        host
        for host in hosts
        if not _accepts(host_spec(host).tool_address, _port(host, tool_name, port), 2)
    ]
    if down:
        start_services(down, tool_name, port)


def _start_one(host: dict, tool_name: str, port: int) -> dict:
    spec = host_spec(host)
    folder = service_dir(spec, tool_name, port)
    port = port_of(spec, tool_name, port)
    argv = get_tool(tool_name).service_start_command(spec.tool_address, port)
    if not _accepts(spec.tool_address, port, timeout_s=2):
        with open_transport(spec) as transport:
            code, _, err = transport.shell(start_script(folder, argv), timeout_s=START_TIMEOUT_S)
            if code != 0:
                raise HostError(spec.name, f"{tool_name} service did not start: {err.strip()}")
            _wait_ready(spec, port, folder, lambda: _exited_service_log(transport, folder, argv))
    else:  # one left by an earlier start is used again, if it is this work folder's
        with open_transport(spec) as transport:
            code, _, _ = transport.shell(own_service_script(folder, argv), timeout_s=30)
        if code != 0:
            raise HostError(
                spec.name,
                f"port {port} answers, but not with the {tool_name} service started from"
                f" {folder}: another campaign's (another workdir) or another program's; its"
                " runs would write where this campaign does not look. Stop it, or give this"
                " campaign other ports (service_ports)",
            )
    return {"host": spec.name, "endpoint": with_port(spec.tool_address, port), "folder": folder}


def own_service_script(folder: str, argv: list[str]) -> str:
    """Exit 0 when the process in folder's service.pid runs the service's command line."""
    return "\n".join(_service_pid_lines(folder, argv, otherwise=1))


def _service_pid_lines(folder: str, argv: list[str], otherwise: int) -> list[str]:
    """Shell lines that exit ``otherwise`` unless the process in folder's service.pid runs
    the service's command line (then $pid holds it; the last line's status says)."""
    return [
        f"f={shlex.quote(folder + '/service.pid')}",
        f"command=; for word in {_quoted_words(argv)}; do",
        '  command="${command:+$command }$word"',
        "done",
        f'[ -r "$f" ] || exit {otherwise}',
        'pid=$(cat "$f")',
        f"case $pid in ''|*[!0-9]*) exit {otherwise};; esac",
        'tr "\\000" " " < "/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$command"',
    ]  # fmt: skip


def start_script(folder: str, argv: list[str]) -> str:
    """One session: a stale service that no longer answers is stopped, then ours starts."""
    return (
        f"( {stale_service_script(folder, argv)} ) && {detached_script(folder, argv)}"
        f" && {_forget_version_script()}"
    )


def stale_service_script(folder: str, argv: list[str]) -> str:
    """Stop the service an earlier start left in folder (its service.pid, if that process still
    runs the service's command line): SIGTERM, a grace period, SIGKILL. The pid file, not a
    scan of every process's command line (pkill -f): 128 loopback hosts share one /proc, and
    128 scans of it took 2 of the 3.5 s a start took there. The command line is put together
    word by word: written out whole, it was in this script's own command line, and at 256
    hosts the old pid came back as the shell running the script, which stopped itself."""
    polls = int(TERM_GRACE_S / 0.1)
    *check, runs = _service_pid_lines(folder, argv, otherwise=0)
    return "\n".join([
        *check,
        f"{runs} || exit 0",
        'kill -TERM "$pid" 2>/dev/null || exit 0',
        "n=0",
        f'while kill -0 "$pid" 2>/dev/null && [ "$n" -lt {polls} ]; do',
        "  sleep 0.1; n=$((n + 1))",
        "done",
        'kill -KILL "$pid" 2>/dev/null; exit 0',
    ])  # fmt: skip


def orphans_script(folder: str, argv: list[str]) -> str:
    """Stop the service's processes that lost their parent (SIGTERM, a grace period, SIGKILL)
    and print their pids: fio's job process, in a session of its own, runs on when the
    backend that forked it is killed. Every other process of a service (its main one, in
    folder's service.pid, aside) has a parent running the service's command line, so a run
    of another target on the same service keeps its jobs. Linux's /proc."""
    polls = int(TERM_GRACE_S / 0.1)
    return "\n".join([
        f"f={shlex.quote(folder + '/service.pid')}",
        f"command=; for word in {_quoted_words(argv)}; do",
        '  command="${command:+$command }$word"',
        "done",
        '[ -r "$f" ] || exit 0',
        'main=$(cat "$f")',
        # its command line exactly (this script's own holds the words apart, never matches)
        'ours() { [ "$(tr "\\000" " " 2>/dev/null < "/proc/$1/cmdline")" = "$command " ]; }',
        # running: a zombie, gone but not yet reaped, is not
        'running() { read -r s 2>/dev/null < "/proc/$1/stat" || return 1; s=${s##*) };'
        ' [ "${s%% *}" != Z ]; }',
        "orphans=",
        f"for found in $(grep -l -a -F -e {shlex.quote(argv[-1])} /proc/[0-9]*/cmdline"
        " 2>/dev/null); do",
        "  pid=${found#/proc/}; pid=${pid%/cmdline}",
        '  [ "$pid" != "$main" ] && ours "$pid" || continue',
        '  read -r s 2>/dev/null < "/proc/$pid/stat" || continue',
        "  s=${s##*) }; set -- $s",
        '  ours "$2" || orphans="$orphans $pid"',
        "done",
        '[ -n "$orphans" ] || exit 0',
        "echo $orphans",
        "kill -TERM $orphans 2>/dev/null",
        "n=0",
        f'while [ "$n" -lt {polls} ]; do',
        "  left=; for pid in $orphans; do running $pid && left=\"$left $pid\"; done",
        '  [ -n "$left" ] || exit 0',
        "  sleep 0.1; n=$((n + 1))",
        "done",
        "kill -KILL $left 2>/dev/null; exit 0",
    ])  # fmt: skip


def detached_script(folder: str, argv: list[str]) -> str:
    """All three streams redirected, or the SSH session would wait for the service to end."""
    command = _quoted_words(argv)
    return (
        f"mkdir -p {shlex.quote(folder)} && cd {shlex.quote(folder)} && "
        f"{{ nohup {command} >> {LOG_NAME} 2>&1 < /dev/null & echo $! > service.pid; }}"
    )


def _quoted_words(argv: list[str]) -> str:
    """Every word quoted: a script's own command line never holds the service's command line,
    which stopping a stale service matches in the same session."""
    return " ".join("'" + arg + "'" if "'" not in arg else shlex.quote(arg) for arg in argv)


def version_script(tool) -> str:
    """The tool's version on stdout (as it prints it), bounded in time."""
    return f"exec timeout -k 5 {VERSION_TIMEOUT_S} {shlex.join(tool.version_command())}"


# cat in shell builtins: no process to start
_SHOW = 'show() { while IFS= read -r line || [ -n "$line" ]; do printf \'%s\\n\' "$line"; done; }'


def kept_version_script(folder: str, tool) -> str:
    """The tool's version, kept in folder per identity of its programs' files (device, inode,
    size, mtime of each; '-' for one not on the host, as gosbench's server on a service run's
    hosts): later runs on the host read it in shell builtins instead of starting the tool (fio
    --version: 20 ms of CPU per host and run); a changed, added or removed program asks again."""
    programs = tool.version_programs()
    if not programs:
        return version_script(tool)
    quoted = shlex.quote(folder)
    identity = (
        f"id=; for program in {' '.join(shlex.quote(program) for program in programs)}; do"
        ' part=$(stat -L -c %d.%i.%s.%Y -- "$(command -v "$program")" 2>/dev/null) || part=-;'
        " id=${id:+$id.}$part; done"
    )
    return "\n".join([
        _SHOW,
        identity,
        f'kept={shlex.quote(f"{folder}/{tool.name}")}."$id"',
        'if [ -n "$id" ] && [ -f "$kept" ]; then show < "$kept"; exit 0; fi',
        f"out=$({version_script(tool)}); rc=$?",
        "printf '%s\\n' \"$out\"",
        f'if [ $rc -eq 0 ] && [ -n "$id" ] && mkdir -p -- {quoted} 2>/dev/null; then',
        "  printf '%s\\n' \"$out\" > \"$kept.$$.tmp\" && mv -f -- \"$kept.$$.tmp\" \"$kept\"",
        "fi",
        "exit $rc",
    ])  # fmt: skip


def _forget_version_script() -> str:
    """An earlier service's recorded version, removed when a service starts: the first run
    on the new one records its own (recorded_version_script)."""
    return f"rm -f -- {' '.join(VERSION_NAMES)}"


def recorded_version_script(folder: str, tool) -> str:
    """The service's version, as the first run on it recorded it, read in shell builtins (every
    later run's preparation, on every host); else the tool's version now, recorded."""
    out, err = (shlex.quote(f"{folder}/{name}") for name in VERSION_NAMES)
    out_tmp, err_tmp = (f'{name}".$$.tmp"' for name in (out, err))  # runs may prepare at once
    return "\n".join([
        _SHOW,
        f"if [ -f {out} ]; then show < {out}; {{ show < {err}; }} >&2 2>/dev/null; exit 0; fi",
        f"[ -d {shlex.quote(folder)} ] || {version_script(tool)}",
        f"( {version_script(tool)} ) > {out_tmp} 2> {err_tmp}; rc=$?",
        f"show < {out_tmp}; {{ show < {err_tmp}; }} >&2 2>/dev/null",
        f"if [ $rc -eq 0 ]; then mv -f -- {err_tmp} {err}; mv -f -- {out_tmp} {out};"
        f" else rm -f -- {out_tmp} {err_tmp}; fi",
        "exit $rc",
    ])  # fmt: skip


def _wait_ready(spec: Host, port: int, folder: str, exited_log=lambda: None) -> None:
    """Until the port answers; exited_log() (asked every EXITED_CHECK_S) returns the log of a
    service that has already exited (fio not on the host's PATH), which fails it at once."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    next_check = time.monotonic() + EXITED_CHECK_S
    log = None
    while time.monotonic() < deadline:
        if _accepts(spec.tool_address, port, timeout_s=1):
            return
        if time.monotonic() >= next_check:
            log = exited_log()
            if log is not None:
                break
            next_check = time.monotonic() + EXITED_CHECK_S
        time.sleep(0.1)
    if log is not None:
        raise HostError(
            spec.name,
            f"service exited before it answered on {with_port(spec.tool_address, port)};"
            f" its log ({folder}/{LOG_NAME}) ends: {log or '(empty)'}",
        )
    # the tool's client connects from here, not through the jump host the sessions go through
    unrouted = (
        f"; the host is reached through jump host {spec.jump}, but the tool's client connects"
        " from this controller: service mode needs a data_address it reaches, or run the"
        " experiment standalone (its sessions go through the jump host)"
        if spec.jump
        else ""
    )
    raise HostError(
        spec.name,
        f"service not answering on {with_port(spec.tool_address, port)}"
        f" after {READY_TIMEOUT_S:.0f} s "
        f"(its log: {folder}/service.log){unrouted}",
    )


def _exited_service_log(transport, folder: str, argv: list[str]) -> str | None:
    """The last lines of the service's log if its process has exited, else None."""
    script = (
        f"( {own_service_script(folder, argv)} ) && exit 3;"
        f" tail -n {LOG_LINES} -- {shlex.quote(folder + '/' + LOG_NAME)} 2>/dev/null; exit 0"
    )
    with contextlib.suppress(HostError):  # unanswered: the port's deadline still stands
        code, out, _ = transport.shell(script, timeout_s=30)
        if code == 0:
            return " / ".join(line.strip() for line in out.splitlines() if line.strip())
    return None


def _accepts(address: str, port: int, timeout_s: float) -> bool:
    try:
        with socket.create_connection((bare(address), port), timeout=timeout_s):
            return True
    except OSError:
        return False


def _stop_one(host: dict, tool_name: str, port: int) -> None:
    spec = host_spec(host)
    with open_transport(spec) as transport:
        transport.kill_matching(service_marker(spec, tool_name, port))


def on_every_host(hosts: Sequence[dict], action, verb: str) -> dict:
    """{host name: action(host)} from all hosts in parallel; one error lists each failed host."""
    results, problems = each_host(hosts, action)
    if problems:
        raise ServiceError(f"{verb} of services", problems)
    return results


def each_host(hosts: Sequence[dict], action) -> tuple[dict, dict[str, str]]:
    """action(host) on all hosts in parallel, as many at once as the fan-out allows:
    ({host name: result}, {host name: why it failed}) for the hosts that did and did not."""
    results, problems = {}, {}
    threads = workers(hosts)
    with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="host") as pool:
        futures = {pool.submit(action, host): host["name"] for host in hosts}
        for future in concurrent.futures.as_completed(futures):
            name = futures[future]
            try:
                results[name] = future.result()
            except HostError as error:
                problems[name] = error.reason if hasattr(error, "reason") else str(error)
            except Exception as error:  # reported per host, the step fails as a whole
                problems[name] = f"{type(error).__name__}: {error}"
    return results, problems
