"""A Manifest from the few keys a parser test cares about (the rest filled with neutral values)."""

from __future__ import annotations

from storbench.core.specs import Manifest

NEUTRAL = {
    "experiment": "e",
    "run_id": "r",
    "iteration": 1,
    "attempt": 1,
    "tool": "",
    "raw_dir": "a1",
    "job_file": "job",
    "job_file_sha256": "",
    "params": {},
    "target": {},
    "hosts": [],
}


def as_manifest(fields: dict) -> Manifest:
    return Manifest.from_dict({**NEUTRAL, **fields})
