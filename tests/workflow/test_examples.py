"""Every shipped config validates and plans; the ready-job-file example really runs."""

import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from tests.sshd import generate_key
from tests.workflow.test_workflow import REPO, SNAKEMAKE, planned_jobs, snakemake

CONFIGS = sorted([REPO / "config/config.yaml", *(REPO / "config/examples").glob("*.yaml")])


LAB_KEY = ".cache/lab/client_ed25519"  # the loopback example's key (`make lab` makes it)


def with_existing_key(config: Path, tmp_path: Path) -> Path:
    """The config, or a copy naming a key that exists (check refuses a missing identity)."""
    text = config.read_text()
    if LAB_KEY not in text:
        return config
    key = tmp_path / "client_ed25519"
    generate_key(key)
    copy = tmp_path / config.name
    copy.write_text(text.replace(LAB_KEY, str(key)))
    return copy


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_config_validates_and_plans(config, tmp_path):
    checked = with_existing_key(config, tmp_path)
    check = subprocess.run(
        [sys.executable, "-m", "storbench", "check", "--config", str(checked)],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert check.returncode == 0, check.stderr
    dry = subprocess.run(
        [SNAKEMAKE, "-n", "--forceall", "--configfile", str(checked)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert dry.returncode == 0, dry.stdout[-2000:] + dry.stderr[-2000:]
    jobs = planned_jobs(dry)
    assert jobs.get("report_experiment", 0) + jobs.get("search_report", 0) >= 1
    if config.parent.name == "examples":
        assert documented_dry_run(config) == planned_jobs(dry)


DRY_RUN_HEADER = "# Dry run (snakemake -n --forceall --configfile <this file>) plans these jobs:"


def documented_dry_run(config: Path) -> dict:
    """The job counts an example's closing comment promises."""
    text = config.read_text()
    assert DRY_RUN_HEADER in text, f"{config.name} lacks its dry-run comment"
    counts = {}
    for line in text[text.index(DRY_RUN_HEADER) :].splitlines()[1:]:
        rule, count = line.lstrip("# ").split()
        if rule != "total":
            counts[rule] = int(count)
    return counts


EXAMPLES = sorted((REPO / "config/examples").glob("*.yaml"))
COMMENT_COMMAND = re.compile(r"^#.*?(?:^#|\s)snakemake (.+?)(?:\s{2,}\(.*\))?$")
COMMENT_PATH = re.compile(r"\b(?:results|reports)/[\w.-][\w./-]*")


def comment_lines(config: Path) -> list[str]:
    return [line for line in config.read_text().splitlines() if line.startswith("#")]


@pytest.mark.parametrize("config", EXAMPLES, ids=lambda p: p.name)
def test_the_outputs_an_example_names_are_under_its_campaign(config):
    campaign = yaml.safe_load(config.read_text())["campaign"]
    named = [path for line in comment_lines(config) for path in COMMENT_PATH.findall(line)]
    assert [
        path
        for path in named
        if not path.startswith((f"results/{campaign}/", f"reports/{campaign}/"))
    ] == []


def documented_commands(config: Path) -> list[list[str]]:
    """The snakemake command lines an example's comments give, past its plain run."""
    commands = []
    for line in comment_lines(config):
        if match := COMMENT_COMMAND.match(line):
            args = match.group(1).split()
            if args != ["--configfile", str(config.relative_to(REPO))]:
                commands.append(args)
    return commands


@pytest.mark.parametrize(
    "config", [c for c in EXAMPLES if documented_commands(c)], ids=lambda p: p.name
)
def test_the_commands_an_example_gives_plan(config):
    """A target after --configfile is read as a config file: each command as written plans."""
    for args in documented_commands(config):
        dry = subprocess.run([SNAKEMAKE, "-n", *args], cwd=REPO, capture_output=True, text=True)
        assert (args, dry.returncode) == (args, 0), dry.stderr[-2000:]


def test_demo_plans_the_issue_sweep():
    dry = subprocess.run([SNAKEMAKE, "-n", "--forceall"], cwd=REPO, capture_output=True, text=True)
    assert planned_jobs(dry)["run_iteration"] == 4 * 2 * 2 * 3


def test_ready_job_file_is_run_parsed_and_reported(tmp_path):
    config = yaml.safe_load((REPO / "config/examples/own-job-file.yaml").read_text())
    job_file = tmp_path / "own.fio"
    job_file.write_text(
        (REPO / "config/examples/own-job-file.fio")
        .read_text()
        .replace("/var/tmp/storbench/own", str(tmp_path / "target"))
    )
    config["experiments"]["own_job"]["job_file"] = str(job_file)
    config["targets"]["local_scratch"]["path"] = str(tmp_path / "target")
    config["experiments"]["own_job"]["iterations"] = 1
    snakemake(tmp_path, config)
    rows = pq.read_table(tmp_path / "results/own-job-file/own_job/summary.parquet").to_pylist()
    jobs = {(r["job"], r["op"], r["bs"]) for r in rows if r["host"] == "all"}
    assert jobs == {("seq-read-128k", "read", 131072), ("rand-write-4k", "write", 4096)}
    assert Path(tmp_path / "reports/own-job-file/own_job/index.html").exists()
