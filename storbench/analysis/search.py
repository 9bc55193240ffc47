"""One probe job of a latency-SLO search through the run engine, and the search's result."""

from __future__ import annotations

from storbench.config.search import limit_label, probe_budget
from storbench.core import atomic, histogram, paths
from storbench.core.schema_names import ALL_HOSTS, PERCENTILES
from storbench.core.specs import ProbeSpec
from storbench.plan import slo_search
from storbench.plan.search import (
    SearchError,
    decide,
    history_of,
    objective_of,
    probe_number,
    probe_run,
    read_markers,
    search_options,
)
from storbench.run import engine as runner
from storbench.run import prepare, render
from storbench.tools import get_tool


def run_probe(
    spec: ProbeSpec, probe: str, history_paths: list[str], output: str, log_path: str | None = None
) -> dict:
    """One probe job: decide from the earlier markers, run (or not), publish the marker.

    log_path: the probe's log, kept by its run's log name for each attempt (attempt.keep_log)."""
    number = probe_number(probe)
    markers = read_markers(history_paths)
    earlier = [marker["probe"] for marker in markers]
    expected = [f"p{n:02d}" for n in range(1, number)]
    if earlier != expected:
        raise SearchError(
            f"{spec.experiment}/{probe}: needs the markers of {', '.join(expected) or 'none'}"
            f", got {', '.join(earlier) or 'none'}"
        )
    decision = decide(spec, markers)
    marker: dict = {"probe": probe, "action": decision.action, "reason": decision.reason}
    if decision.action != slo_search.DONE:
        run = probe_run(spec, decision, markers)
        manifest_path = _run(spec, run, log_path)
        parsed, rows = _parse(manifest_path, spec.experiment, run)
        marker.update(
            run_id=run["run_id"],
            iteration=run["iteration"],
            iodepth=run["params"]["iodepth"],
            manifest=manifest_path,
            parsed=parsed,
        )
        open_loop = decision.action != slo_search.CLOSED
        poisson = open_loop and spec.search.get("arrivals", "poisson") == "poisson"
        marker["measured"] = measured_probe(
            decision.action, run, _all_hosts_rows(rows), poisson=poisson
        ).to_dict()
    atomic.write_json(output, marker)
    return marker


def _run(spec: ProbeSpec, run: dict, log_path: str | None) -> str:
    job_path = paths.job(spec.experiment, run["run_id"], get_tool(spec.tool).job_suffix)
    point = {"iodepth": run["params"]["iodepth"]}
    render_spec = spec.render_spec(run["run_id"], run["params"], point)
    atomic.write_text(job_path, render.render_job(render_spec))
    run_spec = spec.run_spec(run["run_id"], run["params"])
    if run_spec.preparation:  # the target must still be in the state the run is tagged with
        run_spec = run_spec.with_state(prepare.run_state(run_spec.preparation, list(spec.hosts)))
    manifest_path = paths.manifest(spec.experiment, run["run_id"], run["iteration"])
    # by the run's log name: one probe may run another run when it runs again after a change
    run_log = paths.run_log(spec.experiment, run["run_id"], run["iteration"])
    runner.run_iteration(run_spec, run["iteration"], job_path, manifest_path, log_path, run_log)
    return manifest_path


def _parse(manifest_path: str, experiment: str, run: dict) -> tuple[str, list[dict]]:
    """The run's result Parquet (written as the parse rule would) and its rows."""
    from storbench.analysis import ingest  # lazy: loads numpy, pyarrow

    parsed = paths.parsed(experiment, run["run_id"], run["iteration"])
    timeseries = parsed.replace(".parquet", ingest.TIMESERIES_SUFFIX)
    return parsed, ingest.parse_iteration(manifest_path, parsed, timeseries)


def _all_hosts_rows(rows: list[dict]) -> list[dict]:
    return [row for row in rows if row["host"] == ALL_HOSTS and (row.get("ios") or 0) > 0]


def measured_probe(
    phase: str, run: dict, rows: list[dict], *, poisson: bool = True
) -> slo_search.Probe:
    """The probe as the search sees it: IOPS summed over ops, latency from merged bins.

    With Poisson arrivals the probe carries its duration, which gives its achieved rate the
    allowance for the randomness of the arrival count (``slo_search.meets``)."""

    if not rows:
        raise SearchError(f"{run['run_id']}: the run completed no I/O")
    if not all(row["hist_ns"] for row in rows):
        raise SearchError(f"{run['run_id']}: the tool gave no latency histogram for every row")
    values, counts = histogram.merge((row["hist_ns"], row["hist_count"]) for row in rows)
    percentiles = histogram.percentiles(values, counts, PERCENTILES)
    ios = sum(row["ios"] for row in rows)
    latency = {f"p{p:g}": value for p, value in zip(PERCENTILES, percentiles, strict=True)}
    latency["mean"] = sum(row["lat_mean_ns"] * row["ios"] for row in rows) / ios
    durations = [row["duration_s"] for row in rows if row.get("duration_s")]
    return slo_search.Probe(
        phase=phase,
        iodepth=run["params"]["iodepth"] if phase == slo_search.CLOSED else None,
        offered_iops=run["offered_iops"],
        achieved_iops=float(sum(row["iops"] for row in rows)),
        latency_ns=latency,
        duration_s=max(durations) if durations and poisson else None,
    )


def search_result(spec: ProbeSpec, markers: list[dict]) -> dict:
    """The search's answer from all its markers, with the probes in order."""
    search = spec.search
    objective = objective_of(spec)
    history = history_of(markers)
    answer = slo_search.result(history, objective, **search_options(spec))
    if search.get("block_size") and answer.get("rate_iops") is not None:
        answer["bw_bytes_s"] = answer["rate_iops"] * search["block_size"]
    if answer["status"] == slo_search.RUNNING:
        answer["status"] = "unfinished"
        answer["reason"] = (
            f"unfinished after {len(markers)} probes; next would be: {answer['reason']}"
        )
    ran = [m for m in markers if m["action"] != "done"]
    probes = [
        {
            "probe": m["probe"],
            "phase": m["action"],
            "run_id": m["run_id"],
            "iteration": m["iteration"],
            "iodepth": m["iodepth"],
            "offered_iops": m["measured"]["offered_iops"],
            "achieved_iops": m["measured"]["achieved_iops"],
            "latency_ns": m["measured"]["latency_ns"],
            "meets": slo_search.meets(slo_search.Probe.from_dict(m["measured"]), objective),
            "reason": m["reason"],
        }
        for m in ran
    ]
    return {
        "experiment": spec.experiment,
        "objective": search["objective"],
        "limit": limit_label(objective.limit_ns),
        "settings": {
            **{k: search.get(k) for k in ("max_iodepth", "max_probes", "iterations", "arrivals")},
            "probes": probe_budget(
                search["max_iodepth"], search["max_probes"], search["iterations"]
            ),
        },
        "answer": answer,
        "probes": probes,
        "parsed": [m["parsed"] for m in ran],
    }


def gather(spec: ProbeSpec, marker_paths: list[str], output: str, summary: str, timeseries: str):
    """search.json, and the probes' result rows in summary.parquet and timeseries.parquet."""
    from storbench.analysis import ingest  # lazy: loads numpy, pyarrow

    result = search_result(spec, read_markers(marker_paths))
    series = [p.replace(".parquet", ingest.TIMESERIES_SUFFIX) for p in result["parsed"]]
    ingest.gather(result["parsed"] + series, summary, timeseries)
    atomic.write_json(output, result)
    return result
