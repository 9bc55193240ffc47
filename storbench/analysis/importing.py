"""`storbench import`: outputs made elsewhere, found by content in the folders a user has.

``plan(paths, tools)`` walks each folder: a folder one tool claims as a whole (vdbench's
output folder, an elbencho result folder, a GOSBench run folder) is one unit; any other file
is offered to every tool (or the one asked for), which recognises its own outputs by their
content, never by name (a fio status-interval output saved as ``.txt``, ``analyze-mixed.json``
from warp, a folder of iperf3 JSON files). A run folder storbench wrote (``run.json`` beside
its attempt folder) is parsed by its manifest, exactly as the workflow's parse step does.
What no tool recognises is skipped and said so.
A file named on the command line that is not the tool's output is an error, as is any
recognised output that cannot be read whole (an empty or truncated file names itself).

``import_outputs(...)`` then writes the rows (``-o``) and, where the outputs have them, the
per-interval series (``--series``, default ``<output stem>.timeseries.parquet``): never over
an existing file without ``replace`` (which also removes the old series when the new rows
have none), never rows and series in one file, and never two rows of one identity from two
sources (a file reached twice is read once).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from storbench.core import versions
from storbench.core.schema_names import ALL_HOSTS
from storbench.tools import get_tool, known_tools
from storbench.tools.base import UNEXPECTED_SHAPE, ZSTD_MAGIC, ToolOutputError, reading_output

HEAD_BYTES = 64 * 1024
STORBENCH_RUN = "storbench"  # a run folder storbench wrote: its manifest says how to parse it
MANIFEST = "run.json"


class ImportInputError(ValueError):
    pass


@dataclass
class ImportPlan:
    units: dict[str, list[Path]] = field(default_factory=dict)  # tool -> files and folders
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    named: set[Path] = field(default_factory=set)  # given on the command line: errors stop
    resolved: set[Path] = field(default_factory=set)  # the units' resolved paths: read once
    resolved_skipped: set[Path] = field(default_factory=set)

    def used(self) -> list[tuple[str, Path]]:
        return [(tool, path) for tool, paths in self.units.items() for path in paths]


def head_of(path: Path) -> bytes:
    """A file's first bytes, decompressed when it is zstd data (warp's benchmark data)."""
    with open(path, "rb") as handle:
        head = handle.read(HEAD_BYTES)
    if head.startswith(ZSTD_MAGIC):
        # zstandard: only for .zst data
        import zstandard

        try:  # a truncated frame may still show its beginning; else the tool sees the bytes
            data = zstandard.ZstdDecompressor().decompressobj().decompress(head)
        except zstandard.ZstdError:
            return head
        return data[:HEAD_BYTES] or head
    return head


def plan(paths: list[Path], tools: list[str]) -> ImportPlan:
    """Which tool imports which file or folder, and what is skipped (with the reason). A file
    or folder reached twice (named twice, or named and inside a named folder) is read once."""
    result = ImportPlan()
    adapters = [(name, get_tool(name)) for name in tools]
    for path in paths:
        if _seen(path, result):
            continue
        if path.is_dir():
            if any(adapter.claims_folder(path) for _, adapter in adapters):
                result.named.add(path)  # a named result folder: its errors stop the import
            _walk(path, adapters, result)
            continue
        tool = _recognized_by(path, adapters)
        if tool is None:
            raise ImportInputError(_not_recognized(path, [name for name, _ in adapters]))
        _add(result, tool, path)
        result.named.add(path)
    return result


def _seen(path: Path, result: ImportPlan) -> bool:
    """Whether path, or a folder it is in, is a unit already (by resolved path)."""
    resolved = path.resolve()
    return resolved in result.resolved or any(
        folder in result.resolved for folder in resolved.parents
    )


def _add(result: ImportPlan, tool: str, path: Path) -> None:
    result.units.setdefault(tool, []).append(path)
    result.resolved.add(path.resolve())


def storbench_manifest(folder: Path) -> Path | None:
    """The run manifest of an iteration folder storbench wrote (run.json beside its raw
    attempt folder), or None."""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        return None
    try:
        raw_dir = json.loads(manifest.read_text()).get("raw_dir")
    except (OSError, ValueError, AttributeError):
        return None
    return manifest if isinstance(raw_dir, str) and (folder / raw_dir).is_dir() else None


def _walk(folder: Path, adapters: list, result: ImportPlan) -> None:
    if _seen(folder, result):
        return
    if storbench_manifest(folder) is not None:  # parsed as the workflow parses it
        _add(result, STORBENCH_RUN, folder)
        return
    for name, adapter in adapters:
        if adapter.claims_folder(folder):
            _add(result, name, folder)
            return
    for child in sorted(folder.iterdir()):
        if child.is_dir():
            _walk(child, adapters, result)
        elif child.is_file() and not _seen(child, result):
            tool = _recognized_by(child, adapters)
            if tool is None:
                if child.resolve() not in result.resolved_skipped:
                    result.skipped.append((child, _why_skipped(child, adapters)))
                    result.resolved_skipped.add(child.resolve())
            else:
                _add(result, tool, child)


def _recognized_by(path: Path, adapters: list) -> str | None:
    try:
        head = head_of(path)
    except OSError:
        return None
    for name, adapter in adapters:
        if adapter.recognizes(path, head):
            return name
    return None


def _not_recognized(path: Path, tools: list[str]) -> str:
    """A named file no asked tool recognises: say whose output it is, when another tool's."""
    others = [(name, get_tool(name)) for name in known_tools() if name not in tools]
    owner = _recognized_by(path, others) if path.is_file() else None
    wanted = " or ".join(tools)
    if owner:
        return f"{path}: {owner} output, not {wanted} (recognised by content; try --tool {owner})"
    if path.is_file() and path.stat().st_size == 0:
        return f"{path}: empty file, not {wanted} output"
    return f"{path}: not {wanted} output (recognised by content; {_formats(tools)})"


def _formats(tools: list[str]) -> str:
    """What each tool's import reads ('fio reads json, json+'), as its adapter declares."""
    return "; ".join(
        f"{name} reads {', '.join(get_tool(name).capabilities.import_formats)}"
        for name in tools
        if get_tool(name).capabilities.import_formats
    )


def _why_skipped(path: Path, adapters: list) -> str:
    if path.stat().st_size == 0:
        return "empty"
    return "no tool's output" if len(adapters) > 1 else f"not {adapters[0][0]} output"


SERIES_SUFFIX = ".timeseries.parquet"


def series_path(output: Path, series_output: Path | None) -> Path:
    """Where the series go: --series, else the output's whole stem + .timeseries.parquet
    (run.v1.parquet: run.v1.timeseries.parquet)."""
    return series_output or output.with_name(f"{output.stem}{SERIES_SUFFIX}")


def check_outputs(output: Path, series: Path, *, replace: bool) -> None:
    """Refuse outputs that would lose results: the rows and the series in one file, or a
    file that exists already (an earlier import, a campaign's summary.parquet) without
    --replace."""
    if output.name.endswith(SERIES_SUFFIX):
        raise ImportInputError(
            f"-o {output} ends in {SERIES_SUFFIX}, the name of a series file (the series would "
            f"go to {series}); name the results file otherwise"
        )
    if output.resolve() == series.resolve():
        raise ImportInputError(
            f"-o {output} and --series {series} are the same file: the series would replace "
            "the rows; give them different names"
        )
    if replace:
        for path in (output, series):
            if path.is_file() and not _is_parquet(path):
                raise ImportInputError(
                    f"{path} is not a Parquet file; --replace overwrites only results of an "
                    "earlier import or of a campaign: give another -o"
                )
        return
    for path in (output, series):
        if path.exists():
            raise ImportInputError(
                f"{path} exists (results of an earlier import or of a campaign); give --replace "
                "to overwrite it, or another -o"
            )


def _is_parquet(path: Path) -> bool:
    with path.open("rb") as file:
        return file.read(4) == b"PAR1"


def import_outputs(
    paths: list[Path],
    tools: list[str],
    *,
    experiment: str,
    output: Path,
    series_output: Path | None,
    replace: bool = False,
) -> list[str]:
    """Import every recognised output; write rows and series; return the report's lines."""
    # parsing only: the result schema and pyarrow load here
    from storbench.core import results
    from storbench.core.aggregate import with_hosts_in_run

    target = series_path(output, series_output)
    check_outputs(output, target, replace=replace)
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise ImportInputError(f"no such file or folder: {', '.join(missing)}")
    found = plan(paths, tools)
    if not found.units:
        raise ImportInputError(
            f"no {' or '.join(tools)} results found in {', '.join(map(str, paths))}"
        )
    rows: list[dict] = []
    series: list[dict] = []
    for tool, units in found.units.items():
        if tool == STORBENCH_RUN:
            for folder in units:
                run_rows, run_series = _storbench_run(folder, experiment, tools)
                rows += run_rows
                series += run_series
            continue
        base = {"experiment": experiment, "iteration": 1, "attempt": 1, "tool": tool}
        adapter = get_tool(tool)
        tool_rows, tool_series = _read(adapter, units, base, found)
        rows += with_hosts_in_run(tool_rows)
        series += tool_series
    if not rows:
        raise ImportInputError(
            f"no readable results in {', '.join(map(str, paths))}: "
            + "; ".join(f"{path}: {why}" for path, why in found.skipped)
        )
    check_identities(rows)
    outputs = [(results.table_from_rows(rows), output)]
    lines = [f"used ({tool}): {path}" for tool, path in found.used()]
    lines += [f"skipped: {path} ({why})" for path, why in found.skipped]
    runs = sorted({(row["tool"], row["run_id"]) for row in rows})
    lines.append(f"{output}: {len(rows)} rows from {len(runs)} run(s)")
    lines += [f"warning: {warning}" for warning in version_warnings(rows)]
    removing = []
    if series:
        outputs.append((results.table_from_rows(series, results.TIMESERIES_SCHEMA), target))
        lines.append(f"{target}: {len(series)} interval rows")
    elif target.exists():  # --replace: the old rows' series goes with them
        removing.append(target)
        lines.append(f"{target}: removed (the series of the rows replaced; these have none)")
    results.write_parquets(outputs, removing)  # the rows and their series together, or neither
    return lines


IDENTITY = ("experiment", "run_id", "iteration", "host", "job", "op")


def version_warnings(rows: list[dict]) -> list[str]:
    """Per tool whose imported hosts' rows record more than one version of it."""
    by_tool: dict[str, list[tuple[str, str | None]]] = {}
    for row in rows:
        if row.get("host") != ALL_HOSTS:
            by_tool.setdefault(row["tool"], []).append((row["host"], row.get("tool_version")))
    found = []
    for tool, pairs in sorted(by_tool.items()):
        if get_tool(tool).capabilities.version:
            warning = versions.differ_across_hosts(tool, versions.hosts_by_version(pairs))
            found += [warning] if warning else []
    return found


def check_identities(rows: list[dict]) -> None:
    """Two sources giving a row of the same identity (two copies of a run, two vdbench output
    folders of the same RD): refused naming both, as a report would keep one of them."""
    first: dict[tuple, str | None] = {}
    for row in rows:
        key = tuple(row.get(column) for column in IDENTITY)
        source = row.get("raw_path")
        if key not in first:
            first[key] = source
        elif first[key] != source:
            experiment, run_id, _, host, job, op = key
            raise ImportInputError(
                f"run {run_id} (host {host}, job {job}, op {op}) comes from both {first[key]} and "
                f"{source}: import them as separate experiments (--experiment), one import "
                f"each, or leave one out (here both are experiment {experiment})"
            )


def _storbench_run(folder: Path, experiment: str, tools: list[str]) -> tuple[list, list]:
    """Rows and series of a run folder storbench wrote, exactly as its parse step gives them
    (run id, hosts, per-host rows from each service's log), under the import's experiment."""
    from storbench.analysis import ingest  # the workflow's own parse

    path = storbench_manifest(folder)
    assert path is not None  # _walk found it
    manifest = ingest.read_manifest(path)
    with ingest.reading_manifest(path):
        job_file = folder / manifest.job_file
        beside = folder / Path(manifest.job_file).name
        if not job_file.exists() and beside.is_file():  # the run folder moved without jobs/
            manifest = dataclasses.replace(manifest, job_file=str(beside.resolve()))
        rows, series = ingest.manifest_rows(manifest, folder, with_timeseries=True)
    rows = [{**row, "experiment": experiment} for row in rows if row["tool"] in tools]
    series = [{**row, "experiment": experiment} for row in series or [] if row["tool"] in tools]
    return rows, series


def _read(adapter, units: list[Path], base: dict, found: ImportPlan) -> tuple[list, list]:
    """Rows and series of a tool's units; a found (not named) unit it cannot read is skipped
    with the reason (a truncated file names itself), a named one stops the import."""
    while units:
        try:
            return _read_units(adapter, units, base)
        except ToolOutputError as error:
            text = str(error)
            culprits = [u for u in units if text.startswith(str(u)) and u not in found.named]
            if not culprits:
                raise
            culprit = max(culprits, key=lambda u: len(str(u)))
            units.remove(culprit)
            rest = text[len(str(culprit)) :]
            found.skipped.append((culprit, text if rest.startswith("/") else rest.lstrip(": ")))
    return [], []


def _read_units(adapter, units: list[Path], base: dict) -> tuple[list, list]:
    """The tool's rows and series of the units; output of a shape its parser does not expect,
    or an error naming no file, is a ToolOutputError naming the unit (each read alone to find
    it)."""
    try:
        return adapter.import_outputs(units, base), adapter.import_series(units, base)
    except UNEXPECTED_SHAPE as error:  # a ToolOutputError too (a ValueError)
        if isinstance(error, ToolOutputError) and any(str(u) in str(error) for u in units):
            raise
        for unit in units:
            with reading_output(unit, adapter.name):
                adapter.import_outputs([unit], base), adapter.import_series([unit], base)
        # no unit fails alone: the units together are what the parser cannot read
        with reading_output(", ".join(map(str, units)), adapter.name):
            raise


__all__ = ["ImportInputError", "ImportPlan", "ToolOutputError", "import_outputs", "plan"]
