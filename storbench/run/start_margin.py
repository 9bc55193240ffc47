"""How long a held start leaves the tool to reach its start hook, learned on the same hosts.

A held tool (core/start_hook) is launched at once and sets itself up before the release.
How long that takes depends on the hosts: 0.27 s for fio on an idle host here, seconds when
many tools start on the same cores (the loopback lab), and once much longer (a first file
layout). Each held run records the slowest host's set-up: its arrival at the hook minus its
launch, so the launch's own time is in it (standalone: the host's clock corrected by the
probe's offset; service mode: fio's client reaching every service). The next run on the same
set of hosts is released the lower median of the last HISTORY of them after the launch, plus
a margin (MARGIN_FRACTION of it and MARGIN_S), at most CAP_S: the median, so that neither a
one-time layout nor one quick run sets it; a small margin, since every second of it is spent
idle on every run, while a host a little late only starts that much late, and the skew of
that run shows it (standalone hosts with bash 5 are waited for instead: run/start). The
file is a hint, not an output: without it (a fresh results folder) the run goes by the
tool's own start_setup_s.
Standard library only: this is the benchmark path.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from storbench.core import atomic
from storbench.core import paths as paths_of

HISTORY = 3
MARGIN_FRACTION = 0.03  # the run-to-run spread of 8 and 128 loopback hosts: 1-6 %
MARGIN_S = 0.02
CAP_S = 30.0


def history_path(iteration_dir: Path, tool: str, hosts: list[str]) -> Path:
    key = hashlib.sha256("\n".join(hosts).encode()).hexdigest()[:16]
    return Path(paths_of.start_setup(str(iteration_dir), tool, key))


def learned_s(path: Path) -> float | None:
    """Seconds from the launch the release leaves these hosts to set up; None before any run."""
    seen = sorted(_seen(path))
    if not seen:
        return None
    typical = seen[(len(seen) - 1) // 2]
    return min(typical * (1 + MARGIN_FRACTION) + MARGIN_S, CAP_S)


def remember(path: Path, setup_s: float) -> None:
    """Keep the slowest host's set-up time of this run among the last HISTORY."""
    atomic.write_json(path, {"setup_s": [*_seen(path)[-(HISTORY - 1) :], round(setup_s, 3)]})


def _seen(path: Path) -> list[float]:
    try:
        seen = json.loads(path.read_text())["setup_s"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    if not isinstance(seen, list):
        return []
    return [s for s in seen if isinstance(s, int | float) and not isinstance(s, bool) and s >= 0]
