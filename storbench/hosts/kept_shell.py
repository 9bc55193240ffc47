"""A shell kept open on a host through its SSH master, for storbench's own scripts in turn.

Each script runs in a subshell of it with no input, between a start line and an end line
(its exit code) on stdout, and an end line on stderr; the lines carry a fresh random mark, so
no output can end a script early. A session ends when every process holding its output has
let it go, but the end lines come when the script's subshell ends: only scripts that leave no
process holding their output come here (``Transport.own_shell``: a run's preparation, looks
and finish), never a command from the config. A session per script costs an ssh process here
and a session there: for 128 hosts, a preparation's steps (4 KB of script) took 0.75 s each
time as sessions, and through kept shells 0.70 s the first time, 0.22 s from the second on
(bench/HISTORY.md, 2026-12-07). Standard library only: this is the benchmark path.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import signal
import subprocess
import threading
import time
import uuid

CHUNK = 65536
REAP_S = 5.0  # an ended shell's ssh process exits once its streams have


class ShellGone(RuntimeError):
    """The shell ended before the script started: nothing ran, it may be run afresh."""


class KeptShell:
    """One POSIX shell reading scripts on its standard input (``argv`` starts it)."""

    def __init__(self, argv: list[str]) -> None:
        self._proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True,
        )  # fmt: skip
        self.lock = threading.Lock()  # one script at a time; a busy shell is passed by

    def alive(self) -> bool:
        return self._proc.poll() is None

    def run(self, script: str, timeout_s: float) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of script; ShellGone if the shell ended before it
        started; subprocess.TimeoutExpired past timeout_s (the shell is ended: the host's
        session, and the script with it). A shell that ends while the script runs gives
        exit code 255 and the output so far, as ssh does when its session is lost."""
        mark = f"@@storbench-kept-{uuid.uuid4().hex}@@"
        started = f"{mark} started\n".encode()
        out_end = re.compile(rb"\n" + re.escape(mark.encode()) + rb" rc (\d+)\n")
        err_end = f"\n{mark}\n".encode()
        out, err = self._exchange(_wrapped(script, mark).encode(), out_end, err_end, timeout_s)
        begin = out.find(started)  # after what the account's start-up files may print
        if begin < 0:
            self._reap()
            raise ShellGone(_text(err).strip())
        body = out[begin + len(started) :]
        end, err_stop = out_end.search(body), err.find(err_end)
        stdout = _text(body if end is None else body[: end.start()])  # never the end line
        if end is None or err_stop < 0:  # the shell ended with the script: the session lost
            self._reap()
            return 255, stdout, _text(err)
        return int(end[1]), stdout, _text(err[:err_stop])

    def close(self) -> None:
        """End the shell: its input closed (it exits), and its ssh process if it stays."""
        proc = self._proc
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                stream.close()  # type: ignore[union-attr]
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGTERM)

    def _exchange(
        self, text: bytes, out_end: re.Pattern[bytes], err_end: bytes, timeout_s: float
    ) -> tuple[bytes, bytes]:
        """Write text; read both streams until each has its end line, or they close."""
        proc = self._proc
        assert proc.stdin and proc.stdout and proc.stderr
        in_fd, out_fd, err_fd = proc.stdin.fileno(), proc.stdout.fileno(), proc.stderr.fileno()
        out, err = bytearray(), bytearray()
        received = {out_fd: out, err_fd: err}
        # the end lines end the output: only each buffer's tail is looked at (a large
        # output, read in pipe-sized chunks, is not searched again for every chunk)
        tail = len(err_end) + 32
        deadline = time.monotonic() + timeout_s
        pending = memoryview(text)
        with selectors.DefaultSelector() as selector:
            for fd, event in ((in_fd, selectors.EVENT_WRITE), (out_fd, selectors.EVENT_READ),
                              (err_fd, selectors.EVENT_READ)):  # fmt: skip
                os.set_blocking(fd, False)
                selector.register(fd, event)
            while not (
                out_end.search(out, max(0, len(out) - tail))
                and err.find(err_end, max(0, len(err) - tail)) >= 0
            ):
                left = deadline - time.monotonic()
                if left <= 0:
                    self._kill()
                    raise subprocess.TimeoutExpired("kept shell", timeout_s)
                for key, _ in selector.select(left):
                    if key.fd == in_fd:
                        try:
                            pending = pending[os.write(in_fd, pending) :]
                        except BrokenPipeError:
                            pending = pending[len(pending) :]
                        if not pending:
                            selector.unregister(in_fd)
                        continue
                    chunk = os.read(key.fd, CHUNK)
                    if not chunk:  # the stream closed: the shell has ended
                        selector.unregister(key.fd)
                    received[key.fd] += chunk
                if out_fd not in selector.get_map() and err_fd not in selector.get_map():
                    break
        return bytes(out), bytes(err)

    def _kill(self) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        self._reap()

    def _reap(self) -> None:
        """Closed, and waited for: its streams have ended, its process goes with them."""
        self.close()
        try:
            self._proc.wait(timeout=REAP_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()


def _wrapped(script: str, mark: str) -> str:
    """script in a subshell with no input, between the start line and the end lines."""
    return (
        f"printf '%s started\\n' '{mark}'\n( {script}\n) </dev/null\n"
        f"printf '\\n%s rc %s\\n' '{mark}' \"$?\"; printf '\\n%s\\n' '{mark}' >&2\n"
    )


def _text(data: bytes) -> str:
    return data.decode(errors="replace")
