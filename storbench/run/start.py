"""A synchronized start of a standalone run: every host armed, then released at one instant.

Each host thread prepares its host; once all are prepared, each measures how long a trivial
command takes there (all at once) and waits at the barrier. When the last host arrives, the
release time is set a little ahead (twice the slowest round trip plus a floor, capped), and
each host's command is wrapped in a shell that waits on the host until then, prints the
host's own start stamp on stderr and execs the tool. Where the host has bash 5, the wait and
the stamp use its builtins only: nothing forks between reading the clock and the wait, or
between the wake and the stamp (a POSIX shell's `date` and `sleep` make a host start a few
milliseconds late, more on a busy host). The stamp is taken back out of the
stderr file after the run. A host that fails before arming aborts the barrier, so the
others stop instead of waiting.
Standard library only: this is the benchmark path.
"""

from __future__ import annotations

import datetime
import shlex
import threading
import time
from collections.abc import Callable
from pathlib import Path

from storbench.core.atomic import atomic_output
from storbench.hosts.transport import SHELL_TIMEOUT_S

MARGIN_FLOOR_S = 0.2  # on top of twice the slowest host's round trip
MARGIN_CAP_S = 5.0  # a host slower than this starts late, and the skew shows it
STAMP_PREFIX = "storbench-start-epoch "
STAMP_SEARCH_BYTES = 64 * 1024  # the stamp precedes the tool's output (a login rc file may not)
CLOCK = "date +%s.%N"  # the host's clock in epoch seconds (GNU date; busybox prints N)
WRAPPER_NAME = "storbench-start"  # $0 of the wrapper shell, shown in ps
# Any POSIX shell. $1: the release time (epoch seconds); then the tool's argv. GNU date gives
# nanoseconds; a date without %N prints a literal N, and whole seconds are used instead.
PORTABLE_WAIT = (
    "release=$1; shift; "
    'epoch() { t=$(date +%s.%N); case $t in *[!0-9.]*|"") t=$(date +%s);; esac; echo "$t"; }; '
    'delay=$(LC_ALL=C awk -v r="$release" -v n="$(epoch)" '
    "'BEGIN { d = r - n; printf \"%.6f\", (d > 0 ? d : 0) }'); "
    'sleep "${delay:-0}"; '
    f'echo "{STAMP_PREFIX}$(epoch)" >&2; '
    'exec "$@"'
)
# bash 5: $1 the portable wait (taken without $EPOCHREALTIME or /dev/fd); $2 the release
# time in epoch seconds with six decimals, whose digits are microseconds; then the tool's
# argv. `read -t` on a pipe the shell holds both ends of sleeps without a child, and the
# loop outlasts a signal. One command per line, the bash syntax in an eval: a shell that
# is not bash 5 parses no further than the line that hands over to the portable wait.
BASH_WAIT = "\n".join([
    "portable=$1; shift",
    'if [ -z "${EPOCHREALTIME-}" ] || ! eval "exec {wait_fd}<> <(:)"; then',
    '  eval "$portable"; exit 127',
    "fi",
    "release=${1//[!0-9]/}; shift",
    "while now=${EPOCHREALTIME//[!0-9]/}; left=$((10#$release - now)); ((left > 0)); do",
    "  printf -v left '%d.%06d' $((left / 1000000)) $((left % 1000000))",
    '  read -r -t "$left" -u "$wait_fd"',
    "done",
    "stamp=${EPOCHREALTIME//[!0-9]/}; exec {wait_fd}<&-",
    f"printf '{STAMP_PREFIX}%d.%06d\\n' $((stamp / 1000000)) $((stamp % 1000000)) >&2",
    'exec "$@"',
])  # fmt: skip
# $1 the bash wait, $2 the portable one: bash where the host has it, else this shell
WRAPPER_SCRIPT = (
    "precise=$1 portable=$2; shift 2; "
    'if command -v bash >/dev/null 2>&1; then exec bash -c "$precise" "$0" "$portable" "$@"; fi; '
    'eval "$portable"'
)


class StartAborted(RuntimeError):
    """Another host failed before the start (or the run was interrupted): this one did not run."""


class StartBarrier:
    """Arms the run's hosts (one thread each) and picks the instant they all start at.

    Every host is prepared first; then all of them take their probe at once, so the slowest
    round trip includes what reaching every host at the same moment costs this controller
    (sessions opened together queue for its cores), as the launch after the release will.
    """

    def __init__(self, hosts: int):
        self._prepared = threading.Barrier(hosts)
        self._barrier = threading.Barrier(hosts, action=self._pick_release)
        self._hosts = hosts
        self._round_trips: list[float] = []
        self._armed: set[str] = set()
        self._lock = threading.Lock()
        self._why_aborted = ""
        self.release_epoch: float | None = None
        self.margin_s: float | None = None

    def arm(self, host: str, probe: Callable[[], float]) -> float:
        """Wait until every host is prepared, then take probe() (the seconds a trivial
        command takes on the host) with all of them, then wait until every host is armed;
        the release time (epoch seconds, our clock)."""
        self._wait(self._prepared)
        round_trip_s = probe()
        with self._lock:
            self._round_trips.append(round_trip_s)
            self._armed.add(host)
        self._wait(self._barrier)
        assert self.release_epoch is not None  # set by the barrier's action
        return self.release_epoch

    def _wait(self, barrier: threading.Barrier) -> None:
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            raise StartAborted(f"not started: {self._why_aborted}") from None

    def leave(self, host: str, why: str) -> None:
        """A host thread ends: one that never armed aborts the barrier, naming ``why``."""
        if host not in self._armed:
            self.abort(why)

    def abort(self, why: str) -> None:
        with self._lock:
            if not self._barrier.broken and not self._why_aborted:
                self._why_aborted = why
        self._prepared.abort()
        self._barrier.abort()

    def released(self) -> bool:
        """Whether the release instant has passed (the workload has started)."""
        return self.release_epoch is not None and time.time() >= self.release_epoch

    def _pick_release(self) -> None:
        if self._hosts == 1:  # nothing to synchronize with
            margin = 0.0
        else:
            margin = min(2 * max(self._round_trips) + MARGIN_FLOOR_S, MARGIN_CAP_S)
        self.margin_s = margin
        self.release_epoch = time.time() + margin


def probe(transport) -> tuple[float, float | None]:
    """(seconds a trivial command takes on the host, its clock minus ours or None).

    The command goes the way the tool will, through the start wrapper: on a host busy
    starting many sessions, each of the wrapper's shells adds to the time the launch takes.
    The host's clock is read before and after the wrapper; the offset leaves that time out."""
    before, began = time.time(), time.monotonic()
    wrapper = shlex.join(at_release(["true"], 0))
    rc, out, _ = transport.shell(f"{CLOCK}; {wrapper}; {CLOCK}", timeout_s=SHELL_TIMEOUT_S)
    round_trip = time.monotonic() - began
    after = time.time()
    stamps = out.split("\n")
    if rc != 0 or len(stamps) < 2:
        return round_trip, None
    return round_trip, clock_offset(stamps[0], stamps[1], before, after)


def clock_offset(start: str, end: str, before: float, after: float) -> float | None:
    """The host's clock minus ours: its first stamp against our time then, taking the round
    trip's network part as symmetric (what the script itself took is not network)."""
    try:
        first, last = float(start.strip()), float(end.strip())
    except ValueError:  # a date without %N (busybox) prints it literally
        return None
    network_s = max(0.0, (after - before) - (last - first))
    return round(first - (before + network_s / 2), 3) + 0.0  # + 0.0: never -0.0


def at_release(argv: list[str], release_epoch: float) -> list[str]:
    """argv run on the host at release_epoch (its own clock), its start stamped on stderr."""
    return [
        "sh", "-c", WRAPPER_SCRIPT, WRAPPER_NAME, BASH_WAIT, PORTABLE_WAIT,
        f"{release_epoch:.6f}", *map(str, argv),
    ]  # fmt: skip


def take_stamp(stderr_path: Path) -> float | None:
    """The host's start stamp (epoch seconds) from the tool's stderr file, whose stamp line
    is then removed: the file keeps only what the tool wrote. None without a stamp."""
    try:
        with open(stderr_path, "rb") as stream:
            head = stream.read(STAMP_SEARCH_BYTES)
    except OSError:
        return None
    at = _stamp_line_start(head)
    end = -1 if at is None else head.find(b"\n", at)
    if at is None or end < 0:
        return None
    try:
        stamp = float(head[at + len(STAMP_PREFIX) : end])
    except ValueError:
        return None
    _drop_bytes(stderr_path, at, end + 1)
    return stamp


def _stamp_line_start(head: bytes) -> int | None:
    prefix = STAMP_PREFIX.encode()
    if head.startswith(prefix):
        return 0
    found = head.find(b"\n" + prefix)
    return None if found < 0 else found + 1


def _drop_bytes(path: Path, start: int, end: int) -> None:
    with open(path, "rb") as source, atomic_output(path) as tmp, open(tmp, "wb") as sink:
        sink.write(source.read(start))
        source.seek(end)
        while chunk := source.read(1 << 20):
            sink.write(chunk)


def iso(epoch: float) -> str:
    """An epoch time in the manifest's format (attempt.now())."""
    moment = datetime.datetime.fromtimestamp(epoch, datetime.UTC)
    return moment.isoformat(timespec="milliseconds")
