"""Many small steps on one host in one shell round trip, each step's outcome read back apart.

A run prepares each host with a dozen small commands (lock, folders, room, job file, tool
version); one SSH round trip each made the time between runs. A ``Steps`` script runs them
in order, each in its own subshell (an ``exit`` ends only that step), and stops at the first
step that fails; ``run`` returns every step that ran with its exit code, stdout and stderr,
so each failure is still reported naming the host and the step. Standard library only: this
is the benchmark path.
"""

from __future__ import annotations

import shlex
import uuid
from dataclasses import dataclass

from storbench.hosts.base import mkdir_script

MAX_INLINE_TEXT = 64 * 1024  # a file written from the script's own text (larger: put_text)


@dataclass(frozen=True)
class Outcome:
    rc: int
    out: str
    err: str


class ScriptFailed(RuntimeError):
    """The script itself did not finish (killed, or the shell failed): no step is to be trusted."""


class Steps:
    """A POSIX sh script of named steps, run in order until one exits non-zero."""

    def __init__(self) -> None:
        self._delimiter = f"@@storbench-{uuid.uuid4().hex}@@"
        self._steps: list[tuple[str, str]] = []

    def add(self, name: str, script: str) -> None:
        if any(name == known for known, _ in self._steps) or not name.isidentifier():
            raise ValueError(f"step name {name!r} must be a new identifier")
        self._steps.append((name, script))

    def __bool__(self) -> bool:
        return bool(self._steps)

    def script(self) -> str:
        lines = [
            f"d={shlex.quote(self._delimiter)}",
            # on both streams: each step's stdout and stderr are read back apart
            'mark() { printf \'\\n%s %s\\n\' "$d" "$1"; printf \'\\n%s %s\\n\' "$d" "$1" >&2; }',
        ]
        for name, body in self._steps:
            lines += [
                f"mark {name}",
                f"(\n{body}\n) </dev/null",
                "rc=$?",
                'printf \'\\n%s rc %s\\n\' "$d" "$rc"',
                '[ "$rc" -eq 0 ] || { mark end; exit 0; }',
            ]
        lines += ["mark end", "exit 0"]
        return "\n".join(lines) + "\n"

    def parse(self, rc: int, out: str, err: str) -> dict[str, Outcome]:
        """{step: outcome} of the steps that ran (the last one may have failed)."""
        outs, codes = _sections(out, self._delimiter)
        errs, _ = _sections(err, self._delimiter)
        if rc != 0 or "end" not in outs:
            detail = (_unmarked(err, self._delimiter).strip().splitlines() or ["no message"])[-1]
            raise ScriptFailed(f"exit {rc}: {detail}")
        return {
            name: Outcome(codes[name], outs[name], errs.get(name, ""))
            for name, _ in self._steps
            if name in codes
        }


def run(transport, steps: Steps, *, timeout_s: float) -> dict[str, Outcome]:
    """Run the steps on the host in one round trip; ScriptFailed if the script did not end."""
    rc, out, err = transport.own_shell(steps.script(), timeout_s=timeout_s)
    return steps.parse(rc, out, err)


def write_file_script(text: str, path: str) -> str | None:
    """Shell that writes text to path atomically (a temporary file renamed into place), its
    folder made first; None when the text is too large (or binary) for a script. It works
    in the folder: the path itself (a job file's: the marker that finds the tool's
    processes) stays out of the script's command line."""
    if len(text) > MAX_INLINE_TEXT or "\0" in text:
        return None
    folder, name = path.rsplit("/", 1) if "/" in path else (".", path)
    folder = folder or "/"
    tmp = shlex.quote(f".{name}.{uuid.uuid4().hex}.tmp")
    return (
        f"{mkdir_script(folder)} && cd -- {shlex.quote(folder)} || exit\n"
        f"printf '%s' {shlex.quote(text)} > {tmp} && mv -f -- {tmp} {shlex.quote(name)}"
        f" || {{ rc=$?; rm -f -- {tmp}; exit $rc; }}"
    )


def _sections(text: str, delimiter: str) -> tuple[dict[str, str], dict[str, int]]:
    """({step: what it wrote, exactly}, {step: its exit code}) from the marked text."""
    bodies: dict[str, str] = {}
    codes: dict[str, int] = {}
    name = None
    for chunk in text.split(f"\n{delimiter} ")[1:]:
        head, _, body = chunk.partition("\n")
        if head.startswith("rc ") and name is not None:  # a step's exit code follows its output
            codes[name] = int(head[3:])
        else:
            name = head
            bodies[name] = body
    return bodies, codes


def _unmarked(text: str, delimiter: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith(delimiter))
