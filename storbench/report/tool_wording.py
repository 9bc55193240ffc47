"""What each tool's adapter says about its own numbers, for the report's captions and notes.

The report names no tool itself: the wording of a histogram's bins, a latency basis, a
percentile's resolution or a bandwidth's basis comes from the adapter of each tool in the
rows (``ToolAdapter`` attributes such as ``histogram_bins_text``), with the neutral default
of ``storbench.tools.base`` for a tool that is not installed here.
"""

from __future__ import annotations

import pandas as pd

from storbench.core import report_units
from storbench.core.numbers import format_number
from storbench.core.schema_names import ALL_HOSTS, PERCENTILE_COLUMNS
from storbench.tools import get_tool, known_tools
from storbench.tools.base import ToolAdapter


def adapters(frame: pd.DataFrame) -> list[tuple[str, ToolAdapter]]:
    """(name, adapter) of each tool in the rows' ``tool`` column, in name order."""
    names = sorted({str(name) for name in frame["tool"].dropna()}) if "tool" in frame else []
    return [(name, get_tool(name) if name in known_tools() else ToolAdapter()) for name in names]


def texts(frame: pd.DataFrame, attribute: str) -> list[tuple[str, str]]:
    """(tool, text) of the tools whose adapter sets ``attribute`` to a non-empty text."""
    found = [(name, getattr(adapter, attribute)) for name, adapter in adapters(frame)]
    return [(name, text) for name, text in found if text]


def joined(frame: pd.DataFrame, attribute: str, default: str = "") -> str:
    """The tools' text of ``attribute``: one text when they agree, else 'tool: text' each."""
    found = texts(frame, attribute)
    if not found:
        return default
    if len({text for _, text in found}) == 1:
        return found[0][1]
    return "; ".join(f"{name}: {text}" for name, text in found)


def basis_texts(frame: pd.DataFrame, bases: list[str]) -> str | None:
    """What each latency basis in the rows measures, in the words of each tool that has it."""
    parts = []
    tools = adapters(frame) or [("", ToolAdapter())]
    for basis in bases:
        rows = frame[frame["lat_basis"].astype(str) == basis] if "tool" in frame else frame
        meanings = [
            (name, adapter.latency_basis_texts.get(basis, basis))
            for name, adapter in tools
            if name == "" or (rows["tool"].astype(str) == name).any()
        ]
        if len({text for _, text in meanings}) <= 1:
            parts += [text for _, text in meanings[:1]]
        else:
            parts += [f"{name}: {text}" for name, text in meanings]
    return "; ".join(parts) or None


def resolution_note(summary: pd.DataFrame) -> str:
    """A note for the latency table and figure where rows with percentiles come from a tool
    whose percentiles are coarse bucket bounds (vdbench, elbencho); '' otherwise."""
    columns = [column for column in PERCENTILE_COLUMNS if column in summary]
    rows = summary[summary[columns].notna().any(axis=1)] if columns else summary.iloc[0:0]
    found = texts(rows, "percentile_resolution_text")
    return " ".join(f"Percentile resolution: {text}." for _, text in found)


OWN_TOTAL_TOLERANCE = 0.05  # a run's bandwidth this far from the tool's own total is noted
MAX_OWN_TOTAL_RUNS = 6  # runs named in the note per tool


def own_total_note(raw: pd.DataFrame, units: str = report_units.DEFAULT_UNITS) -> str | None:
    """Where a run's bandwidth (the 'all' row) differs from the tool's own printed total
    (``tool_bw_bytes_s``) by more than OWN_TOTAL_TOLERANCE: both numbers and the tool's
    reason, so a reader comparing with the tool's console is not puzzled; None elsewhere."""
    if "tool_bw_bytes_s" not in raw or raw.empty:
        return None
    rows = raw[(raw["host"] == ALL_HOSTS) & raw["bw_bytes_s"].notna()]
    rows = rows[rows["tool_bw_bytes_s"].notna() & (rows["tool_bw_bytes_s"] > 0)]
    ratio = rows["bw_bytes_s"].astype(float) / rows["tool_bw_bytes_s"].astype(float)
    rows = rows[(ratio - 1).abs() > OWN_TOTAL_TOLERANCE]
    if rows.empty:
        return None
    unit, divisor = report_units.table_bandwidth_unit(units)
    parts = []
    for name, adapter in adapters(rows):
        runs = rows[rows["tool"].astype(str) == name].sort_values(["run_id", "iteration", "op"])
        listed = [
            f"{row['run_id']} {row['op']} (iteration {row['iteration']}): "
            f"{format_number(row['bw_bytes_s'] / divisor, 1)} {unit} here, "
            f"{format_number(row['tool_bw_bytes_s'] / divisor, 1)} {unit} in {name}'s own output"
            for _, row in runs.head(MAX_OWN_TOTAL_RUNS).iterrows()
        ]
        more = len(runs) - len(listed)
        parts.append(
            "; ".join(listed)
            + (f"; and {more} more" if more > 0 else "")
            + f". Why: {adapter.own_total_text}."
        )
    return " ".join(parts)
