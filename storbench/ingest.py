"""Turn one iteration's raw output into result rows, and gather an experiment's rows."""

from __future__ import annotations

import json
from pathlib import Path

from storbench import results
from storbench.tools import get_tool


def parse_iteration(manifest_path: str, output_path: str) -> int:
    """Parse the raw files the manifest names; write one Parquet file; return the row count."""
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
    rows = get_tool(manifest["tool"]).parse(manifest, raw_dir, base)
    results.write_rows(rows, output_path)
    return len(rows)


def gather(parsed_paths: list[str], output_path: str) -> int:
    table = results.read_parquet(sorted(parsed_paths))
    results.write_parquet(table, output_path)
    return table.num_rows
