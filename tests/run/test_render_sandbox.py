"""A user's job template cannot run anything: rendering is sandboxed, in `plan` too."""

from __future__ import annotations

import pytest
import yaml

from storbench import cli
from storbench.run.render import RenderError, render_job
from tests.workflow.test_workflow import snakemake

ESCAPES = {
    "cycler-globals": "{{ cycler.__init__.__globals__.os.popen('touch MARK').read() }}",
    "class-subclasses": "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "joiner-globals": "{{ joiner.__init__.__globals__['os'].system('touch MARK') }}",
    "namespace-globals": "{{ namespace.__init__.__globals__.os.system('touch MARK') }}",
}


def spec(template) -> dict:
    return {
        "experiment": "e",
        "run_id": "r",
        "tool": "fio",
        "target": {"name": "t", "type": "directory", "path": "/tmp"},
        "params": {"rw": "read", "bs": "4k", "size": "1m"},
        "point": {},
        "hosts": ["localhost"],
        "template": str(template),
        "job_file": None,
    }


@pytest.mark.parametrize("text", ESCAPES.values(), ids=ESCAPES.keys())
def test_template_escapes_are_refused_and_run_nothing(text, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    template = tmp_path / "job.fio.j2"
    template.write_text(f"[job]\nrw={{{{ options.rw }}}}\n{text}\n")
    with pytest.raises(RenderError, match=r"refused by the template sandbox"):
        render_job(spec(template))
    assert not (tmp_path / "MARK").exists()


def test_a_plain_user_template_still_renders(tmp_path):
    template = tmp_path / "job.fio.j2"
    template.write_text("[job]\n{% for k, v in options.items() %}{{ k }}={{ v }}\n{% endfor %}")
    assert render_job(spec(template)).splitlines() == ["[job]", "rw=read", "bs=4k", "size=1m"]


def test_plan_refuses_the_template_and_touches_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    template = tmp_path / "evil.fio.j2"
    template.write_text("[job]\n" + ESCAPES["cycler-globals"] + "\n")
    config = {
        "hosts": {"local": {"transport": "local", "nodes": "localhost"}},
        "targets": {"t": {"type": "directory", "path": str(tmp_path / "scratch")}},
        "experiments": {
            "e": {
                "tool": "fio",
                "hosts": "local",
                "target": "t",
                "template": str(template),
                "job": {"rw": "read", "bs": "4k", "size": "1m", "runtime": "1s"},
            }
        },
    }
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(config))
    code = cli.main(["plan", "--config", str(path)])
    err = capsys.readouterr().err
    assert code != 0
    assert f"template {template}: refused by the template sandbox" in err
    assert not (tmp_path / "MARK").exists()


def test_snakemake_plan_and_the_run_refuse_it_and_touch_nothing(tmp_path):
    template = tmp_path / "evil.fio.j2"
    template.write_text("[job]\n" + ESCAPES["joiner-globals"] + "\n")
    config = {
        "hosts": {"localhost": {"transport": "local"}},
        "targets": {"scratch": {"type": "directory", "path": str(tmp_path / "scratch")}},
        "experiments": {
            "e": {"tool": "fio", "hosts": "localhost", "target": "scratch",
                  "template": str(template),
                  "job": {"rw": "read", "bs": "4k", "size": "1m", "runtime": "1s"}},
        },
    }  # fmt: skip
    for target in ("plan", "all"):
        result = snakemake(tmp_path, config, target, check=False)
        output = result.stdout + result.stderr
        assert result.returncode != 0, target
        assert "refused by the template sandbox" in output + _logs(tmp_path), target
        assert not (tmp_path / "MARK").exists()
    assert not list(tmp_path.glob("results/e/raw/*/it*/run.json"))


def _logs(workdir) -> str:
    return "".join(path.read_text() for path in workdir.glob("results/**/*.log"))
