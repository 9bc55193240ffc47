"""Before an experiment's first run: every host reachable, the tool there, room on the target.

All hosts are checked at once; the error lists each bad host and why, so a 100-client
campaign does not fail one host at a time. Light imports: this is on the run path.
"""

from __future__ import annotations

import shlex
import threading
import time

from storbench.core import atomic
from storbench.core.model import Host
from storbench.hosts.transport import HostError, open_transport
from storbench.run import room
from storbench.tools import get_tool

CHECK_TIMEOUT_S = 60.0


class PreflightError(RuntimeError):
    pass


def check_host(host: dict, tool, target: dict) -> dict:
    spec = Host.from_dict(host)
    report: dict = {"name": spec.name}
    try:
        with open_transport(spec) as transport:
            transport.check()
            transport.check_file_transfer()  # job files go up, outputs come back
            report["tool_version"] = _tool_version(transport, tool)
            before = time.time()
            rc, out, _ = transport.shell("date +%s.%N", timeout_s=CHECK_TIMEOUT_S)
            after = time.time()
            if rc == 0 and out.strip():
                report["clock_offset_s"] = round(float(out.strip()) - (before + after) / 2, 3)
            directory = tool.target_directory(target, spec.name) or target.get("path")
            if directory and target.get("type") != "s3":
                report["free_bytes"] = room.free_bytes(transport, directory)
    except HostError as error:
        report["error"] = str(error)
    except Exception as error:  # reported per host, like the runner
        report["error"] = f"host {spec.name}: {type(error).__name__}: {error}"
    return report


def _tool_version(transport, tool) -> str:
    command = tool.version_command()
    rc, out, err = transport.shell(shlex.join(command), timeout_s=CHECK_TIMEOUT_S)
    if rc == 0:
        text = out.strip() or err.strip()
        return text.splitlines()[0] if text else ""
    detail = (err.strip() or out.strip()).splitlines()[-1:] or [""]
    raise HostError(transport.spec.name, tool.unusable(rc, detail[0]))


def run_preflight(spec: dict, output_path: str) -> dict:
    """Check every host in parallel; publish the report, or raise naming every bad host."""
    tool = get_tool(spec["tool"])
    hosts = spec["hosts"]
    reports: list[dict] = [{} for _ in hosts]

    def check(index: int, host: dict) -> None:
        reports[index] = check_host(host, tool, spec["target"])

    threads = [
        threading.Thread(target=check, args=(i, host), daemon=True) for i, host in enumerate(hosts)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    bad = [r for r in reports if "error" in r]
    if bad:
        lines = [f"{spec['experiment']}: preflight failed on {len(bad)} of {len(hosts)} host(s)"]
        lines += [f"  {r['error']}" for r in bad]
        raise PreflightError("\n".join(lines))
    report = {"experiment": spec["experiment"], "tool": spec["tool"], "hosts": reports}
    atomic.write_json(output_path, report)
    return report
