"""One headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe).

Chromium reads NUL-terminated JSON commands on its fd 3 and writes replies and events on
fd 4; no port is opened. ``Browser`` starts it in its own session (a timeout kills the
renderers with it), sends commands and waits for replies and events with a deadline.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path

CLOSE_WAIT_S = 10.0
EVENTS_KEPT = 10_000  # events waited for later (a load), among those nobody waits for


class BrowserExited(RuntimeError):
    """Chromium closed its pipe: it exited (``status``) or crashed."""

    def __init__(self, status: int | None):
        super().__init__(f"the browser exited (status {status})")
        self.status = status


class BrowserTimeout(RuntimeError):
    """No reply or event within the deadline."""


class CommandError(RuntimeError):
    """Chromium answered a command with an error."""


class Browser:
    def __init__(self, command: list[str], stderr_path: Path):
        to_browser, self._commands = os.pipe()
        self._replies, from_browser = os.pipe()

        def browser_fds() -> None:  # in the child: the pipe ends as fd 3 and fd 4
            reading, writing = os.dup(to_browser), os.dup(from_browser)
            os.dup2(reading, 3)
            os.dup2(writing, 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)

        with stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                [*command, "--remote-debugging-pipe", "about:blank"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,
                close_fds=False,  # our fds are not inheritable; fd 3 and 4 must stay open
                preexec_fn=browser_fds,
            )
        os.close(to_browser)
        os.close(from_browser)
        self._chunks: list[bytes] = []  # the message being received
        self._complete: list[bytes] = []  # messages received, not yet read
        self._next_id = 0
        self._events: list[dict] = []
        self._sent: dict[int, str] = {}  # id: method of commands not yet answered
        self._results: dict[int, dict] = {}  # replies received before they were asked for

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             *, deadline: float) -> dict:  # fmt: skip
        """The result of one command; ``deadline``: time.monotonic() to give up at."""
        return self.result(self.send(method, params, session), deadline=deadline)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        """Send one command without waiting for it: its id, for result()."""
        self._next_id += 1
        message: dict = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        try:
            os.write(self._commands, json.dumps(message).encode() + b"\0")
        except BrokenPipeError:
            raise BrowserExited(self._status()) from None
        self._sent[self._next_id] = method
        return self._next_id

    def result(self, command: int, *, deadline: float) -> dict:
        """The result of the command sent as ``command``; CommandError if it failed."""
        while command not in self._results:
            reply = self._receive(deadline)
            if "id" in reply:
                self._results[reply["id"]] = reply
            elif "method" in reply:
                self._events.append(reply)
        reply = self._results.pop(command)
        method = self._sent.pop(command)
        if "error" in reply:
            raise CommandError(f"{method}: {reply['error'].get('message')}")
        return reply.get("result", {})

    def wait_event(self, method: str, matches, *, deadline: float) -> dict:
        """The params of the first event ``method`` whose params ``matches``."""
        while True:
            for event in self._events:
                if event["method"] == method and matches(event.get("params", {})):
                    self._events.remove(event)
                    return event["params"]
            # events nobody waits for are dropped; tabs loading at once send a dozen each
            self._events = self._events[-EVENTS_KEPT:]
            reply = self._receive(deadline)
            if "method" in reply:
                self._events.append(reply)

    def close(self) -> None:
        """Ask Chromium to exit; kill its session if it does not in time."""
        try:
            if self.process.poll() is None:
                with contextlib.suppress(BrowserExited, BrowserTimeout, CommandError):
                    self.call("Browser.close", deadline=time.monotonic() + CLOSE_WAIT_S)
                self.process.wait(timeout=CLOSE_WAIT_S)
        except subprocess.TimeoutExpired:
            pass
        finally:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
            os.close(self._commands)
            os.close(self._replies)

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def _receive(self, deadline: float) -> dict:
        # a PDF comes as one message of megabytes in pipe-sized chunks: joined once, at its end
        while not self._complete:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._replies], [], [], left)[0]:
                raise BrowserTimeout()
            chunk = os.read(self._replies, 1 << 20)
            if not chunk:
                raise BrowserExited(self._status())
            self._chunks.append(chunk)
            if b"\0" in chunk:
                self._complete.extend(b"".join(self._chunks).split(b"\0"))
                self._chunks = [self._complete.pop()]  # the start of the next message
        return json.loads(self._complete.pop(0))

    def _status(self) -> int | None:
        try:
            return self.process.wait(timeout=CLOSE_WAIT_S)
        except subprocess.TimeoutExpired:
            return None
