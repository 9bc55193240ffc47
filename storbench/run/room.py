"""Room on a host's target directory: free bytes, and whether a run's files fit.

Checked by every run just before its tool starts (its own size x numjobs, as the adapter
reads them), so a 100 TiB job on a 51 GiB file system fails naming the host instead of
filling it; preflight reports the free space.
"""

from __future__ import annotations

import shlex

from storbench.hosts.transport import HostError

CHECK_TIMEOUT_S = 60.0


def free_bytes(transport, directory: str) -> int | None:
    """Free bytes where directory is (or would be: its nearest existing parent)."""
    script = (
        f"p={shlex.quote(directory)}; "
        'while [ ! -e "$p" ]; do p=$(dirname "$p"); done; df -Pk "$p" | tail -n 1'
    )
    rc, out, _ = transport.shell(script, timeout_s=CHECK_TIMEOUT_S)
    fields = out.split()
    if rc != 0 or len(fields) < 4 or not fields[3].isdigit():
        return None
    return int(fields[3]) * 1024


def check_room(transport, directory: str, needed: int, run_id: str) -> None:
    """Raise HostError when the run's files do not fit; files already there (an earlier
    run's, which fio reuses) count as room."""
    free = free_bytes(transport, directory)
    if free is None:
        return
    rc, out, _ = transport.shell(
        f"du -sk -- {shlex.quote(directory)} 2>/dev/null", timeout_s=CHECK_TIMEOUT_S
    )
    fields = out.split()
    present = int(fields[0]) * 1024 if rc == 0 and fields and fields[0].isdigit() else 0
    if needed - present > free:
        raise HostError(
            transport.spec.name,
            f"not enough room in {directory}: run {run_id} writes {_gib(needed)} of files per"
            f" host (size x numjobs), {_gib(present)} are there already and {_gib(free)} are"
            " free; shrink size or free the target",
        )


def _gib(count: int) -> str:
    return f"{count / 2**30:,.1f} GiB"
