"""A lock file per host and storage target, taken by every run and preparation job.

Snakemake's per-target resource serialises the jobs of one Snakemake session; two sessions
in different folders (or a hand-run `storbench run`) know nothing of each other. So each
benchmark also takes ``<host workdir>/locks/<host>/<place>.lock`` on every host it uses, created
atomically (the shell's noclobber), holding who took it: controller machine, pid and the
pid's start time, folder, and until when it may be held. A lock whose holder runs on this
machine and is gone, or whose time is up, is stale and taken over; any other is an error
naming the holder and the lock file. Released (only if it is still ours) on every exit path
the process lives through; a SIGKILLed holder leaves a stale lock, detected next time.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import posixpath
import re
import shlex
import socket

from storbench.core import paths
from storbench.hosts.transport import SHELL_TIMEOUT_S, HostError
from storbench.run import one_trip
from storbench.run.processes import Process, is_alive, this_process

LOCK_MARGIN_S = 600.0  # beyond the run's own time limit before a lock counts as abandoned


class TargetBusy(HostError):
    """Another storbench holds the target on this host."""


def lock_path(workdir: str, host: str, key: str) -> str:
    """Per host too: hosts may share one work folder (an NFS home)."""
    folder = f"{workdir.rstrip('/')}/locks/{paths.component(host, 'host')}"
    return f"{folder}/{key}.lock"


def run_targets(target: dict) -> list[dict]:
    """The targets a run writes to: each member of a target set, else the target."""
    return [t for t in target.get("members") or [target] if t.get("name")]


def lock_key(target: dict) -> str:
    """A directory or device is locked by its path, whatever the config names it (two
    campaigns naming one folder differently are kept apart; one name for two folders is not
    one lock); a target without a path (S3) by its name."""
    path = target.get("path")
    if not isinstance(path, str) or not path:
        return paths.component(target["name"], "target")
    place = posixpath.normpath(path)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", place.strip("/"))[:48].strip("._") or "root"
    digest = hashlib.sha256(f"{target.get('type')}:{place}".encode()).hexdigest()[:10]
    return f"{slug}-{digest}"


def target_locks(workdir: str, host: str, target: dict) -> list[tuple[str, str]]:
    """(target name, lock file) of each target the run writes to, on this host."""
    return [(t["name"], lock_path(workdir, host, lock_key(t))) for t in run_targets(target)]


def holder(timeout_s: float) -> str:
    """This process as a lock's holder: one line of JSON."""
    me = this_process()
    until = datetime.datetime.now(datetime.UTC) + datetime.timedelta(
        seconds=timeout_s + LOCK_MARGIN_S
    )
    return json.dumps(
        {
            "controller": socket.gethostname(),
            "pid": me.pid,
            "start_ticks": me.start_ticks,
            "folder": os.getcwd(),
            "until": until.isoformat(timespec="seconds"),
        },
        sort_keys=True,
    )


@contextlib.contextmanager
def held(transport, workdir: str, target: dict, timeout_s: float):
    """Hold every lock of the run's targets on this host for the body."""
    me = holder(timeout_s)
    taken: list[str] = []
    try:
        for name, path in target_locks(workdir, transport.spec.name, target):
            acquire(transport, path, me, name)
            taken.append(path)
        yield
    finally:
        release(transport, taken, me)


def acquire(transport, path: str, me: str, target: str) -> None:
    for _ in range(2):  # once more after removing a stale lock
        other = _try_take(transport, path, me)
        if other is None:
            return
        if not is_stale(other):
            raise TargetBusy(transport.spec.name, busy_message(target, path, other))
        remove_if_unchanged(transport, path, other)
    raise TargetBusy(transport.spec.name, f"target {target}: could not take {path}")


def release(transport, lock_paths: list[str], me: str) -> None:
    """Remove each lock that is still ours (best effort: a stale lock is found next time)."""
    if lock_paths:
        with contextlib.suppress(Exception):  # never hide the run's own error behind this
            transport.shell(release_script(lock_paths, me), timeout_s=SHELL_TIMEOUT_S)


def is_stale(text: str) -> bool:
    try:
        other = json.loads(text)
        until = datetime.datetime.fromisoformat(other["until"])
    except (ValueError, KeyError, TypeError):
        return True  # not a lock storbench wrote (or cut short): nobody holds it
    if datetime.datetime.now(datetime.UTC) > until:
        return True
    if other.get("controller") != socket.gethostname():
        return False  # another machine's process: cannot tell, trust its time limit
    return not is_alive(Process(int(other["pid"]), "", str(other["start_ticks"])))


def busy_message(target: str, path: str, text: str) -> str:
    try:
        other = json.loads(text)
        who = (
            f"storbench pid {other['pid']} on {other['controller']} (in {other['folder']},"
            f" until {other['until']} at the latest)"
        )
    except (ValueError, KeyError, TypeError):
        who = "another storbench"
    return (
        f"target {target} is in use by {who}; lock file {path}. Wait for it, or remove the"
        " lock file if that run is gone"
    )


BUSY_EXIT = 3  # take_script's exit code when another holder has the lock


def take_script(path: str, me: str) -> str:
    """Shell taking the lock for me: exit 0 when it is ours (already ours counts), BUSY_EXIT
    with the holder's line on stdout when another holds it, another code when it failed."""
    lock = shlex.quote(path)
    mine = shlex.quote(me)
    return (
        f"{one_trip.mkdir_script(path.rsplit('/', 1)[0])} || exit\n"
        f"(set -C; printf '%s\\n' {mine} > {lock}) 2>/dev/null && exit 0\n"
        f"held=$(cat -- {lock} 2>/dev/null)\n"
        f'[ "$held" = {mine} ] && exit 0\n'
        f"printf '%s\\n' \"$held\"; exit {BUSY_EXIT}"
    )


def holder_of(host: str, path: str, rc: int, out: str, err: str) -> str | None:
    """From take_script's outcome: None when taken; else the holder's line."""
    if rc == 0:
        return None
    if rc == BUSY_EXIT:
        return out.strip()
    reason = err.strip() or f"exit {rc}"
    raise HostError(host, f"cannot take the lock {path}: {reason}")


def release_script(lock_paths: list[str], me: str) -> str:
    """Shell removing each lock that is still ours; always exits 0."""
    lines = [
        f'[ "$(cat -- {shlex.quote(path)} 2>/dev/null)" = {shlex.quote(me)} ]'
        f" && rm -f -- {shlex.quote(path)}"
        for path in lock_paths
    ]
    return "\n".join([*lines, "true"])


def _try_take(transport, path: str, me: str) -> str | None:
    """None when taken; else the holder's line."""
    rc, out, err = transport.shell(take_script(path, me), timeout_s=SHELL_TIMEOUT_S)
    return holder_of(transport.spec.name, path, rc, out, err)


def remove_if_unchanged(transport, path: str, text: str) -> None:
    transport.shell(release_script([path], text), timeout_s=SHELL_TIMEOUT_S)
