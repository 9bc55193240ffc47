"""The report of a latency-SLO search: the answer with its confidence, the probes, the curve.

Writes index.html (self-contained), probes.csv, probes.md and search.png/.svg into the
experiment's report folder. The answer's confidence is twofold: the bisection bracket (the
answer is the highest rate that met, the lowest that failed is above it within the
tolerance), and the confirmation runs at the answer: their achieved IOPS as mean with a
95 % interval on the log scale (geometric mean, ``stats.positive_interval``), and their
latency percentiles from the histograms of every confirmation run merged.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from storbench.analysis import stats
from storbench.core import histogram, report_units
from storbench.core.markers import SEARCH_KEYS, SEARCH_RESULT, read_marker
from storbench.core.numbers import NO_VALUE, format_number
from storbench.core.results import ALL_HOSTS
from storbench.plan import slo_search
from storbench.report import tables
from storbench.report.preparation import make_figure
from storbench.report.toolkit import (
    COLORS,
    as_base64,
    drop_overlapping_labels,
    figure_legend,
    format_percent,
    frame_csv,
    log_scale,
    new_figure,
    read_results,
    readable_counts,
    template_environment,
    write_file,
)
from storbench.tools import get_tool, known_tools
from storbench.tools.base import ToolAdapter

TEMPLATE_NAME = "search.html.j2"
FIGURE_NAME = "search"
PROBES_CSV = "probes.csv"
PROBES_MD = "probes.md"
NS_PER_US = 1000.0
SHOWN_LATENCIES = ("p50", "p99", "p99.9")
PHASE_TITLES = {"closed": "closed loop", "open": "open loop", "confirm": "confirmation"}
PROBE_COLUMNS = (
    "probe",
    "loop",
    "run_id",
    "iteration",
    "iodepth",
    "offered_iops",
    "achieved_iops",
    "achieved_fraction",
    "lat_mean_us",
    "p50_us",
    "p99_us",
    "p99_9_us",
    "meets",
    "reason",
)


def build_search_report(result_path, summary_path, out_dir, meta: dict) -> dict[str, Path]:
    out_dir = Path(out_dir)
    result = read_marker(result_path, SEARCH_KEYS, SEARCH_RESULT)
    rows = read_results(summary_path)
    written: dict[str, Path] = {}
    frame = probes_frame(result)
    written[PROBES_CSV] = write_file(out_dir / PROBES_CSV, frame_csv(frame).encode())
    table = probes_display(frame, result)
    written[PROBES_MD] = write_file(out_dir / PROBES_MD, probes_markdown(table).encode())
    made = make_figure(search_figure, result)
    figures = []
    if made is not None:
        png, svg, caption = made
        written[f"{FIGURE_NAME}.png"] = write_file(out_dir / f"{FIGURE_NAME}.png", png)
        written[f"{FIGURE_NAME}.svg"] = write_file(out_dir / f"{FIGURE_NAME}.svg", svg)
        figures.append({"name": FIGURE_NAME, "caption": caption, "png_base64": as_base64(png)})
    confirmation = confirmation_stats(result, rows)
    context = {
        "title": meta.get("title") or f"storbench search: {result['experiment']}",
        "answer": answer_box(result, confirmation, report_units.units_of(meta)),
        "table": table,
        "figures": figures,
        "methodology": methodology(result, meta, rows),
        "config_yaml": meta.get("config_yaml") or "",
    }
    html = template_environment().get_template(TEMPLATE_NAME).render(context)
    written["index.html"] = write_file(out_dir / "index.html", html.encode())
    return written


def probes_frame(result: dict) -> pd.DataFrame:
    """One row per probe in the order it ran; latencies in µs."""
    records = []
    for probe in result["probes"]:
        latency = probe["latency_ns"]
        offered = probe["offered_iops"]
        records.append(
            {
                "probe": probe["probe"],
                "loop": "closed" if probe["phase"] == "closed" else "open",
                "run_id": probe["run_id"],
                "iteration": probe["iteration"],
                "iodepth": probe["iodepth"],
                "offered_iops": offered,
                "achieved_iops": probe["achieved_iops"],
                "achieved_fraction": probe["achieved_iops"] / offered if offered else math.nan,
                "lat_mean_us": latency["mean"] / NS_PER_US,
                "p50_us": latency["p50"] / NS_PER_US,
                "p99_us": latency["p99"] / NS_PER_US,
                "p99_9_us": latency["p99.9"] / NS_PER_US,
                "meets": bool(probe["meets"]),
                "reason": probe["reason"],
            }
        )
    return pd.DataFrame.from_records(records, columns=list(PROBE_COLUMNS))


def probes_display(frame: pd.DataFrame, result: dict) -> dict:
    latency = result["objective"]["latency"]
    header = [
        "#",
        "Probe",
        "Loop",
        "QD",
        "Offered IOPS",
        "Achieved IOPS",
        "Achieved/offered",
        "Mean µs",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        f"{latency} ≤ {result['limit']}",
    ]
    objective = slo_search.Objective(**result["objective"])
    rows = []
    for number, (_, row) in enumerate(frame.iterrows(), start=1):
        probe = result["probes"][number - 1]
        phase = PHASE_TITLES[probe["phase"]]
        rows.append(
            {
                "cells": [
                    str(number),
                    row["probe"],
                    phase,
                    str(int(row["iodepth"])),
                    format_number(row["offered_iops"], 0),
                    format_number(row["achieved_iops"], 0),
                    format_percent(row["achieved_fraction"]),
                    format_number(row["lat_mean_us"], 1),
                    format_number(row["p50_us"], 1),
                    format_number(row["p99_us"], 1),
                    format_number(row["p99_9_us"], 1),
                    "yes" if row["meets"] else f"no: {_missed_by(probe, objective)}",
                ],
                "flagged": not row["meets"],
            }
        )
    return {"header": header, "rows": rows}


def _missed_by(probe: dict, objective: slo_search.Objective) -> str:
    if probe["latency_ns"][objective.latency] > objective.limit_ns:
        return "latency"
    return "achieved rate"


def probes_markdown(table: dict) -> str:
    rows = [row["cells"] for row in table["rows"]]
    return tables.pipe_table(table["header"], rows) + "\n"


def confirmation_stats(result: dict, rows: pd.DataFrame) -> dict | None:
    """Achieved IOPS (mean, sd, 95 % log-scale interval) and merged latency of the confirmation runs
    at the answer, from the result rows; None without an answer."""
    rate = result["answer"]["rate_iops"]
    if rate is None:
        return None
    run_ids = {
        p["run_id"]
        for p in result["probes"]
        if p["phase"] == "confirm" and math.isclose(p["offered_iops"], rate, rel_tol=1e-9)
    }
    mine = rows[(rows["host"] == ALL_HOSTS) & rows["run_id"].isin(run_ids) & (rows["ios"] > 0)]
    mine = stats.latest_attempts(mine)
    per_run = stats.spread(mine.groupby("iteration")["iops"].sum())
    merged = histogram.merge(zip(mine["hist_ns"], mine["hist_count"], strict=True))
    names = ("p50", "p99", "p99.9")
    percentiles = histogram.percentiles(*merged, [50.0, 99.0, 99.9])
    return {
        "n": int(mine["iteration"].nunique()),
        "offered_iops": rate,
        "achieved_mean": per_run["mean"],
        "achieved_sd": per_run["sd"],
        "ci_low": per_run["ci_low"],
        "ci_high": per_run["ci_high"],
        "latency_ns": dict(zip(names, percentiles, strict=True)),
    }


def answer_box(
    result: dict, confirmation: dict | None, units: str = report_units.DEFAULT_UNITS
) -> dict:
    answer = result["answer"]
    objective = result["objective"]
    condition = f"{objective['latency']} ≤ {result['limit']}"
    details = [answer["reason"]]
    if answer["bracket"]:
        lo, hi = answer["bracket"]
        bound = "failed" if answer["hi_tested"] else "untested ceiling: 105 % of the peak"
        details.append(
            f"bracket: {lo:,.0f} IOPS met, {hi:,.0f} IOPS {bound}; width "
            f"{answer['relative_width']:.1%} (tolerance {objective['tolerance']:.0%})"
        )
    closed = answer["closed"]
    if closed["peak_qd"] is not None:
        knee = (
            f"knee at QD {closed['knee_qd']} ({closed['knee_iops']:,.0f} IOPS)"
            if closed["saturated"]
            else "no knee: IOPS still rose at the deepest queue"
        )
        details.append(
            f"closed loop: peak {closed['peak_iops']:,.0f} IOPS at QD {closed['peak_qd']}; {knee}"
        )
    if confirmation:
        latency = ", ".join(
            f"{name} {confirmation['latency_ns'][name] / NS_PER_US:,.1f} µs"
            for name in ("p50", "p99", "p99.9")
        )
        interval = (
            f", 95 % interval on the log scale (geometric mean) "
            f"{confirmation['ci_low']:,.0f}–{confirmation['ci_high']:,.0f}"
            if confirmation["n"] > 1
            else ""
        )
        details.append(
            f"{confirmation['n']} confirmation run(s) at {confirmation['offered_iops']:,.0f} "
            f"IOPS offered: achieved {confirmation['achieved_mean']:,.0f} IOPS{interval}; "
            f"merged latency {latency}"
        )
    details.append(
        f"{answer['probes']} probes: {answer['closed_probes']} closed-loop, "
        f"{answer['open_probes']} open-loop, {answer['confirm_probes']} confirmation"
    )
    if answer["status"] == slo_search.FOUND and answer.get("bw_bytes_s") is not None:
        unit, divisor = report_units.bandwidth_unit(answer["bw_bytes_s"], units)
        headline = (
            f"{answer['bw_bytes_s'] / divisor:,.2f} {unit} ({answer['rate_iops']:,.0f} IOPS) "
            f"sustained with {condition}"
        )
        state = "achieved"
    elif answer["status"] == slo_search.FOUND:
        headline = f"{answer['rate_iops']:,.0f} IOPS sustained with {condition}"
        state = "achieved"
    elif answer["status"] == slo_search.NOT_MET:
        headline = f"No rate meets {condition}"
        state = "failed"
    else:
        headline = f"Search unfinished ({condition})"
        state = "failed"
    return {"headline": headline, "state": state, "details": details}


def search_figure(result: dict):
    probes = result["probes"]
    if not probes:
        return None
    fig, (rates_ax, latency_ax) = new_figure(1, 2, height_in=3.2)
    open_probes = [p for p in probes if p["phase"] != "closed"]
    closed_probes = [p for p in probes if p["phase"] == "closed"]
    if open_probes:
        offered = [p["offered_iops"] for p in open_probes]
        achieved = [p["achieved_iops"] for p in open_probes]
        top = max(offered + achieved) * 1.05
        rates_ax.plot(
            [0, top], [0, top], color="#999999", linewidth=0.8, label="achieved = offered"
        )
        rates_ax.scatter(
            offered,
            achieved,
            c=[COLORS[3] if not p["meets"] else COLORS[2] for p in open_probes],
            marker="o",
            s=18,
            zorder=3,
        )
        # probes near the answer lie close together: the first of overlapping numbers shown
        drop_overlapping_labels(
            fig,
            [
                rates_ax.annotate(
                    str(number),
                    (probe["offered_iops"], probe["achieved_iops"]),
                    fontsize=6,
                    xytext=(3, -8),
                    textcoords="offset points",
                )
                for number, probe in enumerate(probes, start=1)
                if probe["phase"] != "closed"
            ],
        )
        rates_ax.set_xlim(0, top)
        rates_ax.set_ylim(0, top)
    rates_ax.set_xlabel("offered IOPS (all hosts)")
    rates_ax.set_ylabel("achieved IOPS")
    readable_counts(rates_ax.xaxis)
    readable_counts(rates_ax.yaxis)
    rates_ax.set_title("open loop: offered vs achieved (green met, red failed)")

    limit_us = result["objective"]["limit_ns"] / NS_PER_US
    for key, color in zip(SHOWN_LATENCIES, COLORS, strict=False):
        for group, marker, fill in ((closed_probes, "s", "none"), (open_probes, "o", color)):
            if not group:
                continue
            ordered = sorted(group, key=lambda p: p["achieved_iops"])
            latency_ax.plot(
                [p["achieved_iops"] for p in ordered],
                [p["latency_ns"][key] / NS_PER_US for p in ordered],
                marker=marker,
                markersize=4,
                markerfacecolor=fill,
                color=color,
                linewidth=0.8,
                linestyle="--" if group is closed_probes else "-",
                label=f"{key} ({'closed' if group is closed_probes else 'open'})",
            )
    latency_ax.axhline(limit_us, color="black", linewidth=1.0, label=f"limit {result['limit']}")
    rate = result["answer"]["rate_iops"]
    if rate is not None:
        latency_ax.axvline(rate, color=COLORS[2], linewidth=1.0, linestyle=":", label="answer")
    log_scale(latency_ax.yaxis)
    latency_ax.set_xlabel("achieved IOPS (all hosts)")
    readable_counts(latency_ax.xaxis)
    latency_ax.set_ylabel("latency (µs, log scale)")
    latency_ax.set_title("latency vs achieved IOPS")
    figure_legend(fig, [rates_ax, latency_ax])
    caption = (
        "Left: offered against achieved IOPS of the open-loop and confirmation probes, "
        "numbered in the order they ran (where numbers would overlap, the first). Right: "
        "p50, p99 and p99.9 latency from histograms merged over all hosts against achieved "
        "IOPS; squares and dashed lines are the closed-loop queue-depth ladder, circles the "
        "open-loop probes; the horizontal line is "
        f"the limit ({result['objective']['latency']} ≤ {result['limit']})."
    )
    return fig, caption


def _search_tool(meta: dict, rows: pd.DataFrame) -> ToolAdapter:
    """The search's tool: the meta's, else its rows' (a hand-made meta may not say)."""
    names = rows["tool"].dropna().unique().tolist() if "tool" in rows else []
    name = meta.get("tool") or (names[0] if names else None)
    return get_tool(name) if name in known_tools() else ToolAdapter()


def methodology(result: dict, meta: dict, rows: pd.DataFrame) -> list[tuple[str, str]]:
    objective = result["objective"]
    settings = result["settings"]
    arrivals = settings.get("arrivals") or "poisson"
    versions = sorted({str(v) for v in rows.get("tool_version", pd.Series()).dropna()})
    job = meta.get("job") or {}
    target = meta.get("target") or {}
    tool = _search_tool(meta, rows)
    return [
        (
            "Objective",
            f"highest aggregate IOPS with {objective['latency']} latency ≤ {result['limit']} "
            f"and at least {objective['min_achieved']:.0%} of the offered rate achieved; "
            f"tolerance {objective['tolerance']:.0%}",
        ),
        ("Hosts", ", ".join(meta.get("hosts") or []) or NO_VALUE),
        ("Target", f"{target.get('name', NO_VALUE)} ({target.get('type', '?')})"),
        ("Tool", f"{tool.name} {', '.join(versions)}".strip()),
        ("Workload", ", ".join(f"{k}={v}" for k, v in sorted(job.items())) or NO_VALUE),
        (
            "Phase 1, closed loop",
            f"queue depths {', '.join(map(str, slo_search.qd_ladder(settings['max_iodepth'])))}"
            " per job, stopped early once two depths were over the limit and the deeper one "
            f"gained under {slo_search.KNEE_GAIN:.0%} IOPS",
        ),
        (
            "Phase 2, open loop",
            f"bisection on the offered rate, at most {settings['max_probes']} probes, iodepth "
            "twice what Little's law needs at the limit. An open-loop probe meets the "
            "objective when its achieved rate is at least the share above of the offered "
            f"rate, less {slo_search.POISSON_SIGMAS:g} standard deviations of the Poisson "
            "arrival count (sqrt(rate x runtime)): lengthen the runtime to resolve rates more "
            f"finely than that. The rate: {tool.search_rate_text(arrivals)}",
        ),
        ("Phase 3, confirmation", f"{settings['iterations']} run(s) at the answer"),
        ("Latency", tool.search_latency_text),
    ]
