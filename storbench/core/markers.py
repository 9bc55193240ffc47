"""Reading a step's JSON marker back (a preparation stage, a flush, a recipe's summary, a
latency-SLO search's result).

A marker given by hand that is not one (not JSON, not an object, or without the keys its
kind always has) is refused with one line naming the file and what it lacks, rather than a
traceback, or a page built from nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

# What each preparation marker always holds (run.prepare, analysis.preparation write them)
STAGE_KEYS = ("stage", "kind")  # and an index, but for the flush's
FLUSH_KEYS = ("stage", "kind", "flush")
PREPARED_KEYS = ("target", "recipe", "passes", "steady_state")
# A latency-SLO search's search.json (analysis.search writes it)
SEARCH_KEYS = ("experiment", "objective", "limit", "answer", "probes")
SEARCH_RESULT = "search result (search.json)"


class MarkerError(ValueError):
    """A file given as a marker of some kind that is not one."""


def read_marker(path: str | os.PathLike, keys: tuple[str, ...], kind: str) -> dict:
    """The marker's object, once it is JSON holding ``keys``; else MarkerError naming it."""
    try:
        data = json.loads(Path(path).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise MarkerError(f"{os.fspath(path)}: not a {kind}: not JSON ({error})") from None
    if not isinstance(data, dict):
        raise MarkerError(
            f"{os.fspath(path)}: not a {kind}: a JSON {type(data).__name__}, not an object"
        )
    missing = [key for key in keys if key not in data]
    if missing:
        raise MarkerError(f"{os.fspath(path)}: not a {kind}: no {', '.join(missing)}")
    return data
