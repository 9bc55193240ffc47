"""Credentials of S3 targets: read at run time from environment variables or a credentials
file the config names, never from the config itself, and kept out of every file we write.
"""

from __future__ import annotations

import configparser
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from storbench.core import atomic


class SecretError(RuntimeError):
    pass


@dataclass(frozen=True)
class Credentials:
    access_key: str
    secret_key: str

    def __repr__(self) -> str:  # tracebacks and logs never show the values
        return "Credentials(access_key=***, secret_key=***)"

    def field(self, name: str) -> str:
        return {"access_key": self.access_key, "secret_key": self.secret_key}[name]

    def values(self) -> tuple[str, str]:
        return (self.access_key, self.secret_key)


def target_credentials(target_name: str, target: dict, environ=None) -> Credentials:
    """The target's keys, or SecretError naming the variable or file that is missing."""
    environ = os.environ if environ is None else environ
    spec = target.get("credentials") or {}
    where = f"target {target_name}"
    if "file" in spec:
        return _from_file(where, os.path.expanduser(spec["file"]), spec.get("profile", "default"))
    values = {}
    for field in ("access_key", "secret_key"):
        variable = spec.get(f"{field}_env")
        if not variable:
            raise SecretError(f"{where}: credentials.{field}_env is not set in the config")
        value = environ.get(variable)
        if not value:
            raise SecretError(f"{where}: environment variable {variable} is not set or empty")
        values[field] = value
    return Credentials(**values)


def _from_file(where: str, path: str, profile: str) -> Credentials:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        with open(path, encoding="utf-8") as handle:
            _warn_if_shared(path, os.fstat(handle.fileno()).st_mode)
            parser.read_file(handle)
    except OSError as error:
        reason = error.strerror
        raise SecretError(f"{where}: cannot read credentials file {path}: {reason}") from None
    except configparser.Error as error:  # its message quotes the line: a key, perhaps
        line = getattr(error, "lineno", None) or next(iter(getattr(error, "errors", [])), [None])[0]
        at = f" (line {line}" if line else " ("
        raise SecretError(
            f"{where}: {path} is not an INI credentials file{at}{', ' if line else ''}"
            f"{type(error).__name__}; the text is not shown)"
        ) from None
    if not parser.has_section(profile):
        raise SecretError(f"{where}: no profile [{profile}] in {path}")
    section = parser[profile]
    missing = [k for k in ("aws_access_key_id", "aws_secret_access_key") if not section.get(k)]
    if missing:
        raise SecretError(f"{where}: profile [{profile}] in {path} lacks {', '.join(missing)}")
    return Credentials(section["aws_access_key_id"], section["aws_secret_access_key"])


def _warn_if_shared(path: str, mode: int) -> None:
    if mode & 0o077:
        print(
            f"storbench: warning: credentials file {path} can be read by other users (mode"
            f" {mode & 0o777:o}); chmod 600 {path}",
            file=sys.stderr,
        )


def scrub(text: str, secrets) -> str:
    """text with every secret value replaced (for error messages that quote tool output)."""
    for value in secrets:
        if value:
            text = text.replace(value, "***")
    return text


# An option whose name says it holds a secret (elbencho's --s3key/--s3secret, warp's
# --access-key/--secret-key, any --*secret*, --*key*, --*password*, --*token*), or an
# environment assignment named so (WARP_SECRET_KEY=...), and its value: one argument, quoted
# or not, after a space or '='. An option's name in quotes is elbencho's recorded argv.
_SECRET_OPTION = re.compile(
    r"""(?P<name>(?P<quote>["']?)-{1,2}[\w.-]*(?:secret|key|passw|token|credential)[\w.-]*"""
    r"""(?P=quote)(?:=|\s+)"""
    r"""|\b[A-Za-z_]*(?:SECRET|KEY|PASSW|TOKEN|CREDENTIAL)[A-Za-z_]*=)"""
    r"""(?P<value>"[^"]*"|'[^']*'|(?!--)[^\s"']+)""",
    re.IGNORECASE,
)


def scrub_command(command: str) -> str:
    """A recorded command line with the value of every secret-named option replaced by ***
    (quotes kept): what a tool recorded of its own argv reaches no result file."""

    def hidden(match: re.Match) -> str:
        value = match["value"]
        quote = value[0] if value[0] in "\"'" else ""
        return f"{match['name']}{quote}***{quote}"

    return _SECRET_OPTION.sub(hidden, command)


def scrub_files(folder: Path, secrets) -> list[Path]:
    """Every file under folder with each secret value replaced by ***, in place (a tool that
    prints its keys, in a debug line or its environment, leaves them in its kept output);
    the files changed."""
    values = [value.encode() for value in secrets if value]
    changed = []
    for path in sorted(folder.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if not any(value in data for value in values):
            continue
        for value in values:
            data = data.replace(value, b"***")
        atomic.write_bytes(path, data)
        changed.append(path)
    return changed


_SECRET_KEY = re.compile(r"password|passwd|secret|token|access_key|credential", re.IGNORECASE)
REDACTED = "***redacted***"


def redacted(value):
    """A copy with the values of secret-looking keys replaced, for reports and logs."""
    if isinstance(value, dict):
        return {
            key: REDACTED if _SECRET_KEY.search(str(key)) else redacted(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [redacted(item) for item in value]
    return value


def redacted_yaml(value) -> str:
    import yaml  # lazy: the run path imports this module for credentials alone

    return yaml.safe_dump(redacted(value), sort_keys=False, default_flow_style=False)
