"""Every CLI step names a missing input file or a non-JSON option and exits without a traceback.

The steps are what the rules call; users run them by hand to debug (README), so a typo in a
path must read as one line naming the path, and nothing may be published.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from storbench.config import campaign as config
from storbench.plan import specs as plan
from storbench.run import render
from tests.paths import FIXTURES
from tests.workflow.test_workflow import tiny_config

# A comparison's regressions.json given where a search.json belongs, and the reverse
REGRESSIONS = {"a": "before", "b": "after", "thresholds": {"iops": "-5%"}, "regressions": []}
SEARCH_RESULT = {"experiment": "slo", "objective": {}, "limit": "1 ms", "answer": {}, "probes": []}
NOT_A_SEARCH = "not a search result (search.json): no experiment, objective, limit, answer, probes"
NOT_A_VERDICT = "not a comparison's regressions.json"


def storbench(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "storbench", *args]
    return subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=120)


def assert_refused(result: subprocess.CompletedProcess, workdir: Path, stderr: str) -> None:
    """The step exited 1 with exactly this error, no traceback, and published nothing."""
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == stderr
    assert list(workdir.iterdir()) == []


def tiny_run_spec(target: Path) -> str:
    campaign = config.load_campaign(tiny_config(target, rw=("read",)))
    (run,) = campaign.experiment_runs("tiny")
    return plan.to_json(plan.run_spec(campaign, "tiny", run))


def test_run_names_a_missing_job_file_and_publishes_nothing(tmp_path):
    manifest = tmp_path / "results/tiny/raw/read_bs4k/it1/run.json"
    result = storbench(
        tmp_path, "run", "--spec", tiny_run_spec(tmp_path / "target"), "--iteration", "1",
        "--job", "jobs/absent.fio", "--manifest", str(manifest),
    )  # fmt: skip
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == "storbench: error: jobs/absent.fio: No such file or directory"
    assert not manifest.exists() and not (tmp_path / "target").exists()


def test_run_stops_the_tool_at_the_time_limit_it_is_given(tmp_path):
    """The configured `timeout` reaches the run beside its spec (a new limit runs no finished
    run again): a 30 s fio job given 2 s is stopped, named, and publishes nothing."""
    config_ = tiny_config(tmp_path / "target", rw=("read",))
    config_["experiments"]["tiny"]["job"]["runtime"] = "30s"
    campaign = config.load_campaign(config_)
    (run,) = campaign.experiment_runs("tiny")
    spec = plan.run_spec(campaign, "tiny", run)
    assert spec.timeout_s == 2 * 30 + 120  # the spec's own limit, from the planned time
    job = tmp_path / "job.fio"
    render.write_job(json.loads(plan.to_json(plan.render_spec(campaign, "tiny", run))), str(job))
    manifest = tmp_path / "raw/it1/run.json"
    result = storbench(
        tmp_path, "run", "--spec", plan.to_json(spec), "--iteration", "1", "--timeout-s", "2",
        "--job", str(job), "--manifest", str(manifest),
    )  # fmt: skip
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "host localhost: fio timed out" in result.stderr
    assert not manifest.exists() and (tmp_path / "raw/it1/a1/localhost.json").exists()


@pytest.mark.parametrize(
    "args, missing",
    [
        (["parse", "--manifest", "gone/run.json", "--output", "it1.parquet"], "gone/run.json"),
        (["gather", "gone/it1.parquet", "--output", "summary.parquet"], "gone/it1.parquet"),
        (["report", "--summary", "gone/summary.parquet", "--out-dir", "report",
          "--meta", '{"title": "t"}'], "gone/summary.parquet"),
        (["pdf", "--html", "gone/index.html", "--pdf", "report.pdf"], "gone/index.html"),
    ],
)  # fmt: skip
def test_steps_name_their_missing_input(args, missing, tmp_path):
    result = storbench(tmp_path, *args)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert missing in result.stderr and result.stderr.startswith("storbench: error:")
    assert "Failed to open" not in result.stderr  # pyarrow's words, the path said twice
    assert sorted(path.name for path in tmp_path.iterdir()) == []


def test_progress_names_a_workdir_that_is_no_folder(tmp_path):
    """Before: a mistyped --workdir printed 'runs done: 0 of 8 (0%)' as if nothing ran."""
    config_path = tmp_path / "campaign.yaml"
    config_path.write_text(json.dumps(tiny_config(tmp_path / "target")))
    for workdir, why in ((tmp_path / "gone", "No such file or directory"),
                         (config_path, "Not a directory")):  # fmt: skip
        result = storbench(tmp_path, "progress", "--config", str(config_path), "--workdir",
                           str(workdir))  # fmt: skip
        assert (result.returncode, result.stdout, result.stderr) == (
            1,
            "",
            f"storbench: error: --workdir {workdir}: {why}\n",
        )


def test_pdf_swapped_arguments_overwrite_nothing(tmp_path):
    """--html and --pdf given the wrong way round: the page is kept, no browser starts."""
    page = tmp_path / "index.html"
    page.write_text("<!doctype html><title>report</title><p>IOPS 5,210</p>\n")
    (tmp_path / "report.pdf").write_bytes(b"%PDF-1.4 printed before\n")
    result = storbench(tmp_path, "pdf", "--html", "report.pdf", "--pdf", "index.html")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "report.pdf is not an HTML page" in result.stderr
    result = storbench(tmp_path, "pdf", "--html", "index.html", "--pdf", "index.html")
    assert result.returncode == 1 and "index.html exists and is not a PDF" in result.stderr
    assert page.read_text().endswith("<p>IOPS 5,210</p>\n")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["index.html", "report.pdf"]


@pytest.mark.parametrize("step", ["run", "render", "preflight", "services", "cleanup"])
def test_a_spec_that_is_not_json_names_the_option(step, tmp_path):
    extra = {
        "run": ["--iteration", "1", "--job", "j.fio", "--manifest", "run.json"],
        "render": ["--output", "j.fio"],
        "preflight": ["--output", "preflight.json"],
        "services": ["start", "--output", "m.json"],
        "cleanup": [],
    }[step]
    result = storbench(tmp_path, step, "--spec", "{'rw': read}", *extra)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"storbench {step}: error: argument --spec: not valid JSON" in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args, missing",
    [
        (["run", "--iteration", "1", "--timeout-s", "5", "--job", "j.fio",
          "--manifest", "run.json"],
         "run spec: missing key(s) experiment, hosts, params, run_id, target, timeout_s"),
        (["render", "--output", "j.fio"],
         "render spec: missing key(s) experiment, hosts, params, point, run_id, target"),
        (["preflight", "--output", "preflight.json"],
         "preflight spec: missing key(s) experiment, hosts, target"),
        (["services", "start", "--output", "services.json"],
         "services spec: missing key(s) hosts, port"),
        (["telemetry", "--output", "facts.json"],
         "telemetry spec: missing key(s) host, targets, tools"),
        (["telemetry-hosts"], "telemetry-hosts spec: missing key(s) hosts"),
    ],
)  # fmt: skip
def test_a_hand_written_spec_missing_keys_is_refused_naming_them(args, missing, tmp_path):
    result = storbench(tmp_path, args[0], "--spec", '{"tool": "fio"}', *args[1:])
    assert_refused(result, tmp_path, f"storbench: error: {missing}")


@pytest.mark.parametrize(
    "args",
    [
        ["gather", "bad.parquet", "--output", "summary.parquet"],
        ["report", "--summary", "bad.parquet", "--out-dir", "report", "--meta", '{"title": "t"}'],
        ["campaign-report", "--meta", "{}", "--out-dir", "report", "--summaries", "bad.parquet"],
        ["network-report", "--parquet", "bad.parquet", "--out-dir", "report"],
        ["search", "report", "--result", "search.json", "--summary", "bad.parquet",
         "--out-dir", "report", "--meta", "{}"],
        ["compare", "report", "bad.parquet", "bad.parquet", "--out-dir", "report"],
    ],
)  # fmt: skip
def test_a_results_file_that_is_not_parquet_is_named(args, tmp_path):
    (tmp_path / "bad.parquet").write_text("experiment,run_id\ne,r\n")  # a CSV by mistake
    (tmp_path / "search.json").write_text(json.dumps(SEARCH_RESULT))
    result = storbench(tmp_path, *args)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(
        "storbench: error: bad.parquet: not a results Parquet file: Parquet magic bytes not found"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.parquet", "search.json"]


def test_a_results_file_whose_columns_do_not_fit_is_named(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"run_id": ["r"], "iops": ["fast"]}), tmp_path / "odd.parquet")
    result = storbench(tmp_path, "gather", "odd.parquet", "--output", "summary.parquet")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("storbench: error: odd.parquet: not a results Parquet file: ")
    assert "fast" in result.stderr  # pyarrow names the value it could not read as a number
    assert sorted(p.name for p in tmp_path.iterdir()) == ["odd.parquet"]


def test_a_report_meta_without_its_title_is_refused_naming_it(tmp_path):
    result = storbench(
        tmp_path, "report", "--summary", "s.parquet", "--out-dir", "report", "--meta", "{}"
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == "storbench: error: report meta spec: missing key(s) title"


def test_a_telemetry_host_missing_keys_is_refused_naming_them(tmp_path):
    spec = json.dumps({"hosts": [{"host": {"name": "h1"}, "targets": []}]})
    result = storbench(tmp_path, "telemetry-hosts", "--spec", spec)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        "storbench: error: telemetry-hosts host spec: missing key(s) output, tools"
    )


def test_a_spec_on_stdin_that_is_not_json_names_the_option(tmp_path):
    command = [sys.executable, "-m", "storbench", "preflight", "--spec", "-", "--output", "p.json"]
    result = subprocess.run(
        command, cwd=tmp_path, input="{'hosts': []", capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "storbench preflight: error: argument --spec: not valid JSON" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_version_help_texts_and_a_closed_pipe():
    import argparse
    import subprocess
    import sys
    from importlib.metadata import version

    from storbench.cli import build_parser

    done = subprocess.run([sys.executable, "-m", "storbench", "--version"],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0 and done.stdout == f"storbench {version('storbench')}\n"
    parser = build_parser()
    for name, sub in parser._subparsers._group_actions[0].choices.items():
        for action in sub._actions:
            if not isinstance(action, argparse._HelpAction):
                assert action.help, f"storbench {name} {action.option_strings or action.dest}"
    # `storbench check --runs | head -1`: no BrokenPipeError traceback
    piped = subprocess.run(
        f"{sys.executable} -m storbench check --config config/examples/scale-test.yaml --runs"
        " | head -1",
        shell=True, capture_output=True, text=True,
    )  # fmt: skip
    assert "Traceback" not in piped.stderr and "BrokenPipeError" not in piped.stderr
    assert piped.stdout.startswith("bw_100g: fio on 20 host(s)")


def test_the_package_declares_compatible_ranges_and_the_environment_pins_them():
    import tomllib
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    dependencies = tomllib.loads((repo / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not [d for d in dependencies if "==" in d]
    pins = {
        line.split("==")[0].lower(): line.split("==")[1]
        for line in (repo / "envs/requirements.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    }
    for dependency in dependencies:
        name = dependency.split(">=")[0].lower()
        assert name in pins, f"{name} is not pinned in envs/requirements.txt"


ROUND_MARKER = {"stage": "round-01", "kind": "round", "index": 1, "steady_state": None}


@pytest.mark.parametrize(
    "prepared, problem",
    [
        # a run's manifest given instead: JSON, but none of a prepared marker's keys
        (
            '{"experiment": "tiny", "run_id": "read_bs4k", "hosts": []}',
            "not a recipe's prepared marker: no target, recipe, passes, steady_state",
        ),
        ("[1, 2]", "not a recipe's prepared marker: a JSON list, not an object"),
        (
            "PAR1",
            "not a recipe's prepared marker: not JSON (Expecting value: line 1 column 1 (char 0))",
        ),
    ],
)  # fmt: skip
def test_a_preconditioning_page_refuses_a_file_that_is_not_a_prepared_marker(
    prepared, problem, tmp_path
):
    (tmp_path / "prepared.json").write_text(prepared)
    (tmp_path / "round-01.json").write_text(json.dumps(ROUND_MARKER))
    result = storbench(
        tmp_path, "prepare", "report", "--prepared", "prepared.json", "--out-dir", "page",
        "--stages", "round-01.json",
    )  # fmt: skip
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == f"storbench: error: prepared.json: {problem}"
    assert not (tmp_path / "page").exists()


def test_a_preconditioning_page_refuses_a_stage_marker_without_its_kind(tmp_path):
    prepared = {"target": "disk", "recipe": "snia", "passes": [], "steady_state": None}
    (tmp_path / "prepared.json").write_text(json.dumps(prepared))
    (tmp_path / "round-01.json").write_text(json.dumps({"stage": "round-01", "index": 1}))
    result = storbench(
        tmp_path, "prepare", "report", "--prepared", "prepared.json", "--out-dir", "page",
        "--stages", "round-01.json",
    )  # fmt: skip
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == "storbench: error: round-01.json: not a stage marker: no kind"
    assert not (tmp_path / "page").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["campaign-report", "--meta", '{"title": "t"}', "--out-dir", "out",
         "--searches", "given.json"],
        ["search", "report", "--result", "given.json", "--summary", "s.parquet",
         "--meta", '{"title": "t"}', "--out-dir", "out"],
    ],
)  # fmt: skip
def test_a_search_result_that_is_not_one_is_named(args, tmp_path):
    (tmp_path / "given.json").write_text(json.dumps(REGRESSIONS))
    result = storbench(tmp_path, *args)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == f"storbench: error: given.json: {NOT_A_SEARCH}"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "given, line",
    [
        (json.dumps(SEARCH_RESULT), f"{NOT_A_VERDICT}: no a, b, thresholds, regressions"),
        ("[]", f"{NOT_A_VERDICT}: a JSON list, not an object"),
    ],
)  # fmt: skip
def test_compare_check_names_a_file_that_is_not_a_comparisons_verdict(given, line, tmp_path):
    """Exit 1 is also what a regression gives: the line says which it was."""
    (tmp_path / "given.json").write_text(given)
    result = storbench(tmp_path, "compare", "check", "given.json", "--output", "passed.json")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == f"storbench: error: given.json: {line}"
    assert not (tmp_path / "passed.json").exists()


@pytest.mark.parametrize(
    "spec, line",
    [
        ({}, "network check spec: no server (with its clients) and no mesh"),
        ({"mesh": [{"name": "a"}, {"name": "b"}], "duraton_s": 5},
         "network check spec: unknown key(s) duraton_s"),
        ({"server": {"name": "srv", "transport": "local"}, "clients": []},
         "network.clients: no client hosts"),
    ],
)  # fmt: skip
def test_a_network_check_spec_that_checks_nothing_or_has_a_typo_is_refused(spec, line, tmp_path):
    spec_json = json.dumps(spec)
    result = storbench(
        tmp_path, "network", "--spec", spec_json, "--out-dir", "out", "--parquet", "n.parquet"
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == f"storbench: error: {line}"
    assert not (tmp_path / "n.parquet").exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "option, value, line",
    [
        ("--iteration", "0", "argument --iteration: expected a whole number from 1, got '0'"),
        ("--timeout-s", "-5", "argument --timeout-s: expected seconds above 0, got '-5'"),
        ("--timeout-s", "nan", "argument --timeout-s: expected seconds above 0, got 'nan'"),
    ],
)
def test_a_run_refuses_an_iteration_or_time_limit_it_cannot_have(option, value, line, tmp_path):
    """Before, iteration 0 ran, and a negative limit started the run and failed on the host."""
    job = tmp_path / "job.fio"
    job.write_text("[read]\nrw=read\nsize=1MiB\n")
    given = {"--iteration": "1", "--timeout-s": "60", option: value}
    result = storbench(
        tmp_path, "run", "--spec", tiny_run_spec(tmp_path / "target"), "--job", str(job),
        "--manifest", "raw/it1/run.json", *[part for pair in given.items() for part in pair],
    )  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().endswith(f"storbench run: error: {line}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.fio"]


def tiny_render_spec(target: Path) -> dict:
    campaign = config.load_campaign(tiny_config(target, rw=("read",)))
    (run,) = campaign.experiment_runs("tiny")
    return json.loads(plan.to_json(plan.render_spec(campaign, "tiny", run)))


def test_a_hand_written_run_spec_with_a_host_given_as_a_name_is_named(tmp_path):
    """It reached the run engine and stopped there with a traceback (found by mutating specs)."""
    spec = json.loads(tiny_run_spec(tmp_path / "target"))
    (tmp_path / "j.fio").write_text("[read]\nrw=read\n")
    manifest = tmp_path / "it1/run.json"
    result = storbench(
        tmp_path, "run", "--spec", json.dumps({**spec, "hosts": "localhost"}), "--iteration", "1",
        "--job", "j.fio", "--manifest", str(manifest),
    )  # fmt: skip
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        'storbench: error: run spec: hosts must be a list of mappings, not "localhost"'
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j.fio"]


@pytest.mark.parametrize(
    ("change", "line"),
    [
        ({"tool": "fioo"},
         "unknown tool 'fioo' (known: elbencho, fio, gosbench, iperf3, vdbench, warp)"),
        ({"hosts": ["localhost", 2]}, "render spec: hosts[1] must be a string, not 2"),
        ({"target": {"name": "scratch", "type": "directory", "path": True}},
         "render spec: target.path must be a string, not true"),
    ],
    ids=["unknown-tool", "host-not-a-name", "path-not-a-string"],
)  # fmt: skip
def test_a_hand_written_render_spec_out_of_shape_is_named(change, line, tmp_path):
    spec = {**tiny_render_spec(tmp_path / "target"), **change}
    result = storbench(tmp_path, "render", "--spec", json.dumps(spec), "--output", "j.fio")
    assert_refused(result, tmp_path, f"storbench: error: {line}")


def test_a_vdbench_option_refused_at_render_is_one_line(tmp_path):
    """VdbenchJobError is a RenderError now: `render` named it with a traceback before."""
    spec = {
        **tiny_render_spec(tmp_path / "target"),
        "tool": "vdbench",
        "params": {"rw": "randread", "bs": "4k", "size": "1g", "interval": -1},
    }
    result = storbench(tmp_path, "render", "--spec", json.dumps(spec), "--output", "j.vdb")
    assert_refused(
        result, tmp_path, "storbench: error: vdbench: interval must be at least 1 second, got -1"
    )


HOST = {"name": "localhost", "transport": "local"}
TARGET = {"name": "scratch", "type": "directory", "path": "/tmp/storbench-test-never-made"}


@pytest.mark.parametrize(
    ("args", "spec", "line"),
    [
        (["preflight", "--output", "p.json"],
         {"experiment": "demo", "tool": "fio", "target": {**TARGET, "path": 1}, "hosts": [HOST]},
         "preflight spec: target.path must be a string, not 1"),
        (["preflight", "--output", "p.json"],
         {"experiment": "demo", "tool": "fio", "target": TARGET,
          "hosts": [{**HOST, "connect_timeout": {}}]},
         "preflight spec: hosts[0].connect_timeout must be a number, not {}"),
        (["services", "start", "--output", "s.json"],
         {"tool": "fio", "port": "8765", "hosts": [HOST]},
         'services spec: port must be a whole number, not "8765"'),
        (["telemetry", "--output", "t.json"],
         {"host": HOST, "targets": [TARGET], "tools": [["fio"]]},
         'telemetry spec: tools[0] must be a string, not ["fio"]'),
        (["telemetry-hosts"],
         {"hosts": [{"host": HOST, "targets": "scratch", "tools": ["fio"], "output": "t.json"}]},
         'telemetry-hosts host spec: targets must be a list of mappings, not "scratch"'),
        (["network", "--out-dir", "n", "--parquet", "n.parquet"], [HOST],
         "network spec: expected a mapping, got list"),
    ],
    ids=["preflight-target", "preflight-host", "services-port", "telemetry-tools", "hosts-targets",
         "network-list"],
)  # fmt: skip
def test_a_mapping_spec_value_of_the_wrong_shape_is_named(args, spec, line, tmp_path):
    """Found by mutating the steps' real specs: each stopped with a traceback, or failed on
    the host with an error of Python's (preflight's, for a target path that is a number)."""
    result = storbench(tmp_path, *args, "--spec", json.dumps(spec))
    assert_refused(result, tmp_path, f"storbench: error: {line}")


@pytest.mark.parametrize(
    ("target", "line"),
    [
        ({"type": "s3", "endpoint": "http://127.0.0.1:1", "path": "b"},
         "prepare-bucket spec: target: missing key name"),
        ({"name": "s3", "type": "s3", "path": "b"},
         "prepare-bucket spec: target: a target of type s3 needs endpoint, credentials"),
    ],
    ids=["no-name", "no-endpoint"],
)  # fmt: skip
def test_a_bucket_target_without_its_keys_is_named(target, line, tmp_path):
    """It stopped with KeyError: 'name' (a traceback) before asking any endpoint."""
    result = storbench(
        tmp_path, "prepare-bucket", "--target", json.dumps(target), "--bucket", "b",
        "--marker", "bucket.json",
    )  # fmt: skip
    assert_refused(result, tmp_path, f"storbench: error: {line}")


@pytest.mark.parametrize(
    ("args", "meta", "line"),
    [
        (["report", "--summary", "s.parquet"], {"title": "t", "sweep": "bs"},
         'report meta spec: sweep must be a mapping, not "bs"'),
        (["report", "--summary", "s.parquet"], {"title": "t", "max_start_skew_s": "1s"},
         'report meta spec: max_start_skew_s must be a number or null, not "1s"'),
        (["campaign-report"], {"hosts": [{"group": "g"}]},
         "campaign report meta spec: hosts[0] needs a name"),
        (["campaign-report"], {"experiments": {"e": "fio"}},
         "campaign report meta spec: experiments.e must be a mapping"),
        (["campaign-report"], {"units": "metric"},
         "unknown unit system 'metric' (expected decimal or binary)"),
        (["search", "report", "--result", "r.json", "--summary", "s.parquet"], {"hosts": "c1"},
         'search report meta spec: hosts must be a list of strings, not "c1"'),
    ],
    ids=["sweep", "skew", "host-name", "experiment", "units", "search-hosts"],
)  # fmt: skip
def test_a_hand_made_report_meta_out_of_shape_is_named(args, meta, line, tmp_path):
    """Found by mutating a real report's meta: each stopped with a traceback."""
    result = storbench(tmp_path, *args, "--out-dir", "out", "--meta", json.dumps(meta))
    assert_refused(result, tmp_path, f"storbench: error: {line}")


def test_a_spec_given_as_a_file_name_says_how_to_give_the_file(tmp_path):
    """`--spec run.json` read the name as JSON: "Expecting value: line 1 column 1"."""
    (tmp_path / "run.json").write_text(tiny_run_spec(tmp_path / "target"))
    result = storbench(
        tmp_path, "run", "--spec", "run.json", "--iteration", "1", "--job", "j.fio",
        "--manifest", "it1/run.json",
    )  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        "storbench run: error: argument --spec: not valid JSON: run.json is a file; "
        "give - and the file on stdin (< run.json)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


SETUP = {
    "step": "mount", "host": HOST, "host_index": 0, "hosts": 1, "command": "echo mounted",
    "timeout_s": 10, "check": "test -e never-made", "undo": "echo undone",
}  # fmt: skip


def test_a_set_up_step_whose_check_still_fails_is_one_line(tmp_path):
    """SetupError was not among the errors the CLI names: it printed a traceback."""
    result = storbench(tmp_path, "setup", "--spec", json.dumps(SETUP), "--output", "m.json")
    assert_refused(
        result,
        tmp_path,
        "storbench: error: setup mount on host localhost: `echo mounted` ran, but its check "
        "`test -e never-made` still exits 1:\n    (no output)",
    )


def test_a_set_up_step_with_no_time_to_run_is_refused_before_it_runs(tmp_path):
    """A time limit of 0 stopped the step with subprocess's TimeoutExpired traceback."""
    spec = {**SETUP, "command": "touch ran", "timeout_s": 0}
    result = storbench(tmp_path, "setup", "--spec", json.dumps(spec), "--output", "m.json")
    assert_refused(
        result, tmp_path, "storbench: error: setup spec: timeout_s must be seconds above 0, not 0"
    )


def test_an_adapters_own_python_error_at_render_is_one_line_naming_the_run_and_host(tmp_path):
    """A value `check` would refuse (or a host's computed fact made) stopped the render step
    with Python's ValueError and a traceback."""
    spec = {
        **tiny_render_spec(tmp_path / "target"),
        "tool": "warp",
        "target": {"name": "minio", "type": "s3", "endpoint": "http://127.0.0.1:9000",
                   "bucket": "bench", "credentials": {"access_key": "a", "secret_key": "s"}},
        "params": {"op": "get", "numjobs": "four", "runtime": "30s"},
        "host": "client07", "host_index": 0, "role": None,
    }  # fmt: skip
    result = storbench(tmp_path, "render", "--spec", json.dumps(spec), "--output", "j.warp")
    assert_refused(
        result,
        tmp_path,
        "storbench: error: tiny/read_bs4k_nj1 on host client07: warp cannot write this job:"
        " invalid literal for int() with base 10: 'four'",
    )


def _with_file_size_limit(limit: int):
    """A real write error of the kind a full disk gives, without mounting one: the kernel
    refuses a file past RLIMIT_FSIZE (EFBIG) and pyarrow's error names no file."""

    def limit_writes():
        import resource
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limit_writes


def test_a_parse_whose_write_fails_names_the_file_and_publishes_neither_output(tmp_path):
    """The per-interval file (3 KB) fits under the limit, the result table does not: before,
    a traceback, and the series was published without its table."""
    manifest = FIXTURES / "elbencho/storbench-service-4hosts-file/run.json"
    result = subprocess.run(
        [sys.executable, "-m", "storbench", "parse", "--manifest", str(manifest),
         "--output", "it1.parquet", "--timeseries", "it1.timeseries.parquet"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        preexec_fn=_with_file_size_limit(8192),
    )  # fmt: skip
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == f"storbench: error: it1.parquet: {os.strerror(errno.EFBIG)}"
    assert list(tmp_path.iterdir()) == []  # no table, no series, no temporary file
    unlimited = storbench(tmp_path, "parse", "--manifest", str(manifest), "--output",
                          "it1.parquet", "--timeseries", "it1.timeseries.parquet")  # fmt: skip
    assert unlimited.returncode == 0, unlimited.stderr
    assert (tmp_path / "it1.parquet").stat().st_size > 8192
    assert 0 < (tmp_path / "it1.timeseries.parquet").stat().st_size < 8192


def test_a_full_disk_that_names_no_file_is_still_one_line():
    """A write outside an atomic output (a library's own file): the state, not a traceback."""
    from storbench.cli import file_problem

    error = OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28]")
    assert file_problem(error) == (
        "No space left on device ([Errno 28] Error writing bytes to file. Detail: [errno 28])"
    )
    assert file_problem(OSError(errno.EBADF, "Bad file descriptor")) is None  # a bug: traceback
