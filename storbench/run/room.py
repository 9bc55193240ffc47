"""Room on a host's target directory: free bytes, and whether a run's files fit.

Checked by every run just before its tool starts (its own size x numjobs, as the adapter
reads them), so a 100 TiB job on a 51 GiB file system fails naming the host instead of
filling it; preflight reports the free space.
"""

from __future__ import annotations

import shlex

from storbench.hosts.transport import HostError

CHECK_TIMEOUT_S = 60.0


def _where(directory: str) -> str:
    """Shell: $p becomes directory, or its nearest existing parent (it may not exist yet)."""
    return f'p={shlex.quote(directory)}; while [ ! -e "$p" ]; do p=$(dirname "$p"); done'


def _kib(text: str) -> int | None:
    return int(text) * 1024 if text.isdigit() else None


def free_bytes(transport, directory: str) -> int | None:
    """Free bytes where directory is (or would be)."""
    rc, out, _ = transport.shell(free_bytes_script(directory), timeout_s=CHECK_TIMEOUT_S)
    return free_bytes_from(rc, out)


def free_bytes_script(directory: str) -> str:
    return f'{_where(directory)}; df -Pk "$p" | tail -n 1'


NOT_A_DIRECTORY, NOT_WRITABLE = 3, 4  # writable_script's exit codes


def writable_script(directory: str) -> str:
    """Shell: exit 0 when directory, or the nearest parent it would be made in, is a folder
    this user can write; NOT_A_DIRECTORY or NOT_WRITABLE (that path on stdout) otherwise."""
    return (
        f'{_where(directory)}; [ -d "$p" ] || {{ printf %s "$p"; exit {NOT_A_DIRECTORY}; }};'
        f' [ -w "$p" ] || {{ printf %s "$p"; exit {NOT_WRITABLE}; }}'
    )


def writable_problem(
    rc: int, out: str, directory: str, what: str = "target directory"
) -> str | None:
    """From writable_script's outcome: why the run could not write its files there, or None."""
    if rc == NOT_A_DIRECTORY:
        return f"{what} {directory}: {out.strip()} is a file, not a folder"
    if rc == NOT_WRITABLE:
        return (
            f"{what} {directory}: {out.strip()} is not writable here (a read-only"
            " file system, or its permissions)"
        )
    return None


def free_bytes_from(rc: int, out: str) -> int | None:
    fields = out.split()
    return _kib(fields[3]) if rc == 0 and len(fields) >= 4 else None


def check_room(transport, directory: str, needed: int, run_id: str) -> None:
    """Raise HostError when the run's files do not fit; files already there (an earlier
    run's, which fio reuses) count as room. One round trip: df, then du if it is short."""
    rc, out, _ = transport.shell(room_script(directory, needed), timeout_s=CHECK_TIMEOUT_S)
    problem = room_problem(rc, out, directory, needed, run_id)
    if problem:
        raise HostError(transport.spec.name, problem)


def room_script(directory: str, needed: int) -> str:
    """Shell printing df's line for directory (or its nearest parent), then du's of the
    directory only when df's free space is short of ``needed`` bytes: du reads every file
    there, minutes on a target holding a dataset of millions of files, at every run."""
    needed_kib = -(-needed // 1024)
    return (
        f'{_where(directory)}; room_df=$(df -Pk "$p" | tail -n 1); printf "%s\\n" "$room_df";'
        f' if ! (set -f; set -- $room_df; [ "${{4:-0}}" -ge {needed_kib} ]) 2>/dev/null; then'
        f" du -sk -- {shlex.quote(directory)} 2>/dev/null || echo 0; fi"
    )


def room_problem(rc: int, out: str, directory: str, needed: int, run_id: str) -> str | None:
    """From room_script's output: why the run's files do not fit, or None (also unknown)."""
    lines = out.splitlines()
    df = lines[0].split() if lines else []
    free = _kib(df[3]) if rc == 0 and len(df) >= 4 else None
    if free is None:
        return None
    du = lines[1].split() if len(lines) > 1 else []
    present = (_kib(du[0]) if du else None) or 0
    if needed - present <= free:
        return None
    # one unit for all three, MiB when none reaches a GiB (16 MiB into 8 read '0.0 GiB')
    unit, scale = ("GiB", 2**30) if max(needed, present, free) >= 2**30 else ("MiB", 2**20)
    needed_text, present_text, free_text = (
        f"{n / scale:,.1f} {unit}" for n in (needed, present, free)
    )
    return (
        f"not enough room in {directory}: run {run_id} writes {needed_text} of files per"
        f" host (size x numjobs), {present_text} are there already and {free_text} are"
        " free; shrink size or free the target"
    )
