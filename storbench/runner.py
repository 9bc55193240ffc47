"""Run one iteration of one run on every host of its group, and keep the raw output.

Raw files go to ``<raw>/<run_id>/it<k>/a<attempt>/`` (a new attempt folder each time, so a
rerun never overwrites earlier raw output); the manifest ``it<k>/run.json`` is published
last and only when every host succeeded. Imports stay light: this is the benchmark path.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import re
import shlex
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path

from storbench import atomic
from storbench.hosts import HostError, HostSpec, open_transport, raise_interrupt
from storbench.secrets import Credentials, SecretError, scrub, target_credentials
from storbench.tools import get_tool
from storbench.tools.base import SECRET_PLACEHOLDERS

STDERR_TAIL_LINES = 20
_ATTEMPT = re.compile(r"^a(\d+)$")


class RunError(RuntimeError):
    pass


@dataclass
class HostResult:
    name: str
    command: list[str] = field(default_factory=list)
    exit_code: int | None = None
    start_time: str | None = None
    end_time: str | None = None
    tool_version: str | None = None
    error: str | None = None


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


def next_attempt_dir(iteration_dir: Path) -> tuple[int, Path]:
    iteration_dir.mkdir(parents=True, exist_ok=True)
    used = [int(m.group(1)) for p in iteration_dir.iterdir() if (m := _ATTEMPT.match(p.name))]
    attempt = max(used, default=0) + 1
    path = iteration_dir / f"a{attempt}"
    path.mkdir()
    return attempt, path


def _tail(path: Path, lines: int = STDERR_TAIL_LINES) -> str:
    if not path.exists():
        return ""
    text = path.read_bytes().decode("utf-8", errors="replace")
    return "\n".join(text.strip().splitlines()[-lines:])


@dataclass(frozen=True)
class HostPaths:
    """Where a host's job file and tool output live on that host."""

    workdir: str
    job_path: str
    output_path: str


def host_paths(
    spec: HostSpec, tool, local_dir: Path, run_path: str, *, private: bool = False
) -> HostPaths:
    """Local runs work in the raw folder itself, unless private files (keys) are involved."""
    if spec.transport == "local" and not private:
        workdir = str(local_dir.resolve())
    else:
        workdir = f"{spec.workdir.rstrip('/')}/{run_path}"
    return HostPaths(
        workdir=workdir,
        job_path=f"{workdir}/job{tool.job_suffix}",
        output_path=f"{workdir}/{tool.output_name(spec.name)}",
    )


def stale_attempts_marker(workdir: str) -> str:
    """Text in the command line of every attempt's tool of this iteration ('.../it1/a')."""
    return workdir[: workdir.rindex("/a") + 2]


def _run_on_host(spec: dict, host: HostSpec, paths: HostPaths, job_text: str, local_dir: Path,
                 result: HostResult, credentials: Credentials | None, attempt: int):  # fmt: skip
    tool = get_tool(spec["tool"])
    name = host.name
    try:
        with open_transport(host) as transport:
            transport.check()
            if attempt > 1:  # a SIGKILLed campaign can leave the last attempt's tool running
                transport.kill_matching(stale_attempts_marker(paths.workdir))
            transport.mkdirs(paths.workdir)
            for target_directory in tool.target_directories(spec["target"], name):
                transport.mkdirs(target_directory)
            transport.put_text(job_text, paths.job_path)
            if tool.output_is_folder:
                transport.mkdirs(paths.output_path)
            result.tool_version = _tool_version(transport, tool, local_dir, name)
            private_files: list[str] = []
            try:
                argv = _command_with_secrets(
                    transport, tool, paths, job_text, credentials, private_files, spec["params"]
                )
                result.command = tool.run_command(
                    paths.job_path, paths.output_path, name, spec["params"]
                )
                result.start_time = _now()
                result.exit_code = transport.run(
                    argv,
                    timeout_s=spec["timeout_s"],
                    stdout_path=local_dir / f"{name}.stdout",
                    stderr_path=local_dir / f"{name}.stderr",
                    marker=paths.job_path,  # unique to this attempt on this host
                )
            finally:
                transport.remove(private_files)
            result.end_time = _now()
            if result.exit_code == 0:
                _fetch_output(transport, tool, paths, local_dir / tool.output_name(name))
    except HostError as error:
        result.error = str(error)
    except Exception as error:  # reported per host; the iteration fails as a whole below
        result.error = f"host {name}: {type(error).__name__}: {error}"


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
            filled = filled.replace(placeholder, credentials.field(field))
        private_files.append(job_path)
        transport.put_private_text(filled, job_path)
    argv = tool.run_command(job_path, paths.output_path, transport.spec.name, params)
    if not tool.secret_env:
        return argv
    env_file = f"{paths.job_path}.env"
    lines = [f"{var}={shlex.quote(credentials.field(key))}" for var, key in tool.secret_env.items()]
    private_files.append(env_file)
    transport.put_private_text("\n".join(lines) + "\n", env_file)
    # the keys reach the tool's environment, never its command line
    return ["sh", "-c", 'set -a; . "$1"; set +a; shift; exec "$@"', "env-file", env_file, *argv]


def _fetch_output(transport, tool, paths: HostPaths, local_path: Path) -> None:
    if tool.output_is_folder:
        transport.fetch_tree(paths.output_path, local_path)
    else:
        transport.fetch(paths.output_path, local_path)


def _tool_version(transport, tool, local_dir: Path, name: str) -> str:
    out = local_dir / f"{name}.version"
    err = local_dir / f"{name}.version.stderr"
    code = transport.run(
        tool.version_command(),
        timeout_s=60,
        stdout_path=out,
        stderr_path=err,
        marker=" ".join(tool.version_command()),
    )
    if code != 0:
        raise HostError(transport.spec.name, tool.unusable(code, _tail(err)))
    return out.read_text(errors="replace").strip()


def _kill_everywhere(hosts: list[HostSpec], paths: list[HostPaths]) -> None:
    for host, host_paths_ in zip(hosts, paths, strict=True):
        try:
            with open_transport(host) as transport:
                transport.kill_matching(host_paths_.job_path)
        except Exception:  # best effort while interrupted; the next run starts a new attempt
            pass


def _failure_message(spec: dict, results: list[HostResult], local_dir: Path) -> str:
    lines = [f"{spec['experiment']}/{spec['run_id']}: {spec['tool']} failed"]
    for result in results:
        if result.error:
            lines.append(result.error)
        elif result.exit_code != 0:
            reason = "timed out" if result.exit_code == 124 else f"exited {result.exit_code}"
            lines.append(f"host {result.name}: {spec['tool']} {reason}; stderr tail:")
            tail = _tail(local_dir / f"{result.name}.stderr") or _tail(
                local_dir / f"{result.name}.stdout"
            )
            lines.extend(f"    {line}" for line in (tail or "(empty)").splitlines())
    lines.append(f"raw output kept in {local_dir}")
    return "\n".join(lines)


def run_iteration(
    spec: dict,
    iteration: int,
    job_file: str | dict[str, str],
    manifest_path: str,
) -> dict:
    """Run, wait for every host, then publish the manifest; raise RunError on any failure.

    job_file: one job file for every host, or {host: job file} for per-host job files.
    """
    host_jobs = job_file if isinstance(job_file, dict) else None
    job_texts = {
        host["name"]: Path(host_jobs[host["name"]] if host_jobs else job_file).read_text()
        for host in spec["hosts"]
    }
    iteration_dir = Path(manifest_path).parent
    attempt, local_dir = next_attempt_dir(iteration_dir)
    previous_term = signal.signal(signal.SIGTERM, raise_interrupt)  # Snakemake stops jobs so
    try:
        if spec.get("execution") == "service":
            from storbench.service_run import run_service_iteration

            placement = run_service_iteration(spec, local_dir, host_jobs or {})
        else:
            placement = {"hosts": _run_standalone(spec, iteration, attempt, local_dir, job_texts)}
    finally:
        signal.signal(signal.SIGTERM, previous_term)
    if host_jobs:
        for host in placement["hosts"]:
            host["job_file"] = os.path.relpath(host_jobs[host["name"]], iteration_dir)
            host["job_file_sha256"] = _sha256(job_texts[host["name"]])
    first_job = host_jobs[spec["hosts"][0]["name"]] if host_jobs else job_file
    manifest = {
        "experiment": spec["experiment"],
        "run_id": spec["run_id"],
        "iteration": iteration,
        "attempt": attempt,
        "tool": spec["tool"],
        "raw_dir": f"a{attempt}",
        "job_file": os.path.relpath(first_job, iteration_dir),
        "job_file_sha256": _sha256("".join(job_texts[h] for h in sorted(job_texts))),
        "params": spec["params"],
        "target": spec["target"],
        "step": spec.get("step"),
        **({"prep_state": spec["prep_state"]} if spec.get("prep_state") else {}),
        **({"reprepared": spec["reprepared"]} if spec.get("reprepared") else {}),
        **placement,
    }
    atomic.write_json(manifest_path, manifest)
    return manifest


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _run_standalone(
    spec: dict, iteration: int, attempt: int, local_dir: Path, job_texts: dict[str, str]
) -> list[dict]:
    tool = get_tool(spec["tool"])
    credentials = _credentials(spec)
    run_path = f"{spec['experiment']}/{spec['run_id']}/it{iteration}/a{attempt}"
    hosts = [
        HostSpec.from_dict({k: v for k, v in h.items() if k != "group"}) for h in spec["hosts"]
    ]
    private = credentials is not None
    paths = [host_paths(host, tool, local_dir, run_path, private=private) for host in hosts]
    results = [HostResult(name=host.name) for host in hosts]
    threads = [
        threading.Thread(
            target=_run_on_host,
            args=(spec, host, host_paths_, job_texts[host.name], local_dir, result, credentials),
            kwargs={"attempt": attempt},
            name=f"run-{host.name}",
            daemon=True,
        )
        for host, host_paths_, result in zip(hosts, paths, results, strict=True)
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)
    except KeyboardInterrupt:
        _kill_everywhere(hosts, paths)
        raise
    if any(r.error or r.exit_code != 0 for r in results):
        message = _failure_message(spec, results, local_dir)
        raise RunError(scrub(message, credentials.values()) if credentials else message)
    return [
        {
            "name": r.name,
            "command": r.command,
            "exit_code": r.exit_code,
            "start_time": r.start_time,
            "end_time": r.end_time,
            "tool_version": r.tool_version,
            "output": tool.output_name(r.name),
            "stdout": f"{r.name}.stdout",
            "stderr": f"{r.name}.stderr",
        }
        for r in results
    ]


def _credentials(spec: dict) -> Credentials | None:
    target = spec["target"]
    if target.get("type") != "s3":
        return None
    try:
        return target_credentials(target["name"], target)
    except SecretError as error:
        raise RunError(str(error)) from None
