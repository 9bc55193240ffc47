"""Publish files atomically: write a temp file beside the target, then rename.

A failed or interrupted writer leaves no partial file under the final name.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike):
    """Yield a temp path in the target's directory; rename it to ``path`` on success."""
    with atomic_outputs(path) as (tmp,), naming_write_errors(path):
        yield tmp


@contextlib.contextmanager
def atomic_outputs(*paths: str | os.PathLike, removing: Sequence[str | os.PathLike] = ()):
    """Temp paths for several files that appear together: none is published unless every
    one is written (a step's outputs, such as a table and its per-interval series). The files
    in ``removing`` (a series the new table has none of) go when they appear: set aside
    first, put back if publishing fails."""
    targets = [Path(path) for path in paths]
    temps: list[Path] = []
    aside: list[tuple[Path, Path]] = []
    try:
        for target in targets:
            temps.append(_temp_beside(target))
        yield temps
        for path in map(Path, removing):
            if path.exists():
                hidden = _temp_beside(path)
                os.replace(path, hidden)
                aside.append((hidden, path))
        for tmp, target in zip(temps, targets, strict=True):
            os.replace(tmp, target)
    except BaseException:
        for tmp in temps:
            tmp.unlink(missing_ok=True)
        for hidden, path in aside:
            os.replace(hidden, path)
        raise
    for hidden, _ in aside:
        hidden.unlink(missing_ok=True)


@contextlib.contextmanager
def naming_write_errors(path: str | os.PathLike):
    """A library's write error that names no file (pyarrow on a full disk) names ``path``."""
    try:
        yield
    except OSError as error:
        if error.filename is None and error.errno is not None:
            raise OSError(error.errno, os.strerror(error.errno), str(path)) from error
        raise


def _temp_beside(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o666 & ~_current_umask())  # mkstemp makes 0600; published files follow the umask
    os.close(fd)
    return Path(tmp)


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_output(path) as tmp:
        tmp.write_text(text)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_output(path) as tmp:
        tmp.write_bytes(data)


def write_json(path: str | os.PathLike, obj) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")
