"""One iteration in service mode: one controller (here) drives the services on every host.

The services were started once for the campaign (``storbench services start``); each
iteration checks they answer, prepares the hosts (target directory, tool version), runs
the tool's client locally with each host's own job file, and reads back every host's
actual start time. On Ctrl-C or SIGTERM the client and every service of the campaign
are stopped, so no tool process is left on any host.
"""

from __future__ import annotations

import contextlib
import datetime
import shlex
from pathlib import Path

from storbench.core.model import Host
from storbench.core.schema_names import CONTROLLER
from storbench.core.specs import RunSpec
from storbench.hosts import services
from storbench.hosts.transport import HostError, hold_signals, open_transport
from storbench.run import target_lock
from storbench.run.attempt import RunError, exit_reason, now, output_tail, tool_version
from storbench.tools import get_tool


def run_service_iteration(spec: RunSpec, local_dir: Path, job_files: dict[str, str]) -> dict:
    """Run the controller; return the manifest part {controller, hosts} (raises on failure)."""
    tool = get_tool(spec.tool)
    port = (spec.service or {})["port"]
    hosts = list(spec.hosts)
    missing = [h["name"] for h in hosts if h["name"] not in job_files]
    if missing:
        raise RunError(f"no job file for host(s) {', '.join(missing)}")
    services.ensure_services(hosts, spec.tool, port)
    holder = target_lock.holder(spec.timeout_s)
    try:
        prepared = _prepare_hosts(spec, tool, hosts, port, local_dir, holder)
        endpoints = [services.endpoint(host, port) for host in hosts]
        output_path = (local_dir / f"{CONTROLLER}.json").resolve()  # absolute: a unique marker
        argv = tool.controller_command(
            [str(Path(job_files[h["name"]]).resolve()) for h in hosts], str(output_path), endpoints
        )
        controller = Host(name="controller", transport="local")
        start = now()
        try:
            with open_transport(controller) as transport:
                exit_code = transport.run(
                    argv,
                    timeout_s=spec.timeout_s,
                    stdout_path=local_dir / f"{CONTROLLER}.stdout",
                    stderr_path=local_dir / f"{CONTROLLER}.stderr",
                    marker=str(output_path),  # absolute and unique: stops exactly this client
                )
        except KeyboardInterrupt:
            hold_signals()
            _stop_campaign_services(spec)
            raise
        end = now()
        if exit_code != 0:
            reason = exit_reason(exit_code)
            tail = output_tail(local_dir / f"{CONTROLLER}.stderr") or output_tail(
                local_dir / f"{CONTROLLER}.stdout"
            )
            raise RunError(
                f"{spec.experiment}/{spec.run_id}: {spec.tool} client {reason}; "
                f"stderr tail:\n    "
                + "\n    ".join((tail or "(empty)").splitlines())
                + f"\nraw output kept in {local_dir}"
            )
        stamps = _start_stamps(spec, tool, hosts, port)
        return {
            "execution": "service",
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
                    "command": argv,
                    "exit_code": exit_code,
                    # the host's own start (its job's exec_prerun), else when the client started
                    "start_time": stamps.get(host["name"]) or start,
                    "start_time_source": "host" if host["name"] in stamps else "controller",
                    "end_time": end,
                    "tool_version": prepared[host["name"]],
                    "output": output_path.name,
                }
                for host, endpoint in zip(hosts, endpoints, strict=True)
            ],
        }
    finally:
        _release_locks(spec, hosts, holder)


def _prepare_hosts(
    spec: RunSpec, tool, hosts: list[dict], port: int, local_dir: Path, holder: str
) -> dict:
    """Target locks taken, target directories made, old start stamps removed, tool version
    read: per host, at once."""

    def prepare(host: dict) -> str:
        host_spec = services.host_spec(host)
        with open_transport(host_spec) as transport:
            for name in target_lock.target_names(spec.target):
                path = target_lock.lock_path(host_spec.workdir, host_spec.name, name)
                target_lock.acquire(transport, path, holder, name)
            for directory in tool.target_directories(spec.target, host_spec.name):
                transport.mkdirs(directory)
            transport.remove(_stamp_paths(host_spec, spec, tool, port))
            return tool_version(transport, tool, local_dir, host_spec.name)

    return services.on_every_host(hosts, prepare, "preparing the hosts")


def _release_locks(spec: RunSpec, hosts: list[dict], holder: str) -> None:
    def release(host: dict) -> None:
        host_spec = services.host_spec(host)
        paths = [
            target_lock.lock_path(host_spec.workdir, host_spec.name, name)
            for name in target_lock.target_names(spec.target)
        ]
        with open_transport(host_spec) as transport:
            target_lock.release(transport, paths, holder)

    with contextlib.suppress(Exception):  # never hide the run's own error behind this
        services.on_every_host(hosts, release, "releasing the target locks")


def _stamp_paths(host_spec: Host, spec: RunSpec, tool, port: int) -> list[str]:
    folder = services.service_dir(host_spec, spec.tool, port)
    return [f"{folder}/{name}" for name in tool.start_stamp_names(spec.to_dict())]


def _start_stamps(spec: RunSpec, tool, hosts: list[dict], port: int) -> dict[str, str]:
    """ISO start time per host from the stamp its job left; hosts without one are absent."""

    def read(host: dict) -> str | None:
        host_spec = services.host_spec(host)
        paths = " ".join(_quote(p) for p in _stamp_paths(host_spec, spec, tool, port))
        try:
            with open_transport(host_spec) as transport:
                _, out, _ = transport.shell(f"cat {paths} 2>/dev/null", timeout_s=30)
        except HostError:  # the run succeeded; its start then falls back to the controller's
            return None
        return _earliest(out)

    stamps = services.on_every_host(hosts, read, "reading start stamps")
    return {name: stamp for name, stamp in stamps.items() if stamp}


def _earliest(text: str) -> str | None:
    """numjobs clones each stamp; the host started when its first clone did."""
    seconds = []
    for line in text.split():
        try:
            seconds.append(float(line))
        except ValueError:
            continue
    if not seconds:
        return None
    moment = datetime.datetime.fromtimestamp(min(seconds), datetime.UTC)
    return moment.isoformat(timespec="milliseconds")


def _quote(path: str) -> str:

    return shlex.quote(path)


def _stop_campaign_services(spec: RunSpec) -> None:
    service = spec.service or {}
    # best effort while interrupted; `snakemake cleanup` stops the rest
    with contextlib.suppress(Exception):
        services.stop_services(service["hosts"], service["tool"], service["port"])
