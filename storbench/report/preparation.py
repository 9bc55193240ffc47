"""Preconditioning report of one (target, recipe): reports/targets/<target>/<recipe>/.

``build_precondition_report`` reads the JSON markers the preconditioning stages wrote and
writes a self-contained index.html, stages.csv and stages.md (one row per stage in recipe
order), steady_state.csv when the recipe has workload-dependent rounds, and the figures
whose data exists, as PNG and SVG:

- ``write_cliff``: write bandwidth over time per overwrite pass, chunk series concatenated
  in stage order (chunk k starts where chunk k-1 ended), the write cliff marked;
- ``convergence``: each tracked variable per round run, the measurement window shaded;
- ``window``: the measurement window with its average, the ±10 % and ±20 % bands, and the
  least-squares fit (y = slope·round + intercept, absolute round numbers).

Inputs (written by other code, only read here): a stage marker per stage job (kind purge,
pass, round or flush; ``index`` orders them; rounds after steady state are ``skipped``),
the prepared marker (capacity, hosts, the final steady-state verdict or null, passes with
their write cliff, the recipe as configured), and optionally the flush stage's marker.
The verdict follows SNIA PTS 2.0: a window of 5 rounds, range ≤ 20 % of the window
average, slope excursion |slope|·(window−1) ≤ 10 % of it, at most 25 rounds.

Output is byte-for-byte reproducible like storbench.report.experiment: same figure settings,
no dates in images; the only times in the page are the markers' own.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import MaxNLocator

from storbench.analysis import writecliff
from storbench.core import atomic, report_units
from storbench.core.markers import FLUSH_KEYS, PREPARED_KEYS, STAGE_KEYS, read_marker
from storbench.core.numbers import (
    NO_VALUE,
    format_number,
    is_missing,
)
from storbench.core.secrets import redacted_yaml
from storbench.core.units import size_label
from storbench.report import tables
from storbench.report.toolkit import (
    COLORS,
    MARKERS,
    as_base64,
    figure_legend,
    format_percent,
    frame_csv,
    int_label,
    new_figure,
    readable_counts,
    render_figure,
    style,  # selects matplotlib's Agg backend before any figure
    template_environment,
)

TEMPLATE_NAME = "precondition.html.j2"
STAGES_CSV = "stages.csv"
STAGES_MD = "stages.md"
STEADY_STATE_CSV = "steady_state.csv"
CONVERGENCE_FIGURE = "convergence"
WINDOW_FIGURE = "window"
WRITE_CLIFF_FIGURE = "write_cliff"
BAND_NARROW = 0.10  # ±10 % of the average: all values inside keep the range within 20 %
BAND_WIDE = 0.20
BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
INTEGER_STAGE_COLUMNS = ("index", "pass_number", "repeat", "chunk", "round", "bytes")


# ---------------------------------------------------------------------------------------
# Entry point


def build_precondition_report(
    stage_markers: list[str | Path],
    prepared: str | Path,
    out_dir: str | Path,
    *,
    flushed: str | Path | None = None,
    meta: dict | None = None,
) -> dict[str, Path]:
    """Write the preconditioning page of one (target, recipe) into ``out_dir``.

    ``stage_markers``: the stage markers (any order; sorted by their ``index``);
    ``prepared``: the prepared marker; ``flushed``: the flush stage's marker, if any;
    ``meta``: optional {'title', 'hosts', 'tool_version', 'units'} (units: the bandwidth unit
    system, storbench.core.report_units). Returns {file name: path}.
    """
    out_dir = Path(out_dir)
    meta = meta or {}
    units = report_units.units_of(meta)
    prep = read_marker(prepared, PREPARED_KEYS, "recipe's prepared marker")
    flush_stage = read_marker(flushed, FLUSH_KEYS, "flush marker") if flushed is not None else None
    stages = load_stages(stage_markers, flush_stage)
    verdict = final_verdict(prep, stages)
    tracked = [variable["name"] for variable in (verdict or {}).get("variables") or []]
    written: dict[str, Path] = {}

    stage_frame = stages_frame(stages, tracked)
    stage_table = stages_display(stage_frame, tracked, units)
    written[STAGES_CSV] = _write(out_dir / STAGES_CSV, frame_csv(stage_frame).encode())
    written[STAGES_MD] = _write(out_dir / STAGES_MD, stages_markdown(stage_table).encode())
    if verdict is not None and verdict.get("variables"):
        frame = steady_state_frame(verdict)
        written[STEADY_STATE_CSV] = _write(out_dir / STEADY_STATE_CSV, frame_csv(frame).encode())

    headline = verdict_sentence(verdict)
    figures = []
    for name, builder, args in (
        (WRITE_CLIFF_FIGURE, write_cliff_figure, (pass_timelines(stages), prep, units)),
        (CONVERGENCE_FIGURE, convergence_figure, (verdict,)),
        (WINDOW_FIGURE, window_figure, (verdict, headline)),
    ):
        made = make_figure(builder, *args)
        if made is None:
            continue
        png, svg, caption = made
        written[f"{name}.png"] = _write(out_dir / f"{name}.png", png)
        written[f"{name}.svg"] = _write(out_dir / f"{name}.svg", svg)
        figures.append({"name": name, "caption": caption, "png_base64": as_base64(png)})

    context = {
        "title": f"Preconditioning {prep.get('recipe', '?')} on {prep.get('target', '?')}",
        "verdict": {
            "headline": headline,
            "details": verdict_details(verdict, stages, prep),
            "state": _verdict_state(verdict),
        },
        "facts": _facts(prep, meta),
        "steady_state": steady_state_display(verdict),
        "passes": passes_display(prep, units),
        "flush": flush_items(flush_stage),
        "stages": stage_table,
        "figures": figures,
        "recipe_yaml": redacted_yaml(prep["recipe_spec"]) if prep.get("recipe_spec") else "",
    }
    html = template_environment().get_template(TEMPLATE_NAME).render(context)
    written["index.html"] = _write(out_dir / "index.html", html.encode())
    return written


def _write(path: Path, data: bytes) -> Path:
    atomic.write_bytes(path, data)
    return path


def load_stages(stage_markers: list[str | Path], flush_stage: dict | None = None) -> list[dict]:
    """The stage markers in recipe order, the flush stage added unless already among them."""
    stages = [read_marker(path, STAGE_KEYS, "stage marker") for path in stage_markers]
    names = {stage.get("stage") for stage in stages}
    if flush_stage is not None and flush_stage.get("stage") not in names:
        stages.append(flush_stage)
    # A flush marker without index goes last: it runs after every other stage.
    return sorted(stages, key=lambda stage: (stage.get("index", math.inf), str(stage.get("stage"))))


def final_verdict(prep: dict, stages: list[dict]) -> dict | None:
    """The prepared marker's verdict; else the verdict after the last round that ran."""
    if prep.get("steady_state"):
        return prep["steady_state"]
    rounds = [
        stage
        for stage in stages
        if stage.get("kind") == "round" and not stage.get("skipped") and stage.get("steady_state")
    ]
    if not rounds:
        return None
    return max(rounds, key=lambda stage: stage.get("round") or 0)["steady_state"]


# ---------------------------------------------------------------------------------------
# Formatting


def format_bytes(value) -> str:
    """1536 -> '1.5 KiB', 268435456 -> '256.0 MiB', 12 -> '12 B'; missing -> '–'."""
    if is_missing(value):
        return NO_VALUE
    size = float(value)
    power = 0
    while abs(size) >= 1024 and power < len(BYTE_UNITS) - 1:
        size /= 1024
        power += 1
    return f"{int(size)} B" if power == 0 else f"{size:,.1f} {BYTE_UNITS[power]}"


def format_value(value) -> str:
    """A tracked value or fit coefficient, decimals by magnitude: 1,234.5 / 3.21 / 0.0123."""
    if is_missing(value):
        return NO_VALUE
    magnitude = abs(float(value))
    decimals = 1 if magnitude >= 100 else 2 if magnitude >= 1 else 4
    return format_number(value, decimals)


def fit_formula(slope: float, intercept: float) -> str:
    """'y = −20.0·x + 2,100.0' (x = round number)."""
    sign = "−" if slope < 0 else ""
    joiner = "−" if intercept < 0 else "+"
    return f"y = {sign}{format_value(abs(slope))}·x {joiner} {format_value(abs(intercept))}"


def _window_text(window) -> str:
    return f"rounds {window[0]}–{window[1]}" if window else NO_VALUE


def _ratio_text(ratio, ok) -> str:
    """'10.0 % ok', '41.7 % exceeded'; '–' before the window is full (no ratio yet)."""
    if is_missing(ratio):
        return NO_VALUE
    return f"{format_percent(ratio)} {'ok' if ok else 'exceeded'}"


# ---------------------------------------------------------------------------------------
# Verdict


def is_achieved(verdict: dict | None) -> bool:
    if not verdict:
        return False
    return bool(verdict.get("achieved") or verdict.get("status") == "achieved")


def verdict_sentence(verdict: dict | None) -> str:
    """The one-line verdict shown in the box and above the window figure."""
    if verdict is None:
        return "No steady-state rounds in this recipe: preconditioned by overwrite passes only."
    rounds = verdict.get("rounds") or 0
    if is_achieved(verdict):
        round_text = verdict.get("steady_round") or rounds
        return (
            f"Steady state achieved at round {round_text} "
            f"(window {_window_text(verdict.get('window'))})."
        )
    if verdict.get("status") == "running":
        return (
            f"Steady state not decided yet: {rounds} of at most "
            f"{verdict.get('max_rounds')} rounds run."
        )
    return f"Steady state NOT achieved in {rounds} rounds."


def _verdict_state(verdict: dict | None) -> str:
    if verdict is None or verdict.get("status") == "running":
        return "neutral"
    return "achieved" if is_achieved(verdict) else "failed"


def verdict_details(verdict: dict | None, stages: list[dict], prep: dict) -> list[str]:
    """Lines under the verdict: failed criteria, skipped rounds, write cliffs."""
    lines = []
    if verdict is not None:
        range_limit = verdict.get("range_limit")
        slope_limit = verdict.get("slope_limit")
        for variable in verdict.get("variables") or []:
            if variable.get("steady"):
                continue
            failed = []
            if variable.get("range_ok") is False and not is_missing(variable.get("range_ratio")):
                failed.append(
                    f"range {format_percent(variable.get('range_ratio'))} of the average "
                    f"(limit {format_percent(range_limit, 0)})"
                )
            if variable.get("slope_ok") is False and not is_missing(
                variable.get("excursion_ratio")
            ):
                failed.append(
                    f"slope excursion {format_percent(variable.get('excursion_ratio'))} of the "
                    f"average (limit {format_percent(slope_limit, 0)})"
                )
            if failed:
                lines.append(f"{variable['name']}: {', '.join(failed)}.")
        if verdict.get("window") and not is_achieved(verdict):
            lines.append(f"Last measurement window: {_window_text(verdict['window'])}.")
    skipped = [stage for stage in stages if stage.get("kind") == "round" and stage.get("skipped")]
    if skipped:
        lines.append(f"{len(skipped)} later round(s) skipped after steady state (no I/O).")
    for item in prep.get("passes") or []:
        cliff = item.get("cliff")
        if cliff:
            lines.append(
                f"Write cliff in pass {item.get('number')} ({item.get('name')}) at "
                f"{format_number(cliff.get('t_s'), 1)} s after "
                f"{format_bytes(cliff.get('bytes_written'))} written."
            )
    return lines


# ---------------------------------------------------------------------------------------
# Tables


def stages_frame(stages: list[dict], tracked: list[str]) -> pd.DataFrame:
    """One row per stage at full precision; a column per tracked variable (rounds only)."""
    records = [_stage_record(stage, tracked) for stage in stages]
    columns = [
        "stage",
        "index",
        "kind",
        "pass_name",
        "pass_number",
        "repeat",
        "chunk",
        "round",
        "bytes",
        "duration_s",
        "bw_bytes_s",
        *tracked,
        "skipped",
        "started",
        "finished",
    ]
    frame = pd.DataFrame.from_records(records, columns=columns)
    for column in INTEGER_STAGE_COLUMNS:
        frame[column] = pd.array(frame[column].tolist(), dtype="Int64")
    return frame


def _stage_record(stage: dict, tracked: list[str]) -> dict:
    info = (stage.get("pass") or {}) if stage.get("kind") == "pass" else {}
    skipped = bool(stage.get("skipped"))
    elements = stage.get("elements") or {}
    record = {
        "stage": stage.get("stage"),
        "index": stage.get("index"),
        "kind": stage.get("kind"),
        "pass_name": info.get("name"),
        "pass_number": info.get("number"),
        "repeat": info.get("repeat"),
        "chunk": info.get("chunk"),
        "round": stage.get("round") if stage.get("kind") == "round" else None,
        "bytes": None if skipped else _stage_bytes(stage, info, elements),
        "duration_s": stage.get("duration_s"),
        "bw_bytes_s": _pass_bandwidth(stage, info, elements) if info and not skipped else None,
        "skipped": skipped,
        "started": stage.get("started"),
        "finished": stage.get("finished"),
    }
    for name in tracked:
        is_round = stage.get("kind") == "round" and not skipped
        record[name] = tracked_value(elements, name) if is_round else None
    return record


def _stage_bytes(stage: dict, info: dict, elements: dict) -> int | None:
    if info.get("bytes") is not None:
        return int(info["bytes"])
    counts = [element["bytes"] for element in elements.values() if element.get("bytes") is not None]
    return int(sum(counts)) if counts else None


def _pass_bandwidth(stage: dict, info: dict, elements: dict) -> float | None:
    """The write element's mean bandwidth, else bytes / duration."""
    write = elements.get("write") or {}
    if write.get("bw_bytes_s") is not None:
        return float(write["bw_bytes_s"])
    written = _stage_bytes(stage, info, elements)
    duration = stage.get("duration_s")
    return written / duration if written is not None and duration else None


def tracked_value(elements: dict, variable: str) -> float | None:
    """'randwrite_bs4k.iops' -> elements['randwrite_bs4k']['iops'] (None when absent)."""
    element, _, metric = variable.rpartition(".")
    value = (elements.get(element) or {}).get(metric)
    return None if value is None else float(value)


def stages_display(
    frame: pd.DataFrame, tracked: list[str], units: str = report_units.DEFAULT_UNITS
) -> dict:
    unit, divisor = report_units.table_bandwidth_unit(units)
    header = [
        "Stage",
        "Kind",
        "Pass / round",
        "Bytes",
        "Duration (s)",
        f"Bandwidth ({unit}) / tracked",
        "Skipped",
    ]
    rows = [
        {"cells": _stage_cells(row, tracked, divisor), "flagged": bool(row["skipped"])}
        for _, row in frame.iterrows()
    ]
    return {"header": header, "rows": rows}


def _stage_cells(row, tracked: list[str], bw_divisor: float) -> list[str]:
    if row["kind"] == "pass":
        step = (
            f"{row['pass_name']} #{int_label(row['pass_number'])}, repeat "
            f"{int_label(row['repeat'])}, chunk {int_label(row['chunk'])}"
        )
        rate = format_number(_per_unit(row["bw_bytes_s"], bw_divisor), 1)
    elif row["kind"] == "round":
        step = f"round {int_label(row['round'])}"
        values = [
            f"{name} = {format_value(row[name])}" for name in tracked if not is_missing(row[name])
        ]
        rate = "; ".join(values) or NO_VALUE
    else:
        step, rate = NO_VALUE, NO_VALUE
    return [
        str(row["stage"]),
        str(row["kind"]),
        step,
        format_bytes(row["bytes"]),
        format_number(row["duration_s"], 1),
        rate,
        "skipped" if row["skipped"] else "",
    ]


def stages_markdown(table: dict) -> str:
    rows = [row["cells"] for row in table["rows"]]
    return tables.pipe_table(table["header"], rows) + "\n"


def steady_state_frame(verdict: dict) -> pd.DataFrame:
    """Per tracked variable: window, average, range, slope, excursion and the verdict."""
    window = (verdict or {}).get("window") or (None, None)
    records = [
        {
            "variable": variable.get("name"),
            "window_first": window[0],
            "window_last": window[1],
            "average": variable.get("average"),
            "range": variable.get("range"),
            "range_ratio": variable.get("range_ratio"),
            "range_limit": verdict.get("range_limit"),
            "range_ok": variable.get("range_ok"),
            "slope": variable.get("slope"),
            "intercept": variable.get("intercept"),
            "excursion": variable.get("excursion"),
            "excursion_ratio": variable.get("excursion_ratio"),
            "slope_limit": verdict.get("slope_limit"),
            "slope_ok": variable.get("slope_ok"),
            "steady": variable.get("steady"),
        }
        for variable in verdict.get("variables") or []
    ]
    frame = pd.DataFrame.from_records(records)
    for column in ("window_first", "window_last"):
        frame[column] = pd.array(frame[column].tolist(), dtype="Int64")
    return frame


def steady_state_display(verdict: dict | None) -> dict | None:
    if not verdict or not verdict.get("variables"):
        return None
    range_limit = format_percent(verdict.get("range_limit"), 0)
    slope_limit = format_percent(verdict.get("slope_limit"), 0)
    header = [
        "Variable",
        "Window",
        "Average",
        "Range",
        f"Range / average (≤ {range_limit})",
        "Slope per round",
        "Fit",
        "Slope excursion",
        f"Excursion / average (≤ {slope_limit})",
        "Verdict",
    ]
    rows = []
    for variable in verdict["variables"]:
        slope, intercept = variable.get("slope"), variable.get("intercept")
        has_fit = not is_missing(slope) and not is_missing(intercept)
        rows.append(
            {
                "cells": [
                    str(variable.get("name")),
                    _window_text(verdict.get("window")),
                    format_value(variable.get("average")),
                    format_value(variable.get("range")),
                    _ratio_text(variable.get("range_ratio"), variable.get("range_ok")),
                    format_value(slope),
                    fit_formula(slope, intercept) if has_fit else NO_VALUE,
                    format_value(variable.get("excursion")),
                    _ratio_text(variable.get("excursion_ratio"), variable.get("slope_ok")),
                    "steady" if variable.get("steady") else "not steady",
                ],
                "flagged": not variable.get("steady"),
            }
        )
    note = (
        f"SNIA PTS 2.0 steady state over a window of {verdict.get('window_size')} rounds: "
        f"range (max − min) ≤ {range_limit} of the window average, and slope excursion "
        f"|slope| × (window − 1) of the least-squares fit ≤ {slope_limit} of it; at most "
        f"{verdict.get('max_rounds')} rounds. {verdict.get('rounds')} round(s) run."
    )
    return {"header": header, "rows": rows, "note": note}


def passes_display(prep: dict, units: str = report_units.DEFAULT_UNITS) -> dict | None:
    passes = prep.get("passes") or []
    if not passes:
        return None
    header = [
        "Pass",
        "Fraction of capacity",
        "bs",
        "Pattern",
        "Repeats",
        "Chunks",
        "Bytes written",
        "Duration (s)",
        "Write cliff",
    ]
    rows = [
        {
            "cells": [
                f"{item.get('number')}. {item.get('name')}",
                format_percent(item.get("fraction"), 0),
                NO_VALUE if item.get("bs") is None else size_label(int(item["bs"])),
                str(item.get("pattern") or NO_VALUE),
                int_label(item.get("repeats")),
                int_label(item.get("chunks")),
                format_bytes(item.get("bytes_written")),
                format_number(item.get("duration_s"), 1),
                _cliff_text(item.get("cliff"), units),
            ],
            "flagged": False,
        }
        for item in passes
    ]
    return {"header": header, "rows": rows}


def _cliff_text(cliff: dict | None, units: str = report_units.DEFAULT_UNITS) -> str:
    if not cliff:
        return "none"
    plateau, after = cliff.get("plateau_bw_bytes_s"), cliff.get("after_bw_bytes_s")
    unit, divisor = report_units.table_bandwidth_unit(units)  # a cell of the passes table
    return (
        f"at {format_number(cliff.get('t_s'), 1)} s, after "
        f"{format_bytes(cliff.get('bytes_written'))}: "
        f"{format_number(_per_unit(plateau, divisor), 1)} → "
        f"{format_number(_per_unit(after, divisor), 1)} {unit}"
    )


def _per_unit(value, divisor: float):
    return None if is_missing(value) else float(value) / divisor


def flush_items(flush_stage: dict | None) -> list[tuple[str, str]]:
    """(label, text) pairs of the cache flush stage; empty when there was none."""
    if not flush_stage:
        return []
    flush = flush_stage.get("flush") or {}
    items = [
        ("Stage", flush_stage.get("stage")),
        ("Method", flush.get("method")),
        ("Command", flush.get("command") if flush.get("method") == "command" else None),
        ("Polls", flush.get("polls")),
        ("Waited", _seconds(flush.get("waited_s"))),
        ("Duration", _seconds(flush_stage.get("duration_s"))),
        ("Started", flush_stage.get("started")),
        ("Finished", flush_stage.get("finished")),
    ]
    return [(label, str(text)) for label, text in items if text not in (None, "")]


def _seconds(value) -> str | None:
    return None if is_missing(value) else f"{format_number(value, 1)} s"


def _facts(prep: dict, meta: dict) -> list[tuple[str, str]]:
    hosts = meta.get("hosts") or prep.get("hosts") or []
    items = [
        ("Campaign", meta.get("title")),
        ("Target", prep.get("target")),
        ("Recipe", prep.get("recipe")),
        ("Capacity", _capacity_text(prep.get("capacity_bytes"))),
        ("Hosts", ", ".join(str(host) for host in hosts)),
        ("Tool version", meta.get("tool_version")),
    ]
    return [(label, str(text)) for label, text in items if text not in (None, "")]


def _capacity_text(value) -> str | None:
    return None if is_missing(value) else f"{format_bytes(value)} ({int(value):,} bytes)"


# ---------------------------------------------------------------------------------------
# Figures


def make_figure(builder, *args) -> tuple[bytes, bytes, str] | None:
    """(PNG, SVG, caption) of a figure builder, or None when it has no data."""
    with style():
        built = builder(*args)
        if built is None:
            return None
        fig, caption = built
        try:
            png, svg = render_figure(fig)
        finally:
            plt.close(fig)
    return png, svg, caption


def pass_timelines(stages: list[dict]) -> list[dict]:
    """Per pass, in stage order: its chunks' bandwidth series on one time axis.

    Joined by ``writecliff.concatenate``, as the cliff in the prepared marker was found:
    chunk k is shifted by the end of chunk k-1's last interval (a chunk without series
    shifts nothing). Returns dicts with name, number, t_s, bw_bytes_s, boundaries (the
    starts of the chunks after the first) and end_s.
    """
    chunks_by_pass: dict[tuple, list[list[writecliff.Interval]]] = {}
    for stage in stages:
        if stage.get("kind") != "pass" or stage.get("skipped"):
            continue
        info = stage.get("pass") or {}
        chunk = [_interval(point) for point in stage.get("series") or []]
        chunks_by_pass.setdefault((info.get("number"), info.get("name")), []).append(chunk)
    timelines = []
    for (number, name), chunks in chunks_by_pass.items():
        series = writecliff.concatenate(chunks)
        ends = list(itertools.accumulate(chunk[-1].t_s if chunk else 0.0 for chunk in chunks))
        timelines.append(
            {
                "name": name,
                "number": number,
                "t_s": [part.t_s for part in series],
                "bw_bytes_s": [part.bw_bytes_s for part in series],
                "boundaries": ends[:-1],
                "end_s": ends[-1],
            }
        )
    return timelines


def _interval(point: dict) -> writecliff.Interval:
    interval_s = float(point["interval_s"])
    bw = point.get("bw_bytes_s")
    bw = float(point["bytes"]) / interval_s if bw is None else float(bw)
    written = point.get("bytes")
    written = round(bw * interval_s) if written is None else int(written)
    return writecliff.Interval(float(point["t_s"]), interval_s, written, bw)


def write_cliff_figure(timelines: list[dict], prep: dict, units: str = report_units.DEFAULT_UNITS):
    """Write bandwidth over time, a panel per pass with data; the cliff as a vertical line."""
    timelines = [line for line in timelines if line["t_s"]]
    if not timelines:
        return None
    largest = max(max(line["bw_bytes_s"]) for line in timelines)
    unit, scale = report_units.bandwidth_unit(largest, units)
    cliffs = {(item.get("number"), item.get("name")): item for item in prep.get("passes") or []}
    fig, axes = new_figure(nrows=len(timelines), height_in=2.2 * len(timelines) + 0.6)
    for ax, line in zip(axes, timelines, strict=True):
        item = cliffs.get((line["number"], line["name"])) or {}
        bandwidth = [value / scale for value in line["bw_bytes_s"]]
        ax.plot(line["t_s"], bandwidth, color=COLORS[0], linewidth=1, label="write bandwidth")
        for boundary in line["boundaries"]:
            ax.axvline(boundary, color="grey", linewidth=0.6, linestyle=":", label="chunk start")
        if item.get("cliff"):
            _mark_cliff(ax, item["cliff"], line["end_s"], scale, unit)
        ax.set_title(_pass_title(line, item))
        ax.set_xlim(0, line["end_s"] or None)
        ax.set_ylim(bottom=0)
        ax.set_ylabel(f"bandwidth ({unit})")
    axes[-1].set_xlabel("time since the pass started (s)")
    figure_legend(fig, axes)
    caption = (
        f"Write bandwidth during each overwrite pass ({unit}, summed over hosts), the chunks "
        "of a pass joined in order (dotted: chunk starts). Dashed vertical line: the write "
        "cliff, where the bandwidth fell from its plateau (grey dashed lines: median "
        f"bandwidth before and after it); {report_units.units_note(units)}."
    )
    return fig, caption


def _mark_cliff(ax, cliff: dict, end_s: float, scale: float, unit: str) -> None:
    t_s = float(cliff["t_s"])
    ax.axvline(t_s, color=COLORS[3], linewidth=1.2, linestyle="--", label="write cliff")
    for value, start, stop in (
        (cliff.get("plateau_bw_bytes_s"), 0.0, t_s),
        (cliff.get("after_bw_bytes_s"), t_s, end_s),
    ):
        if not is_missing(value):
            ax.hlines(
                float(value) / scale,  # type: ignore[arg-type]  # is_missing checked it
                start,
                stop,
                color="grey",
                linewidth=0.8,
                linestyle="--",
                label="median before / after the cliff",
            )
    ax.annotate(
        f"cliff at {format_number(t_s, 1)} s\n{format_bytes(cliff.get('bytes_written'))} written",
        xy=(t_s, 1.0),
        xycoords=("data", "axes fraction"),
        xytext=(4, -4),
        textcoords="offset points",
        ha="left",
        va="top",
        color=COLORS[3],
    )


def _pass_title(line: dict, item: dict) -> str:
    parts = [f"pass {line['number']}: {line['name']}"]
    if item.get("fraction") is not None:
        parts.append(f"{format_percent(item['fraction'], 0)} of capacity")
    if item.get("bs") is not None:
        parts.append(f"bs {size_label(int(item['bs']))}")
    if item.get("pattern"):
        parts.append(str(item["pattern"]))
    return ", ".join(parts)


def convergence_figure(verdict: dict | None):
    """Each tracked variable per round run (a panel each), the measurement window shaded."""
    variables = [v for v in (verdict or {}).get("variables") or [] if v.get("values")]
    if not variables:
        return None
    window = (verdict or {}).get("window")
    fig, axes = new_figure(nrows=len(variables), height_in=2.0 * len(variables) + 0.6)
    for index, (ax, variable) in enumerate(zip(axes, variables, strict=True)):
        rounds = list(range(1, len(variable["values"]) + 1))
        if window:
            ax.axvspan(
                window[0] - 0.5,
                window[1] + 0.5,
                color=COLORS[2],
                alpha=0.15,
                linewidth=0,
                label="measurement window",
            )
        ax.plot(
            rounds,
            variable["values"],
            color=COLORS[index % len(COLORS)],
            marker=MARKERS[index % len(MARKERS)],
            markersize=4,
            linewidth=1,
        )
        ax.set_title(str(variable["name"]))
        ax.set_ylabel(_metric_label(variable["name"]))
        readable_counts(ax.yaxis)
        ax.set_xlim(0.5, len(rounds) + 0.5)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if min(variable["values"]) >= 0:
            ax.set_ylim(bottom=0)
    axes[-1].set_xlabel("round")
    figure_legend(fig, axes)
    caption = (
        "Convergence: each tracked variable per round run. Shaded: the measurement window "
        f"({_window_text(window)}). {verdict_sentence(verdict)}"
    )
    return fig, caption


METRIC_LABELS = {
    "iops": "IOPS",
    "bw_bytes_s": "bandwidth (B/s)",
    "lat_mean_ns": "mean latency (ns)",
}


def _metric_label(name: str) -> str:
    metric = name.rpartition(".")[2] or name
    return METRIC_LABELS.get(metric, metric)


def window_figure(verdict: dict | None, headline: str):
    """The window: values, average, ±10 %/±20 % bands and the least-squares fit line."""
    window = (verdict or {}).get("window")
    variables = [v for v in (verdict or {}).get("variables") or [] if v.get("window_values")]
    if not window or not variables:
        return None
    rounds = list(range(window[0], window[1] + 1))
    fig, axes = new_figure(nrows=len(variables), height_in=2.2 * len(variables) + 0.6)
    for ax, variable in zip(axes, variables, strict=True):
        average = float(variable["average"])
        for band, alpha in ((BAND_WIDE, 0.08), (BAND_NARROW, 0.16)):
            ax.axhspan(
                average * (1 - band),
                average * (1 + band),
                color=COLORS[0],
                alpha=alpha,
                linewidth=0,
                label=f"average ± {band:.0%}",
            )
        ax.axhline(average, color=COLORS[0], linewidth=1, label="window average")
        ax.plot(
            rounds[: len(variable["window_values"])],
            variable["window_values"],
            color="black",
            marker="o",
            markersize=4,
            linewidth=0,
            label="value per round",
        )
        slope, intercept = variable.get("slope"), variable.get("intercept")
        if not is_missing(slope) and not is_missing(intercept):
            ends = [rounds[0], rounds[-1]]
            ax.plot(
                ends,
                [slope * x + intercept for x in ends],
                color=COLORS[3],
                linewidth=1.2,
                linestyle="--",
                label=f"fit: {fit_formula(slope, intercept)}",
            )
        ax.set_title(_window_panel_title(variable))
        ax.set_ylabel(_metric_label(variable["name"]))
        readable_counts(ax.yaxis)
        ax.set_xlim(rounds[0] - 0.5, rounds[-1] + 0.5)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    axes[-1].set_xlabel("round")
    fig.suptitle(headline)
    caption = (
        f"Measurement window ({_window_text(window)}): the tracked values, their average, "
        "bands of ±10 % and ±20 % around it, and the least-squares fit line "
        "(x = round number)."
    )
    return fig, caption


def _window_panel_title(variable: dict) -> str:
    state = "steady" if variable.get("steady") else "not steady"
    return (
        f"{variable['name']}: {state} (range {format_percent(variable.get('range_ratio'))}, "
        f"slope excursion {format_percent(variable.get('excursion_ratio'))} of the average)"
    )
