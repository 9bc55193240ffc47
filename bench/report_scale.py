"""Report generation time for a 1,000-run campaign of synthetic result rows.

Rows in the result schema (storbench.core.results.SCHEMA) for one fio experiment on one host:
rw (4) x bs (5) x iodepth (10) x numjobs (5) = 1,000 runs, 3 iterations each, one row per
run, iteration and op on host 'localhost' with a latency histogram (150 log-spaced bins,
counts from a log-normal shape) and percentiles computed from it, and the host 'all' rows
made by storbench.core.aggregate.aggregate_hosts, as the parse step makes them. So every figure
and table runs on full data, including the latency CDF from merged bins. The Parquet goes
to a temporary folder; then storbench.report.experiment.build_report is timed in this process (after
its imports) and the `storbench report` command end to end (a fresh interpreter, as the
workflow runs it), each with an empty figure cache and then again with the figures cached
(a rebuild of the same data draws none; storbench.report.drawing). The figures are drawn
by as many processes as this process has cores. Writes bench/out/report_scale.json with
the seconds and row counts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from common import BIN, print_table, timed_command, write_result

from storbench.core import results

sys.path[:0] = [str(Path(__file__).resolve().parents[1])]  # tests.report.synthetic_sweep
from tests.report.synthetic_sweep import (  # noqa: E402
    BINS,
    ITERATIONS,
    QUICK_IODEPTH,
    SWEEP,
    report_meta,
    synthetic_rows,
)


def time_build_report(
    summary: Path, out_dir: Path, meta: dict, cache: Path
) -> tuple[float, float, int]:
    """(import seconds, build_report seconds, files written) in this process."""
    start = time.perf_counter()
    from storbench.report import experiment as report

    imported = time.perf_counter()
    written = report.build_report(
        summary, out_dir, title=meta["title"], meta=meta, figure_cache=cache
    )
    return imported - start, time.perf_counter() - imported, len(written)


def time_cli(summary: Path, out_dir: Path, meta: dict, cache: Path) -> float:
    command = [
        str(BIN / "storbench"),
        "report",
        "--summary", str(summary),
        "--out-dir", str(out_dir),
        "--figure-cache", str(cache),
        "--meta", json.dumps(meta),
    ]  # fmt: skip
    return timed_command(command, out_dir.parent)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 runs instead of 1,000")
    args = parser.parse_args()
    sweep = {**SWEEP, "iodepth": QUICK_IODEPTH} if args.quick else SWEEP
    meta = report_meta(sweep)
    with tempfile.TemporaryDirectory(prefix="storbench-report-scale-") as scratch_name:
        scratch = Path(scratch_name)
        summary = scratch / "summary.parquet"
        rows = synthetic_rows(sweep)
        results.write_rows(rows, summary)
        in_process, cli = scratch / "in-process", scratch / "cli"
        import_s, build_s, files = time_build_report(summary, in_process, meta, scratch / "cache")
        _, cached_s, _ = time_build_report(summary, in_process, meta, scratch / "cache")
        cli_s = time_cli(summary, cli, meta, scratch / "cli-cache")
        cli_cached_s = time_cli(summary, cli, meta, scratch / "cli-cache")
        parquet_mb = summary.stat().st_size / 1e6
    result = {
        "runs": len(meta["run_ids"]),
        "iterations": ITERATIONS,
        "rows": len(rows),
        "rows_host_all": sum(row["host"] == "all" for row in rows),
        "histogram_bins_per_row": BINS,
        "parquet_mb": round(parquet_mb, 2),
        "build_report_s": round(build_s, 2),
        "report_import_s": round(import_s, 2),
        "storbench_report_cli_s": round(cli_s, 2),
        "build_report_cached_s": round(cached_s, 2),
        "storbench_report_cli_cached_s": round(cli_cached_s, 2),
        "figure_workers": len(os.sched_getaffinity(0)),
        "files_written": files,
        "python": sys.version.split()[0],
        "note": "no per-interval series and no telemetry: those sections are empty",
    }
    write_result("report_scale", result)
    print_table(
        f"report of {result['runs']} runs x {ITERATIONS} iterations",
        [
            ("rows", result["rows"]),
            ("build_report s", result["build_report_s"]),
            ("storbench report (CLI) s", result["storbench_report_cli_s"]),
            ("build_report, figures cached s", result["build_report_cached_s"]),
            ("storbench report (CLI), figures cached s", result["storbench_report_cli_cached_s"]),
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
