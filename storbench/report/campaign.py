"""One report for a whole campaign config: every experiment's key results side by side.

``build_campaign_report(summaries, searches, out_dir, meta, telemetry)`` reads the result rows
of the grid experiments (their summary.parquet) and the answers of the latency-SLO searches
(search.json), and writes into ``out_dir``:

- ``index.html``: summary of key results (peak bandwidth and IOPS per experiment with their
  95 % intervals on the log scale, p99 at the IOPS peak, flagged cells, errors; each search's
  answer), the methodology from the config (hosts, targets, experiments with tool, iterations
  and runtime), the campaign-wide paper tables, the per-host breakdown, and appendices (hosts
  from telemetry, configuration snapshot with secrets redacted, environment);
- ``tables/key_results.*`` and the paper tables of all experiments together
  (``tables/bandwidth.*``, ``latency.*``, ``per_host.*``, ``prep_state.*``: the reference
  documents' bandwidth by tool × pattern × operation × host group), each as CSV, Markdown,
  LaTeX and HTML;
- ``peaks.png/.svg``: peak bandwidth and IOPS per experiment with their 95 % intervals.

The experiments' own reports (``reports/<experiment>/index.html``) are linked, not copied.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from storbench.analysis import scaling, stats
from storbench.core import report_units, results
from storbench.core.markers import SEARCH_KEYS, SEARCH_RESULT, read_marker
from storbench.core.numbers import NS_PER_US, is_missing, scaled
from storbench.report import environment, pivot, tables, toolkit
from storbench.report import paper_tables as report_tables

TEMPLATE_NAME = "campaign.html.j2"
PEAKS_FIGURE = "peaks"
KEY_RESULTS = "key_results"


def build_campaign_report(
    summaries: list,
    searches: list,
    out_dir,
    meta: dict,
    telemetry: dict | None = None,
) -> dict[str, Path]:
    """Write the campaign report; return {file name: path}.

    ``meta``: title, name, experiments {name: {tool, kind, description, iterations, hosts,
    target, job, labels}}, hosts [{name, group, transport}], targets {name: redacted spec},
    config_yaml (redacted), generated_by, tables (report.tables: the pivot tables the config
    chooses, storbench.report.pivot), storage (nodes, cores, memory) and units (report.units:
    the bandwidth unit system, storbench.core.report_units); every key is optional.
    """
    out_dir = Path(out_dir)
    units = report_units.units_of(meta)
    raw = results.read_parquet(list(summaries)).to_pandas() if summaries else None
    summary = stats.summarize(raw) if raw is not None and not raw.empty else None
    answers = [read_marker(path, SEARCH_KEYS, SEARCH_RESULT) for path in searches]
    experiments = meta.get("experiments") or {}
    # A mixed run's headline is its ops' sum where they ran at the same time (read+write).
    together = scaling.together_rows(raw) if summary is not None else None
    combined = stats.summarize(together) if together is not None and not together.empty else None
    key_rows = key_results(summary, answers, experiments, combined)
    written: dict[str, Path] = {}

    key_table = key_results_table(key_rows, units)
    table_dir = out_dir / report_tables.TABLE_DIR
    for name, path in tables.write_all(key_table, table_dir, KEY_RESULTS).items():
        written[f"{report_tables.TABLE_DIR}/{name}"] = path
    paper_tables = report_tables.report_tables(raw, summary, units) if summary is not None else {}
    written.update(report_tables.write_tables(paper_tables, out_dir))
    chosen_tables = pivot.pivot_tables(summary, raw, meta)
    for stem, table in chosen_tables.items():
        for name, path in tables.write_all(table, table_dir, stem).items():
            written[f"{report_tables.TABLE_DIR}/{name}"] = path

    png, svg, caption = peaks_figure(key_rows, units)
    written[f"{PEAKS_FIGURE}.png"] = toolkit.write_file(out_dir / f"{PEAKS_FIGURE}.png", png)
    written[f"{PEAKS_FIGURE}.svg"] = toolkit.write_file(out_dir / f"{PEAKS_FIGURE}.svg", svg)
    figure = {"name": PEAKS_FIGURE, "caption": caption, "png_base64": toolkit.as_base64(png)}

    context = {
        "title": meta.get("title") or "storbench campaign report",
        "key_table": toolkit.paper_table_context({KEY_RESULTS: key_table})[0],
        "experiments": experiment_links(experiments, key_rows),
        "figures": [figure],
        "chosen_tables": toolkit.paper_table_context(chosen_tables),
        "paper_tables": toolkit.paper_table_context(
            {k: v for k, v in paper_tables.items() if k != toolkit.PER_HOST_TABLE}
        ),
        "per_host": toolkit.paper_table_context(
            {k: v for k, v in paper_tables.items() if k == toolkit.PER_HOST_TABLE}
        ),
        "version_warnings": campaign_version_warnings(raw),
        "methodology": methodology(meta),
        "statistics": toolkit.statistics_text(units),
        "percentiles": toolkit.PERCENTILE_TEXT,
        "config_yaml": meta.get("config_yaml") or "",
        "hosts": toolkit.hosts_appendix(telemetry),
        "environment": environment.controller_environment(),
    }
    html = toolkit.template_environment().get_template(TEMPLATE_NAME).render(context)
    written["index.html"] = toolkit.write_file(out_dir / "index.html", html.encode())
    return written


def campaign_version_warnings(raw: pd.DataFrame | None) -> list[str]:
    """An experiment whose hosts ran different versions of its tool, and a tool whose versions
    differ between the experiments: their numbers side by side in the key results are then
    partly the tool's."""
    if raw is None or raw.empty or "experiment" not in raw.columns:
        return []
    sides = [(str(name), rows) for name, rows in raw.groupby("experiment", sort=True)]
    return toolkit.sides_version_warnings(sides, between="the experiments")


# ---------------------------------------------------------------------------------------
# Key results


def key_results(
    summary: pd.DataFrame | None,
    answers: list[dict],
    experiments: dict,
    combined: pd.DataFrame | None = None,
) -> list[dict]:
    """One record per experiment, in config order: peaks of a grid, the answer of a search.

    ``combined``: summary cells of ops that ran together (``scaling.together_rows``), which
    compete for the peaks: a mixed run's read+write, not one of its ops."""
    by_name: dict[str, dict] = {}
    tools: dict[str, str] = {}
    if summary is not None:
        for name, cells in summary.groupby("experiment", sort=False):
            together = None if combined is None else combined[combined["experiment"] == name]
            by_name[str(name)] = grid_peaks(cells, together)
            if "tool" in cells:
                tools[str(name)] = ", ".join(sorted(cells["tool"].dropna().astype(str).unique()))
    for answer in answers:
        by_name[answer["experiment"]] = search_answer(answer)
    order = [name for name in experiments if name in by_name]
    order += sorted(set(by_name) - set(order))
    return [
        {
            "experiment": name,
            # a hand-made meta (or none) names no tool: the experiment's rows do
            "tool": (experiments.get(name) or {}).get("tool") or tools.get(name),
            **by_name[name],
        }
        for name in order
    ]


def grid_peaks(cells: pd.DataFrame, combined: pd.DataFrame | None = None) -> dict:
    """The cells with the highest mean bandwidth and IOPS, with their intervals and p99;
    ``combined`` cells (ops run together) compete for the peaks but count nowhere else."""
    record = {
        "kind": "grid",
        "runs": int(cells["run_id"].nunique()),
        "iterations": int(cells["n"].max()),
        "flagged": int(cells["cov_flag"].fillna(False).astype(bool).sum()),
        "errors": int(cells["errors"].fillna(0).sum()),
    }
    candidates = cells if combined is None or combined.empty else pd.concat([cells, combined])
    for metric, prefix in (("bw_bytes_s", "bw"), ("iops", "iops")):
        present = candidates.dropna(subset=[f"{metric}_mean"]).reset_index(drop=True)
        if present.empty:
            continue
        best = present.loc[present[f"{metric}_mean"].idxmax()]
        record[f"{prefix}_run"] = f"{best['run_id']} {best['op']}"
        record[f"{prefix}_op"] = str(best["op"])
        for stat in ("mean", "ci_low", "ci_high"):
            record[f"{prefix}_{stat}"] = _number(best[f"{metric}_{stat}"])
        if prefix == "iops":
            record["p99_ns"] = _number(best["p99_ns"])
    return record


def search_answer(answer: dict) -> dict:
    """A latency-SLO search: its answer as the IOPS peak (the highest rate meeting the SLO)."""
    found = answer["answer"]
    return {
        "kind": "search",
        "runs": len(answer.get("probes") or []),
        "iterations": (answer.get("settings") or {}).get("iterations"),
        "iops_run": f"SLO {answer['objective'].get('latency')} ≤ {answer['limit']}: "
        f"{found['status']}",
        "iops_mean": _number(found.get("rate_iops")),
        "flagged": None,
        "errors": None,
    }


def _number(value):
    return None if is_missing(value) else float(value)


KEY_COLUMNS = {
    "Experiment": lambda r: r["experiment"],
    "Tool": lambda r: r.get("tool"),
    "Kind": lambda r: r["kind"],
    "Runs": lambda r: r.get("runs"),
    "n": lambda r: report_tables.small_n_text(r.get("iterations")),
}


def key_results_table(rows: list[dict], units: str = report_units.DEFAULT_UNITS) -> tables.Table:
    unit, divisor = report_units.large_bandwidth_unit(units)
    bw = [scaled(r.get("bw_mean"), divisor) for r in rows]
    iops = [r.get("iops_mean") for r in rows]
    bw_decimals = report_tables.column_decimals(bw)
    iops_decimals = min(report_tables.column_decimals(iops), 1)
    columns = {name: [_cell(pick(r)) for r in rows] for name, pick in KEY_COLUMNS.items()}
    columns |= {
        f"Peak {unit}": [report_tables.fixed(v, bw_decimals) for v in bw],
        f"{unit} CI low": [_bound(r, "bw_ci_low", divisor, bw_decimals) for r in rows],
        f"{unit} CI high": [_bound(r, "bw_ci_high", divisor, bw_decimals) for r in rows],
        "Bandwidth peak at": [r.get("bw_run") for r in rows],
        "Peak IOPS": [report_tables.fixed(v, iops_decimals) for v in iops],
        "IOPS CI low": [_bound(r, "iops_ci_low", 1.0, iops_decimals) for r in rows],
        "IOPS CI high": [_bound(r, "iops_ci_high", 1.0, iops_decimals) for r in rows],
        "IOPS peak at": [r.get("iops_run") for r in rows],
        "p99 µs at peak IOPS": [
            report_tables.fixed(scaled(r.get("p99_ns"), NS_PER_US), 1) for r in rows
        ],
        "CoV > 5 %": [_cell(r.get("flagged")) for r in rows],
        "Errors": [_cell(r.get("errors")) for r in rows],
    }
    headers = list(columns)
    body = [list(cells) for cells in zip(*columns.values(), strict=True)]
    return tables.Table(
        columns=headers,
        rows=body,
        caption="Key results per experiment: the cell with the highest mean bandwidth and "
        "the cell with the highest mean IOPS (aggregate over all hosts, mean over iterations; "
        "the operations of a mixed run, which ran at the same time, as one cell read+write) "
        f"with the {report_tables.INTERVAL_NAME}, p99 latency of the IOPS peak from the "
        "merged histograms, cells with CoV above 5 %, and I/O errors. For a latency-SLO "
        "search, Peak IOPS is the highest offered rate found to meet the objective.",
        label="tab:key-results",
        align="lllrr" + "rrrl" * 2 + "rrr",
        notes=(
            f"An empty cell: not applicable or not available. Bandwidth in "
            f"{report_units.units_note(units)}.",
            f"CI: {report_tables.INTERVAL_METHOD}. {report_tables.INTERVAL_FALLBACK}",
            report_tables.SMALL_N_NOTE,
        ),
    )


def _cell(value) -> str | None:
    return None if value is None else str(value)


def _bound(row: dict, key: str, unit: float, decimals: int) -> str | None:
    """One bound of an interval as a number (CSV and LaTeX read it), never below 0."""
    return report_tables.fixed(report_tables.non_negative(scaled(row.get(key), unit)), decimals)


def experiment_links(experiments: dict, key_rows: list[dict]) -> list[dict]:
    """Each experiment with the relative link to its own report and its description."""
    names = list(dict.fromkeys([*experiments, *(r["experiment"] for r in key_rows)]))
    links = []
    for name in names:
        spec = experiments.get(name) or {}
        links.append(
            {
                "name": name,
                "href": f"../{name}/index.html",
                **{key: spec.get(key) or "" for key in ("description", "tool", "kind")},
            }
        )
    return links


# ---------------------------------------------------------------------------------------
# Figure


def peaks_figure(
    rows: list[dict], units: str = report_units.DEFAULT_UNITS
) -> tuple[bytes, bytes, str]:
    """Two panels: peak GB/s (GiB/s) and peak IOPS per experiment, error bars the 95 %
    interval."""
    unit, _ = report_units.large_bandwidth_unit(units)
    caption = (
        f"Peak bandwidth ({unit}, {units}) and peak IOPS of each experiment: the best cell's "
        f"mean over iterations, error bars the {report_tables.INTERVAL_NAME} (none for "
        "one iteration or a search answer); the operation in brackets, read+write for the "
        "sum of a mixed run's operations, which ran at the same time."
    )
    return toolkit.figure_files(lambda: (_peaks(rows, units), caption))


def _peaks(rows: list[dict], units: str):
    if not rows:
        return toolkit.empty_figure("no results")
    fig, axes = toolkit.new_figure(1, 2, height_in=2.8)
    names = [r["experiment"] for r in rows]
    bw_label, bw_divisor = report_units.large_bandwidth_unit(units)
    panels = (("bw", bw_divisor, f"peak bandwidth ({bw_label})"), ("iops", 1.0, "peak IOPS"))
    for ax, (prefix, unit, label) in zip(axes, panels, strict=True):
        means = np.array([_nan(scaled(r.get(f"{prefix}_mean"), unit)) for r in rows])
        low = np.array([_nan(scaled(r.get(f"{prefix}_ci_low"), unit)) for r in rows])
        high = np.array([_nan(scaled(r.get(f"{prefix}_ci_high"), unit)) for r in rows])
        # The interval is for the geometric mean: the arithmetic mean may lie outside it.
        errors = np.clip(np.nan_to_num(np.vstack([means - low, high - means]), nan=0.0), 0, None)
        ax.bar(
            range(len(rows)),
            np.nan_to_num(means, nan=0.0),
            yerr=errors,
            capsize=2,
            color=[toolkit.COLORS[i % len(toolkit.COLORS)] for i in range(len(rows))],
            edgecolor="black",
            linewidth=0.5,
        )
        # The op of the peak: a mixed run's read+write, or the one op it is.
        ticks = [
            f"{name} ({r[f'{prefix}_op']})" if r.get(f"{prefix}_op") else name
            for name, r in zip(names, rows, strict=True)
        ]
        ax.set_xticks(range(len(rows)), ticks, rotation=30, ha="right")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        toolkit.readable_counts(ax.yaxis)
    return fig


def _nan(value) -> float:
    return float("nan") if value is None else float(value)


# ---------------------------------------------------------------------------------------
# Methodology


def methodology(meta: dict) -> list[tuple[str, str]]:
    hosts = meta.get("hosts") or []
    groups: dict[str, list[str]] = {}
    for host in hosts:
        groups.setdefault(f"{host.get('group')} ({host.get('transport')})", []).append(host["name"])
    items = [
        ("Campaign", meta.get("name")),
        ("Hosts", "; ".join(f"{g}: {', '.join(n)}" for g, n in groups.items()) or None),
        (
            "Targets",
            "; ".join(
                f"{name}: {toolkit.mapping_text(spec)}"
                for name, spec in (meta.get("targets") or {}).items()
            )
            or None,
        ),
    ]
    for name, spec in (meta.get("experiments") or {}).items():
        items.append((f"Experiment {name}", _experiment_text(spec)))
    items.append(("Generated by", meta.get("generated_by")))
    return [(label, str(text)) for label, text in items if text not in (None, "")]


def _experiment_text(spec: dict) -> str:
    job = spec.get("job") or {}
    parts = [
        spec.get("description"),
        f"tool {spec.get('tool')}",
        f"{spec.get('kind', 'grid')}",
        f"target {spec.get('target')}",
        f"hosts {', '.join(spec.get('hosts') or [])}",
        f"{spec.get('iterations')} iteration(s)",
        toolkit.runtime_text(job),
        f"{spec.get('runs')} run(s)" if spec.get("runs") else None,
    ]
    return "; ".join(str(p) for p in parts if p)
