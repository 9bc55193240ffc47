"""The whole workflow through real Snakemake and real fio on a local directory."""

import copy
import csv
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))


def tiny_config(target_dir: Path, rw=("randread", "write")) -> dict:
    return {
        "hosts": {"localhost": {"transport": "local"}},
        "targets": {"scratch": {"type": "directory", "path": str(target_dir)}},
        "experiments": {
            "tiny": {
                "tool": "fio",
                "hosts": "localhost",
                "target": "scratch",
                "iterations": 2,
                "job": {"size": "4MiB", "runtime": "1s", "ioengine": "psync", "numjobs": 1},
                "sweep": {"rw": list(rw), "bs": ["4k"]},
            }
        },
    }


def snakemake(
    workdir: Path, config: dict, *args, check=True, env: dict | None = None
) -> subprocess.CompletedProcess:
    (workdir / "campaign.yaml").write_text(yaml.safe_dump(config))
    command = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--configfile", "campaign.yaml"]
    command += ["--cores", "2", *args]
    result = subprocess.run(
        command, cwd=workdir, capture_output=True, text=True, timeout=600, env=env
    )
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def harnessed_snakemake(
    harness: str, report: str, workdir: Path, config: dict, *args
) -> tuple[subprocess.CompletedProcess, object]:
    """Snakemake run by a harness (`python -c`) that prints `<report> <JSON>` to stderr as it
    exits: (the process, that JSON)."""
    (workdir / "campaign.yaml").write_text(yaml.safe_dump(config))
    command = [sys.executable, "-c", harness, "-s", str(REPO / "Snakefile")]
    command += ["--configfile", "campaign.yaml", *args]
    result = subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(line for line in result.stderr.splitlines() if line.startswith(f"{report} "))
    return result, json.loads(line.removeprefix(f"{report} "))


def planned_jobs(result: subprocess.CompletedProcess) -> dict:
    """The 'Job stats' table of a dry run as {rule: count} ({} for nothing to be done)."""
    lines = (result.stdout + result.stderr).splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("Job stats:")), None)
    if start is None:
        assert "Nothing to be done" in result.stdout + result.stderr
        return {}
    counts = {}
    for line in lines[start + 3 :]:
        parts = line.split()
        if len(parts) != 2 or parts[0] == "total":
            break
        counts[parts[0]] = int(parts[1])
    return counts


def converge(workdir: Path, config: dict, calls: int = 4) -> dict:
    """Every job the calls of Snakemake ran until it had nothing to do, {rule: count}: a
    job that waits for one Snakemake runs again is looked at only in the next call."""
    ran: dict = {}
    for _ in range(calls):
        planned = planned_jobs(snakemake(workdir, config, "-n"))
        if not planned:
            return ran
        for rule, count in planned.items():
            ran[rule] = ran.get(rule, 0) + count
        snakemake(workdir, config)
    raise AssertionError(f"still jobs to run after {calls} calls: {ran}")


@pytest.fixture(scope="module")
def finished_campaign(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("campaign")
    config = tiny_config(workdir / "target")
    dry = snakemake(workdir, config, "-n")
    snakemake(workdir, config)
    return workdir, config, dry


def test_dry_run_lists_exactly_the_expected_jobs(finished_campaign):
    _, _, dry = finished_campaign
    assert planned_jobs(dry) == {
        "all": 1,
        "campaign_report": 1,
        "gather_experiment": 1,
        "parse_iteration": 4,
        "preflight": 1,
        "render_job": 2,
        "report_experiment": 1,
        "report_pdfs": 1,  # the experiment's and the campaign's, in one browser
        "run_iteration": 4,
        "telemetry_hosts": 1,
    }


def jobs_recorded(workdir: Path, rule: str) -> list[dict]:
    """Snakemake's record of each job of the rule (one per output file): times, inputs."""
    records = [json.loads(p.read_text()) for p in (workdir / ".snakemake/metadata").iterdir()]
    return [record for record in records if record["rule"] == rule]


def test_the_campaign_report_is_built_beside_the_experiment_report(finished_campaign):
    workdir, _, _ = finished_campaign
    (campaign, *_) = jobs_recorded(workdir, "campaign_report")
    (experiment, *_) = jobs_recorded(workdir, "report_experiment")
    # from the summaries, not the experiment report it links: the two jobs run at once
    assert set(campaign["input"]) == {
        "results/tiny/summary.parquet",
        "results/telemetry/localhost.json",
        "results/tiny/preflight.json",  # order only: a preflight run again reaches the report
    }
    assert campaign["starttime"] < experiment["endtime"]
    assert experiment["starttime"] < campaign["endtime"]


def test_parquet_equals_the_raw_fio_json(finished_campaign):
    workdir, _, _ = finished_campaign
    table = pq.read_table(workdir / "results/tiny/summary.parquet").to_pylist()
    checked = 0
    for run_id, op in (("randread_bs4k_nj1", "read"), ("write_bs4k_nj1", "write")):
        for iteration in (1, 2):
            manifest = json.loads(
                (workdir / f"results/tiny/raw/{run_id}/it{iteration}/run.json").read_text()
            )
            raw_dir = workdir / f"results/tiny/raw/{run_id}/it{iteration}" / manifest["raw_dir"]
            job = json.loads((raw_dir / "localhost.json").read_text())["jobs"][0][op]
            for host in ("localhost", "all"):
                (row,) = [
                    r
                    for r in table
                    if (r["run_id"], r["iteration"], r["host"], r["op"])
                    == (run_id, iteration, host, op)
                ]
                assert row["bytes"] == job["io_bytes"] and row["ios"] == job["total_ios"]
                assert row["iops"] == job["iops"] and row["bw_bytes_s"] == job["bw_bytes"]
                assert row["lat_mean_ns"] == job["lat_ns"]["mean"]
                assert row["p99_ns"] == job["lat_ns"]["percentile"]["99.000000"]
                assert row["tool_version"] == "fio-3.33" or row["tool_version"].startswith("fio-")
                checked += 1
    assert checked == 8


def test_report_table_equals_the_mean_of_the_raw_runs(finished_campaign):
    workdir, _, _ = finished_campaign
    with open(workdir / "reports/tiny/summary.csv") as handle:
        rows = {(r["run_id"], r["op"]): r for r in csv.DictReader(handle)}
    for run_id, op in (("randread_bs4k_nj1", "read"), ("write_bs4k_nj1", "write")):
        raw_iops = []
        for iteration in (1, 2):
            it_dir = workdir / f"results/tiny/raw/{run_id}/it{iteration}"
            raw_dir = it_dir / json.loads((it_dir / "run.json").read_text())["raw_dir"]
            raw_iops.append(
                json.loads((raw_dir / "localhost.json").read_text())["jobs"][0][op]["iops"]
            )
        assert int(rows[(run_id, op)]["n"]) == 2
        assert float(rows[(run_id, op)]["iops_mean"]) == pytest.approx(sum(raw_iops) / 2, rel=1e-9)
    html = (workdir / "reports/tiny/index.html").read_text().replace("<wbr>", "")
    assert "randread_bs4k_nj1" in html and "data:image/png;base64," in html


def test_second_run_does_nothing(finished_campaign):
    workdir, config, _ = finished_campaign
    result = snakemake(workdir, config, "-n")
    assert "Nothing to be done" in result.stdout + result.stderr


def test_changing_one_sweep_value_reruns_only_its_runs(finished_campaign):
    workdir, config, _ = finished_campaign
    changed = tiny_config(workdir / "target", rw=("randread", "read"))
    jobs = planned_jobs(snakemake(workdir, changed, "-n"))
    assert jobs["run_iteration"] == 2 and jobs["render_job"] == 1 and jobs["parse_iteration"] == 2
    assert (workdir / "campaign.yaml").exists()
    snakemake(workdir, config, "-n")  # leave the original config in place for other tests


def test_a_new_time_limit_runs_nothing_again(finished_campaign):
    """`timeout` bounds a run, it does not change what it measures: raised after runs are
    done, it reaches the runs still to come, and the finished ones stay."""
    workdir, config, _ = finished_campaign
    limited = copy.deepcopy(config)
    limited["experiments"]["tiny"]["timeout"] = "300s"
    jobs = planned_jobs(snakemake(workdir, limited, "-n"))
    assert "run_iteration" not in jobs and "parse_iteration" not in jobs
    forced = snakemake(workdir, limited, "-n", "-p", "--forcerun", "run_iteration")
    commands = [line for line in forced.stdout.splitlines() if "storbench run " in line]
    assert len(commands) == 4 and all("--timeout-s 300.0 " in line for line in commands)
    snakemake(workdir, config, "-n")  # leave the original config in place for other tests


def test_a_hosts_way_in_its_group_and_limits_run_no_finished_run_again(finished_campaign):
    """A host group renamed, its workdir moved, attempts kept, a connect timeout: how the host
    is reached and named, not what is measured. Preflight, telemetry and the reports run
    again, and no call after them runs a finished run again."""
    workdir, config, _ = finished_campaign
    moved = copy.deepcopy(config)
    moved["hosts"] = {
        "lab": {
            "nodes": "localhost",
            "transport": "local",
            "workdir": str(workdir / "elsewhere"),
            "keep_attempts": 2,
            "connect_timeout": "5s",
        }
    }
    moved["experiments"]["tiny"]["hosts"] = "lab"
    manifest = workdir / "results/tiny/raw/randread_bs4k_nj1/it1/run.json"
    finished = manifest.stat().st_mtime_ns
    assert "run_iteration" not in converge(workdir, moved)
    assert manifest.stat().st_mtime_ns == finished
    converge(workdir, config)  # the original hosts again for other tests


def test_runs_whose_own_spec_changed_run_in_the_call_that_reruns_their_preflight(
    finished_campaign,
):
    """A renamed group runs preflight again; a new `wait` changes the runs. Snakemake alone
    would look at the runs only in the call after the preflight's: one dry run shows both."""
    workdir, config, _ = finished_campaign
    changed = copy.deepcopy(config)
    changed["hosts"] = {"lab": {"nodes": "localhost", "transport": "local"}}
    changed["experiments"]["tiny"]["hosts"] = "lab"
    changed["experiments"]["tiny"]["wait"] = "1s"
    jobs = planned_jobs(snakemake(workdir, changed, "-n"))
    assert jobs["preflight"] == 1 and jobs["run_iteration"] == 4 and "render_job" not in jobs
    snakemake(workdir, config, "-n")  # leave the original config in place for other tests


def test_a_preflight_only_change_reaches_the_reports_in_the_same_call(finished_campaign):
    """Attempts kept on the host: preflight, telemetry and the reports (which show the
    config) run again, no run does. Snakemake alone looked at the reports only in the call
    after the preflight's: one dry run showed the preflight alone."""
    workdir, config, _ = finished_campaign
    changed = copy.deepcopy(config)
    changed["hosts"]["localhost"]["keep_attempts"] = 2
    jobs = planned_jobs(snakemake(workdir, changed, "-n"))
    again = ("preflight", "telemetry_hosts", "report_experiment", "campaign_report")
    assert {rule: jobs.get(rule) for rule in again} == dict.fromkeys(again, 1)
    assert "run_iteration" not in jobs and "parse_iteration" not in jobs
    snakemake(workdir, changed)
    assert planned_jobs(snakemake(workdir, changed, "-n")) == {}
    for report in ("campaign", "tiny"):
        assert "keep_attempts: 2" in (workdir / f"reports/{report}/index.html").read_text()
    converge(workdir, config)  # the original config again for other tests


def test_a_run_whose_manifest_is_gone_runs_again(finished_campaign):
    """A forced rerun stopped part way leaves its run without a manifest (Snakemake removes
    it as the job starts) and the reports built from the old one: the run runs again."""
    workdir, config, _ = finished_campaign
    manifest = workdir / "results/tiny/raw/write_bs4k_nj1/it2/run.json"
    kept, times = manifest.read_bytes(), manifest.stat()
    manifest.unlink()
    try:
        jobs = planned_jobs(snakemake(workdir, config, "-n"))
    finally:  # as it was, for the other tests
        manifest.write_bytes(kept)
        os.utime(manifest, ns=(times.st_atime_ns, times.st_mtime_ns))
    assert jobs["run_iteration"] == 1 and jobs["parse_iteration"] == 1
    assert jobs["gather_experiment"] == 1


def test_one_report_target_builds_one_experiment(finished_campaign):
    workdir, config, _ = finished_campaign
    result = snakemake(workdir, config, "-n", "reports/tiny/index.html")
    assert "Nothing to be done" in result.stdout + result.stderr


def test_bad_config_stops_before_any_job(tmp_path):
    config = tiny_config(tmp_path / "target")
    config["experiments"]["tiny"]["job"]["bs"] = "4kk"
    config["experiments"]["tiny"]["hosts"] = "nosuch"
    result = snakemake(tmp_path, config, check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "experiments.tiny.job.bs: not a size: '4kk'" in output
    assert "experiments.tiny.hosts: unknown host group 'nosuch'" in output
    assert not (tmp_path / "results").exists()


def test_an_option_only_the_tools_adapter_refuses_stops_the_workflow_before_any_job(tmp_path):
    """vdbench raw workloads have no numjobs: the config's schema takes it, the adapter does
    not. Before, even a dry run planned it, and a real run reached it at its render, after
    the experiments before it had run."""
    config = tiny_config(tmp_path / "target", rw=("read",))
    config["targets"]["lun"] = {"type": "block", "path": "/dev/mapper/afa_lun1"}
    config["experiments"]["afa"] = {
        "tool": "vdbench",
        "hosts": "localhost",
        "target": "lun",
        "job": {"rw": "randread", "bs": "4k", "runtime": "60s", "numjobs": 4},
    }
    result = snakemake(tmp_path, config, "-n", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert (
        "experiments.afa.job.numjobs: run randread_bs4k_nj4: vdbench raw workloads have no"
        " numjobs; use iodepth (threads per SD) (line 6)"
    ) in output
    assert not (tmp_path / "results").exists()


def test_every_target_is_capped_without_a_profile(tmp_path):
    """The workflow caps each target's lock at one run job itself: no profile, two cores, two
    runs on one target, and they still run one after the other."""
    config = tiny_config(tmp_path / "target", rw=("read", "write"))
    config["experiments"]["tiny"]["iterations"] = 1
    snakemake(tmp_path, config, "--workflow-profile", "none")
    windows = []
    for manifest in (tmp_path / "results/tiny/raw").glob("*/it1/run.json"):
        (host,) = json.loads(manifest.read_text())["hosts"]
        windows.append((host["start_time"], host["end_time"]))
    (first, second) = sorted(windows)
    assert first[1] <= second[0]


def test_one_job_at_a_time_listens_on_a_port_workers_dial(tmp_path):
    """GOSBench's service runs listen on this machine's port 2000 for their workers, and
    their preflight listens there while its hosts connect: a run of one experiment and the
    preflight or a run of another (on another target too) would take the port from each
    other. One scheduler resource per such port, held by exactly those jobs."""
    raw = yaml.safe_load((REPO / "config/examples/gosbench-s3.yaml").read_text())
    standalone, service = raw["experiments"]
    raw["experiments"][service]["execution"] = "service"
    result = snakemake(tmp_path, raw, "-n")
    held = {}
    for block in result.stdout.split("\nrule ")[1:]:
        rule, _, rest = block.partition(":")
        fields = dict(line.strip().split(": ", 1) for line in rest.splitlines() if ": " in line)
        experiment = dict(
            pair.split("=", 1) for pair in fields.get("wildcards", "").split(", ") if pair
        ).get("experiment")
        resources = dict(pair.split("=", 1) for pair in fields["resources"].split(", "))
        held.setdefault((rule, experiment), set()).add(resources.get("controller_port_2000"))
    assert held[("preflight", service)] == held[("run_iteration", service)] == {"1"}
    assert held[("preflight", standalone)] == held[("run_iteration", standalone)] == {"0"}
    (tmp_path / "fio").mkdir()
    tiny = snakemake(tmp_path / "fio", tiny_config(tmp_path / "target"), "-n")
    assert "controller_port" not in tiny.stdout  # no experiment has workers that dial


def test_a_target_cap_other_than_one_is_refused(tmp_path):
    result = snakemake(
        tmp_path, tiny_config(tmp_path / "target"), "--resources", "lock_scratch=2", check=False
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "run-job cap of 1; not 1: lock_scratch" in output
    assert not (tmp_path / "results").exists()


def test_tool_failure_publishes_nothing_and_shows_stderr(tmp_path):
    config = tiny_config(tmp_path / "target", rw=("read",))
    config["experiments"]["tiny"]["iterations"] = 1
    # direct I/O at an offset no block starts at: EINVAL from the first read, which neither
    # fio --parse-only nor preflight can see coming (an unknown ioengine preflight refuses)
    config["experiments"]["tiny"]["job"].update(direct=1, offset=100)
    result = snakemake(tmp_path, config, check=False)
    assert result.returncode != 0
    log = (tmp_path / "results/tiny/logs/run/read_bs4k_nj1.it1.log").read_text()
    assert "fio exited 1" in log and "Invalid argument" in log
    assert not (tmp_path / "results/tiny/raw/read_bs4k_nj1/it1/run.json").exists()
    assert not (tmp_path / "results/tiny/parsed").exists()
    kept = tmp_path / "results/tiny/raw/read_bs4k_nj1/it1/a1/localhost.stderr"
    assert "Invalid argument: read offset=100" in kept.read_text()


def test_rerun_after_a_failure_keeps_the_failed_raw_output(tmp_path):
    config = tiny_config(tmp_path / "target", rw=("read",))
    config["experiments"]["tiny"]["iterations"] = 1
    config["experiments"]["tiny"]["job"].update(direct=1, offset=100)  # EINVAL at the first read
    assert snakemake(tmp_path, config, check=False).returncode != 0
    del config["experiments"]["tiny"]["job"]["offset"]
    snakemake(tmp_path, config)
    it_dir = tmp_path / "results/tiny/raw/read_bs4k_nj1/it1"
    manifest = json.loads((it_dir / "run.json").read_text())
    assert manifest["attempt"] == 2 and manifest["raw_dir"] == "a2"
    assert "Invalid argument" in (it_dir / "a1/localhost.stderr").read_text()
    rows = pq.read_table(tmp_path / "results/tiny/summary.parquet").to_pylist()
    assert {r["attempt"] for r in rows} == {2}
    log = tmp_path / "results/tiny/logs/run/read_bs4k_nj1.it1.log"
    assert "fio exited 1" in Path(f"{log}.attempt-1").read_text()
    assert "exited 1" not in log.read_text() and "localhost: exit 0" in log.read_text()


def test_every_attempt_of_a_retried_run_keeps_its_log(tmp_path):
    """Snakemake deletes a job's log before each retry: every attempt's log is kept beside
    it as <log>.attempt-<N>, naming its own raw folder a<N>."""
    config = tiny_config(tmp_path / "target", rw=("read",))
    config["experiments"]["tiny"]["iterations"] = 1
    config["experiments"]["tiny"]["job"].update(direct=1, offset=100)  # EINVAL at the first read
    assert snakemake(tmp_path, config, "--retries", "2", check=False).returncode != 0
    logs = tmp_path / "results/tiny/logs/run"
    kept = sorted(p.name for p in logs.iterdir())
    assert kept == [
        f"read_bs4k_nj1.it1.log{end}" for end in ("", *(f".attempt-{n}" for n in (1, 2, 3)))
    ]
    for attempt in (1, 2, 3):
        text = (logs / f"read_bs4k_nj1.it1.log.attempt-{attempt}").read_text()
        assert text.startswith(f"storbench: attempt a{attempt};")
        assert "Invalid argument" in text
        assert text.rstrip().endswith(
            f"raw output kept in results/tiny/raw/read_bs4k_nj1/it1/a{attempt}"
        )
    assert (logs / "read_bs4k_nj1.it1.log").read_text() == (
        logs / "read_bs4k_nj1.it1.log.attempt-3"
    ).read_text()


def test_host_fact_braces_are_safe_in_every_rule(tmp_path):
    """'{cores}' (the host-facts documentation's first example) reaches params as text:
    Snakemake must not read it as a wildcard in any rule, the campaign report's included."""
    config = tiny_config(tmp_path / "target")
    config["experiments"]["tiny"]["job"]["numjobs"] = "{cores}"
    for target in ("all", "cleanup"):
        done = snakemake(tmp_path, config, "-n", "--forceall", target)
        assert "WildcardError" not in done.stdout + done.stderr
    assert "campaign_report" in snakemake(tmp_path, config, "-n", "--forceall").stdout


def test_another_experiment_on_the_host_leaves_finished_host_fact_runs_alone(tmp_path):
    """A second experiment on the host takes its telemetry again (a new preflight among its
    inputs); the first experiment's runs, whose job files use the host's facts, are done."""
    config = tiny_config(tmp_path / "target", rw=("randread",))
    config["experiments"]["tiny"]["iterations"] = 1
    config["experiments"]["tiny"]["job"]["numjobs"] = "{cores}"
    snakemake(tmp_path, config)
    first = tmp_path / "results/tiny/raw/randread_bs4k_njhost/it1/run.json"
    finished = json.loads(first.read_text())
    config["experiments"]["second"] = {
        **config["experiments"]["tiny"],
        "job": {**config["experiments"]["tiny"]["job"], "numjobs": 1},
        "sweep": {"rw": ["read"], "bs": ["4k"]},
    }
    jobs = planned_jobs(snakemake(tmp_path, config, "-n"))
    assert jobs["telemetry_hosts"] == 1  # its set of inputs changed
    assert jobs["run_iteration"] == 1 and "render_host_jobs" not in jobs  # the second's only
    snakemake(tmp_path, config)
    assert json.loads(first.read_text()) == finished  # not run again: the same attempt
    assert (tmp_path / "results/second/raw/read_bs4k_nj1/it1/run.json").exists()


def test_after_and_ordered_runs_keep_their_order_and_wait(tmp_path):
    """Write before read across experiments, a sweep in its written order, a wait before
    each run: Snakemake dependencies, so two cores still run them one after another."""
    config = tiny_config(tmp_path / "target", rw=("write",))
    config["experiments"]["tiny"]["iterations"] = 1
    reader = copy.deepcopy(config["experiments"]["tiny"])
    reader.update(after="tiny", ordered=True, wait="1s")
    reader["sweep"] = {"rw": ["randread", "read"], "bs": ["4k"]}
    config["experiments"]["reads"] = reader
    config["targets"]["other"] = {"type": "directory", "path": str(tmp_path / "other")}
    reader["target"] = "other"  # another target: only the order keeps it from running at once
    snakemake(tmp_path, config)

    def window(experiment: str, run_id: str) -> tuple[str, str]:
        manifest = tmp_path / f"results/{experiment}/raw/{run_id}/it1/run.json"
        (host,) = json.loads(manifest.read_text())["hosts"]
        return host["start_time"], host["end_time"]

    write = window("tiny", "write_bs4k_nj1")
    randread, read = window("reads", "randread_bs4k_nj1"), window("reads", "read_bs4k_nj1")
    assert write[1] <= randread[0] and randread[1] <= read[0]
    log = (tmp_path / "results/reads/logs/run/read_bs4k_nj1.it1.log").read_text()
    assert "waiting 1 s before the run (experiment wait)" in log


def test_progress_counts_the_published_runs_and_the_planned_time_left(tmp_path):
    """`storbench progress` beside a campaign: one of two runs done, one started and failed."""
    config = tiny_config(tmp_path / "target", rw=("read", "write"))
    config["experiments"]["tiny"]["iterations"] = 1
    config["experiments"]["tiny"]["job"]["runtime"] = "3s"
    snakemake(tmp_path, config, "results/tiny/raw/read_bs4k_nj1/it1/run.json")
    attempt = tmp_path / "results/tiny/raw/write_bs4k_nj1/it1/a1"
    attempt.mkdir(parents=True)  # as a run that started and has not published
    done = subprocess.run(
        [sys.executable, "-m", "storbench", "progress", "--config", "campaign.yaml"],
        cwd=tmp_path, capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    lines = done.stdout.splitlines()
    assert lines[0] == "runs done: 1 of 2 (50%)"
    assert lines[1] == "started, no result yet (running or failed): tiny/write_bs4k_nj1 it1"
    assert lines[2].startswith("planned time left: 0m 03s (finish about ")


def test_the_campaigns_hosts_share_one_telemetry_job_and_any_other_host_gets_its_own(tmp_path):
    """Rule all's hosts (the experiments under run:) in one job, all at once; a host only an
    experiment outside run: uses, when asked for, in a job of its own."""
    config = tiny_config(tmp_path / "target")
    config["hosts"]["second"] = {"transport": "local"}
    config["experiments"]["other"] = {**config["experiments"]["tiny"], "hosts": "second"}
    config["hosts"]["third"] = {"transport": "local"}
    config["experiments"]["wide"] = {
        **config["experiments"]["tiny"],
        "hosts": ["localhost", "third"],
    }
    config["run"] = ["tiny", "wide"]
    facts = [f"results/telemetry/{host}.json" for host in ("localhost", "second", "third")]
    assert planned_jobs(snakemake(tmp_path, config, "-n", *facts)) == {
        "preflight": 3,
        "telemetry": 1,
        "telemetry_hosts": 1,
    }
    snakemake(tmp_path, config, *facts)
    batch = (tmp_path / "results/logs/telemetry.log").read_text().splitlines()
    assert [line.split(":")[0] for line in batch] == ["localhost", "third"]
    assert (tmp_path / "results/telemetry/logs/second.log").read_text().startswith("second: ")
    for path in facts:
        written = json.loads((tmp_path / path).read_text())
        assert written["kernel"] == platform.release()
        assert written["cores"] == os.cpu_count()
