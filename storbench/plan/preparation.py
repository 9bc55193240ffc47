"""Preparation as steps: the markers of datasets and recipe stages, the token paths on the
hosts, and each preparation step's spec."""

from __future__ import annotations

from storbench.config.preparation import (
    DEFAULT_CHUNK_TIMEOUT_S,
    DEFAULT_FLUSH_POLL_S,
    DEFAULT_FLUSH_TIMEOUT_S,
    STATE_DIR,
    Dataset,
    Recipe,
    Stage,
    without_limits,
)
from storbench.core import paths
from storbench.core.specs import DatasetSpec, RecipeSpec, StageSpec
from storbench.tools import preparation_tool


def dataset_marker(dataset: Dataset) -> str:
    return paths.dataset_marker(dataset.target_name, dataset.name)


def recipe_dir(recipe: Recipe) -> str:
    return paths.recipe_dir(recipe.target_name, recipe.name)


def stage_marker(recipe: Recipe, stage_id: str) -> str:
    return paths.stage_marker(recipe.target_name, recipe.name, stage_id)


def prepared_marker(recipe: Recipe) -> str:
    return paths.prepared_marker(recipe.target_name, recipe.name)


def flushed_marker(recipe: Recipe) -> str:
    return paths.flushed_marker(recipe.target_name, recipe.name)


def report_dir(recipe: Recipe) -> str:
    return paths.recipe_report_dir(recipe.target_name, recipe.name)


def token_path(target: dict, host: dict, kind: str, name: str) -> str:
    """Where a host keeps the state token: in the target directory, or its workdir for a device."""
    directory = preparation_tool().target_directory(target, host["name"])
    if directory is None:
        workdir = host.get("workdir", "/tmp/storbench").rstrip("/")
        directory = f"{workdir}/state/{target['name']}"
    else:
        directory = f"{directory}/{STATE_DIR}"
    return f"{directory}/{kind}-{name}.json"


def dataset_spec(dataset: Dataset) -> DatasetSpec:
    return DatasetSpec.from_dict(
        {
            "kind": "dataset",
            "name": dataset.name,
            "target": dataset.target,
            "hosts": list(dataset.hosts),
            "method": dataset.method,
            "job": dataset.job,
            "sha256": dataset.sha256,
            "timeout_s": DEFAULT_CHUNK_TIMEOUT_S,  # a configured one comes beside (limits)
            "raw_dir": paths.dataset_raw_dir(dataset.target_name, dataset.name),
            "tokens": {
                h["name"]: token_path(dataset.target, h, "dataset", dataset.name)
                for h in dataset.hosts
            },
            "storage": dataset.storage or None,
        },
        planned=True,
    )


def recipe_spec(recipe: Recipe) -> RecipeSpec:
    """What every stage job of the recipe needs (kept small: one per command line)."""
    rounds = None
    if recipe.rounds:
        r = recipe.rounds
        rounds = {
            "elements": [[element, params] for element, params in r.elements()],
            "track": list(r.track),
            "window": r.window,
            "max_rounds": r.max_rounds,
            "range_limit": r.range_limit,
            "slope_limit": r.slope_limit,
        }
    return RecipeSpec.from_dict(
        {
            "kind": "precondition",
            "name": recipe.name,
            "target": recipe.target,
            "hosts": list(recipe.hosts),
            "capacity": recipe.capacity,
            "slice_bytes": recipe.slice_bytes,
            "job": recipe.job,
            "interval_s": recipe.interval_s,
            "cliff": recipe.cliff,
            "rounds": rounds,
            "flush": _flush_without_limits(recipe.flush),
            "timeout_s": None,  # a configured one comes beside the spec (limits)
            "sha256": recipe.sha256,
            "dir": recipe_dir(recipe),
            "recipe_spec": without_limits(recipe.raw),
            "tokens": {
                h["name"]: token_path(recipe.target, h, "precondition", recipe.name)
                for h in recipe.hosts
            },
            "storage": recipe.storage or None,
        },
        planned=True,
    )


def stage_spec(recipe: Recipe, stage: Stage) -> StageSpec:
    spec: dict = {
        "recipe": recipe_spec(recipe),
        "stage": stage.stage_id,
        "kind": stage.kind,
        "index": stage.index,
        "round": stage.round,
    }
    if stage.kind == "purge":
        spec["command"] = recipe.purge
    if stage.kind == "pass" and stage.pass_ is not None:
        p = stage.pass_
        spec["pass"] = {
            "name": p.name,
            "number": p.number,
            "repeat": stage.repeat,
            "repeats": p.repeat,
            "chunk": stage.chunk,
            "chunks": stage.chunks,
            "fraction": p.fraction,
            "bs": p.bs,
            "pattern": p.pattern,
            "compressibility": p.compressibility,
            "pass_bytes": recipe.pass_bytes(p),
            "chunk_bytes": recipe.chunk_bytes(p),
            # only when set: the specs of existing recipes stay as they were
            **({"bs_mix": p.bs_mix} if p.bs_mix else {}),
            **({"until": "cliff"} if p.until_cliff else {}),
            **({"targets": list(p.targets)} if p.targets else {}),
        }
    return StageSpec.from_dict(spec, planned=True)


# A preparation's time limits come to its steps beside their specs (the workflow leaves them
# out of its rerun trigger): a limit raised after a timeout prepares nothing again. The specs
# keep the defaults, so a config without limits has the specs it always had.


def _flush_without_limits(flush: dict | None) -> dict | None:
    if not flush or flush.get("method") != "command":
        return flush
    return {**flush, "poll_s": DEFAULT_FLUSH_POLL_S, "timeout_s": DEFAULT_FLUSH_TIMEOUT_S}


def limits(found: Dataset | Recipe) -> dict:
    """A dataset's or recipe's time limits as configured (or their defaults)."""
    flush = getattr(found, "flush", None)
    if flush and flush.get("method") == "command":
        return {
            "timeout_s": found.timeout_s,
            "flush_poll_s": flush["poll_s"],
            "flush_timeout_s": flush["timeout_s"],
        }
    return {"timeout_s": found.timeout_s}


def with_limits(spec: dict, given: dict) -> dict:
    """A dataset, recipe or stage spec (JSON) with the limits ``limits`` gave."""
    if "recipe" in spec:  # a stage: its recipe's limits
        return {**spec, "recipe": with_limits(spec["recipe"], given)}
    limited = {**spec, "timeout_s": given["timeout_s"]}
    if "flush_timeout_s" in given and spec.get("flush"):
        poll, timeout = given["flush_poll_s"], given["flush_timeout_s"]
        limited["flush"] = {**spec["flush"], "poll_s": poll, "timeout_s": timeout}
    return limited
