"""A search's probes as plan: which run the next probe is, decided from the probes before it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from storbench.config.search import Objective
from storbench.core.specs import ProbeSpec
from storbench.plan import slo_search
from storbench.tools import get_tool

_PROBE_ID = re.compile(r"^p(\d+)$")


class SearchError(RuntimeError):
    pass


def objective_of(spec: ProbeSpec) -> Objective:
    return Objective(**spec.search["objective"])


def history_of(markers: list[dict]) -> list[slo_search.Probe]:
    return [slo_search.Probe.from_dict(m["measured"]) for m in markers if m["action"] != "done"]


def read_markers(paths: list[str]) -> list[dict]:
    """Probe markers in probe order."""
    markers = [json.loads(Path(path).read_text()) for path in paths]
    return sorted(markers, key=lambda marker: probe_number(marker["probe"]))


def probe_number(probe: str) -> int:
    match = _PROBE_ID.match(probe)
    if not match:
        raise SearchError(f"not a probe id: {probe!r} (expected p01, p02 ...)")
    return int(match.group(1))


def search_options(spec: ProbeSpec) -> dict:
    """next_probe's settings: a rate is whole per worker, so rates step by workers."""
    search = spec.search
    jobs = len(spec.hosts) * get_tool(spec.tool).jobs_per_host(spec.params)
    return {
        "max_qd": search["max_iodepth"],
        "max_probes": search["max_probes"],
        "iterations": search["iterations"],
        "rate_step": float(jobs),
    }


def decide(spec: ProbeSpec, markers: list[dict]) -> slo_search.Decision:
    return slo_search.next_probe(history_of(markers), objective_of(spec), **search_options(spec))


def probe_run(spec: ProbeSpec, decision: slo_search.Decision, markers: list[dict]) -> dict:
    """Run id, iteration, job options and the offered aggregate rate of a decision."""
    tool = get_tool(spec.tool)
    job = spec.params
    hosts = len(spec.hosts)
    numjobs = tool.jobs_per_host(job)
    if decision.action == slo_search.CLOSED:
        if decision.iodepth is None:
            raise SearchError(f"a closed-loop probe without a queue depth: {decision}")
        run_id = f"qd{decision.iodepth}"
        params = tool.probe_options(job, decision.iodepth, None, None)
        offered = None
    else:
        if decision.offered_iops is None:
            raise SearchError(f"an open-loop probe without an offered rate: {decision}")
        per_job = max(1, round(slo_search.split_rate(decision.offered_iops, hosts, numjobs)))
        offered = float(per_job * hosts * numjobs)
        depth = slo_search.iodepth_for_rate(per_job, objective_of(spec).limit_ns)
        arrivals = spec.search.get("arrivals", "poisson")
        params = tool.probe_options(job, depth, per_job, arrivals)
        run_id = f"rate{int(offered)}"
        if decision.action == slo_search.CONFIRM:
            run_id += "-confirm"
    iteration = 1 + sum(marker.get("run_id") == run_id for marker in markers)
    return {"run_id": run_id, "iteration": iteration, "params": params, "offered_iops": offered}
