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
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path

from storbench import atomic
from storbench.hosts import HostError, HostSpec, open_transport
from storbench.tools import get_tool

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


def _host_workdir(spec: HostSpec, local_dir: Path, run_path: str) -> str:
    if spec.transport == "local":
        return str(local_dir.resolve())
    return f"{spec.workdir.rstrip('/')}/{run_path}"


def _run_on_host(spec: dict, host: dict, job_text: str, local_dir: Path, run_path: str, result):
    tool = get_tool(spec["tool"])
    host_spec = HostSpec.from_dict({k: v for k, v in host.items() if k != "group"})
    name = host_spec.name
    stdout_path = local_dir / f"{name}.stdout"
    stderr_path = local_dir / f"{name}.stderr"
    try:
        with open_transport(host_spec) as transport:
            transport.check()
            workdir = _host_workdir(host_spec, local_dir, run_path)
            job_path = f"{workdir}/job{tool.job_suffix}"
            output_path = f"{workdir}/{tool.output_name(name)}"
            transport.mkdirs(workdir)
            target_directory = tool.target_directory(spec["target"], name)
            if target_directory:
                transport.mkdirs(target_directory)
            transport.put_text(job_text, job_path)
            result.tool_version = _tool_version(transport, tool, local_dir, name)
            result.command = tool.command(job_path, output_path, name)
            result.start_time = _now()
            result.exit_code = transport.run(
                result.command,
                timeout_s=spec["timeout_s"],
                stdout_path=stdout_path,
                stderr_path=stderr_path,
                marker=job_path,
            )
            result.end_time = _now()
            if result.exit_code == 0:
                transport.fetch(output_path, local_dir / tool.output_name(name))
    except HostError as error:
        result.error = str(error)
    except Exception as error:  # reported per host; the iteration fails as a whole below
        result.error = f"host {name}: {type(error).__name__}: {error}"


def _tool_version(transport, tool, local_dir: Path, name: str) -> str:
    out = local_dir / f"{name}.version"
    err = local_dir / f"{name}.version.stderr"
    code = transport.run(
        tool.version_command(), timeout_s=60, stdout_path=out, stderr_path=err, marker="--version"
    )
    if code != 0:
        raise RunError(
            f"host {transport.spec.name}: '{' '.join(tool.version_command())}' "
            f"exited {code}: {_tail(err)}"
        )
    return out.read_text(errors="replace").strip()


def _kill_everywhere(hosts: list[dict], marker: str) -> None:
    for host in hosts:
        try:
            spec = HostSpec.from_dict({k: v for k, v in host.items() if k != "group"})
            with open_transport(spec) as transport:
                transport.kill_matching(marker)
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


def run_iteration(spec: dict, iteration: int, job_file: str, manifest_path: str) -> dict:
    """Run, wait for every host, then publish the manifest; raise RunError on any failure."""
    tool = get_tool(spec["tool"])
    job_text = Path(job_file).read_text()
    iteration_dir = Path(manifest_path).parent
    attempt, local_dir = next_attempt_dir(iteration_dir)
    run_path = f"{spec['experiment']}/{spec['run_id']}/it{iteration}/a{attempt}"
    results = [HostResult(name=host["name"]) for host in spec["hosts"]]
    threads = [
        threading.Thread(
            target=_run_on_host,
            args=(spec, host, job_text, local_dir, run_path, result),
            name=f"run-{host['name']}",
            daemon=True,
        )
        for host, result in zip(spec["hosts"], results, strict=True)
    ]
    previous_term = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)
    except KeyboardInterrupt:
        marker = f"/{run_path}/job{tool.job_suffix}"
        _kill_everywhere(spec["hosts"], marker)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous_term)
    if any(r.error or r.exit_code != 0 for r in results):
        raise RunError(_failure_message(spec, results, local_dir))
    manifest = {
        "experiment": spec["experiment"],
        "run_id": spec["run_id"],
        "iteration": iteration,
        "attempt": attempt,
        "tool": spec["tool"],
        "raw_dir": f"a{attempt}",
        "job_file": os.path.relpath(job_file, iteration_dir),
        "job_file_sha256": hashlib.sha256(job_text.encode()).hexdigest(),
        "params": spec["params"],
        "target": spec["target"],
        "hosts": [
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
        ],
    }
    atomic.write_json(manifest_path, manifest)
    return manifest


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")
