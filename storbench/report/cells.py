"""Cells of a page's results tables: a mean with its spread, a CoV, an interval, the
workload columns every table starts with, and which columns a table needs to show.

One place for them, so the summary, per-run and scale-out tables, their Markdown and their
HTML agree.
"""

from __future__ import annotations

import pandas as pd

from storbench.analysis import stats
from storbench.core.numbers import NO_VALUE, NS_PER_US, format_number, is_missing
from storbench.report.paper_tables import rw_label
from storbench.report.toolkit import COV_MARK, OUTLIER_MARK, bs_label, int_label


def format_mean_sd(mean, sd, decimals: int) -> str:
    """'110.0 ± 10.0'; just the mean when sd is undefined (one iteration)."""
    if is_missing(mean):
        return NO_VALUE
    if is_missing(sd):
        return format_number(mean, decimals)
    return f"{format_number(mean, decimals)} ± {format_number(sd, decimals)}"


def format_cov(cov) -> str:
    """0.0909 -> '9.1 % †' (flagged above stats.COV_LIMIT); missing -> '–'."""
    if is_missing(cov):
        return NO_VALUE
    text = f"{100 * float(cov):.1f} %"
    return f"{text} {COV_MARK}" if cov > stats.COV_LIMIT else text


def format_interval(low, high, decimals: int) -> str:
    """'3,120.5 – 3,279.5'; '–' when the interval is undefined (fewer than two iterations).
    Its quantities (bandwidth, IOPS) are never negative: a lower bound under 0 shows as 0."""
    if is_missing(low) or is_missing(high):
        return NO_VALUE
    return f"{format_number(max(low, 0.0), decimals)} – {format_number(high, decimals)}"


def outlier_marked(text: str, outliers) -> str:
    """The text with OUTLIER_MARK appended when the cell has at least one outlier iteration."""
    return f"{text} {OUTLIER_MARK}" if not is_missing(outliers) and outliers > 0 else text


def ns_to_us(value):
    return None if is_missing(value) else float(value) / NS_PER_US


def jobs_matter(frame: pd.DataFrame, run_column: str) -> bool:
    """Several job names, not all just the run's own name (fio names a run's job after it)."""
    named_after_run = (frame["job"].astype(str) == frame[run_column].astype(str)).all()
    return frame["job"].nunique() > 1 and not named_after_run


def varies(frame: pd.DataFrame, column: str) -> bool:
    """True when a column takes more than one value (a missing value counts as one)."""
    return column in frame and frame[column].nunique(dropna=False) > 1


def workload_cells(row) -> list[str]:
    """rw, bs, iodepth, numjobs and op: the columns every results table starts with."""
    return [
        rw_label(row),
        bs_label(row["bs"]),
        int_label(row["iodepth"]),
        int_label(row["numjobs"]),
        str(row["op"]),
    ]
