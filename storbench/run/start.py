"""A synchronized start of a standalone run: every host armed, then released at one instant.

Each host thread prepares its host; once all are prepared, each measures how long a trivial
command takes there (all at once) and waits at the barrier. When the last host arrives, the
release time is set a little ahead (twice the slowest round trip plus a floor, capped), and
each host's command is wrapped in a shell that waits on the host until then, prints the
host's own start stamp on stderr and execs the tool. Where the host has bash 5, the wait and
the stamp use its builtins only: nothing forks between reading the clock and the wait, or
between the wake and the stamp (a POSIX shell's `date` and `sleep` make a host start a few
milliseconds late, more on a busy host). A tool whose job holds its start (a start hook,
core/start_hook) is launched at once instead, and the same wait runs in its hook, after
the tool's exec and set-up: those no longer happen at the release, all hosts at once.
The stamp is taken back out of the stderr file after the run. A host that fails before
arming aborts the barrier, so the others stop instead of waiting.
Standard library only: this is the benchmark path.
"""

from __future__ import annotations

import datetime
import posixpath
import re
import shlex
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from storbench.core import start_hook
from storbench.core.atomic import atomic_output
from storbench.hosts.transport import SHELL_TIMEOUT_S

MARGIN_FLOOR_S = 0.2  # on top of twice the slowest host's round trip
MARGIN_CAP_S = 5.0  # a host slower than this starts late, and the skew shows it
# A held start's early release: the hooks wait on a FIFO in the tool's work folder (its path
# in RELEASE_VARIABLE) as well as for the release time, and go on when the controller, seeing
# every host's LISTENING_LINE, has each host's session guard write them a line there.
RELEASE_VARIABLE = "STORBENCH_RELEASE"
LISTENING_LINE = "storbench-listening"
LISTENING_DEADLINE_S = 60.0  # a first held start waits this long at most for every host
POLL_S = 0.01  # the hosts' stderr files are looked at this often for LISTENING_LINE
STAMP_PREFIX = "storbench-start-epoch "
ARMED_PREFIX = "storbench-armed-epoch "  # when the host's wait began (a held tool: set up)
OUR_LINE = b"storbench-"  # what every stamp line starts with
STAMP_SEARCH_BYTES = 64 * 1024  # the stamp precedes the tool's output (a login rc file may not)
CLOCK = "date +%s.%N"  # the host's clock in epoch seconds (GNU date; busybox prints N)
WRAPPER_NAME = "storbench-start"  # $0 of the wrapper shell, shown in ps
# Any POSIX shell. $1: the release time (epoch seconds); then the tool's argv. GNU date gives
# nanoseconds; a date without %N prints a literal N, and whole seconds are used instead.
PORTABLE_WAIT = (
    "release=$1; shift; "
    'epoch() { t=$(date +%s.%N); case $t in *[!0-9.]*|"") t=$(date +%s);; esac; echo "$t"; }; '
    f'echo "{ARMED_PREFIX}$(epoch)" >&2; '
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
    "armed=${EPOCHREALTIME//[!0-9]/}",
    f"printf '{ARMED_PREFIX}%d.%06d\\n' $((armed / 1000000)) $((armed % 1000000)) >&2",
    # an early release: a line on the FIFO (hooks reading it at once share its bytes, so
    # the line says nothing), then the instant to go at (epoch microseconds) in
    # <fifo>.released, if sooner, else now; a hook takes one line, then waits on its own pipe
    f'sooner() {{ n=0; until read -r at 2>/dev/null < "${RELEASE_VARIABLE}.released"'
    ' || ((++n > 1000)); do :; done; at=${at//[!0-9]/}; fd=$wait_fd;'
    ' if [ -z "$at" ]; then release=0; elif ((10#$at < 10#$release)); then release=$at; fi; }',
    "fd=$wait_fd",
    f'if [ -p "${{{RELEASE_VARIABLE}-}}" ]; then',
    f'  exec {{fifo_fd}}<> "${RELEASE_VARIABLE}"; fd=$fifo_fd',
    f'  echo "$$" >> "${RELEASE_VARIABLE}.hooks"',
    f'  [ -e "${RELEASE_VARIABLE}.released" ] && sooner',
    f"  echo {LISTENING_LINE} >&2",
    "fi",
    "while now=${EPOCHREALTIME//[!0-9]/}; left=$((10#$release - now)); ((left > 0)); do",
    "  printf -v left '%d.%06d' $((left / 1000000)) $((left % 1000000))",
    '  read -r -t "$left" -u "$fd" && sooner',
    "done",
    "stamp=${EPOCHREALTIME//[!0-9]/}; exec {wait_fd}<&-",
    f"printf '{STAMP_PREFIX}%d.%06d\\n' $((stamp / 1000000)) $((stamp % 1000000)) >&2",
    '[ -z "${fifo_fd-}" ] || exec {fifo_fd}<&-',
    'exec "$@"',
])  # fmt: skip
# $1 the bash wait, $2 the portable one: bash where the host has it, else this shell
WRAPPER_SCRIPT = (
    "precise=$1 portable=$2; shift 2; "
    'if command -v bash >/dev/null 2>&1; then exec bash -c "$precise" "$0" "$portable" "$@"; fi; '
    'eval "$portable"'
)

STAMP_FD = 7  # a tool holding its start: the hook's stamp goes to the tool's stderr through it
# A tool whose job holds its start (start_hook.COMMAND): exec'd at once in its work folder
# (where it may leave the hook's output), the hook's script in the hook's variable, its
# stderr also on STAMP_FD, since the tool sends the hook's own output to a file.
HELD_SCRIPT = (
    f'{start_hook.VARIABLE}=$1; export {start_hook.VARIABLE}; cd "$2" || exit 126; shift 2; '
    f'exec {STAMP_FD}>&2; exec "$@"'
)
# the FIFO, its hooks' PIDs, the instant, every hook told (hosts/base RELEASE_ACTION)
RELEASE_SUFFIXES = ("", ".hooks", ".released", ".sent")


def fresh_fifo_script(word: str) -> str:
    """Shell: a new release FIFO at word (a shell word), what an earlier run left removed."""
    files = " ".join(f"{word}{suffix}" for suffix in RELEASE_SUFFIXES)
    return f"rm -f -- {files}; mkfifo -m 600 -- {word}"


# The same, its hooks listening on a new FIFO ($3) for an early release.
LISTENING_SCRIPT = (
    f'{start_hook.VARIABLE}=$1; export {start_hook.VARIABLE}; cd "$2" || exit 126; '
    f"{fresh_fifo_script(chr(34) + '$3' + chr(34))} && {RELEASE_VARIABLE}=$3 && "
    f'export {RELEASE_VARIABLE}; shift 3; exec {STAMP_FD}>&2; exec "$@"'
)


class StartAborted(RuntimeError):
    """Another host failed before the start (or the run was interrupted): this one did not run."""


class StartBarrier:
    """Arms the run's hosts (one thread each) and picks the instant they all start at.

    Every host is prepared first; then all of them take their probe at once, so the slowest
    round trip includes what reaching every host at the same moment costs this controller
    (sessions opened together queue for its cores), as the launch after the release will.
    """

    def __init__(
        self, hosts: int, setup_s: float = 0.0, learned: bool = False, listen: bool = False
    ):
        """setup_s: a held start (the tool launched at once, its hook waiting) leaves the
        tool this long to reach its hook: on top of the probes' margin, or, learned (a set-up
        time measured from the launch, run/start_margin), at least that long. listen: a held
        start is released when every host waits (EarlyRelease), if every host's probe shows
        the precise wait: its time is then only a deadline. Learned, the release is sent as
        soon as every host waits, for the learned instant (each hook waits for it on its own
        clock: on 128 loopback hosts sharing 2 cores that started them closer together than
        the release's way through each host's session did), or for the probes' margin from
        then if later: at 256 hosts a run's set-up outgrew the last runs' by 18 s, and the
        hosts that arrived after the learned instant started up to that late."""
        self._setup_s = setup_s
        self._learned = learned
        self._listen = listen
        self._imprecise: set[str] = set()
        self.listening = False
        self.learned_epoch: float | None = None  # a learned start's instant, listening
        self._prepared = threading.Barrier(hosts)
        self._barrier = threading.Barrier(hosts, action=self._pick_release)
        self._hosts = hosts
        self._round_trips: list[float] = []
        self._armed: set[str] = set()
        self._lock = threading.Lock()
        self._why_aborted = ""
        self.release_epoch: float | None = None
        self.margin_s: float | None = None
        self.delivery_s = 0.0  # the probes' margin: what reaching every host takes, at most

    def imprecise(self, host: str) -> None:
        """host's probe ran the portable wait, which cannot be released early."""
        with self._lock:
            self._imprecise.add(host)

    def release_early(self) -> float | None:
        """Bring a listening start's release forward to the probes' margin from now (or its
        learned instant, if later), if that is before its deadline: the new release time,
        else None."""
        with self._lock:
            at = max(time.time() + self.delivery_s, self.learned_epoch or 0.0)
            if self._why_aborted or not self.listening or self.release_epoch is None:
                return None
            if at >= self.release_epoch:
                return None
            self.release_epoch = at
            return at

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
            margin = self.delivery_s = delivery_margin(max(self._round_trips))
            margin = max(margin, self._setup_s) if self._learned else margin + self._setup_s
            # the hooks go when all are waiting (at the learned instant at the earliest): a
            # deadline
            self.listening = self._listen and not self._imprecise
            if self.listening:
                if self._learned:
                    self.learned_epoch = time.time() + margin
                margin = max(margin, LISTENING_DEADLINE_S)
        self.margin_s = margin
        self.release_epoch = time.time() + margin


def delivery_margin(round_trip_s: float) -> float:
    """How long after now a release reaches hosts whose slowest round trip, all of them at
    once, took round_trip_s: twice that and a floor, capped."""
    return min(2 * round_trip_s + MARGIN_FLOOR_S, MARGIN_CAP_S)


def probe(transport) -> tuple[float, float | None, bool]:
    """(seconds a trivial command takes on the host, its clock minus ours or None, whether
    it runs the precise wait: bash 5, whose stamps have microseconds where the portable
    one's date has nanoseconds, or whole seconds).

    The command goes the way the tool will, through the start wrapper: on a host busy
    starting many sessions, each of the wrapper's shells adds to the time the launch takes.
    The host's clock is read before and after the wrapper; the offset leaves that time out."""
    before, began = time.time(), time.monotonic()
    rc, out, err = transport.shell(f"{CLOCK}; {wait_probe()}; {CLOCK}", timeout_s=SHELL_TIMEOUT_S)
    round_trip = time.monotonic() - began
    after = time.time()
    precise = rc == 0 and waits_precisely(err)
    stamps = out.split("\n")
    if rc != 0 or len(stamps) < 2:
        return round_trip, None, precise
    return round_trip, clock_offset(stamps[0], stamps[1], before, after), precise


PRECISE_STAMP = re.compile(rf"^{re.escape(STAMP_PREFIX)}[0-9]+\.[0-9]{{6}}$", re.MULTILINE)


def wait_probe() -> str:
    """Shell: the start wrapper around `true`, released at once: its stamp on stderr shows
    which wait the host runs (waits_precisely)."""
    return shlex.join(at_release(["true"], 0))


def waits_precisely(stderr: str) -> bool:
    """Whether wait_probe's stderr has the precise wait's stamp (bash 5: microseconds, where
    the portable wait's date has nanoseconds, or whole seconds)."""
    return PRECISE_STAMP.search(stderr) is not None


class Releasable(Protocol):
    """A listening held start's release time (StartBarrier; service mode's Deadline)."""

    @property
    def release_epoch(self) -> float | None: ...

    def release_early(self) -> float | None: ...


class EarlyRelease:
    """Releases a listening held start (StartBarrier.listening) once every host's start
    hook is waiting, to go at an instant the delivery margin ahead (release_early), so the
    release's way to each host is not in the skew: each hook says it waits on the tool's
    stderr (LISTENING_LINE), which arrives in the host's stderr file here while the tool
    runs. Each host's thread says where that file is and how to release it (expect);
    watch() runs in a thread of its own."""

    def __init__(self, barrier: Releasable, hosts: int):
        self._barrier = barrier
        self._hosts = hosts
        self._expected: dict[str, tuple[Path, Callable[[float], None]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._gone: set[str] = set()
        self.released = False

    def expect(self, host: str, stderr_path: Path, release: Callable[[float], None]) -> None:
        """release(at): the host's hooks told to go at at (epoch seconds)."""
        with self._lock:
            self._expected[host] = (stderr_path, release)

    def gone(self, host: str) -> None:
        """host's tool has ended before the release (it failed): the others need not wait
        for it, and go when they listen, as they would have at their time."""
        with self._lock:
            self._gone.add(host)

    def stop(self) -> None:
        self._stop.set()

    def watch(self) -> None:
        """Until every host listens (then release them all), the deadline, or stop()."""
        listening: set[str] = set()
        sizes: dict[str, int] = {}
        while not self._stop.wait(POLL_S):
            deadline = self._barrier.release_epoch
            if deadline is not None and time.time() >= deadline:
                return
            with self._lock:
                expected = dict(self._expected)
                listening |= self._gone
            for host, (path, _) in expected.items():
                if host not in listening and _grew(path, sizes, host) and _listens(path):
                    listening.add(host)
            if len(listening) == self._hosts and (at := self._barrier.release_early()):
                for _, release in expected.values():
                    release(at)
                self.released = True
                return


def _grew(path: Path, sizes: dict[str, int], key: str) -> bool:
    try:
        size = path.stat().st_size
    except OSError:
        return False
    grew = size != sizes.get(key)
    sizes[key] = size
    return grew


def _listens(path: Path) -> bool:
    try:
        with open(path, "rb") as stream:
            head = stream.read(STAMP_SEARCH_BYTES)
    except OSError:
        return False
    line = LISTENING_LINE.encode()
    return any(head[at:end] == line for at, end in _our_lines(head))


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


def held_at_release(
    argv: list[str], release_epoch: float, workdir: str, fifo: str | None = None
) -> list[str]:
    """argv started at once in workdir, its job's start hook holding the workload until
    release_epoch (the host's own clock); the hook stamps the start on the tool's stderr.
    fifo: a path on the host for the early release (EarlyRelease); made new here."""
    hook = hook_script(release_epoch)
    if fifo is None:
        return ["sh", "-c", HELD_SCRIPT, WRAPPER_NAME, hook, workdir, *argv]
    return ["sh", "-c", LISTENING_SCRIPT, WRAPPER_NAME, hook, workdir, fifo, *argv]


def release_fifo(workdir: str, host: str) -> str:
    """Where a host's held start listens for its early release (hosts may share workdir)."""
    return posixpath.join(workdir, f".storbench-release.{host}")


def hook_script(release_epoch: float) -> str:
    """The start hook's script (standalone): its stamps on STAMP_FD, the tool's stderr."""
    return f"exec 2>&{STAMP_FD} {STAMP_FD}>&-\n{_hook_wait(f'{release_epoch:.6f}')}"


def hook_file_text() -> str:
    """The service-mode start hook (core/start_hook.SCRIPT_NAME), the release its first
    argument and the FIFO it listens on for an early release its second, if any; its
    stamps on stderr, which fio saves with the hook's output."""
    listen = f'if [ -n "${{2-}}" ]; then {RELEASE_VARIABLE}=$2; export {RELEASE_VARIABLE}; fi\n'
    return listen + _hook_wait('"$1"') + "\n"


def _hook_wait(release: str) -> str:
    """The wait of at_release until release (a shell word: epoch seconds, six decimals),
    with no command after it: the wait's `exec` without one ends the hook with status 0,
    which lets the tool go on (fio skips the I/O of a job whose exec_prerun fails, and
    says nothing)."""
    return f"{shlex.join(['set', '--', BASH_WAIT, PORTABLE_WAIT])} {release}\n{WRAPPER_SCRIPT}"


def stamps_in(text: str) -> tuple[float | None, float | None]:
    """(the earliest start, the latest arrival) among text's stamp lines; None: none such."""
    found: dict[str, list[float]] = {STAMP_PREFIX: [], ARMED_PREFIX: []}
    for line in text.splitlines():
        stamp = _stamp_of(line)
        if stamp is not None:
            found[stamp[0]].append(stamp[1])
    return _earliest_and_latest(found)


def take_stamps(stderr_path: Path) -> tuple[float | None, float | None]:
    """(the host's start, when it was armed), epoch seconds, from the tool's stderr file,
    whose stamp lines are then removed: the file keeps only what the tool wrote. A tool
    holding its start stamps once per job section or process: the earliest start counts,
    and the latest arrival (the host is armed when all of them are). None: no such stamp."""
    try:
        with open(stderr_path, "rb") as stream:
            head = stream.read(STAMP_SEARCH_BYTES)
    except OSError:
        return None, None
    found: dict[str, list[float]] = {STAMP_PREFIX: [], ARMED_PREFIX: []}
    lines = []
    for at, end in _our_lines(head):
        text = head[at:end].decode(errors="replace")
        stamp = _stamp_of(text)
        if stamp is not None:
            found[stamp[0]].append(stamp[1])
        if stamp is not None or text == LISTENING_LINE:
            lines.append((at, end))
    if lines:
        _drop_lines(stderr_path, lines)
    return _earliest_and_latest(found)


def _stamp_of(line: str) -> tuple[str, float] | None:
    for prefix in (STAMP_PREFIX, ARMED_PREFIX):
        if line.startswith(prefix):
            try:
                return prefix, float(line.removeprefix(prefix))
            except ValueError:
                return None
    return None


def _earliest_and_latest(found: dict[str, list[float]]) -> tuple[float | None, float | None]:
    starts, arrivals = found[STAMP_PREFIX], found[ARMED_PREFIX]
    return (min(starts) if starts else None), (max(arrivals) if arrivals else None)


def _our_lines(head: bytes) -> list[tuple[int, int]]:
    """(start, end) of every whole line in head that starts like a stamp, end at its newline."""
    found: list[tuple[int, int]] = []
    at = 0 if head.startswith(OUR_LINE) else _next_line(head, 0)
    while at is not None and (end := head.find(b"\n", at)) >= 0:
        found.append((at, end))
        at = _next_line(head, end)
    return found


def _next_line(head: bytes, start: int) -> int | None:
    found = head.find(b"\n" + OUR_LINE, start)
    return None if found < 0 else found + 1


def _drop_lines(path: Path, lines: list[tuple[int, int]]) -> None:
    with open(path, "rb") as source, atomic_output(path) as tmp, open(tmp, "wb") as sink:
        kept_from = 0
        for at, end in lines:
            sink.write(source.read(at - kept_from))
            source.seek(end + 1)
            kept_from = end + 1
        while chunk := source.read(1 << 20):
            sink.write(chunk)


def iso(epoch: float) -> str:
    """An epoch time in the manifest's format (attempt.now())."""
    moment = datetime.datetime.fromtimestamp(epoch, datetime.UTC)
    return moment.isoformat(timespec="milliseconds")
