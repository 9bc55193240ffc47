"""Latency-SLO search experiments: config checks, probe arithmetic, and a real search.

The real search runs fio's null engine with ``thinktime`` on the local host: every I/O is
followed by 1 ms of think time, so one job cannot exceed about 1,000 IOPS whatever the
queue depth or the offered rate. That is a target whose capacity is known in advance.
"""

from __future__ import annotations

import copy
import csv
import json
import math

import pyarrow.parquet as pq
import pytest

from storbench.analysis import search as search_probe
from storbench.config import campaign as config
from storbench.config import search as search_settings
from storbench.core.results import ALL_HOSTS
from storbench.core.specs import ProbeSpec
from storbench.plan import search, slo_search
from storbench.plan import specs as plan_specs
from tests.workflow.test_workflow import planned_jobs, snakemake

THINK_TIME_US = 1000


def search_config(target_dir, **search_overrides) -> dict:
    return {
        "hosts": {"localhost": {"transport": "local"}},
        "targets": {"scratch": {"type": "directory", "path": str(target_dir)}},
        "experiments": {
            "slo": {
                "tool": "fio",
                "hosts": "localhost",
                "target": "scratch",
                "iterations": 2,
                "job": {
                    "rw": "randread",
                    "bs": "4k",
                    "size": "16MiB",
                    "ioengine": "null",
                    "numjobs": 1,
                    "runtime": "2s",
                    "thinktime": f"{THINK_TIME_US}us",
                },
                "search": {
                    "objective": {"metric": "iops", "latency": "p99", "limit": "1ms"},
                    "max_iodepth": 4,
                    "max_probes": 8,
                    **search_overrides,
                },
            }
        },
    }


def problems_of(raw: dict) -> list[str]:
    with pytest.raises(config.ConfigError) as error:
        config.load_campaign(raw)
    return error.value.problems


def test_settings_and_probe_budget(tmp_path):
    campaign = config.load_campaign(search_config(tmp_path))
    settings = campaign.experiments["slo"].search
    assert settings["objective"] == {
        "limit_ns": 1_000_000.0,
        "latency": "p99",
        "metric": "iops",
        "tolerance": 0.02,
        "min_achieved": 0.99,
    }
    # ladder 1, 2, 4 + 8 bisection probes + 4 rounds of 2 confirmations
    assert settings["probes"] == 3 + 8 + 8
    assert search_settings.probe_ids(settings)[-1] == "p19"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda e: e.update(sweep={"bs": ["4k", "8k"]}), "experiments.slo.sweep: not allowed"),
        (lambda e: e["job"].update(iodepth=8), "experiments.slo.job.iodepth: set by the search"),
        (lambda e: e["job"].update(rate_iops=100), "experiments.slo.job.rate_iops: set by"),
        (lambda e: e["job"].pop("runtime"), "experiments.slo.job.runtime: a search needs"),
        (
            lambda e: e["job"].update(numjobs="{cores}"),
            "experiments.slo.job.numjobs: a latency-SLO search runs one job on every host",
        ),
        (
            lambda e: e["search"]["objective"].update(limit="fast"),
            "experiments.slo.search.objective.limit: not a duration",
        ),
        (
            lambda e: e["search"].update(tolerance="80%"),
            "experiments.slo.search.tolerance: must be in (0, 0.5]",
        ),
        (lambda e: e.update(execution="service"), "experiments.slo.execution: a search runs"),
    ],
)
def test_bad_search_config_names_the_key(tmp_path, change, expected):
    raw = search_config(tmp_path)
    change(raw["experiments"]["slo"])
    problems = problems_of(raw)
    assert any(problem.startswith(expected) for problem in problems), problems


def test_schema_rejects_an_unknown_latency(tmp_path):
    raw = search_config(tmp_path)
    raw["experiments"]["slo"]["search"]["objective"]["latency"] = "p95"
    assert any("latency" in problem for problem in problems_of(raw))


def spec_for(hosts: int, numjobs: int) -> ProbeSpec:
    return ProbeSpec.from_dict({
        "experiment": "slo",
        "target": {"name": "t", "type": "directory", "path": "/tmp"},
        "timeout_s": 60,
        "tool": "fio",
        "params": {"rw": "randread", "numjobs": numjobs, "runtime": "2s"},
        "hosts": [{"name": f"h{i}"} for i in range(hosts)],
        "search": {
            "objective": {"limit_ns": 2e6, "latency": "p99", "metric": "iops",
                          "tolerance": 0.02, "min_achieved": 0.99},
            "max_iodepth": 8, "max_probes": 4, "iterations": 3,
        },
    })  # fmt: skip


def test_open_probe_splits_the_rate_over_hosts_and_jobs():
    spec = spec_for(hosts=2, numjobs=2)
    decision = slo_search.Decision("open", None, 10_000.0, "bisection")
    run = search.probe_run(spec, decision, [])
    # 10,000 over 4 jobs = 2,500 per job; Little's law at 2 ms with 2x headroom: 2500*0.002*2
    assert run["params"]["rate_iops"] == 2500
    assert run["params"]["rate_process"] == "poisson"
    assert run["params"]["iodepth"] == 10
    assert run["offered_iops"] == 10_000.0
    assert (run["run_id"], run["iteration"]) == ("rate10000", 1)


def test_confirmations_are_iterations_of_one_run_id():
    spec = spec_for(hosts=1, numjobs=1)
    decision = slo_search.Decision("confirm", None, 4_000.0, "confirmation")
    earlier = [{"run_id": "rate4000"}, {"run_id": "rate4000-confirm"}]
    run = search.probe_run(spec, decision, earlier)
    assert (run["run_id"], run["iteration"]) == ("rate4000-confirm", 2)
    closed = search.probe_run(spec, slo_search.Decision("closed", 4, None, "ladder"), earlier)
    assert (closed["run_id"], closed["params"]["iodepth"], closed["offered_iops"]) == (
        "qd4",
        4,
        None,
    )


def test_rates_step_by_the_number_of_jobs():
    spec = spec_for(hosts=3, numjobs=2)
    assert search.search_options(spec)["rate_step"] == 6.0
    # a closed-loop ladder that ends at 1,003 IOPS within the limit: the hint steps down to 1,002
    history = [
        slo_search.Probe("closed", depth, None, 1003.0, {"p99": 1e6}) for depth in (1, 2, 4, 8)
    ]
    decision = slo_search.next_probe(history, search.objective_of(spec), max_qd=8, rate_step=6.0)
    assert decision.action == "open"
    # bisection between the hint 1002 and 1.05 x 1003 = 1053.15, to the nearest step of 6
    assert decision.offered_iops == 1026.0


def test_measured_probe_merges_histograms_and_weights_the_mean():
    rows = [
        {"iops": 300.0, "ios": 600, "lat_mean_ns": 1000.0, "duration_s": 2.0,
         "hist_ns": [1000, 2000], "hist_count": [500, 100]},
        {"iops": 100.0, "ios": 200, "lat_mean_ns": 5000.0, "duration_s": 2.0,
         "hist_ns": [2000, 9000], "hist_count": [190, 10]},
    ]  # fmt: skip
    run = {"run_id": "rate400", "params": {"iodepth": 3}, "offered_iops": 400.0}
    probe = search_probe.measured_probe("open", run, rows)
    assert probe.achieved_iops == 400.0
    assert probe.offered_iops == 400.0 and probe.iodepth is None
    # merged: 1000 x 500, 2000 x 290, 9000 x 10 of 800 I/Os
    assert probe.latency_ns["p50"] == 1000
    assert probe.latency_ns["p90"] == 2000
    assert probe.latency_ns["p99.9"] == 9000
    assert probe.latency_ns["mean"] == (1000 * 600 + 5000 * 200) / 800
    assert probe.duration_s == 2.0
    assert search_probe.measured_probe("open", run, rows, poisson=False).duration_s is None


def test_poisson_allowance_in_meets():
    objective = slo_search.Objective(limit_ns=1e6)
    # 5,000 IOPS offered for 2 s: sd of the arrival count = sqrt(10,000) = 100 I/Os = 50 IOPS
    allowance = slo_search.POISSON_SIGMAS * 50.0
    required = 0.99 * 5000 - allowance
    latency = {"p99": 5e5}
    near = slo_search.Probe("open", None, 5000.0, required + 0.5, latency, duration_s=2.0)
    short = slo_search.Probe("open", None, 5000.0, required - 0.5, latency, duration_s=2.0)
    assert slo_search.meets(near, objective) and not slo_search.meets(short, objective)
    no_duration = slo_search.Probe("open", None, 5000.0, required + 0.5, latency)
    assert not slo_search.meets(no_duration, objective)


# --- a real search ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def finished_search(tmp_path_factory):
    """A search stopped after four probes, then resumed to the end."""
    workdir = tmp_path_factory.mktemp("search")
    # evenly spaced arrivals: fio 3.33's Poisson mode alone can miss the offered rate by 10 %
    raw = search_config(workdir / "target", arrivals="linear")
    snakemake(workdir, raw, "results/slo/search/p04.json")
    first = {
        probe: (workdir / f"results/slo/search/{probe}.json").stat().st_mtime_ns
        for probe in ("p01", "p02", "p03", "p04")
    }
    assert not (workdir / "results/slo/search/p05.json").exists()
    snakemake(workdir, raw)
    return workdir, first


def markers_of(workdir) -> list[dict]:
    paths = sorted((workdir / "results/slo/search").glob("p*.json"))
    return [json.loads(path.read_text()) for path in paths]


def test_resumed_search_keeps_the_probes_it_had(finished_search):
    workdir, first = finished_search
    for probe, mtime in first.items():
        assert (workdir / f"results/slo/search/{probe}.json").stat().st_mtime_ns == mtime
    markers = markers_of(workdir)
    assert [m["probe"] for m in markers] == [f"p{n:02d}" for n in range(1, 20)]
    # every run ran exactly once: a single attempt folder per probe run
    for marker in markers:
        if marker["action"] != "done":
            raw = workdir / marker["manifest"]
            assert sorted(p.name for p in raw.parent.glob("a*")) == ["a1"]


def test_search_runs_the_ladder_then_open_loop_then_confirmations(finished_search):
    workdir, _ = finished_search
    actions = [m["action"] for m in markers_of(workdir)]
    ran = [a for a in actions if a != "done"]
    assert ran[:3] == ["closed", "closed", "closed"]
    assert ran[-2:] == ["confirm", "confirm"]
    assert actions[len(ran) :] == ["done"] * (len(actions) - len(ran))


def test_probe_values_are_fios_own_numbers(finished_search):
    workdir, _ = finished_search
    rows = pq.read_table(workdir / "results/slo/summary.parquet").to_pylist()
    for marker in markers_of(workdir):
        if marker["action"] == "done":
            continue
        mine = [
            r
            for r in rows
            if r["run_id"] == marker["run_id"]
            and r["iteration"] == marker["iteration"]
            and r["host"] == ALL_HOSTS
            and r["ios"]
        ]
        assert mine, marker["probe"]
        measured = marker["measured"]
        assert measured["achieved_iops"] == pytest.approx(sum(r["iops"] for r in mine))
        fio_json = (workdir / marker["manifest"]).parent / "a1/localhost.json"
        fio = json.loads(fio_json.read_text())
        assert measured["achieved_iops"] == pytest.approx(fio["jobs"][0]["read"]["iops"])
        loop = "closed" if marker["action"] == "closed" else "open"
        assert {r["loop"] for r in mine} == {loop}
        assert {r["offered_iops"] for r in mine} == {measured["offered_iops"]}
        job = (workdir / f"results/slo/jobs/{marker['run_id']}.fio").read_text()
        assert f"iodepth={marker['iodepth']}\n" in job
        if loop == "open":
            assert f"rate_iops={int(measured['offered_iops'])}\n" in job
            assert "rate_process=linear\n" in job


def test_the_answer_is_bounded_by_the_think_time(finished_search):
    workdir, _ = finished_search
    result = json.loads((workdir / "results/slo/search.json").read_text())
    answer = result["answer"]
    assert answer["status"] == "found"
    # one job thinking 1 ms after every I/O cannot pass 1 / 1 ms = 1,000 IOPS
    peak = answer["closed"]["peak_iops"]
    assert peak < 1e6 / THINK_TIME_US
    objective = slo_search.Objective(**result["objective"])
    met = [p["offered_iops"] for p in result["probes"] if p["phase"] != "closed" and p["meets"]]
    assert answer["rate_iops"] == max(r for r in met if r < answer["bracket"][1])
    confirmations = [p for p in result["probes"] if p["phase"] == "confirm" and p["meets"]]
    assert [p["offered_iops"] for p in confirmations[-2:]] == [answer["rate_iops"]] * 2
    for probe in result["probes"]:
        recomputed = slo_search.meets(
            slo_search.Probe.from_dict({**probe, "duration_s": _duration(workdir, probe)}),
            objective,
        )
        assert probe["meets"] == recomputed
    assert answer["rate_iops"] <= 1.05 * peak


def _duration(workdir, probe) -> float:
    marker = json.loads((workdir / f"results/slo/search/{probe['probe']}.json").read_text())
    return marker["measured"]["duration_s"]


def test_report_lists_every_probe(finished_search):
    workdir, _ = finished_search
    result = json.loads((workdir / "results/slo/search.json").read_text())
    with open(workdir / "reports/slo/probes.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["probe"] for r in rows] == [p["probe"] for p in result["probes"]]
    for row, probe in zip(rows, result["probes"], strict=True):
        assert float(row["achieved_iops"]) == pytest.approx(probe["achieved_iops"])
        assert float(row["p99_us"]) == pytest.approx(probe["latency_ns"]["p99"] / 1000)
    html = (workdir / "reports/slo/index.html").read_text()
    rate = f"{result['answer']['rate_iops']:,.0f} IOPS sustained with p99 ≤ 1 ms"
    assert rate in html
    assert "data:image/png;base64," in html
    assert (workdir / "reports/slo/search.svg").stat().st_size > 0
    assert math.isfinite(float(rows[0]["achieved_iops"]))


def test_a_bandwidth_objective_needs_one_block_size(tmp_path):
    """Elastifile's question: the highest bandwidth with latency within the limit."""
    raw = search_config(tmp_path)
    raw["experiments"]["slo"]["search"]["objective"]["metric"] = "bandwidth"
    raw["experiments"]["slo"]["job"]["bs"] = "1m"
    settings = config.load_campaign(raw).experiments["slo"].search
    assert settings["objective"]["metric"] == "bandwidth" and settings["block_size"] == 1 << 20
    raw["experiments"]["slo"]["job"]["bs"] = "64k,1m"
    assert problems_of(raw) == [
        "experiments.slo.search.objective.metric: bandwidth needs one block size in job.bs "
        "(the search holds IOPS; bandwidth is IOPS x bs)"
    ]


def test_the_bandwidth_answer_is_the_iops_answer_times_the_block_size(finished_search):
    workdir, _ = finished_search
    markers = markers_of(workdir)
    campaign = config.load_campaign(search_config(workdir / "target", arrivals="linear"))
    spec = plan_specs.search_spec(campaign, "slo")
    iops_answer = search_probe.search_result(spec, markers)["answer"]
    assert "bw_bytes_s" not in iops_answer and iops_answer["rate_iops"] is not None
    search = {**spec.search, "block_size": 4096}
    search["objective"] = {**search["objective"], "metric": "bandwidth"}
    bandwidth = ProbeSpec.from_dict({**spec.to_dict(), "search": search})
    answer = search_probe.search_result(bandwidth, markers)["answer"]
    assert answer["rate_iops"] == iops_answer["rate_iops"]
    assert answer["bw_bytes_s"] == answer["rate_iops"] * 4096


def test_every_attempt_of_a_retried_probe_keeps_its_log(tmp_path):
    """Snakemake deletes a probe's log before each retry: each attempt's is kept by its run's
    log name (a probe that runs again after a change may run another run), naming a<N>."""
    raw = search_config(tmp_path / "target")
    job = raw["experiments"]["slo"]["job"]
    del job["ioengine"], job["thinktime"]
    job.update(direct=1, offset=100)  # EINVAL at the first read
    done = snakemake(tmp_path, raw, "results/slo/search/p01.json", "--retries", "2", check=False)
    assert done.returncode != 0
    logs = tmp_path / "results/slo/logs"
    kept = sorted(p.name for p in (logs / "run").iterdir())
    assert kept == [f"qd1.it1.log.attempt-{n}" for n in (1, 2, 3)]
    for attempt in (1, 2, 3):
        text = (logs / f"run/qd1.it1.log.attempt-{attempt}").read_text()
        assert text.startswith(f"storbench: attempt a{attempt}; this log is kept as")
        assert "Invalid argument" in text
        assert f"raw output kept in results/slo/raw/qd1/it1/a{attempt}" in text
    probe_log = (logs / "search/p01.log").read_text()
    assert probe_log == (logs / "run/qd1.it1.log.attempt-3").read_text()


def test_probes_whose_own_spec_changed_run_in_the_call_that_reruns_their_preflight(tmp_path):
    """Attempts kept on the host run the set-up step, preflight and the report again, not the
    probes; a new limit beside it runs them in that call too. Snakemake alone looked at
    preflight only in the call after the set-up step's (it waited by an ancient link), the
    probes and the report one after."""
    raw = search_config(tmp_path / "target", arrivals="linear", max_iodepth=2, max_probes=2)
    raw["experiments"]["slo"].update(iterations=1, setup="scratch")
    raw["setup"] = {"scratch": {"hosts": "localhost", "command": f"mkdir -p {tmp_path}/target"}}
    snakemake(tmp_path, raw)
    markers = sorted((tmp_path / "results/slo/search").glob("p*.json"))
    finished = {marker.name: marker.stat().st_mtime_ns for marker in markers}
    kept = copy.deepcopy(raw)
    kept["hosts"]["localhost"]["keep_attempts"] = 2
    jobs = planned_jobs(snakemake(tmp_path, kept, "-n"))
    again = ("host_setup", "preflight", "search_report")  # the report shows the config
    assert {rule: jobs.get(rule) for rule in again} == dict.fromkeys(again, 1)
    assert "search_probe" not in jobs
    snakemake(tmp_path, kept)
    assert planned_jobs(snakemake(tmp_path, kept, "-n")) == {}
    assert {marker.name: marker.stat().st_mtime_ns for marker in markers} == finished
    assert "keep_attempts: 2" in (tmp_path / "reports/slo/index.html").read_text()
    changed = copy.deepcopy(raw)
    changed["hosts"]["localhost"]["keep_attempts"] = 3
    changed["experiments"]["slo"]["search"]["objective"]["limit"] = "2ms"
    jobs = planned_jobs(snakemake(tmp_path, changed, "-n"))
    again = ("host_setup", "preflight", "search_probe", "search_gather")
    assert {rule: jobs.get(rule) for rule in again} == {
        "host_setup": 1, "preflight": 1, "search_probe": len(markers), "search_gather": 1,
    }  # fmt: skip
    snakemake(tmp_path, changed)
    assert planned_jobs(snakemake(tmp_path, changed, "-n")) == {}
    result = json.loads((tmp_path / "results/slo/search.json").read_text())
    assert result["limit"] == "2 ms"
