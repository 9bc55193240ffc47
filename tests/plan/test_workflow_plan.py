"""WorkflowPlan: what the rules' input functions get, by wildcard values, without Snakemake."""

from __future__ import annotations

import json

import pytest

from storbench.config.campaign import load_campaign
from storbench.core import paths
from storbench.plan.workflow import WorkflowPlan, WorkflowPlanError, lock_name, names_pattern


def campaign(tmp_path, **experiment_overrides):
    raw = {
        "hosts": {
            "local": {"transport": "local"},
            "pair": {"transport": "ssh", "nodes": "node[1-2]", "user": "root"},
        },
        "targets": {
            "scratch": {"type": "directory", "path": str(tmp_path / "a")},
            "other": {"type": "directory", "path": str(tmp_path / "b")},
            "minio": {
                "type": "s3",
                "endpoint": "http://127.0.0.1:9000",
                "bucket_prefix": "sb",
                "credentials": {"access_key_env": "AK", "secret_key_env": "SK"},
            },
        },
        "experiments": {
            "grid": {
                "tool": "fio",
                "hosts": "local",
                "target": "scratch",
                "iterations": 2,
                "job": {"size": "4MiB", "runtime": "1s"},
                "sweep": {"rw": ["read", "write"]},
                **experiment_overrides,
            },
            "sets": {
                "tool": "fio",
                "hosts": "pair",
                "target": ["scratch", "other"],
                "execution": "service",
                "job": {"rw": "read", "size": "4MiB", "runtime": "1s"},
            },
            "objects": {"tool": "warp", "hosts": "local", "target": "minio", "job": {}},
            "slo": {
                "tool": "fio",
                "hosts": "local",
                "target": "scratch",
                "job": {"rw": "randread", "runtime": "1s"},
                "search": {"objective": {"limit": "2ms"}, "max_iodepth": 4, "max_probes": 2},
            },
        },
    }
    return WorkflowPlan(load_campaign(raw))


def test_names_for_the_wildcards(tmp_path):
    plan = campaign(tmp_path)
    assert plan.used_targets == ["minio", "other", "scratch"]
    assert plan.host_names == ["local", "node1", "node2"]
    assert plan.job_suffixes == ["fio", "warp"]
    assert plan.service_tools == ["fio"]
    assert plan.search_experiments == ["slo"]
    assert plan.grid_experiments == ["grid", "sets", "objects"]
    assert names_pattern([]) == "(?!x)x"
    assert lock_name("my-target.1") == "lock_my_target_1"


def test_a_run_on_a_target_set_holds_every_members_lock(tmp_path):
    plan = campaign(tmp_path)
    assert plan.run_targets("sets", "read_t-all") == ("scratch", "other")
    assert plan.run_targets("sets", "read_t-other") == ("other",)
    assert plan.run_targets("grid", "read") == ("scratch",)
    assert plan.run_targets("grid", None) == ("scratch",)
    assert plan.missing_lock_caps({"lock_scratch": 1, "lock_other": 2}) == [
        "lock_minio",
        "lock_other",
    ]


def test_a_lock_is_a_number_when_every_run_holds_it_alike(tmp_path):
    plan = campaign(tmp_path)
    assert plan.fixed_lock("minio") is None  # only the warp experiment's runs hold it
    assert plan.fixed_lock("other") is None  # only some runs of the target set
    plan = WorkflowPlan(load_campaign(one_target_raw(tmp_path)))
    assert plan.fixed_lock("scratch") == 1


def test_one_template_for_every_experiment_is_shared(tmp_path):
    assert campaign(tmp_path).shared_job_source is None  # fio and warp templates
    plan = WorkflowPlan(load_campaign(one_target_raw(tmp_path)))
    fio_template = str(paths.TEMPLATES_DIR / "fio" / "job.fio.j2")
    assert plan.job_source("grid") == plan.job_source("slo") == fio_template
    assert plan.shared_job_source == fio_template


def one_target_raw(tmp_path) -> dict:
    return {
        "hosts": {"local": {"transport": "local"}},
        "targets": {"scratch": {"type": "directory", "path": str(tmp_path / "a")}},
        "experiments": {
            "grid": {
                "tool": "fio",
                "hosts": "local",
                "target": "scratch",
                "job": {"size": "4MiB", "runtime": "1s"},
                "sweep": {"rw": ["read", "write"]},
            },
            "slo": {
                "tool": "fio",
                "hosts": "local",
                "target": "scratch",
                "job": {"rw": "randread", "runtime": "1s"},
                "search": {"objective": {"limit": "2ms"}, "max_iodepth": 4, "max_probes": 2},
            },
        },
    }


def test_job_files_are_one_per_run_or_one_per_host(tmp_path):
    plan = campaign(tmp_path)
    assert plan.run_job_files("grid", "read") == "results/grid/jobs/read.fio"
    # one folder for the hosts' own files, which one job renders
    assert plan.run_job_files("sets", "read_t-all") == "results/sets/jobs/read_t-all"
    assert len(plan.experiment_job_files("sets")) == 3


def test_one_job_renders_each_host_as_its_own_render_would(tmp_path):
    """The host jobs step writes, for every host, what rendering that host alone writes:
    the read/write split's roles, each host's facts and its index."""
    from storbench.config.campaign import load_campaign as load
    from storbench.plan import specs
    from storbench.run import render

    for address in ("h1", "h2", "h3", "h4"):
        facts = {"host": address, "cores": 2 + len(address) * int(address[1])}
        (tmp_path / f"{address}.json").write_text(json.dumps(facts))
    raw = {
        "hosts": {"four": {"transport": "ssh", "nodes": "h[1-4]", "user": "root"}},
        "targets": {"scratch": {"type": "directory", "path": str(tmp_path / "t")}},
        "experiments": {
            "split": {
                "tool": "fio", "hosts": "four", "target": "scratch", "execution": "service",
                "rwmixreadhost": 50,
                "job": {"rw": "randread", "size": "1m", "numjobs": "{cores}"},
            }
        },
    }  # fmt: skip
    campaign_model = load(raw)
    (run,) = campaign_model.experiment_runs("split")
    spec = json.loads(specs.to_json(specs.host_jobs_spec(campaign_model, "split", run)))
    for entry in spec["hosts"]:
        entry["facts"] = str(tmp_path / f"{entry['host']}.json")
    written = render.write_host_jobs(spec, str(tmp_path / "jobs" / run.run_id))
    assert written == ["h1.fio", "h2.fio", "h3.fio", "h4.fio"]
    for index, host in enumerate(("h1", "h2", "h3", "h4")):
        alone = tmp_path / f"alone-{host}.fio"
        one = specs.render_spec(campaign_model, "split", run, host=host)
        render.write_job(json.loads(one.to_json()), str(alone), str(tmp_path / f"{host}.json"))
        text = (tmp_path / "jobs" / run.run_id / f"{host}.fio").read_text()
        assert text == alone.read_text()
        assert f"numjobs={2 + 2 * (index + 1)}" in text
        assert ("rw=randread" if index < 2 else "rw=randwrite") in text


def test_iterations_give_manifests_and_parsed_files(tmp_path):
    plan = campaign(tmp_path)
    assert plan.parsed_iterations("grid") == [
        "results/grid/parsed/read/it1.parquet",
        "results/grid/parsed/read/it2.parquet",
        "results/grid/parsed/write/it1.parquet",
        "results/grid/parsed/write/it2.parquet",
    ]
    assert plan.parsed_timeseries("grid")[0] == "results/grid/parsed/read/it1.timeseries.parquet"
    assert plan.fault_manifests("grid") == []
    with pytest.raises(WorkflowPlanError, match="has no run 'nope'"):
        plan.run("grid", "nope")
    with pytest.raises(WorkflowPlanError, match="has no client step 'h2'"):
        plan.step_iterations("grid", "h2")


def test_service_runs_wait_for_the_services_and_s3_runs_for_their_bucket(tmp_path):
    plan = campaign(tmp_path)
    assert plan.services_marker("sets") == "results/services/fio.json"
    assert plan.services_marker("grid") == []
    assert plan.bucket_marker("objects") == "results/targets/minio/buckets/sb-objects.json"
    assert plan.bucket_marker("grid") == []
    cleanup = json.loads(plan.cleanup_spec())
    assert [s["tool"] for s in cleanup["services"]] == ["fio"]
    assert [h["name"] for h in cleanup["services"][0]["hosts"]] == ["node1", "node2"]
    assert cleanup["buckets"][0]["buckets"] == ["sb-objects"]
    # the pair's group names no connection: the default, persistent, which cleanup closes
    assert [h["name"] for h in cleanup["connections"]] == ["node1", "node2"]


def test_report_meta_snapshots_only_the_experiments_own_config(tmp_path):
    plan = campaign(tmp_path)
    meta = json.loads(plan.report_meta("grid"))
    assert meta["run_ids"] == ["read", "write"]
    assert meta["hosts"] == ["local"]
    assert "minio" not in meta["config_yaml"] and "scratch:" in meta["config_yaml"]
    assert meta["preparation"] is None


def test_campaign_meta_redacts_nothing_secret_and_lists_every_experiment(tmp_path):
    plan = campaign(tmp_path)
    meta = json.loads(plan.campaign_meta())
    assert meta["experiments"]["slo"]["kind"] == "search"
    assert meta["experiments"]["slo"]["runs"] is None
    assert meta["experiments"]["grid"]["runs"] == 2
    assert plan.campaign_search_results() == ["results/slo/search.json"]
    assert "results/slo/summary.parquet" not in plan.campaign_grid_summaries()


def test_report_units_reach_every_report_spec(tmp_path):
    plan = campaign(tmp_path)
    assert plan.report_units == "decimal"
    assert json.loads(plan.report_meta("grid"))["units"] == "decimal"
    binary = WorkflowPlan(load_campaign({**plan.campaign.raw, "report": {"units": "binary"}}))
    assert binary.report_units == "binary"
    assert json.loads(binary.report_meta("slo"))["units"] == "binary"
    assert json.loads(binary.campaign_meta())["units"] == "binary"


def test_final_reports_are_every_default_experiment_and_the_campaign(tmp_path):
    plan = campaign(tmp_path)
    reports = plan.final_reports()
    assert paths.report_index("grid") in reports
    assert paths.report_pdf("campaign") in reports
    assert len(reports) == 2 * 5


def test_probes_wait_for_every_earlier_probe(tmp_path):
    plan = campaign(tmp_path)
    markers = plan.probe_markers("slo")
    assert markers[0] == "results/slo/search/p01.json"
    assert plan.earlier_probe_markers("slo", "p03") == markers[:2]
    with pytest.raises(WorkflowPlanError, match="not 'p99'"):
        plan.earlier_probe_markers("slo", "p99")
    with pytest.raises(WorkflowPlanError, match="is not a search"):
        plan.search_settings("grid")


def test_paths_give_patterns_without_arguments():
    assert paths.manifest() == "results/{experiment}/raw/{run_id}/it{iteration}/run.json"
    assert paths.manifest("e", "r", 3) == "results/e/raw/r/it3/run.json"
    assert paths.host_job() == "results/{experiment}/jobs/{run_id}/{host}.{suffix}"
    assert paths.stage_marker("t", "afa", "purge") == (
        "results/targets/t/precondition/afa/stages/purge.json"
    )


def test_runs_wait_for_every_set_up_step_on_their_hosts(tmp_path):
    """'grid' names no step, but a step of 'sets' mounts over node1's target path: grid's runs
    on node1 wait for it, so the mount never lands while one of them measures the host."""
    raw_plan = campaign(tmp_path, hosts="pair")
    raw = raw_plan.campaign.raw
    raw["setup"] = {
        "mount": {"hosts": "pair", "command": f"mount -t tmpfs x {tmp_path}/a/{{host}}"},
        "unused": {"hosts": "pair", "command": "true"},
    }
    raw["experiments"]["sets"]["setup"] = "mount"
    plan = WorkflowPlan(load_campaign(raw))
    run_id = next(iter(plan.runs["grid"]))
    assert plan.setup_markers("grid", run_id) == [
        paths.setup_marker("mount", "node1"),
        paths.setup_marker("mount", "node2"),
    ]
    assert plan.setup_markers("objects") == []  # on local: no step there
