"""fio's preparation jobs: the options of a preconditioning pass's chunk, a round of a
steady-state recipe, and a dataset's layout or fill (run.prepare renders and runs them)."""

from __future__ import annotations

from collections.abc import Callable

from storbench.core.specs import REGION_FILE, DatasetSpec, RecipeSpec, StageSpec

DirectoryOf = Callable[[dict, str], "str | None"]  # (target, host) -> its folder on the host


def region_options(
    recipe: RecipeSpec,
    host_index: int,
    host: str,
    target_directory: DirectoryOf,
    target: dict | None = None,
) -> tuple[dict, int]:
    """(fio options naming the host's region of target (default the recipe's), its first byte)."""
    target = target or recipe.target
    if target["type"] == "block":
        return {"filename": target["path"]}, host_index * recipe.slice_bytes

    directory = target_directory(target, host)
    return {"directory": directory, "filename": REGION_FILE}, 0


def pass_sections(
    spec: StageSpec, host_index: int, host: str, target_directory: DirectoryOf
) -> tuple[dict, list[dict]]:
    """One chunk of an overwrite pass: a slice of the pass (sequential) or random writes."""
    recipe, p = spec.recipe, spec.pass_settings()
    region, start = region_options(recipe, host_index, host, target_directory)
    done = (p["chunk"] - 1) * p["chunk_bytes"]
    size = min(p["chunk_bytes"], p["pass_bytes"] - done)
    options = {**(p.get("bs_mix") or {"bs": p["bs"]}), "end_fsync": 1}
    if p["pattern"] == "sequential":
        options.update(rw="write", offset=start + done, size=size)
    else:  # random writes anywhere in the slice; each chunk a fresh seed
        options.update(
            rw="randwrite", offset=start, size=recipe.slice_bytes, io_size=size, randrepeat=0
        )
    if p["compressibility"] is not None:
        options.update(buffer_compress_percentage=p["compressibility"], refill_buffers=1)
    if p.get("targets"):  # one section per target, all in one group: their bytes add up
        sections = []
        for target in p["targets"]:
            own_region, own_start = region_options(
                recipe, host_index, host, target_directory, target
            )
            section = {**options, **own_region}
            section["offset"] = own_start + (done if p["pattern"] == "sequential" else 0)
            sections.append({"name": spec.stage, "options": section, "together": True})
        return {**recipe.job, "group_reporting": 1}, sections
    global_options = {**recipe.job, **region, "group_reporting": 1}
    return global_options, [{"name": spec.stage, "options": options}]


def round_sections(
    spec: StageSpec, host_index: int, host: str, target_directory: DirectoryOf
) -> tuple[dict, list[dict]]:
    """Every element of the round workload in turn, each its own group."""
    recipe = spec.recipe
    region, start = region_options(recipe, host_index, host, target_directory)
    global_options = {
        **recipe.job,
        **region,
        "offset": start,
        "size": recipe.slice_bytes,
        "group_reporting": 1,
        "time_based": 1,
    }
    elements = (recipe.rounds or {}).get("elements", [])
    sections = [{"name": element, "options": params} for element, params in elements]
    return global_options, sections


def dataset_sections(
    spec: DatasetSpec, host: str, target_directory: DirectoryOf
) -> tuple[dict, list[dict]]:
    directory = target_directory(spec.target, host)
    options = {"filename_format": f"{spec.name}.$jobnum.$filenum", **spec.job}
    if spec.method == "layout":
        options["create_only"] = 1
    else:
        options = {"rw": "write", "bs": "1m", "end_fsync": 1, **options}
    return {"directory": directory, "group_reporting": 1}, [{"name": spec.name, "options": options}]
