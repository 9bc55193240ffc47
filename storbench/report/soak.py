"""The soak section of an experiment report: one series per run over all chunks, anomalies.

A soak experiment runs each workload as resumable chunks (its iterations, one chunk each:
``soak: {duration, chunk}``). Here the per-interval rows of a run's chunks are put on one
time axis (``anomaly.merge_chunks``, chunk k after the chunks before it, each as long as its
last interval), summed per interval (``fault_analysis.aggregate_series``), and checked for
intervals far from their trailing rolling median (``anomaly.rolling_anomalies``) and for a
sustained drift (``anomaly.drift``). Each anomaly gets its offset from the soak's start, its
chunk, and the wall-clock time (the chunk's recorded start plus the offset in the chunk).
Written: ``tables/soak_anomalies.*``, ``tables/soak_drift.*`` and ``soak.png/.svg``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd

from storbench.analysis import anomaly, fault_analysis
from storbench.config import fault_config
from storbench.core.numbers import NO_VALUE  # noqa: E402
from storbench.report import paper_tables as report_tables
from storbench.report import tables, toolkit

FIGURE = "soak"
METRICS = {"iops": ("IOPS", 1.0), "lat_mean": ("mean latency ms", 1e6)}
PANEL_HEIGHT_IN = 2.2
CAPTION = (
    "IOPS per interval over the whole soak, chunks joined (dotted lines: chunk "
    "boundaries), intervals flagged as anomalies marked ×."
)


def settings_from(meta: dict) -> dict:
    """window, k and drift of the soak plan (config fills in their defaults)."""
    soak = {**fault_config.SOAK_DEFAULTS, **(meta.get("soak") or {})}
    return {"window": int(soak["window"]), "k": float(soak["k"]), "drift": float(soak["drift"])}


def merged_rows(timeseries: pd.DataFrame, run_id: str) -> tuple[list[dict], list[float]]:
    """The run's rows on one time axis, and where each chunk after the first starts."""
    rows = timeseries[timeseries["run_id"] == run_id]
    chunks = [
        anomaly.Chunk(int(iteration), None, group)
        for iteration, group in sorted(rows.groupby("iteration"), key=lambda item: item[0])
    ]
    merged = anomaly.merge_chunks(chunks)
    starts, offset = [], 0.0
    for chunk in chunks[:-1]:
        offset += float(chunk.rows["t_s"].max())
        starts.append(offset)
    return merged, starts


def chunk_starts(raw: pd.DataFrame, run_id: str) -> dict[int, str]:
    """The recorded start time (ISO) of each chunk of a run: the earliest host start."""
    rows = raw[(raw["run_id"] == run_id) & raw["start_time"].notna()]
    return {int(it): str(group["start_time"].min()) for it, group in rows.groupby("iteration")}


def analyse_run(timeseries: pd.DataFrame, raw: pd.DataFrame, run_id: str, settings: dict):
    merged, boundaries = merged_rows(timeseries, run_id)
    series = fault_analysis.aggregate_series(merged)
    starts = chunk_starts(raw, run_id)
    anomalies, drifts = [], []
    for metric, (label, scale) in METRICS.items():
        points = series.get(metric) or []
        if sum(v is not None for _, v in points) < 2:
            continue
        for found in anomaly.rolling_anomalies(points, window=settings["window"], k=settings["k"]):
            chunk, offset = _chunk_of(found.t_s, boundaries)
            anomalies.append(
                {
                    "run_id": run_id,
                    "metric": label,
                    "t_s": found.t_s,
                    "chunk": chunk,
                    "wall_clock": _wall_clock(starts.get(chunk), offset),
                    "value": found.value / scale,
                    "median": found.median / scale,
                    "score": found.score,
                }
            )
        drifts.append(
            {
                "run_id": run_id,
                "metric": label,
                "scale": scale,
                "result": anomaly.drift(points, min_fraction=settings["drift"]),
            }
        )
    return series, boundaries, anomalies, drifts


def _chunk_of(t_s: float, boundaries: list[float]) -> tuple[int, float]:
    """(chunk number from 1, offset in that chunk) of a time on the merged axis."""
    chunk, start = 1, 0.0
    for boundary in boundaries:
        if t_s > boundary:
            chunk, start = chunk + 1, boundary
    return chunk, t_s - start


def _wall_clock(start_iso: str | None, offset_s: float) -> str:
    if not start_iso:
        return NO_VALUE
    start = dt.datetime.fromisoformat(start_iso.replace("Z", "+00:00"))
    return (start + dt.timedelta(seconds=offset_s)).isoformat(timespec="seconds")


def build_section(
    raw: pd.DataFrame, timeseries: pd.DataFrame | None, meta: dict, out_dir: Path
) -> tuple[dict | None, dict[str, Path]]:
    if not meta.get("soak") or timeseries is None or timeseries.empty:
        return None, {}
    settings = settings_from(meta)
    analysed = {
        run_id: analyse_run(timeseries, raw, run_id, settings)
        for run_id in dict.fromkeys(timeseries["run_id"])
    }
    anomalies = [row for _, _, found, _ in analysed.values() for row in found]
    drifts = [row for _, _, _, found in analysed.values() for row in found]
    table_dir = out_dir / report_tables.TABLE_DIR
    built = {
        "soak_anomalies": anomaly_table(anomalies, settings),
        "soak_drift": drift_table(drifts),
    }
    written = {}
    for stem, table in built.items():
        for path in tables.write_all(table, table_dir, stem).values():
            written[f"{report_tables.TABLE_DIR}/{path.name}"] = path
    png, svg, caption = figure(analysed)
    written[f"{FIGURE}.png"] = toolkit.write_file(out_dir / f"{FIGURE}.png", png)
    written[f"{FIGURE}.svg"] = toolkit.write_file(out_dir / f"{FIGURE}.svg", svg)
    section = {
        "id": "soak",
        "title": "Soak",
        "text": (
            f"Each run's chunks on one time axis. Anomaly: an interval more than "
            f"{settings['k']:g} robust standard deviations (1.4826 × MAD) from the median of "
            f"the {settings['window']} intervals before it. Drift: the least-squares change "
            f"over the whole soak; flagged above {100 * settings['drift']:g} % of the mean, "
            "sustained when the first and last tenths moved the same way as much."
        ),
        "tables": toolkit.paper_table_context(built),
        "figure": {"name": FIGURE, "caption": caption, "png_base64": toolkit.as_base64(png)},
    }
    return section, written


def anomaly_table(rows: list[dict], settings: dict) -> tables.Table:
    body = [
        [
            row["run_id"],
            row["metric"],
            f"{row['t_s']:.1f}",
            _clock(row["t_s"]),
            str(row["chunk"]),
            row["wall_clock"],
            f"{row['value']:,.2f}",
            f"{row['median']:,.2f}",
            f"{row['score']:+.1f}",
        ]
        for row in rows
    ]
    return tables.Table(
        columns=[
            "Run",
            "Metric",
            "t s",
            "h:mm:ss",
            "Chunk",
            "Time (UTC)",
            "Value",
            "Rolling median",
            "Score",
        ],
        rows=body,
        caption=f"Intervals more than {settings['k']:g} robust standard deviations from their "
        "trailing rolling median, with their offset from the soak's start and wall-clock time.",
        label="tab:soak-anomalies",
        align="lllllllrr",
        notes=("No rows: no anomaly found.",) if not body else (),
    )


def drift_table(rows: list[dict]) -> tables.Table:
    body = []
    for row in rows:
        result, scale = row["result"], row["scale"]
        body.append(
            [
                row["run_id"],
                row["metric"],
                f"{result.mean / scale:,.2f}",
                _percent(result.change_fraction),
                f"{result.first_tenth_median / scale:,.2f}",
                f"{result.last_tenth_median / scale:,.2f}",
                _percent(result.tenth_change_fraction),
                "yes" if result.flagged else "no",
                "yes" if result.sustained else "no",
            ]
        )
    return tables.Table(
        columns=[
            "Run",
            "Metric",
            "Mean",
            "Change %",
            "First tenth",
            "Last tenth",
            "Tenths %",
            "Drift",
            "Sustained",
        ],
        rows=body,
        caption="Drift over the whole soak: least-squares change as a share of the mean, and "
        "the medians of the first and last tenth of the intervals.",
        label="tab:soak-drift",
        align="ll" + "r" * 5 + "ll",
    )


def _percent(fraction) -> str:
    return NO_VALUE if fraction is None else f"{100 * fraction:+.1f}"


def _clock(seconds: float) -> str:
    whole = int(round(seconds))
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def figure(analysed: dict) -> tuple[bytes, bytes, str]:
    def build():
        fig, axes = toolkit.new_figure(
            len(analysed), 1, height_in=PANEL_HEIGHT_IN * len(analysed) + 0.5
        )
        for ax, (run_id, (series, boundaries, found, _)) in zip(
            axes, analysed.items(), strict=True
        ):
            points = [(t, v) for t, v in series.get("iops", []) if v is not None]
            if points:
                ax.plot(
                    *zip(*points, strict=True), color=toolkit.COLORS[0], linewidth=0.8, label="IOPS"
                )
            marked = [(r["t_s"], r["value"]) for r in found if r["metric"] == "IOPS"]
            if marked:
                ax.scatter(
                    *zip(*marked, strict=True),
                    color="#D55E00",
                    marker="x",
                    s=25,
                    zorder=3,
                    label="anomaly",
                )
            for boundary in boundaries:
                ax.axvline(boundary, color="grey", linewidth=0.6, linestyle=":", label="chunk")
            ax.set_title(str(run_id))
            ax.set_ylim(bottom=0)
            ax.set_ylabel("IOPS")
            toolkit.readable_counts(ax.yaxis)
            ax.set_xlabel("time since the soak started (s)")
        toolkit.figure_legend(fig, axes)
        return fig, CAPTION

    return toolkit.figure_files(build)
