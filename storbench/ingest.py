"""Turn one iteration's raw output into result rows, and gather an experiment's rows."""

from __future__ import annotations

import json
from pathlib import Path

from storbench import results
from storbench.tools import get_tool


def parse_iteration(
    manifest_path: str, output_path: str, timeseries_path: str | None = None
) -> int:
    """Parse the raw files the manifest names into result rows (and per-interval rows)."""
    manifest_file = Path(manifest_path)
    manifest = json.loads(manifest_file.read_text())
    raw_dir = manifest_file.parent / manifest["raw_dir"]
    hosts = manifest["hosts"]
    base = {
        "experiment": manifest["experiment"],
        "run_id": manifest["run_id"],
        "iteration": manifest["iteration"],
        "attempt": manifest["attempt"],
        "tool": manifest["tool"],
        "params_json": json.dumps(manifest["params"], sort_keys=True),
        "job_file_sha256": manifest["job_file_sha256"],
        "command": " ".join(hosts[0]["command"]),
        "raw_path": str(raw_dir),
        "start_time": min(h["start_time"] for h in hosts),
        "end_time": max(h["end_time"] for h in hosts),
    }
    tool = get_tool(manifest["tool"])
    rows = tool.parse(manifest, raw_dir, base)
    if timeseries_path:
        identity = {k: base[k] for k in ("experiment", "run_id", "iteration", "attempt", "tool")}
        series = tool.parse_timeseries(manifest, raw_dir, identity)
        results.write_timeseries(series, timeseries_path)
    results.write_rows(rows, output_path)
    return len(rows)


def gather(parsed_paths: list[str], output_path: str, timeseries_output: str | None = None) -> int:
    """One Parquet of every result row; the per-interval files go to timeseries_output."""
    series = sorted(p for p in parsed_paths if p.endswith(TIMESERIES_SUFFIX))
    table = results.read_parquet(sorted(set(parsed_paths) - set(series)))
    if timeseries_output:
        timeseries = results.read_parquet(series, results.TIMESERIES_SCHEMA)
        results.write_parquet(timeseries, timeseries_output)
    results.write_parquet(table, output_path)
    return table.num_rows


TIMESERIES_SUFFIX = ".timeseries.parquet"
