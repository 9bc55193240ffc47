"""A preconditioning stage as one step: its I/O through ``run.prepare``, then what it measured.

A pass records its per-interval write series (for the write cliff); a round records its
elements' metrics and the SNIA steady-state verdict over the rounds so far, which decides
whether the next round runs; ``finish`` sums the passes and finds their write cliffs.
"""

from __future__ import annotations

import time
from pathlib import Path

from storbench.analysis import steadystate, writecliff
from storbench.core import atomic
from storbench.core.markers import STAGE_KEYS, read_marker
from storbench.core.specs import RecipeSpec, SpecError, StageSpec
from storbench.run.prepare import (
    PrepareError,
    chunk_timeout,
    elapsed_s,
    element_metrics,
    now_text,
    parse_rows,
    pass_sections,
    purge,
    round_sections,
    run_jobs,
    seconds_of,
    write_tokens,
)
from storbench.tools import preparation_tool


def run_stage(spec: StageSpec | dict, marker_path: str) -> dict:
    """Run one stage of a recipe and publish its marker (rounds after steady state: skipped)."""
    spec = StageSpec.from_dict(spec)
    recipe = spec.recipe
    started, clock = now_text(), time.monotonic()
    marker = {
        "target": recipe.target["name"],
        "recipe": recipe.name,
        "stage": spec.stage,
        "kind": spec.kind,
        "index": spec.index,
        "skipped": False,
    }
    recipe_dir = Path(recipe.dir)
    if spec.kind == "purge":
        marker["purge"] = purge(recipe, spec.command or "", recipe_dir / "raw" / "purge")
    elif spec.kind == "pass":
        seen = _cliff_seen(spec, Path(marker_path).parent)
        marker.update(_skipped_pass(spec, seen) if seen else _pass(spec, recipe_dir))
    elif spec.kind == "round":
        marker.update(_round(spec, recipe_dir, Path(marker_path).parent))
    marker.update(started=started, finished=now_text(), duration_s=elapsed_s(clock))
    atomic.write_json(marker_path, marker)
    return marker


def _pass(spec: StageSpec, recipe_dir: Path) -> dict:

    recipe = spec.recipe
    params = {"status_interval": f"{int(recipe.interval_s)}s"}
    manifest, raw_dir = run_jobs(
        recipe_dir,
        spec.stage,
        recipe,
        recipe.hosts,
        lambda index, host: pass_sections(spec, index, host),
        timeout_s=chunk_timeout(spec, spec.pass_settings()["chunk_bytes"]),
        params=params,
        members=tuple(spec.pass_settings().get("targets") or ()),
    )
    rows = parse_rows(manifest, raw_dir)
    base = {
        "experiment": manifest.experiment,
        "run_id": manifest.run_id,
        "iteration": 1,
        "attempt": manifest.attempt,
        "tool": preparation_tool().name,
    }
    series = writecliff.aggregate(
        preparation_tool().parse_timeseries(manifest, raw_dir, base), "write"
    )
    metrics = element_metrics(rows).get(spec.stage, {})
    return {
        "pass": {**spec.pass_settings(), "bytes": metrics.get("bytes", 0)},
        "elements": {"write": metrics},
        "series": [
            {"t_s": i.t_s, "interval_s": i.interval_s, "bytes": i.bytes, "bw_bytes_s": i.bw_bytes_s}
            for i in series
        ],
        "raw": str(Path("raw") / spec.stage / "run.json"),
        "attempt": manifest.attempt,
    }


def _cliff_seen(spec: StageSpec, stages_dir: Path) -> str | None:
    """For a pass repeated until its write cliff: the earlier repeat that showed one."""
    p = spec.pass_settings()
    if p.get("until") != "cliff" or p["repeat"] == 1:
        return None
    prefix = f"p{p['number']}-{p['name']}-r"
    series = []
    for repeat in range(1, p["repeat"]):
        markers = sorted(stages_dir.glob(f"{prefix}{repeat}.json")) + sorted(
            stages_dir.glob(f"{prefix}{repeat}-c*.json"), key=lambda path: _chunk_number(path)
        )
        if not markers:
            raise PrepareError(f"{spec.stage}: repeat {repeat} has no marker; run in order")
        for path in markers:
            stage = read_marker(path, STAGE_KEYS, "stage marker")
            if stage.get("skipped"):
                return stage.get("cliff_seen_in") or f"repeat {repeat}"
            series.append([writecliff.Interval(**i) for i in stage["series"]])
        options = spec.recipe.cliff
        cliff = writecliff.detect(
            writecliff.concatenate(series),
            fraction=options.get("fraction", 0.5),
            sustain=options.get("sustain", 3),
            plateau_s=options.get("plateau_s"),
        )
        if cliff is not None:
            return f"repeat {repeat}"
    return None


def _chunk_number(path: Path) -> int:
    return int(path.stem.rsplit("-c", 1)[1])


def _skipped_pass(spec: StageSpec, seen: str) -> dict:
    return {
        "pass": {**spec.pass_settings(), "bytes": 0},
        "skipped": True,
        "cliff_seen_in": seen,
        "elements": {},
        "series": [],
    }


def _round(spec: StageSpec, recipe_dir: Path, stages_dir: Path) -> dict:

    recipe = spec.recipe
    rounds, number = recipe.rounds, spec.round
    if rounds is None or number is None:
        raise SpecError(f"stage {spec.stage}: a round of recipe {recipe.name}, which has no rounds")
    earlier = [_read_round(stages_dir, spec.stage, n) for n in range(1, number)]
    if earlier and (earlier[-1].get("skipped") or earlier[-1]["steady_state"]["achieved"]):
        return {"round": number, "skipped": True, "steady_state": earlier[-1]["steady_state"]}
    runtime = sum(
        seconds_of(params.get("runtime")) + seconds_of(params.get("ramp_time"))
        for _, params in rounds["elements"]
    )
    manifest, raw_dir = run_jobs(
        recipe_dir,
        spec.stage,
        recipe,
        recipe.hosts,
        lambda index, host: round_sections(spec, index, host),
        timeout_s=recipe.timeout_s or 2 * runtime + 120,
        params={},
    )
    elements = element_metrics(parse_rows(manifest, raw_dir))
    history = [m["elements"] for m in earlier] + [elements]
    values = {
        f"{t['element']}.{t['metric']}": [
            h.get(t["element"], {}).get(t["metric"]) or 0.0 for h in history
        ]
        for t in rounds["track"]
    }
    verdict = steadystate.evaluate(
        values,
        window=rounds["window"],
        max_rounds=rounds["max_rounds"],
        range_limit=rounds["range_limit"],
        slope_limit=rounds["slope_limit"],
    )
    return {
        "round": number,
        "elements": elements,
        "steady_state": verdict.to_dict(),
        "raw": str(Path("raw") / spec.stage / "run.json"),
        "attempt": manifest.attempt,
    }


def _read_round(stages_dir: Path, current: str, number: int) -> dict:
    width = len(current.split("-", 1)[1])
    path = stages_dir / f"round-{number:0{width}d}.json"
    try:
        return read_marker(path, STAGE_KEYS, "stage marker")
    except OSError:
        raise PrepareError(
            f"round {number} has no marker ({path}); run the rounds in order"
        ) from None


def finish(recipe: RecipeSpec | dict, stage_paths: list[str], output: str) -> dict:
    """The recipe's summary (verdict, passes with their write cliffs); its tokens on the hosts."""
    recipe = RecipeSpec.from_dict(recipe)
    stages = [read_marker(path, (*STAGE_KEYS, "index"), "stage marker") for path in stage_paths]
    stages.sort(key=lambda stage: stage["index"])
    rounds = [s for s in stages if s["kind"] == "round" and not s.get("skipped")]
    passes: list[dict] = []
    for stage in (s for s in stages if s["kind"] == "pass"):
        p = stage["pass"]
        if not passes or passes[-1]["name"] != p["name"]:
            passes.append(
                {
                    key: p[key]
                    for key in ("name", "number", "repeats", "chunks", "fraction", "bs", "pattern")
                }
                | {"bytes_written": 0, "duration_s": 0.0, "series": [], "repeats_skipped": 0}
            )
        if stage.get("skipped"):
            passes[-1]["repeats_skipped"] += 1 if stage["pass"]["chunk"] == 1 else 0
            continue
        passes[-1]["bytes_written"] += p["bytes"]
        passes[-1]["duration_s"] += stage["duration_s"]
        passes[-1]["series"].append([writecliff.Interval(**i) for i in stage["series"]])
    cliff_options = {
        "fraction": recipe.cliff.get("fraction", 0.5),
        "sustain": recipe.cliff.get("sustain", 3),
        "plateau_s": recipe.cliff.get("plateau_s"),
    }
    for summary in passes:
        series = writecliff.concatenate(summary.pop("series"))
        cliff = writecliff.detect(series, **cliff_options) if series else None
        summary["cliff"] = cliff.to_dict() if cliff else None
    prepared = {
        "target": recipe.target["name"],
        "recipe": recipe.name,
        "capacity_bytes": recipe.capacity,
        "slice_bytes": recipe.slice_bytes,
        "hosts": [h["name"] for h in recipe.hosts],
        "steady_state": rounds[-1]["steady_state"] if rounds else None,
        "passes": passes,
        "recipe_spec": recipe.recipe_spec,
        "sha256": recipe.sha256,
        "finished": now_text(),
    }
    write_tokens(recipe, {"steady_state": (prepared["steady_state"] or {}).get("status")})
    atomic.write_json(output, prepared)
    return prepared
