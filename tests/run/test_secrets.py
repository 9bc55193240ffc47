"""S3 keys reach the tool and nothing else: not results, logs, reports, PDFs or Snakemake's files.

A whole campaign runs under Snakemake against a real MinIO (bucket preparation, preflight,
run, parse, gather, report, campaign report, PDFs). warp cannot be installed here, so a
stand-in `warp` on PATH records the keys it was given (outside the workflow folder) and
answers with warp 1.1.3's real analysis from tests/fixtures/warp.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from storbench.core.specs import RunSpec
from storbench.run.attempt import RunError
from storbench.run.engine import run_iteration
from tests.minio import free_port
from tests.paths import FIXTURES as SHARED_FIXTURES
from tests.run.test_s3 import bucket_names, every_file_text, warp_campaign
from tests.workflow.test_workflow import snakemake

FIXTURES = SHARED_FIXTURES / "warp"

STAND_IN_WARP = """\
#!/bin/sh
case "$1" in
  --version) echo "warp version 1.1.3 - 27b021d"; exit 0 ;;
  analyze) cat {analysis}; exit 0 ;;
esac
printf '%s %s\\n' "$WARP_ACCESS_KEY" "$WARP_SECRET_KEY" >> {proof}
echo "stand-in warp $*"
echo "stand-in warp: a line on stderr" >&2
for argument in "$@"; do
  case $argument in --benchdata=*) : > "${{argument#--benchdata=}}.json.zst" ;; esac
done
"""


@pytest.fixture
def stand_in_warp(tmp_path, monkeypatch) -> Path:
    """A `warp` on PATH; returns the file where it appends the keys it got, one run a line."""
    bin_dir, proof = tmp_path / "bin", tmp_path / "proof.txt"
    bin_dir.mkdir()
    script = STAND_IN_WARP.format(analysis=FIXTURES / "analyze-put-full.json", proof=proof)
    (bin_dir / "warp").write_text(script)
    (bin_dir / "warp").chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return proof


def secret_campaign(endpoint: str) -> dict:
    """test_s3's warp campaign as a put of the fixture's shape, two iterations."""
    raw = warp_campaign(endpoint)
    raw["experiments"]["objects"].update(
        iterations=2, job={"op": "put", "runtime": "10s", "numjobs": 4}, sweep={"bs": ["4k"]}
    )
    return raw


def test_keys_reach_the_tool_but_no_result_log_report_or_pdf(minio, monkeypatch, tmp_path,
                                                             stand_in_warp):  # fmt: skip
    monkeypatch.setenv("SB_ACCESS", minio.access_key)
    monkeypatch.setenv("SB_SECRET", minio.secret_key)
    workdir = tmp_path / "campaign"
    workdir.mkdir()
    done = snakemake(workdir, secret_campaign(minio.endpoint), "--resources", "lock_minio=1")

    # the tool got the keys, once per iteration, and did its work
    proof_lines = stand_in_warp.read_text().splitlines()
    assert proof_lines == [f"{minio.access_key} {minio.secret_key}"] * 2
    assert "storbench-objects" in bucket_names(minio)
    rows = pq.read_table(workdir / "results/objects/summary.parquet").to_pylist()
    host_rows = [row for row in rows if row["host"] == "localhost"]
    assert sorted(row["ios"] for row in host_rows) == [7936, 7936]  # analyze-put-full.json
    pdfs = sorted(workdir.glob("reports/*/report.pdf"))
    assert [pdf.parent.name for pdf in pdfs] == ["campaign", "objects"]

    # and nothing storbench or Snakemake wrote holds either key
    tool_stderr = sorted(workdir.glob("results/objects/raw/*/it*/a1/localhost.stderr"))
    assert [path.read_text() for path in tool_stderr] == ["stand-in warp: a line on stderr\n"] * 2
    assert len(list(workdir.glob("results/objects/logs/run/*.log"))) == 2
    pdf_text = "".join(
        subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True).stdout
        for pdf in pdfs
    )
    assert "objects" in pdf_text
    everything = every_file_text(workdir) + done.stdout + done.stderr + pdf_text
    for key in (minio.access_key, minio.secret_key):
        assert key not in everything


STAND_IN_GOSBENCH_SERVER = """\
#!/bin/sh
# logs the S3 settings of its config (as a debug log could), then fails
while [ $# -gt 0 ]; do case $1 in -c) grep -E 'access_key|secret_key' "$2" ;; esac; shift; done
exit 3
"""


def test_a_failed_service_run_quotes_its_controllers_output_without_the_keys(tmp_path, monkeypatch):
    """gosbench-server prints its config's keys and fails: the run's error quotes its output
    tail with *** for each key (that text goes to the step's log and Snakemake's)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, script in (("gosbench-server", STAND_IN_GOSBENCH_SERVER),
                         ("gosbench-worker", "#!/bin/sh\nexit 0\n")):  # fmt: skip
        (bin_dir / name).write_text(script)
        (bin_dir / name).chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("SB_ACCESS", "AKSERVICEPLANTED")
    monkeypatch.setenv("SB_SECRET", "SKSERVICEPLANTED")
    job = tmp_path / "jobs" / "localhost.yaml"
    job.parent.mkdir()
    job.write_text(
        "s3_config:\n  - access_key: '@@STORBENCH_ACCESS_KEY@@'\n"
        "    secret_key: '@@STORBENCH_SECRET_KEY@@'\ntests: []\n"
    )
    host = {"name": "localhost", "transport": "local", "workdir": str(tmp_path / "w")}
    spec = RunSpec.from_dict({
        "experiment": "gos", "run_id": "write_bs4k_nj2", "tool": "gosbench", "params": {},
        "target": {"name": "store", "type": "s3", "endpoint": "http://127.0.0.1:9",
                   "credentials": {"access_key_env": "SB_ACCESS", "secret_key_env": "SB_SECRET"}},
        "hosts": [host], "timeout_s": 30, "execution": "service",
        "service": {"hosts": [host], "port": free_port(), "tool": "gosbench"},
    })  # fmt: skip
    manifest_path = tmp_path / "raw/it1/run.json"
    with pytest.raises(RunError) as failed:
        run_iteration(spec, 1, {"localhost": str(job)}, str(manifest_path))
    message = str(failed.value)
    assert message.startswith(
        "gos/write_bs4k_nj2: gosbench client exited 3; controller.stderr tail:\n"
    )
    assert [line for line in message.splitlines() if "_key" in line] == [
        "      - access_key: '***'",
        "        secret_key: '***'",
    ]
    failed_note = (manifest_path.parent / "a1" / "failed.txt").read_text()
    assert "secret_key: '***'" in failed_note and "SKSERVICEPLANTED" not in failed_note


def test_an_attempt_killed_before_its_scrub_is_scrubbed_when_the_next_one_starts(
    tmp_path, monkeypatch, stand_in_warp
):
    """A SIGKILLed run never reaches its scrub: its raw folder kept the keys its tool printed
    (warp's stdout here) until the next attempt of the iteration finds it lost."""
    monkeypatch.setenv("SB_ACCESS", "AKKILLEDPLANTED")
    monkeypatch.setenv("SB_SECRET", "SKKILLEDPLANTED")
    killed = tmp_path / "raw/it1/a1"
    killed.mkdir(parents=True)
    (killed / "localhost.stdout").write_text("debug: AKKILLEDPLANTED SKKILLEDPLANTED\n")
    job = tmp_path / "job.warp"
    job.write_text("put\n--duration=10s\n")
    spec = RunSpec.from_dict({
        "experiment": "objects", "run_id": "put", "tool": "warp", "params": {},
        "target": {"name": "store", "type": "s3", "endpoint": "http://127.0.0.1:9",
                   "bucket": "storbench-objects",
                   "credentials": {"access_key_env": "SB_ACCESS", "secret_key_env": "SB_SECRET"}},
        "hosts": [{"name": "localhost", "transport": "local", "workdir": str(tmp_path / "w")}],
        "timeout_s": 30,
    })  # fmt: skip
    manifest = run_iteration(spec, 1, str(job), str(tmp_path / "raw/it1/run.json"))
    assert manifest.attempt == 2
    assert stand_in_warp.read_text() == "AKKILLEDPLANTED SKKILLEDPLANTED\n"
    assert (killed / "localhost.stdout").read_text() == "debug: *** ***\n"
