"""A tmpfs mounted for one test (needs root; the test is skipped where mount is refused)."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

import pytest


@contextlib.contextmanager
def tmpfs(mount_point: Path, options: str):
    """mount_point made and a tmpfs mounted there with options ('size=2m', 'ro,size=1m'),
    unmounted afterwards."""
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount_point)],
        capture_output=True, text=True,
    )  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=True)
