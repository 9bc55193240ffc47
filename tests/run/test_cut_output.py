"""An output cut short while the tool exits 0 (fio on a full disk) fails its run, published
nothing, instead of a manifest whose parse fails on every later campaign."""

from __future__ import annotations

from pathlib import Path

import pytest

from storbench.core.specs import RunSpec
from storbench.run import engine as runner
from storbench.run.attempt import RunError
from storbench.run.engine import FAILED_NOTE, PUBLISHED_COPY
from storbench.tools.fio import FioAdapter

FIXTURES = Path(__file__).parents[1] / "fixtures" / "fio"
WHOLE = FIXTURES / "standalone-group.jsonplus.json"
SERIES = FIXTURES / "status-interval.json.txt"  # interim reports, then the final one


def cut(source: Path, folder: Path, keep: int) -> Path:
    path = folder / f"cut-{source.name}"
    path.write_bytes(source.read_bytes()[:keep])
    return path


def test_fios_whole_reports_pass_and_cut_ones_are_named(tmp_path):
    fio = FioAdapter()
    assert fio.output_problem(WHOLE) is None
    assert fio.output_problem(SERIES) is None
    cut_final = cut(SERIES, tmp_path, SERIES.stat().st_size - 200)  # the final report cut
    assert fio.output_problem(cut_final) == (
        f"fio exited 0, but its output {cut_final.name} ({SERIES.stat().st_size - 200}"
        " characters) holds no whole JSON report: cut short (a full disk where it was written?)"
    )
    assert "holds no whole JSON report" in fio.output_problem(cut(WHOLE, tmp_path, 16384))
    assert "(0 characters)" in fio.output_problem(cut(WHOLE, tmp_path, 0))


def local_run(tmp_path: Path, timeout_s: float) -> tuple[Path, RunSpec]:
    """A job file and the spec of a run of it on this machine."""
    job = tmp_path / "job.fio"
    job.write_text("[j]\nrw=read\nsize=1m\n")
    spec = RunSpec.from_dict({
        "experiment": "e", "run_id": "r", "tool": "fio",
        "target": {"name": "t", "type": "directory", "path": str(tmp_path / "target")},
        "params": {}, "timeout_s": timeout_s,
        "hosts": [{"name": "localhost", "transport": "local", "workdir": str(tmp_path / "w")}],
    })  # fmt: skip
    return job, spec


class CutFio(FioAdapter):
    """fio's real output, cut where a full disk cut it, and exit 0, as fio did."""

    def command(self, job_path, output_path, host):
        script = f'head -c 16384 {WHOLE} > "$1"'
        return ["sh", "-c", script, "cut-fio", output_path, job_path]  # the job: its marker

    def run_command(self, job_path, output_path, host, params):
        return self.command(job_path, output_path, host)


def test_a_cut_output_fails_the_run_and_publishes_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "get_tool", lambda name: CutFio())
    job, spec = local_run(tmp_path, timeout_s=30)
    manifest = tmp_path / "raw/it1/run.json"
    with pytest.raises(RunError) as failed:
        runner.run_iteration(spec, 1, str(job), str(manifest))
    assert "host localhost: fio exited 0, but its output localhost.json (16384 characters)" in (
        str(failed.value)
    )
    attempt = manifest.parent / "a1"
    assert not manifest.exists() and not (attempt / PUBLISHED_COPY).exists()
    assert "holds no whole JSON report" in (attempt / FAILED_NOTE).read_text()
    assert (attempt / "localhost.json").stat().st_size == 16384  # the raw output is kept


class StalledTool(FioAdapter):
    """A tool that ignores SIGTERM (as a SIGSTOPped fio does) past its time limit."""

    def command(self, job_path, output_path, host):
        return ["sh", "-c", 'trap "" TERM; sleep 20', "stalled", job_path]

    def run_command(self, job_path, output_path, host, params):
        return self.command(job_path, output_path, host)


def test_a_tool_killed_after_its_time_limit_is_named_as_timed_out(tmp_path, monkeypatch):
    """It was 'killed by SIGKILL', with no word of the time limit (SIGSTOP in the audit)."""
    from storbench.hosts import base

    monkeypatch.setattr(runner, "get_tool", lambda name: StalledTool())
    monkeypatch.setattr(base, "KILL_AFTER_S", 1)  # `timeout -k`: SIGKILL 1 s after SIGTERM
    monkeypatch.setattr(runner, "KILL_AFTER_S", 1)
    job, spec = local_run(tmp_path, timeout_s=1)
    with pytest.raises(RunError) as failed:
        runner.run_iteration(spec, 1, str(job), str(tmp_path / "raw/it1/run.json"))
    lines = str(failed.value).splitlines()
    assert lines[:2] == [
        "e/r: fio failed",
        "host localhost: fio timed out after 1 s and killed by SIGKILL: it did not stop on"
        " SIGTERM within 1 s; stderr tail:",
    ]
