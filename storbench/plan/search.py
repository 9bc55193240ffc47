"""Latency-SLO search experiments: their settings, and one probe job of the search.

A search experiment has a chain of probe jobs ``p01`` ... ``pNN`` (N = :func:`probe_budget`).
Each probe job reads the markers of the probes before it, asks ``slo_search.next_probe``
what to run, runs that fio job on every host and publishes its marker
``results/<experiment>/search/<probe>.json``; once the search is done the remaining probes
publish a ``done`` marker without touching a host. A killed search resumes at its first
missing marker, and the decision is the same because it depends only on the markers.

Run ids tell the probe's loop: ``qd8`` (closed loop, queue depth 8), ``rate95000`` (open
loop, 95,000 IOPS offered over all hosts and jobs) and ``rate95000-confirm`` (confirmation
runs, one iteration each). The standard library only until the run has finished.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path

from storbench.analysis import slo_search
from storbench.core import atomic
from storbench.core.schema_names import ALL_HOSTS, PERCENTILES

DEFAULT_MAX_IODEPTH = 64
DEFAULT_MAX_PROBES = 12
# The search sets these itself for every probe.
SEARCH_OPTIONS = ("iodepth", "rate_iops", "rate", "rate_min", "rate_process", "rate_cycle")
_PROBE_ID = re.compile(r"^p(\d+)$")


class SearchError(RuntimeError):
    pass


def settings(key: str, spec: dict, problems: list[str]) -> dict | None:
    """The search settings of an experiment's config, or None after appending problems."""
    search = spec["search"]
    before = len(problems)
    for option, reason in (
        ("sweep", "a search finds its own queue depths and rates; run one workload"),
        ("schedule", "a search runs one workload"),
        ("steps", "client stepping is not combined with a search"),
        ("job_file", "the search renders each probe's job; use job or a template"),
        ("rwmixreadhost", "a host-level read/write split is not combined with a search"),
    ):
        if option in spec:
            problems.append(f"{key}.{option}: not allowed with search ({reason})")
    if spec["tool"] != "fio":
        problems.append(f"{key}.search: only fio is supported (rate_iops), not {spec['tool']!r}")
    if not isinstance(spec["target"], str) and len(spec["target"]) > 1:
        problems.append(f"{key}.target: a search runs on one target, not a target set")
    if spec.get("execution", "standalone") != "standalone":
        problems.append(f"{key}.execution: a search runs standalone")
    job = spec.get("job") or {}
    for option in SEARCH_OPTIONS:
        if option in job:
            problems.append(f"{key}.job.{option}: set by the search for each probe; remove it")
    if "runtime" not in job:
        problems.append(f"{key}.job.runtime: a search needs a runtime for each probe (e.g. 10s)")
    numjobs = job.get("numjobs", 1)
    if not isinstance(numjobs, int) or isinstance(numjobs, bool) or numjobs < 1:
        problems.append(f"{key}.job.numjobs: a search needs a whole number >= 1, not {numjobs!r}")
    objective = _objective(key, search, problems)
    if objective is None or len(problems) > before:
        return None
    max_iodepth = int(search.get("max_iodepth", DEFAULT_MAX_IODEPTH))
    max_probes = int(search.get("max_probes", DEFAULT_MAX_PROBES))
    iterations = int(spec.get("iterations", 1))
    return {
        "objective": asdict(objective),
        "max_iodepth": max_iodepth,
        "max_probes": max_probes,
        "iterations": iterations,
        "arrivals": search.get("arrivals", "poisson"),
        "probes": probe_budget(max_iodepth, max_probes, iterations),
    }


def _objective(key: str, search: dict, problems: list[str]) -> slo_search.Objective | None:
    fields = {**search["objective"]}
    for name in ("tolerance", "min_achieved"):
        if name in search:
            fields[name] = search[name]
    try:
        return slo_search.Objective.from_config(fields)
    except ValueError as error:
        field, _, reason = str(error).partition(": ")
        name = field.removeprefix("Objective.")
        where = f"objective.{name}" if name in ("limit", "latency", "metric") else name
        problems.append(f"{key}.search.{where}: {reason or error}")
        return None


CONFIRMATION_ROUNDS = 4  # a noisy target near the limit can fail a few confirmation rounds


def probe_budget(max_iodepth: int, max_probes: int, iterations: int) -> int:
    """Probe jobs in the chain: the ladder, the bisection, and rounds of confirmations."""
    ladder = len(slo_search.qd_ladder(max_iodepth))
    return ladder + max_probes + CONFIRMATION_ROUNDS * iterations


def probe_ids(search_settings: dict) -> list[str]:
    return [f"p{n:02d}" for n in range(1, search_settings["probes"] + 1)]


def probe_marker(experiment: str, probe: str) -> str:
    return f"results/{experiment}/search/{probe}.json"


def objective_of(spec: dict) -> slo_search.Objective:
    return slo_search.Objective(**spec["search"]["objective"])


def history_of(markers: list[dict]) -> list[slo_search.Probe]:
    return [slo_search.Probe.from_dict(m["measured"]) for m in markers if m["action"] != "done"]


def read_markers(paths: list[str]) -> list[dict]:
    """Probe markers in probe order."""
    markers = [json.loads(Path(path).read_text()) for path in paths]
    return sorted(markers, key=lambda marker: _probe_number(marker["probe"]))


def _probe_number(probe: str) -> int:
    match = _PROBE_ID.match(probe)
    if not match:
        raise SearchError(f"not a probe id: {probe!r} (expected p01, p02 ...)")
    return int(match.group(1))


def search_options(spec: dict) -> dict:
    """next_probe's settings: fio's rate_iops is whole per job, so rates step by jobs."""
    search = spec["search"]
    jobs = len(spec["hosts"]) * int(spec["params"].get("numjobs", 1))
    return {
        "max_qd": search["max_iodepth"],
        "max_probes": search["max_probes"],
        "iterations": search["iterations"],
        "rate_step": float(jobs),
    }


def decide(spec: dict, markers: list[dict]) -> slo_search.Decision:
    return slo_search.next_probe(history_of(markers), objective_of(spec), **search_options(spec))


def probe_run(spec: dict, decision: slo_search.Decision, markers: list[dict]) -> dict:
    """Run id, iteration, fio options and the offered aggregate rate of a decision."""
    job = spec["params"]
    hosts = len(spec["hosts"])
    numjobs = int(job.get("numjobs", 1))
    if decision.action == slo_search.CLOSED:
        run_id = f"qd{decision.iodepth}"
        params = {**job, "iodepth": decision.iodepth}
        offered = None
    else:
        per_job = max(1, round(slo_search.split_rate(decision.offered_iops, hosts, numjobs)))
        offered = float(per_job * hosts * numjobs)
        depth = slo_search.iodepth_for_rate(per_job, objective_of(spec).limit_ns)
        arrivals = spec["search"].get("arrivals", "poisson")
        params = {**job, "iodepth": depth, "rate_iops": per_job, "rate_process": arrivals}
        run_id = f"rate{int(offered)}"
        if decision.action == slo_search.CONFIRM:
            run_id += "-confirm"
    iteration = 1 + sum(marker.get("run_id") == run_id for marker in markers)
    return {"run_id": run_id, "iteration": iteration, "params": params, "offered_iops": offered}


def run_probe(spec: dict, probe: str, history_paths: list[str], output: str) -> dict:
    """One probe job: decide from the earlier markers, run (or not), publish the marker."""
    number = _probe_number(probe)
    markers = read_markers(history_paths)
    earlier = [marker["probe"] for marker in markers]
    expected = [f"p{n:02d}" for n in range(1, number)]
    if earlier != expected:
        raise SearchError(
            f"{spec['experiment']}/{probe}: needs the markers of {', '.join(expected) or 'none'}"
            f", got {', '.join(earlier) or 'none'}"
        )
    decision = decide(spec, markers)
    marker = {"probe": probe, "action": decision.action, "reason": decision.reason}
    if decision.action != slo_search.DONE:
        run = probe_run(spec, decision, markers)
        manifest_path = _run(spec, run)
        parsed, rows = _parse(manifest_path, spec["experiment"], run)
        marker.update(
            run_id=run["run_id"],
            iteration=run["iteration"],
            iodepth=run["params"]["iodepth"],
            manifest=manifest_path,
            parsed=parsed,
        )
        poisson = run["params"].get("rate_process") == "poisson"
        marker["measured"] = measured_probe(
            decision.action, run, _all_hosts_rows(rows), poisson=poisson
        ).to_dict()
    atomic.write_json(output, marker)
    return marker


def _run(spec: dict, run: dict) -> str:
    from storbench.run import render, runner

    experiment = spec["experiment"]
    run_spec = {**spec, "run_id": run["run_id"], "params": run["params"]}
    job_path = f"results/{experiment}/jobs/{run['run_id']}.fio"
    render_spec = {
        **run_spec,
        "hosts": [host["name"] for host in spec["hosts"]],
        "point": {"iodepth": run["params"]["iodepth"]},
    }
    atomic.write_text(job_path, render.render_job(render_spec))
    if spec.get("preparation"):  # the target must still be in the state the run is tagged with
        from storbench.run import prepare

        run_spec.update(prepare.run_state(spec["preparation"], spec["hosts"]))
    manifest_path = f"results/{experiment}/raw/{run['run_id']}/it{run['iteration']}/run.json"
    runner.run_iteration(run_spec, run["iteration"], job_path, manifest_path)
    return manifest_path


def _parse(manifest_path: str, experiment: str, run: dict) -> tuple[str, list[dict]]:
    """The run's result Parquet (written as the parse rule would) and its rows."""
    from storbench.analysis import ingest

    parsed = f"results/{experiment}/parsed/{run['run_id']}/it{run['iteration']}.parquet"
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
    from storbench.core import histogram

    if not rows:
        raise SearchError(f"{run['run_id']}: the run completed no I/O")
    if not all(row["hist_ns"] for row in rows):
        raise SearchError(f"{run['run_id']}: fio gave no latency histogram (json+ output)")
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


def search_result(spec: dict, markers: list[dict]) -> dict:
    """The search's answer from all its markers, with the probes in order."""
    search = spec["search"]
    objective = objective_of(spec)
    history = history_of(markers)
    answer = slo_search.result(history, objective, **search_options(spec))
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
        "experiment": spec["experiment"],
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


def limit_label(limit_ns: float) -> str:
    """2e6 -> '2 ms', 500e3 -> '500 µs'."""
    if limit_ns >= 1e6:
        return f"{limit_ns / 1e6:g} ms"
    return f"{limit_ns / 1e3:g} µs"


def gather(spec: dict, marker_paths: list[str], output: str, summary: str, timeseries: str):
    """search.json, and the probes' result rows in summary.parquet and timeseries.parquet."""
    from storbench.analysis import ingest

    result = search_result(spec, read_markers(marker_paths))
    series = [p.replace(".parquet", ingest.TIMESERIES_SUFFIX) for p in result["parsed"]]
    ingest.gather(result["parsed"] + series, summary, timeseries)
    atomic.write_json(output, result)
    return result
