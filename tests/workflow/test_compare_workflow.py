"""Comparisons through real Snakemake and real fio: reports, thresholds failing `rule all`."""

import csv
import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from storbench.config import campaign as storbench_config
from storbench.config import compare as config_compare
from tests.workflow.test_workflow import snakemake, tiny_config

# Both sides are throttled so their IOPS are steady: B is a quarter of A, a clear drop.
# invalidate=0 keeps the file in the page cache, so a busy disk cannot slow either side.
FAST_IOPS, SLOW_IOPS = 2000, 500


def two_experiments(target_dir) -> dict:
    config = tiny_config(target_dir, rw=("randread",))
    tiny = config["experiments"].pop("tiny")
    for name, rate in (("fast", FAST_IOPS), ("slow", SLOW_IOPS)):
        config["experiments"][name] = {
            **tiny,
            "job": {**tiny["job"], "rate_iops": rate, "invalidate": 0},
        }
    return config


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("compare")
    config = two_experiments(workdir / "target")
    config["compare"] = [
        {"a": "fast", "b": "slow", "thresholds": {"iops": "-5%"}},
        {"a": "slow", "b": "fast", "name": "recovery", "thresholds": {"iops": "-5%"}},
    ]
    # --keep-going: the failing check must not stop the passing one
    result = snakemake(workdir, config, "--keep-going", check=False)
    return workdir, config, result


def mean_iops(summary_path) -> float:
    rows = [
        row
        for row in pq.read_table(summary_path).to_pylist()
        if row["host"] == "all" and row["op"] == "read"
    ]
    assert sorted(row["iteration"] for row in rows) == [1, 2]
    assert {row["attempt"] for row in rows} == {1}
    return sum(row["iops"] for row in rows) / len(rows)


def change_rows(report_dir) -> dict:
    with open(report_dir / "comparison.csv") as handle:
        return {row["metric"]: row for row in csv.DictReader(handle)}


def test_a_crossed_threshold_fails_snakemake_and_keeps_the_report(compared):
    workdir, _, result = compared
    assert result.returncode != 0
    report_dir = workdir / "reports/compare/fast_vs_slow"
    fast = mean_iops(workdir / "results/fast/summary.parquet")
    slow = mean_iops(workdir / "results/slow/summary.parquet")
    iops = change_rows(report_dir)["iops"]
    assert (iops["run_id_a"], iops["run_id_b"]) == ("randread_bs4k_nj1", "randread_bs4k_nj1")
    assert float(iops["mean_a"]) == pytest.approx(fast, rel=1e-12)
    assert float(iops["mean_b"]) == pytest.approx(slow, rel=1e-12)
    assert float(iops["change_pct"]) == pytest.approx((slow - fast) / fast * 100, rel=1e-9)
    assert iops["significant"] == "True"
    verdict = json.loads((report_dir / "regressions.json").read_text())
    assert (verdict["a"], verdict["b"], verdict["thresholds"]) == ("fast", "slow", {"iops": "-5%"})
    (message,) = verdict["regressions"]
    assert message.startswith("fio randread bs=4k") and "iops (IOPS)" in message
    assert "crosses the threshold -5 %" in message
    assert not (report_dir / "passed.json").exists()
    output = result.stdout + result.stderr
    assert "compare_check" in output and message in output
    log = (workdir / "results/logs/compare/fast_vs_slow/check.log").read_text()
    assert "1 regression(s)" in log and message in log


def test_a_threshold_not_crossed_passes(compared):
    workdir, _, _ = compared
    report_dir = workdir / "reports/compare/recovery"
    fast = mean_iops(workdir / "results/fast/summary.parquet")
    slow = mean_iops(workdir / "results/slow/summary.parquet")
    iops = change_rows(report_dir)["iops"]
    assert float(iops["change_pct"]) == pytest.approx((fast - slow) / slow * 100, rel=1e-9)
    passed = json.loads((report_dir / "passed.json").read_text())
    assert passed == {
        "a": "slow",
        "b": "fast",
        "thresholds": {"iops": "-5%"},
        "regressions": [],
        "warnings": [],  # both sides ran this machine's fio
        "passed": True,
    }
    assert (report_dir / "index.html").is_file() and (report_dir / "unmatched.csv").is_file()


def test_a_results_folder_as_side(compared):
    workdir, config, _ = compared
    # the folder of an earlier campaign; a drop of 75 % does not cross -90 %
    config = {
        **config,
        "compare": [{"a": "results/fast", "b": "slow", "thresholds": {"iops": "-90%"}}],
    }
    snakemake(workdir, config)
    report_dir = workdir / "reports/compare/results-fast_vs_slow"
    assert json.loads((report_dir / "passed.json").read_text())["a"] == "results/fast"
    assert (
        change_rows(report_dir)["iops"]["change_pct"]
        == (change_rows(workdir / "reports/compare/fast_vs_slow")["iops"]["change_pct"])
    )


def test_cli_report_and_check(compared, tmp_path):
    workdir, _, _ = compared
    storbench = [sys.executable, "-m", "storbench", "compare"]
    report = subprocess.run(
        [*storbench, "report", "results/fast", "results/slow/summary.parquet"]
        + ["--out-dir", str(tmp_path), "--threshold", "iops=-5%", "p99_ns=+1000%"],
        cwd=workdir,
        capture_output=True,
        text=True,
    )
    assert report.returncode == 0, report.stderr
    assert f"{tmp_path}: 1 matched cell(s)" in report.stdout and "1 regression(s)" in report.stdout
    verdict = json.loads((tmp_path / "regressions.json").read_text())
    assert verdict["a"] == "results/fast"
    assert verdict["thresholds"] == {"iops": "-5%", "p99_ns": "+1000%"}
    check = subprocess.run(
        [*storbench, "check", str(tmp_path / "regressions.json"), "--output", "p.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert check.returncode == 1 and verdict["regressions"][0] in check.stderr
    assert not (tmp_path / "p.json").exists()


def test_unknown_experiment_is_a_config_error(tmp_path):
    config = two_experiments(tmp_path / "target")
    config["compare"] = [{"a": "fast", "b": "slower"}]
    result = snakemake(tmp_path, config, "-n", check=False)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "compare[0].b: unknown experiment 'slower' (defined: fast, slow;" in output


def test_compare_entries_are_checked(tmp_path):
    config = two_experiments(tmp_path / "target")
    config["compare"] = [
        {"a": "old/results/fast", "b": "slow"},
        {"a": "fast", "b": "slow"},
        {"a": "slow", "b": "fast", "name": "fast_vs_slow"},
        {"a": "fast", "b": "slow", "thresholds": {"iops": "+5%"}},
    ]
    with pytest.raises(storbench_config.ConfigError) as error:
        storbench_config.load_campaign(config)
    problems = error.value.problems
    assert (
        "compare[3].thresholds.iops: '+5%' is not a drop in percent, with its sign ('-5%')"
    ) in problems
    del config["compare"][3]
    with pytest.raises(storbench_config.ConfigError) as error:
        storbench_config.load_campaign(config)
    assert error.value.problems == [
        "compare[0].a: no 'old/results/fast/summary.parquet'; expected a results folder "
        "holding summary.parquet, or the file itself",
        "compare[2].name: 'fast_vs_slow' is also the name of compare[1]; "
        "give one of them another name",
    ]


def test_default_names():
    entries = config_compare.comparisons(
        {"compare": [{"a": "../old/results/demo/summary.parquet", "b": "demo"}]}
    )
    (entry,) = entries
    assert entry.name == "old-results-demo_vs_demo"
    assert entry.a == config_compare.CompareSide(
        "../old/results/demo/summary.parquet", None, "../old/results/demo/summary.parquet"
    )
    assert entry.b == config_compare.CompareSide("demo", "demo", "results/demo/summary.parquet")


def test_default_names_of_two_imports_in_one_folder_differ():
    """storbench import -o old/run.v1.parquet, then run.v2.parquet beside it."""
    entries = config_compare.comparisons(
        {
            "compare": [
                {"a": "demo", "b": "old/run.v1.parquet"},
                {"a": "demo", "b": "old/run.v2.parquet"},
            ]
        }
    )
    assert [entry.name for entry in entries] == ["demo_vs_old-run.v1", "demo_vs_old-run.v2"]
