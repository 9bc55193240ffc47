"""Steps that work on results only (parse, gather, reports, job files) yield the controller's
cores to the run steps beside them: run as the `storbench` program, they raise their niceness."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow.parquet as pq

from storbench import cli
from tests.analysis.test_bad_raw_output import fixture, write_iteration

# a step as the program runs it (main() reading sys.argv), or called in process; then the
# exit code and the niceness before and after it
AS_PROGRAM = "sys.argv = ['storbench', *sys.argv[1:]]\ncode = cli.main()\n"
IN_PROCESS = "code = cli.main(sys.argv[1:])\n"


def step(how: str, *argv: str) -> tuple[int, int, int, str]:
    code = (
        "import os, sys\nfrom storbench import cli\nbefore = os.nice(0)\n"
        f"{how}print(code, before, os.nice(0))\n"
    )
    result = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
    exit_code, before, after = map(int, result.stdout.splitlines()[-1].split())
    return exit_code, before, after, result.stderr


def test_a_parse_run_as_the_program_raises_its_niceness_and_still_parses(tmp_path):
    manifest = write_iteration(tmp_path / "it1", {"h1": fixture()})
    output = tmp_path / "parsed" / "it1.parquet"
    code, before, after, _ = step(
        AS_PROGRAM, "parse", "--manifest", str(manifest), "--output", str(output)
    )
    assert code == 0
    assert after == min(before + cli.BACKGROUND_NICENESS, 19)
    rows = pq.read_table(output).to_pandas()
    # fio's own IOPS of the fixture's 4 jobs (randrw: its reads and its writes)
    expected = sorted(
        op["iops"]
        for job in json.loads(fixture())["jobs"]
        for op in (job["read"], job["write"])
        if op["iops"]
    )
    assert sorted(rows[rows["host"] == "h1"]["iops"]) == expected


def test_the_same_step_called_in_process_leaves_the_callers_priority(tmp_path):
    manifest = write_iteration(tmp_path / "it1", {"h1": fixture()})
    output = tmp_path / "parsed" / "it1.parquet"
    code, before, after, _ = step(
        IN_PROCESS, "parse", "--manifest", str(manifest), "--output", str(output)
    )
    assert (code, after) == (0, before)
    assert len(pq.read_table(output)) == 10  # 5 rows of host h1, 5 of 'all'


def test_a_run_keeps_its_priority(tmp_path):
    code, before, after, stderr = step(
        AS_PROGRAM, "run", "--spec", '{"tool": "fio"}', "--iteration", "1", "--timeout-s", "5",
        "--job", str(tmp_path / "job.fio"), "--manifest", str(tmp_path / "run.json"),
    )  # fmt: skip
    assert after == before
    # a hand-written spec missing keys: refused naming them, no traceback
    assert code == 1 and "Traceback" not in stderr
    assert stderr.strip() == (
        "storbench: error: run spec: missing key(s) experiment, hosts, params, run_id, target,"
        " timeout_s"
    )


def test_background_steps_are_those_that_touch_no_host():
    parser = cli.build_parser()

    def background(*argv: str) -> bool:
        return cli._in_background(parser.parse_args(list(argv)))

    assert background("parse", "--manifest", "m", "--output", "o")
    assert background("gather", "--output", "o", "p")
    assert background("render", "--spec", "{}", "--output", "o")
    assert background("pdf", "--html", "a.html", "--pdf", "a.pdf")
    assert background("search", "report") and background("search", "gather")
    assert background("prepare", "report")
    assert not background("search", "probe") and not background("prepare", "stage")
    assert not background("preflight", "--spec", "{}", "--output", "o")
    assert not background("telemetry-hosts", "--spec", "{}")
    assert not background(
        "run", "--spec", "{}", "--iteration", "1", "--timeout-s", "5", "--job", "j",
        "--manifest", "m",
    )  # fmt: skip
