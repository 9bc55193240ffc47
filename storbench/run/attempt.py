"""What every run path shares about one attempt: its errors, times, tails and tool version."""

from __future__ import annotations

import contextlib
import datetime
import os
import signal
from pathlib import Path

from storbench.core import paths
from storbench.core.secrets import Credentials, SecretError, target_credentials
from storbench.core.specs import RunSpec
from storbench.hosts.transport import HostError

STDERR_TAIL_LINES = 20


class RunError(RuntimeError):
    pass


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


def keep_log(
    log_path: str | None, attempt: int, kept_as: str | None = None, named: str | None = None
) -> None:
    """The step's log linked as its attempt's own (paths.attempt_log of kept_as, else of the
    log), so that it outlives the deletion of the log before the next attempt; a hard link,
    so even a killed attempt keeps all it wrote. named: how its first line names the attempt
    (a run's 'a<attempt>', its raw folder's name, by default)."""
    if log_path is None:
        return
    kept = paths.attempt_log(kept_as or log_path, attempt)
    linking = f"{kept}.linking"
    try:
        os.makedirs(os.path.dirname(kept) or ".", exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(linking)
        os.link(log_path, linking)
        os.replace(linking, kept)  # an attempt-N left by a raw folder deleted by hand
    except OSError as error:
        print(f"storbench: warning: this log is not kept as {kept}: {error}", flush=True)
        return
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(linking)  # a rename onto a link to the same file leaves it
    print(f"storbench: {named or f'attempt a{attempt}'}; this log is kept as {kept}", flush=True)


def next_kept_attempt(log_path: str | None) -> int:
    """The number of a step's attempt that has no raw attempt folder of its own (the network
    check runs many, each numbered on its own): the first no kept log has."""
    attempt = 1
    while log_path is not None and os.path.lexists(paths.attempt_log(log_path, attempt)):
        attempt += 1
    return attempt


def output_tail(path: Path, lines: int = STDERR_TAIL_LINES) -> str:
    if not path.is_file():
        return ""
    text = path.read_bytes().decode("utf-8", errors="replace")
    return "\n".join(text.strip().splitlines()[-lines:])


def tool_version(transport, tool, local_dir: Path, name: str) -> str:
    out = local_dir / f"{name}.version"
    err = local_dir / f"{name}.version.stderr"
    code = transport.run(
        tool.version_command(),
        timeout_s=60,
        stdout_path=out,
        stderr_path=err,
        marker=" ".join(tool.version_command()),
    )
    if code != 0:
        raise HostError(transport.spec.name, tool.unusable(code, output_tail(err)))
    return out.read_text(errors="replace").strip()


def exit_reason(code: int, own: dict[int, str] | None = None) -> str:
    """How a tool ended, from its exit code ('timed out', 'killed by SIGKILL', 'exited 1');
    own: the tool's own statuses that would read as a signal's (ToolAdapter.exit_statuses)."""
    if code == 124:  # coreutils timeout
        return "timed out"
    if code < 0:  # local: the tool died of a signal
        return f"killed by {signal_name(-code)}"
    if own and code in own:
        return f"exited {code} ({own[code]})"
    if 128 < code <= 128 + 64:  # remote: the shell's status of a tool that died of a signal
        return f"exited {code} (as a tool killed by {signal_name(code - 128)} does)"
    return f"exited {code}"


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def run_credentials(spec: RunSpec) -> Credentials | None:
    """An S3 target's keys for the run (RunError naming the target when they are missing)."""
    target = spec.target
    if target.get("type") != "s3":
        return None
    try:
        return target_credentials(target["name"], target)
    except SecretError as error:
        raise RunError(str(error)) from None
