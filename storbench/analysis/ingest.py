"""Turn one iteration's raw output into result rows, and gather an experiment's rows."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from pathlib import Path

from storbench.core import results
from storbench.core.aggregate import aggregate_hosts
from storbench.core.schema_names import ALL_HOSTS
from storbench.core.specs import Manifest, SpecError, start_skew_s
from storbench.tools import get_tool
from storbench.tools.base import UNEXPECTED_SHAPE, ToolOutputError, reading_output


def parse_iteration(
    manifest_path: str, output_path: str, timeseries_path: str | None = None
) -> list[dict]:
    """Parse the raw files the manifest names into result rows (and per-interval rows);
    write them and return the result rows."""
    rows, series = iteration_rows(manifest_path, with_timeseries=timeseries_path is not None)
    # both tables are built before either file is published
    outputs = [(_table(rows, results.SCHEMA, manifest_path), output_path)]
    if timeseries_path:
        outputs.append((_table(series, results.TIMESERIES_SCHEMA, manifest_path), timeseries_path))
    results.write_parquets(outputs)
    return rows


def _table(rows: list[dict], schema, manifest_path: str):
    import pyarrow as pa  # lazy: loads numpy, pyarrow

    try:
        return results.table_from_rows(rows, schema)
    except results.ResultValueError as error:  # it names the value, its column and its run
        raise ToolOutputError(f"{manifest_path}: {error}") from None
    except (ValueError, TypeError, pa.ArrowException) as error:
        raise ToolOutputError(
            f"{manifest_path}: the parsed rows do not fit the result schema: {error}"
        ) from None


def iteration_rows(manifest_path: str, *, with_timeseries: bool = False):
    """(result rows, per-interval rows or None) of one iteration; the standard library only."""
    manifest_file = Path(manifest_path)
    manifest = read_manifest(manifest_file)
    with reading_manifest(manifest_file):
        return manifest_rows(manifest, manifest_file.parent, with_timeseries)


@contextlib.contextmanager
def reading_manifest(path: Path):
    """Rows from a manifest of a shape storbench does not write (edited by hand, damaged): a
    ToolOutputError naming it. The tool's own output is named by reading_output."""
    try:
        yield
    except ToolOutputError:
        raise
    except UNEXPECTED_SHAPE as error:
        raise ToolOutputError(
            f"{path}: not a run manifest as storbench writes it ({type(error).__name__}: {error})"
        ) from None


def manifest_rows(manifest: Manifest, folder: Path, with_timeseries: bool = False):
    """(result rows, per-interval rows or None) of the iteration whose manifest sits in
    folder (its raw files in folder / manifest.raw_dir)."""
    raw_dir = folder / manifest.raw_dir
    hosts = manifest.hosts
    tool = get_tool(manifest.tool)
    offered = tool.offered_iops(manifest.params, len(hosts))
    base = {
        "experiment": manifest.experiment,
        "run_id": manifest.run_id,
        "iteration": manifest.iteration,
        "attempt": manifest.attempt,
        "tool": manifest.tool,
        "params_json": json.dumps(manifest.params, sort_keys=True),
        "job_file_sha256": manifest.job_file_sha256,
        # a service run's hosts share the controller's command, kept once (not once per host)
        "command": " ".join((manifest.controller or {}).get("command") or hosts[0]["command"]),
        "raw_path": str(raw_dir),
        "start_time": min(h["start_time"] for h in hosts),
        "end_time": max(h["end_time"] for h in hosts),
        "step": manifest.step,
        "hosts_in_run": len(hosts),
        "target": manifest.target.get("name"),
        "start_skew_s": start_skew_s(hosts),
        "prep_state": manifest.prep_state,
        "loop": "closed" if offered is None else "open",
        "offered_iops": offered,
    }
    with reading_output(raw_dir, manifest.tool):
        rows = with_host_times(tool.parse(manifest, raw_dir, base), hosts)
    if manifest.target.get("members"):
        rows = with_target_set_rows(rows, manifest.target)
    series = None
    if with_timeseries:
        identity = {k: base[k] for k in ("experiment", "run_id", "iteration", "attempt", "tool")}
        with reading_output(raw_dir, manifest.tool):
            series = tool.parse_timeseries(manifest, raw_dir, identity)
    return rows, series


def read_manifest(path: Path) -> Manifest:
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ToolOutputError(f"{path}: cannot read the run manifest: {error.strerror}") from None
    except ValueError as error:  # not JSON, or not UTF-8
        raise ToolOutputError(f"{path}: not a run manifest (JSON): {error}") from None
    if not isinstance(manifest, dict):
        raise ToolOutputError(f"{path}: not a run manifest (a JSON object)")
    try:
        return Manifest.from_dict(manifest)
    except SpecError as error:
        raise ToolOutputError(f"{path}: not a run manifest: {error}") from None


def with_host_times(rows: list[dict], hosts: Sequence[dict]) -> list[dict]:
    """Per-host rows carry their own host's start and end; 'all' rows keep the run's span."""
    times = {h["name"]: (h.get("start_time"), h.get("end_time")) for h in hosts}
    for row in rows:
        if row.get("host") in times:
            row["start_time"], row["end_time"] = times[row["host"]]
    return rows


def with_target_set_rows(rows: list[dict], target: dict) -> list[dict]:
    """A run on a whole target set: each job section is one target; add the sum over them."""

    members = {member["name"] for member in target["members"]}
    for row in rows:
        if row.get("job") in members:
            row["target"] = row["job"]
    per_host = [
        {**row, "job": target["name"], "target": target["name"]}
        for row in rows
        if row.get("host") != ALL_HOSTS and row.get("job") in members
    ]
    return rows + aggregate_hosts(per_host)


def gather(parsed_paths: list[str], output_path: str, timeseries_output: str | None = None) -> int:
    """One Parquet of every result row; the per-interval files go to timeseries_output."""
    series = sorted(p for p in parsed_paths if p.endswith(TIMESERIES_SUFFIX))
    table = results.read_parquet(sorted(set(parsed_paths) - set(series)))
    outputs = [(table, output_path)]
    if timeseries_output:
        outputs.append((results.read_parquet(series, results.TIMESERIES_SCHEMA), timeseries_output))
    results.write_parquets(outputs)
    return table.num_rows


TIMESERIES_SUFFIX = ".timeseries.parquet"
