"""The config's compare entries: two sides each, an experiment of this campaign or a
results folder (a path with a '/'), and the problems of entries that name neither.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from storbench.core import paths


@dataclass(frozen=True)
class CompareSide:
    source: str  # as written in the config
    experiment: str | None  # the experiment it names; None for a path
    summary: str  # the summary.parquet to read


@dataclass(frozen=True)
class CompareEntry:
    name: str  # folder under reports/compare/
    a: CompareSide
    b: CompareSide
    thresholds: dict


def comparisons(raw: dict) -> list[CompareEntry]:
    """The config's compare entries; a side with a '/' is a path, otherwise an experiment."""
    entries = []
    for spec in raw.get("compare") or []:
        a, b = compare_side(spec["a"]), compare_side(spec["b"])
        name = spec.get("name") or f"{side_label(a)}_vs_{side_label(b)}"
        entries.append(CompareEntry(name, a, b, dict(spec.get("thresholds") or {})))
    return entries


def compare_side(source: str) -> CompareSide:
    if "/" not in source:
        return CompareSide(source, source, paths.summary(source))
    path = Path(source)
    summary = path if path.suffix == ".parquet" else path / "summary.parquet"
    return CompareSide(source, None, str(summary))


def side_label(side: CompareSide) -> str:
    """The experiment's name, or the path as a folder-name-safe label: a results folder's, or
    an imported file's without .parquet (two imports in one folder are two labels)."""
    if side.experiment is not None:
        return side.experiment
    summary = Path(side.summary)
    where = summary.parent if summary.name == "summary.parquet" else summary.with_suffix("")
    return re.sub(r"[^A-Za-z0-9.-]+", "-", str(where)).strip("-.") or "results"


def compare_problems(raw: dict) -> list[str]:
    problems: list[str] = []
    seen: dict = {}
    entries = comparisons(raw)
    for index, entry in enumerate(entries):
        for key, side in (("a", entry.a), ("b", entry.b)):
            if side.experiment is not None and side.experiment not in raw["experiments"]:
                problems.append(
                    f"compare[{index}].{key}: unknown experiment {side.experiment!r} "
                    f"(defined: {', '.join(raw['experiments'])}; a results folder is a path "
                    "with a '/', e.g. ./old-results/demo)"
                )
            elif side.experiment is None and not Path(side.summary).is_file():
                problems.append(
                    f"compare[{index}].{key}: no {side.summary!r}; expected a results folder "
                    "holding summary.parquet, or the file itself"
                )
        if entry.name in seen:
            problems.append(
                f"compare[{index}].name: {entry.name!r} is also the name of "
                f"compare[{seen[entry.name]}]; give one of them another name"
            )
        seen.setdefault(entry.name, index)
    return problems
