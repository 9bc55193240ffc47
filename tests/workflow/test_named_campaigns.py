"""Two configs in one checkout: a campaign name keeps each one's results, reports and
telemetry apart, so running one never reruns or replaces the other."""

import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
import yaml

from tests.workflow.test_workflow import REPO, SNAKEMAKE, tiny_config

pytestmark = pytest.mark.workflow


def run(workdir, configfile, *args):
    command = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--configfile", configfile, "--cores", "2"]
    result = subprocess.run(
        [*command, *args], cwd=workdir, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def named(workdir, name, rw):
    config = tiny_config(workdir / f"target-{name}", rw=(rw,))
    config["campaign"] = name
    config["experiments"]["tiny"]["iterations"] = 1
    (workdir / f"{name}.yaml").write_text(yaml.safe_dump(config))
    return f"{name}.yaml"


def test_two_named_campaigns_with_the_same_experiment_stay_apart(tmp_path):
    alpha, beta = named(tmp_path, "alpha", "read"), named(tmp_path, "beta", "write")
    alpha_log = run(tmp_path, alpha).stderr
    run(tmp_path, beta)
    again = run(tmp_path, alpha, "-n")
    assert "Nothing to be done" in again.stdout + again.stderr

    for name, op in (("alpha", "read"), ("beta", "write")):
        folder = tmp_path / "results" / name / "tiny"
        (row,) = [
            r for r in pq.read_table(folder / "summary.parquet").to_pylist() if r["host"] == "all"
        ]
        manifest = json.loads((folder / f"raw/{op}_bs4k_nj1/it1/run.json").read_text())
        raw = folder / f"raw/{op}_bs4k_nj1/it1" / manifest["raw_dir"] / "localhost.json"
        job = json.loads(raw.read_text())["jobs"][0][op]
        assert (row["op"], row["bytes"], row["iops"]) == (op, job["io_bytes"], job["iops"])
        assert (tmp_path / f"results/{name}/telemetry/localhost.json").is_file()
        summary_csv = (tmp_path / f"reports/{name}/tiny/summary.csv").read_text()
        assert f"{op}_bs4k_nj1" in summary_csv
        assert (tmp_path / f"reports/{name}/campaign/index.html").is_file()
    # the storbench logger plugin's lines, beside Snakemake's own
    assert "storbench: runs done 0 of 1 (0%) · running tiny/read_bs4k_nj1 it1 · planned time" in (
        alpha_log
    )
    assert "storbench: runs done 1 of 1 (100%)\n" in alpha_log
    assert not (tmp_path / "results/tiny").exists() and not (tmp_path / "reports/campaign").exists()

    progress = subprocess.run(
        [sys.executable, "-m", "storbench", "progress", "--config", beta],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert progress.stdout.startswith("runs done: 1 of 1 (100%)")
