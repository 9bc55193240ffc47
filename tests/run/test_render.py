"""Job files from templates: the default fio template, own templates, ready job files."""

import os

import pytest

from storbench.run.render import RenderError, render_job

SPEC = {
    "experiment": "demo",
    "run_id": "randread_bs4k_qd16_nj1",
    "tool": "fio",
    "target": {"name": "scratch", "type": "directory", "path": "/var/tmp/storbench/scratch"},
    "params": {"size": "256MiB", "runtime": "5s", "rw": "randread", "bs": "4k", "iodepth": 16},
    "point": {"rw": "randread", "bs": "4k", "iodepth": 16},
    "hosts": ["localhost"],
    "template": None,
    "job_file": None,
}


def option_lines(text: str) -> dict:
    return dict(
        line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith(";")
    )


def test_default_fio_template_renders_every_option():
    text = render_job(SPEC)
    options = option_lines(text)
    assert options["directory"] == "/var/tmp/storbench/scratch/${STORBENCH_HOST}"
    assert options["size"] == "256m"  # fio would read '256MiB' as 256,000,000 bytes
    assert options["runtime"] == "5s" and options["time_based"] == "1"
    assert options["rw"] == "randread" and options["bs"] == "4k" and options["iodepth"] == "16"
    assert options["group_reporting"] == "1" and options["lat_percentiles"] == "1"
    assert text.rstrip().endswith("[randread_bs4k_qd16_nj1]")


def test_a_standalone_job_on_several_hosts_holds_its_start_in_exec_prerun():
    """Its hook waits for the release after fio's set-up; one host has nothing to wait for;
    a service-mode job runs the script the run leaves in the service's folder, with the
    release the run writes in; a job's own exec_prerun is left alone."""
    hook = 'eval "$STORBENCH_START"'  # no braces: fio would expand ${...} itself
    assert option_lines(render_job({**SPEC, "hosts": ["a", "b"]}))["exec_prerun"] == hook
    assert "exec_prerun" not in option_lines(render_job(SPEC))
    service_hook = "sh storbench-start.sh @storbench-release@"
    for hosts in (["a"], ["a", "b"]):
        service = {**SPEC, "hosts": hosts, "execution": "service"}
        assert option_lines(render_job(service))["exec_prerun"] == service_hook
    own = {**SPEC, "hosts": ["a", "b"], "params": {**SPEC["params"], "exec_prerun": "sync"}}
    assert option_lines(render_job(own))["exec_prerun"] == "sync"


def test_shared_target_directory_without_per_host_subdir():
    spec = {**SPEC, "target": {**SPEC["target"], "per_host_subdir": False}}
    assert option_lines(render_job(spec))["directory"] == "/var/tmp/storbench/scratch"


def test_own_template_sees_the_same_variables(tmp_path):
    template = tmp_path / "mine.fio.j2"
    template.write_text("[{{ run_id }}]\nrw={{ options.rw }}\nfilename={{ target.path }}/f\n")
    text = render_job({**SPEC, "template": str(template)})
    assert text == "[randread_bs4k_qd16_nj1]\nrw=randread\nfilename=/var/tmp/storbench/scratch/f\n"


def test_undefined_variable_is_an_error_naming_the_template(tmp_path):
    template = tmp_path / "typo.fio.j2"
    template.write_text("bs={{ options.blocksize }}\n")
    with pytest.raises(RenderError, match="typo.fio.j2.*blocksize"):
        render_job({**SPEC, "template": str(template)})


def test_ready_job_file_is_used_verbatim(tmp_path):
    job = tmp_path / "ready.fio"
    job.write_text("[global]\nrw=read\n[x]\nsize=1m\n")
    assert render_job({**SPEC, "job_file": str(job)}) == job.read_text()


def test_published_files_follow_the_umask(tmp_path):
    from storbench.core import atomic

    previous = os.umask(0o022)
    try:
        atomic.write_text(tmp_path / "out.txt", "x")
    finally:
        os.umask(previous)
    assert (tmp_path / "out.txt").stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_a_template_is_compiled_once_for_many_renders_and_again_when_it_changes(
    tmp_path, monkeypatch
):
    """A run's host job files (128 at 128 hosts) share one compilation of their template."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    compiled = []
    compile_source = ImmutableSandboxedEnvironment.compile

    def counting(self, source, *args, **kwargs):
        compiled.append(source)
        return compile_source(self, source, *args, **kwargs)

    monkeypatch.setattr(ImmutableSandboxedEnvironment, "compile", counting)
    template = tmp_path / "mine.fio.j2"
    template.write_text("[{{ run_id }}]\nbs={{ options.bs }}\n")
    texts = [
        render_job({**SPEC, "template": str(template), "run_id": f"h{index}"})
        for index in range(128)
    ]
    assert texts[0] == "[h0]\nbs=4k\n" and texts[127] == "[h127]\nbs=4k\n"
    assert len(compiled) == 1
    template.write_text("[{{ run_id }}]\nbs={{ options.bs }}\niodepth={{ options.iodepth }}\n")
    later = template.stat().st_mtime + 2  # a later edit, whatever the clock's resolution
    os.utime(template, (later, later))
    assert render_job({**SPEC, "template": str(template)}) == (
        "[randread_bs4k_qd16_nj1]\nbs=4k\niodepth=16\n"
    )
    assert len(compiled) == 2
