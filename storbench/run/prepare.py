"""Run preparation stages (datasets, purge, overwrite chunks, SNIA rounds, flush) and keep state.

Each stage renders one fio job per host from ``templates/fio/prepare.fio.j2``, runs it with the
runner (raw output kept per attempt, nothing published on failure) and publishes a small JSON
marker. After a recipe's stages, ``finish`` writes a state token on every host (in the target
directory, or the host's workdir for a device); before a run, ``run_state`` reads the tokens
back: a missing or different dataset token re-prepares the dataset on that host, a missing
recipe token stops the run. Stays light: no pandas here, this is the benchmark path.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import re
import shlex
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from storbench.config.preparation import DEFAULT_CHUNK_TIMEOUT_S
from storbench.core import atomic, hostfacts, paths
from storbench.core.markers import PREPARED_KEYS, read_marker
from storbench.core.model import Host
from storbench.core.options import normalized_options
from storbench.core.specs import DatasetSpec, Manifest, RecipeSpec, RunSpec, StageSpec
from storbench.core.units import parse_duration
from storbench.hosts.services import on_every_host
from storbench.hosts.transport import open_transport
from storbench.run.engine import RunError, run_iteration
from storbench.run.render import job_template
from storbench.tools import preparation_tool

TOKEN_READ_TIMEOUT_S = 30.0
FLUSH_COMMAND_TIMEOUT_S = 300.0


class PrepareError(RuntimeError):
    pass


def now_text() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


def _host_spec(host: dict) -> Host:
    return Host.from_dict(host)


# --- job files ----------------------------------------------------------------------------------


def render(purpose: str, host: str, global_options: dict, sections: list[dict]) -> str:

    template = paths.TEMPLATES_DIR / preparation_tool().preparation_template
    return job_template(template).render(
        purpose=purpose,
        host=host,
        global_options=normalized_options(global_options),
        sections=[{**s, "options": normalized_options(s["options"])} for s in sections],
    )


def pass_sections(spec: StageSpec, host_index: int, host: str) -> tuple[dict, list[dict]]:
    """One chunk of an overwrite pass, as the preparation tool writes it."""
    return preparation_tool().pass_job(spec, host_index, host)


def round_sections(spec: StageSpec, host_index: int, host: str) -> tuple[dict, list[dict]]:
    """Every element of a round's workload in turn, as the preparation tool writes it."""
    return preparation_tool().round_job(spec, host_index, host)


def dataset_sections(spec: DatasetSpec, host: str) -> tuple[dict, list[dict]]:
    """A dataset's layout or fill, as the preparation tool writes it."""
    return preparation_tool().dataset_job(spec, host)


# --- running a prepared job on the hosts ---------------------------------------------------------


def run_jobs(
    kind_dir: Path,
    name: str,
    spec_like: DatasetSpec | RecipeSpec,
    hosts: Sequence[dict],
    sections_of,
    *,
    timeout_s: float,
    params: dict,
    members: tuple[dict, ...] = (),
) -> tuple[Manifest, Path]:
    """Render each host's job, run them all at once, return (manifest, raw folder).

    ``members``: the targets the job writes when they are not the spec's own target (a pass
    on another target set): the runner makes their directories and takes their locks.
    """
    jobs_dir = kind_dir / "jobs" / name
    jobs_dir.mkdir(parents=True, exist_ok=True)
    host_jobs = {}
    for index, host in enumerate(hosts):
        global_options, sections = sections_of(index, host["name"])
        names = FactNames(spec_like, host["name"])
        global_options = names.resolved(global_options)
        sections = [{**s, "options": names.resolved(s["options"])} for s in sections]
        path = jobs_dir / f"{host['name']}{preparation_tool().job_suffix}"
        atomic.write_text(
            path, render(f"{spec_like.name} {name}", host["name"], global_options, sections)
        )
        host_jobs[host["name"]] = str(path)
    run_spec = RunSpec(
        experiment=f"targets-{spec_like.target['name']}-{spec_like.name}",
        run_id=name,
        tool=preparation_tool().name,
        target={**spec_like.target, "members": list(members)} if members else spec_like.target,
        params=params,
        hosts=tuple(hosts),
        timeout_s=timeout_s,
    )
    manifest_path = kind_dir / "raw" / name / "run.json"
    manifest = run_iteration(run_spec, 1, host_jobs, str(manifest_path))
    return manifest, manifest_path.parent / manifest.raw_dir


class FactNames:
    """One host's expression names ({cores}, {host_index}, {storage_cores}), read when used."""

    def __init__(self, spec_like: DatasetSpec | RecipeSpec, host: str):
        self.spec_like, self.host = spec_like, host

    def resolved(self, options: dict) -> dict:
        if not any(hostfacts.has_expression(value) for value in options.values()):
            return options
        try:
            return hostfacts.resolve(options, self.names)
        except hostfacts.HostFactError as error:
            raise PrepareError(f"host {self.host}: {error}") from None

    @functools.cached_property
    def names(self) -> dict:  # read once per host: the global options and every section use it
        telemetry = Path(paths.telemetry(self.host))
        facts = json.loads(telemetry.read_text()) if telemetry.exists() else {}
        every_host = [h["name"] for h in self.spec_like.hosts]
        return {
            **hostfacts.expression_names(
                facts, hosts_in_run=len(every_host), host_index=every_host.index(self.host)
            ),
            **(self.spec_like.storage or {}),
        }


def parse_rows(manifest: Manifest, raw_dir: Path) -> list[dict]:
    base = {"experiment": manifest.experiment, "run_id": manifest.run_id, "iteration": 1}
    return preparation_tool().parse(manifest, raw_dir, base)


def element_metrics(rows: list[dict]) -> dict[str, dict]:
    """Per fio section ('all' rows, read and write together): IOPS, bandwidth, bytes, latency."""
    metrics: dict[str, dict] = {}
    for row in rows:
        if row["host"] != "all":
            continue
        entry = metrics.setdefault(
            row["job"], {"iops": 0.0, "bw_bytes_s": 0.0, "bytes": 0, "ios": 0, "lat_sum": 0.0}
        )
        entry["iops"] += row.get("iops") or 0.0
        entry["bw_bytes_s"] += row.get("bw_bytes_s") or 0.0
        entry["bytes"] += row.get("bytes") or 0
        entry["ios"] += row.get("ios") or 0
        entry["lat_sum"] += (row.get("lat_mean_ns") or 0.0) * (row.get("ios") or 0)
    for entry in metrics.values():
        lat_sum = entry.pop("lat_sum")
        entry["lat_mean_ns"] = lat_sum / entry["ios"] if entry["ios"] else None
    return metrics


def chunk_timeout(spec: StageSpec, bytes_per_host: int) -> float:
    configured = spec.recipe.timeout_s
    if configured:
        return configured
    return DEFAULT_CHUNK_TIMEOUT_S + bytes_per_host / (1 << 20)  # plus a second per MiB


# --- stages ------------------------------------------------------------------------------------


def seconds_of(value) -> float:

    return parse_duration(value) if value is not None else 0.0


def purge(recipe: RecipeSpec, command: str, raw_dir: Path) -> dict:
    """The purge command on every host at once; any failure fails the stage."""
    raw_dir.mkdir(parents=True, exist_ok=True)
    codes = _on_hosts(
        recipe.hosts,
        lambda host: _command(host, command, raw_dir, "purge", recipe.timeout_s or 3600.0),
    )
    failed = {name: code for name, code in codes.items() if code != 0}
    if failed:
        detail = ", ".join(f"{name} exited {code}" for name, code in sorted(failed.items()))
        raise PrepareError(f"purge command failed: {detail}; output in {raw_dir}")
    return {"command": command, "hosts": sorted(codes)}


def _command(host: dict, command: str, raw_dir: Path, label: str, timeout_s: float) -> int:
    name = host["name"]
    marker = f"storbench-{label}-{name}-{time.time_ns()}"
    with open_transport(_host_spec(host)) as transport:
        return transport.run(
            ["sh", "-c", command, marker],  # the marker ($0) identifies the process for a kill
            timeout_s=timeout_s,
            stdout_path=raw_dir / f"{name}.{label}.stdout",
            stderr_path=raw_dir / f"{name}.{label}.stderr",
            marker=marker,
        )


def _on_hosts(hosts: Sequence[dict], action) -> dict:

    try:
        return on_every_host(hosts, action, "preparation")
    except Exception as error:
        raise PrepareError(str(error)) from None


# --- the prepared state ----------------------------------------------------------------------


def flush(recipe: RecipeSpec | dict, output: str) -> dict:
    """Wait for the write cache: a fixed wait, or the command polled until it reports done."""
    recipe = RecipeSpec.from_dict(recipe)
    spec = recipe.flush
    started, clock = now_text(), time.monotonic()
    result = {
        "kind": "flush",
        "stage": "flush",
        "target": recipe.target["name"],
        "recipe": recipe.name,
        "flush": {"method": spec["method"]},
    }
    if spec["method"] == "wait":
        time.sleep(spec["wait_s"])
        result["flush"]["waited_s"] = spec["wait_s"]
    else:
        result["flush"].update(_poll_flush(recipe, spec, Path(recipe.dir) / "raw" / "flush"))
    result.update(started=started, finished=now_text(), duration_s=elapsed_s(clock))
    atomic.write_json(output, result)
    return result


def _poll_flush(recipe: RecipeSpec, spec: dict, raw_dir: Path) -> dict:
    host = next(h for h in recipe.hosts if h["name"] == spec["host"])
    raw_dir.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + spec["timeout_s"]
    polls = 0
    while True:
        polls += 1
        remaining = max(1.0, deadline - time.monotonic())
        code = _command(
            host, spec["command"], raw_dir, "flush", min(FLUSH_COMMAND_TIMEOUT_S, remaining)
        )
        output = (raw_dir / f"{host['name']}.flush.stdout").read_text(errors="replace")
        if code == 0 and (spec.get("done") is None or re.search(spec["done"], output)):
            return {
                "command": spec["command"],
                "polls": polls,
                "waited_s": round(spec["timeout_s"] - (deadline - time.monotonic()), 3),
            }
        if time.monotonic() + spec["poll_s"] > deadline:
            raise PrepareError(
                f"cache flush on {host['name']} not done after {spec['timeout_s']:g}s "
                f"({polls} polls of {spec['command']!r}); last exit {code}, output: "
                f"{output.strip()[-200:]!r}"
            )
        time.sleep(spec["poll_s"])


# --- state tokens ----------------------------------------------------------------------------


def write_tokens(spec: DatasetSpec | RecipeSpec, extra: dict | None = None) -> None:
    """A small JSON file per host recording what was prepared there (kind, name, spec digest)."""
    token = {
        "kind": spec.kind,
        "name": spec.name,
        "target": spec.target["name"],
        "sha256": spec.sha256,
        "prepared_at": now_text(),
        **(extra or {}),
    }
    text = json.dumps(token, sort_keys=True) + "\n"

    def write(host: dict) -> None:
        path = spec.tokens[host["name"]]
        with open_transport(_host_spec(host)) as transport:
            transport.mkdirs(path.rsplit("/", 1)[0])
            transport.put_text(text, path)

    _on_hosts(spec.hosts, write)


def read_tokens(host: dict, paths: list[str | None]) -> list[dict | None]:
    """The tokens at paths on a host (None where missing or unreadable), over one connection."""
    tokens: list[dict | None] = []
    with open_transport(_host_spec(host)) as transport:
        for path in paths:
            if path is None:
                tokens.append(None)
                continue
            code, out, _ = transport.shell(
                f"cat -- {shlex.quote(path)}", timeout_s=TOKEN_READ_TIMEOUT_S
            )
            try:
                tokens.append(json.loads(out) if code == 0 else None)
            except ValueError:
                tokens.append(None)
    return tokens


def prepare_dataset(
    spec: DatasetSpec | dict, marker_path: str | None, hosts: list[dict] | None = None
) -> dict:
    """Lay out (or write) the dataset's files on the hosts, then their tokens and the marker."""
    spec = DatasetSpec.from_dict(spec)
    hosts = list(hosts or spec.hosts)
    started, clock = now_text(), time.monotonic()
    manifest, raw_dir = run_jobs(
        Path(spec.raw_dir),
        "prepare",
        spec,
        hosts,
        lambda index, host: dataset_sections(spec, host),
        timeout_s=spec.timeout_s,
        params={},
    )
    metrics = element_metrics(parse_rows(manifest, raw_dir)).get(spec.name, {})
    write_tokens(dataclasses.replace(spec, hosts=tuple(hosts)))
    marker = {
        "target": spec.target["name"],
        "dataset": spec.name,
        "method": spec.method,
        "hosts": [h["name"] for h in hosts],
        "sha256": spec.sha256,
        "bytes_written": metrics.get("bytes", 0),
        "attempt": manifest.attempt,
        "started": started,
        "finished": now_text(),
        "duration_s": round(time.monotonic() - clock, 3),
    }
    if marker_path:
        atomic.write_json(marker_path, marker)
    return marker


def run_state(preparation: dict, run_hosts: list[dict]) -> dict:
    """Before a run: every host's tokens match (a dataset is re-prepared where its token is off).

    Returns the run's ``prep_state`` label (with the steady-state verdict, when the recipe has
    rounds) and the hosts whose dataset was prepared again.
    """
    checks: dict[str, dict] = {}
    lock = threading.Lock()

    def check(host: dict) -> None:
        specs = preparation["specs"]
        tokens = read_tokens(host, [spec["tokens"].get(host["name"]) for spec in specs])
        found = {
            spec["kind"]: token is not None and token.get("sha256") == spec["sha256"]
            for spec, token in zip(specs, tokens, strict=True)
        }
        with lock:
            checks[host["name"]] = found

    _on_hosts(run_hosts, check)
    reprepared = []
    for spec in preparation["specs"]:
        stale = [h for h in run_hosts if not checks[h["name"]][spec["kind"]]]
        if not stale:
            continue
        names = ", ".join(h["name"] for h in stale)
        if spec["kind"] == "dataset":
            print(
                f"storbench: dataset {spec['name']} token missing or different on {names};"
                " preparing it again"
            )
            prepare_dataset(spec, None, stale)
            reprepared += [h["name"] for h in stale]
        else:
            raise RunError(
                f"target {spec['target']['name']} is not in the state {spec['name']!r} on "
                f"{names}: its state token ({spec['tokens'][stale[0]['name']]}) is missing or "
                f"from a different recipe. Precondition again: remove {spec['dir']} and run "
                "snakemake again"
            )
    return {"prep_state": _label(preparation), "reprepared": reprepared}


def _label(preparation: dict) -> str | None:
    label = preparation.get("state")
    prepared = preparation.get("prepared")
    if label and prepared and Path(prepared).is_file():
        verdict = read_marker(prepared, PREPARED_KEYS, "recipe's prepared marker")["steady_state"]
        if verdict:
            label += ", steady state" if verdict["achieved"] else ", steady state not achieved"
    return label


def elapsed_s(clock: float) -> float:
    """Seconds since a time.monotonic() reading, to the millisecond."""
    return round(time.monotonic() - clock, 3)
