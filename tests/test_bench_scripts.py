"""bench/README.md: each script runs alone, so `--help` must answer, not start the benchmark."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.name for p in (REPO / "bench").glob("*.py") if p.name != "common.py")


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_bench_script_answers_help_without_running(script):
    process = subprocess.Popen(
        [sys.executable, f"bench/{script}", "--help"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a script that ignores --help starts labs: stop them all
    )
    try:
        out, err = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        process.communicate()
        pytest.fail(f"bench/{script} --help ran the benchmark")
    assert (process.returncode, err) == (0, "")
    assert out.startswith(f"usage: {script} [-h]")
