"""Render one run's job file from a Jinja template (StrictUndefined), or copy a ready job file."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
from pathlib import Path

from storbench.core import atomic, hostfacts, paths
from storbench.core.model import Campaign
from storbench.core.specs import HostJobsSpec, RenderSpec
from storbench.tools import get_tool
from storbench.tools.base import REFUSALS, RenderError, refusal_text

TEMPLATES_DIR = paths.TEMPLATES_DIR


def render_job(spec: RenderSpec | dict) -> str:
    spec = RenderSpec.from_dict(spec)
    if spec.job_file:
        try:
            return Path(spec.job_file).read_text(encoding="utf-8")
        except UnicodeDecodeError as error:
            raise _not_utf8(f"job file {spec.job_file}", error) from None
    import jinja2  # lazy: loads jinja2
    from jinja2.exceptions import SecurityError

    tool = get_tool(spec.tool)
    template_path = Path(spec.template) if spec.template else TEMPLATES_DIR / tool.default_template
    try:
        # adapters see the spec as the mapping its JSON is: third-party templates use its names
        context = tool.template_context(spec.mapping())
    except RenderError:
        raise
    except REFUSALS as error:  # Python's error on a value of the wrong kind, as `check` has it
        where = f" on host {spec.host}" if spec.host else ""
        raise RenderError(
            f"{spec.experiment}/{spec.run_id}{where}: {tool.name} cannot write this job: "
            f"{refusal_text(error)}"
        ) from None
    try:
        return job_template(template_path).render(**context)
    except jinja2.UndefinedError as error:
        raise RenderError(f"template {template_path}: {error.message}") from error
    except SecurityError as error:
        raise RenderError(
            f"template {template_path}: refused by the template sandbox: {error}"
        ) from None
    except jinja2.TemplateSyntaxError as error:
        raise RenderError(f"template {template_path}:{error.lineno}: {error.message}") from error
    except UnicodeDecodeError as error:
        raise _not_utf8(f"template {template_path}", error) from None


def _not_utf8(what: str, error: UnicodeDecodeError) -> RenderError:
    line = error.object[: error.start].count(b"\n") + 1
    return RenderError(f"{what}:{line}: not UTF-8 text (byte {error.object[error.start]:#04x})")


def own_job_problems(campaign: Campaign) -> list[str]:
    """Each experiment's own template or job file, rendered for its first run as the render
    step would: a syntax error, an unknown variable, what the sandbox refuses or bytes that
    are not UTF-8, before any job."""
    from storbench.plan import specs  # lazy: the render step itself starts without the planner

    problems = []
    for name, experiment in campaign.experiments.items():
        own = "template" if experiment.template else "job_file" if experiment.job_file else None
        runs = campaign.experiment_runs(name) if own else []
        if runs:
            try:
                text = render_job(specs.render_spec(campaign, name, runs[0]))
            except RenderError as error:
                problems.append(f"experiments.{name}.{own}: {error}")
                continue
            if problem := get_tool(experiment.tool).own_job_problem(text):
                source = experiment.template or experiment.job_file
                problems.append(f"experiments.{name}.{own}: {source}: {problem}")
    return problems


def job_template(path: Path):
    """A job-file template: unknown variables are errors, text is not HTML-escaped.

    Sandboxed: a template (a user's own, or one from a colleague's config) can read the
    values it is given but not reach Python (``cycler.__init__.__globals__.os`` and the like
    raise SecurityError), so rendering, and ``snakemake plan``, runs nothing.
    """
    return _environment(str(path.parent)).get_template(path.name)


@functools.lru_cache(maxsize=16)
def _environment(directory: str):
    """One environment per template folder: it compiles a template once and again only when
    its file changes (a run's 128 host job files compiled it 128 times: 1.5 of 1.6 s)."""
    import jinja2  # lazy: loads jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    return ImmutableSandboxedEnvironment(
        loader=jinja2.FileSystemLoader(directory),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,  # job files are not HTML
        auto_reload=True,
    )


def with_host_facts(spec: RenderSpec | dict, facts: dict) -> RenderSpec:
    """The spec with every host-fact expression in its options computed for its host."""
    spec = RenderSpec.from_dict(spec)
    if spec.host_index is None:
        raise RenderError(f"{spec.experiment}/{spec.run_id}: host facts need a per-host job")
    names = {
        **hostfacts.expression_names(
            facts, hosts_in_run=len(spec.hosts), host_index=spec.host_index
        ),
        **(spec.storage or {}),
    }
    try:
        params = hostfacts.resolve(spec.params, names)
    except hostfacts.HostFactError as error:
        raise RenderError(f"host {spec.host}: {error}") from None
    return dataclasses.replace(spec, params=params)


def write_job(spec: RenderSpec | dict, output: str, facts_path: str | None = None) -> None:
    spec = RenderSpec.from_dict(spec)
    if facts_path:
        spec = with_host_facts(spec, json.loads(Path(facts_path).read_text()))
    atomic.write_text(output, render_job(spec))


def write_host_jobs(spec: HostJobsSpec | dict, output_dir: str) -> list[str]:
    """Every host's job file of a run into output_dir, which appears whole or not at all."""
    spec = HostJobsSpec.from_dict(spec)
    target = Path(output_dir)
    staging = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    written = []
    try:
        for host_spec, facts_path in spec.host_specs():
            if facts_path:
                host_spec = with_host_facts(host_spec, json.loads(Path(facts_path).read_text()))
            host = str(host_spec.host)  # host_specs() always names it
            name = Path(
                paths.host_job(host_spec.experiment, host_spec.run_id, host, spec.suffix)
            ).name
            (staging / name).write_text(render_job(host_spec))
            written.append(name)
        shutil.rmtree(target, ignore_errors=True)  # Snakemake removes it too; by hand a rerun
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return written
