"""The network check's page: each client alone and all at once, against the median."""

from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display; the same renderer everywhere keeps bytes identical

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from storbench.analysis import scaling, stats
from storbench.core import results
from storbench.core.numbers import format_number, is_missing  # noqa: E402
from storbench.report.toolkit import (
    COLORS,
    FLAG_MARK,
    HATCHES,
    as_base64,
    empty_figure,
    figure_legend,
    format_percent,
    frame_csv,
    grid,
    join_nonempty,
    list_text,
    panel_width_in,
    read_results,
    recorded_versions,
    render_figure,
    spaced_labels,
    style,  # noqa: E402
    template_environment,
    write_file,
)
from storbench.run import netcheck
from storbench.tools import network_tool

TEMPLATE_NAME = "index.html.j2"

NETWORK_FIGURE = "network"


NETWORK_TEMPLATE_NAME = "network.html.j2"


NETWORK_COLUMNS = (
    "phase",
    "host",
    "send_bytes_s",
    "receive_bytes_s",
    "bw_bytes_s",
    "median_bytes_s",
    "fraction_of_median",
    "flagged",
)


PHASE_TITLES = {
    "single": "each client alone",
    "all": "all clients at once",
    "pairs": "mesh: each link alone",
    "mesh": "mesh: every host at once",
}


BITS_PER_BYTE = 8
MAX_BARS = 24  # clients a panel draws as bars; beyond, a dot each
SLANTED_NAME_IN = 0.17  # the width a 45° host name takes on the axis, in inches


def build_network_report(parquet_path, out_dir, *, min_fraction: float) -> dict[str, Path]:
    """The network check's report: index.html, network.csv, network.png/.svg in ``out_dir``.

    Reads the rows of experiment 'network' (storbench.run.netcheck): per phase ('single': each
    client alone, 'all': all at once) each client's bandwidth (receive, else send), the
    median of the clients, and the clients netcheck.slow_clients flags below
    ``min_fraction`` x the median.
    """
    from storbench.run import netcheck  # lazy: the run-path module pulls in the SSH stack

    out_dir = Path(out_dir)
    raw = read_results(parquet_path)
    rows = stats.latest_attempts(raw[raw["experiment"] == netcheck.EXPERIMENT])
    table = network_table(rows, min_fraction)
    written: dict[str, Path] = {}
    png, svg, caption = make_network_figure(table, min_fraction)
    written[f"{NETWORK_FIGURE}.png"] = write_file(out_dir / f"{NETWORK_FIGURE}.png", png)
    written[f"{NETWORK_FIGURE}.svg"] = write_file(out_dir / f"{NETWORK_FIGURE}.svg", svg)
    written["network.csv"] = write_file(out_dir / "network.csv", frame_csv(table).encode())
    flagged = [
        {
            "host": row["host"],
            "phase": row["phase"],
            "bw_bytes_s": row["bw_bytes_s"],
            "median": row["median_bytes_s"],
            "fraction": row["fraction_of_median"],
        }
        for _, row in table[table["flagged"]].iterrows()
    ]
    context = {
        "title": "Network check",
        "verdict": netcheck.describe_slow_clients(flagged, min_fraction),
        "flagged": bool(flagged),
        "table": network_display(table),
        "figure": {"name": NETWORK_FIGURE, "caption": caption, "png_base64": as_base64(png)},
        "methodology": _network_methodology(rows, min_fraction),
    }
    html = template_environment().get_template(NETWORK_TEMPLATE_NAME).render(context)
    written["index.html"] = write_file(out_dir / "index.html", html.encode())
    return written


def network_table(rows: pd.DataFrame, min_fraction: float) -> pd.DataFrame:
    """Per phase and client: send, receive, the compared bandwidth, median, fraction, flag.

    The phase's aggregate (host 'all') follows its clients, without median or flag. A mesh
    phase lists each link ('a → b') as its client.
    """
    if "target" in rows:
        mesh = (
            rows["run_id"].isin(netcheck.MESH_PHASES)
            & (rows["host"] != results.ALL_HOSTS)
            & rows["target"].notna()
        )
        links = rows["host"].astype(str) + " → " + rows["target"].astype(str)
        rows = rows.assign(host=rows["host"].where(~mesh, links))
    means = rows.groupby(["run_id", "host", "op"], sort=False, dropna=False)["bw_bytes_s"].mean()
    records = [
        {"run_id": run_id, "host": host, "op": op, "bw_bytes_s": None if is_missing(bw) else bw}
        for (run_id, host, op), bw in means.items()
    ]
    slow = {(item["phase"], item["host"]) for item in netcheck.slow_clients(records, min_fraction)}
    phases = [p for p in (*netcheck.PHASES, *netcheck.MESH_PHASES) if p in set(rows["run_id"])]
    phases += sorted(set(rows["run_id"]) - set(phases))
    out = []
    for phase in phases:
        hosts = sorted({h for (r, h, _) in means.index if r == phase}, key=scaling.natural_key)
        clients = [h for h in hosts if h != results.ALL_HOSTS]
        values = {host: _network_values(means, phase, host) for host in hosts}
        compared = [values[h]["bw_bytes_s"] for h in clients]
        compared = [value for value in compared if not is_missing(value)]
        median = float(np.median(compared)) if compared else math.nan
        for host in [*clients, *([results.ALL_HOSTS] if results.ALL_HOSTS in hosts else [])]:
            client = host != results.ALL_HOSTS
            bw = values[host]["bw_bytes_s"]
            out.append(
                {
                    "phase": phase,
                    "host": host,
                    **values[host],
                    "median_bytes_s": median if client else math.nan,
                    "fraction_of_median": bw / median if client and median else math.nan,
                    "flagged": (phase, host) in slow,
                }
            )
    table = pd.DataFrame.from_records(out, columns=list(NETWORK_COLUMNS))
    return table.astype({c: float for c in NETWORK_COLUMNS[2:7]} | {"flagged": bool})


def _network_values(means: pd.Series, phase: str, host: str) -> dict:
    send = _mean_of(means, phase, host, "send")
    receive = _mean_of(means, phase, host, "receive")
    return {
        "send_bytes_s": send,
        "receive_bytes_s": receive,
        "bw_bytes_s": receive if not is_missing(receive) else send,  # netcheck's rule
    }


def _mean_of(means: pd.Series, phase: str, host: str, op: str) -> float:
    value = means.get((phase, host, op))
    return math.nan if value is None or is_missing(value) else float(value)


def _gbits(value):
    return None if is_missing(value) else float(value) * BITS_PER_BYTE / 1e9


def network_display(table: pd.DataFrame) -> dict:
    # op send: the client sends to the server; receive: iperf3 --reverse.
    header = ["Phase", "Client", "Client → server Gbit/s", "Server → client Gbit/s"]
    header += ["vs median", "Slow"]
    rows = []
    for _, row in table.iterrows():
        fraction = row["fraction_of_median"]
        rows.append(
            {
                "cells": [
                    PHASE_TITLES.get(row["phase"], str(row["phase"])),
                    "all (sum)" if row["host"] == results.ALL_HOSTS else str(row["host"]),
                    format_number(_gbits(row["send_bytes_s"]), 2),
                    format_number(_gbits(row["receive_bytes_s"]), 2),
                    format_percent(None if is_missing(fraction) else fraction - 1, signed=True),
                    FLAG_MARK if row["flagged"] else "",
                ],
                "flagged": bool(row["flagged"]),
            }
        )
    return {"header": header, "rows": rows}


def make_network_figure(table: pd.DataFrame, min_fraction: float) -> tuple[bytes, bytes, str]:
    with style():
        fig, caption = network_figure(table, min_fraction)
        try:
            png, svg = render_figure(fig)
        finally:
            plt.close(fig)
    return png, svg, caption


def network_figure(table: pd.DataFrame, min_fraction: float):
    """Per phase, one bar per client (Gbit/s), the median and the flag threshold."""
    clients = table[(table["host"] != results.ALL_HOSTS) & table["bw_bytes_s"].notna()]
    if clients.empty:
        return empty_figure("no network data"), "Network check: no data."
    phases = list(dict.fromkeys(clients["phase"]))
    fig, axes = grid(len(phases), 2.6)
    axis_width = panel_width_in(min(len(phases), 3))
    many = clients.groupby("phase")["host"].nunique().max() > MAX_BARS
    for ax, phase in zip(axes, phases, strict=True):
        rows = clients[clients["phase"] == phase]
        flagged = rows["flagged"].tolist()
        gbits = rows["bw_bytes_s"] * BITS_PER_BYTE / 1e9
        names = [str(h) for h in rows["host"]]
        if many:
            _client_dots(ax, gbits.tolist(), flagged, names)
            ax.grid(False, axis="x")  # a grid line per client would grey the panel
        else:
            ax.bar(
                range(len(rows)),
                gbits,
                0.7,
                color=[COLORS[3] if flag else COLORS[0] for flag in flagged],
                hatch=[HATCHES[1] if flag else "" for flag in flagged],
                edgecolor="black",
                linewidth=0.5,
            )
            for x, (flag, value) in enumerate(zip(flagged, gbits, strict=True)):
                if flag:
                    ax.annotate("slow", (x, value), ha="center", va="bottom")
        median = rows["median_bytes_s"].iloc[0] * BITS_PER_BYTE / 1e9
        ax.axhline(median, color="grey", linewidth=1, label="median")
        threshold = min_fraction * median
        ax.axhline(threshold, color=COLORS[3], linewidth=1, linestyle="--", label="flag threshold")
        slanted = len(names) > 4
        ax.set_xticks(
            range(len(rows)),
            spaced_labels(names, axis_width, SLANTED_NAME_IN) if slanted else names,
            rotation=45 if slanted else 0,
            ha="right" if slanted else "center",
        )
        ax.set_xlim(-0.6, len(rows) - 0.4)
        ax.set_ylim(bottom=0)
        ax.set_title(PHASE_TITLES.get(phase, str(phase)))
        ax.set_ylabel("bandwidth (Gbit/s)")
    figure_legend(fig, axes)
    marks = "a dot per client, a flagged one red and named" if many else "hatched, 'slow'"
    caption = (
        "iperf3 bandwidth of each client host (Gbit/s; receive side). Solid line: median of "
        f"the clients; dashed: {min_fraction:.0%} of the median, below which a client is "
        f"flagged ({marks})."
    )
    return fig, caption


def _client_dots(ax, gbits: list[float], flagged: list[bool], names: list[str]) -> None:
    """Many clients: a dot each (128 bars were a black block), the flagged ones named."""
    ax.scatter(
        range(len(gbits)),
        gbits,
        s=10,
        color=[COLORS[3] if flag else COLORS[0] for flag in flagged],
        zorder=3,
    )
    for x, (flag, value, name) in enumerate(zip(flagged, gbits, names, strict=True)):
        if flag:
            ax.annotate(
                name, (x, value), xytext=(3, -3), textcoords="offset points", fontsize=6,
                color=COLORS[3],
            )  # fmt: skip


def _parenthesized(text) -> str | None:
    return f"({text})" if text else None


def _network_methodology(rows: pd.DataFrame, min_fraction: float) -> list[tuple[str, str]]:
    params = {}
    for text in rows["params_json"].dropna().unique() if "params_json" in rows else []:
        params.update(json.loads(text))
    clients = sorted({h for h in rows["host"] if h != results.ALL_HOSTS}, key=scaling.natural_key)
    items = [
        ("Tool", recorded_versions(rows) or network_tool().name),
        ("Server", join_nonempty(params.get("server"), _parenthesized(params.get("address")))),
        ("Clients", list_text(clients)),
        ("Duration", f"{params['duration_s']} s" if params.get("duration_s") else None),
        ("Parallel streams", params.get("parallel")),
        ("Phases", "each client alone, one after the other (single); all clients at once (all)"),
        ("Flag", f"a client below {min_fraction:.0%} of the median of its phase"),
    ]
    return [(label, str(text)) for label, text in items if text not in (None, "", [], {})]
