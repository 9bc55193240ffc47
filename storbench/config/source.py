"""A campaign config's YAML source: reading it safely, and naming each problem's line.

``load_yaml`` refuses duplicate keys, non-UTF-8 bytes, YTE templates and anything but a
mapping; ``with_lines`` adds to each '<key path>: <problem>' the line of the config file
that has the key (or the nearest key above it).
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

import yaml

# libyaml's loader when PyYAML has it: the schema is read by every Snakemake start (40x faster)
FAST_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MERGE_TAG = "tag:yaml.org,2002:merge"  # '<<: *base' in a mapping
# Snakemake reads each --configfile itself, before storbench's code runs, and says only this
SNAKEMAKE_CONFIGFILE_ERROR = "Config file is not valid JSON or YAML"


class ConfigError(ValueError):
    """A config problem; ``problems`` holds one '<key path>: <problem>' line each."""

    def __init__(self, problems: list[str], source: str = "config"):
        self.problems = list(dict.fromkeys(problems))  # one check may meet a value twice
        self.source = source
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid {source}:\n{lines}")


class _UniqueKeyLoader(yaml.SafeLoader):
    """safe_load, but a key given twice in one mapping is an error (PyYAML keeps the last),
    and each plain number written with a leading zero is noted (leading_zero_problem)."""

    def __init__(self, stream):
        super().__init__(stream)
        self.leading_zeros: list[str] = []

    def construct_scalar(self, node):
        if node.style is None and (problem := leading_zero_problem(node)):
            self.leading_zeros.append(problem)
        return super().construct_scalar(node)

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == MERGE_TAG:  # '<<: *base', overridable keys
                continue
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r} (first on line {seen[key] + 1})",
                    key_node.start_mark,
                )
            seen.setdefault(key, key_node.start_mark.line)
        return super().construct_mapping(node, deep=deep)


def load_yaml(path: str | os.PathLike) -> dict:
    try:
        with open(path, "rb") as handle:
            raw_bytes = handle.read()
    except OSError as error:
        raise ConfigError([f"cannot read: {error.strerror}"], source=str(path)) from error
    try:
        text = raw_bytes.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw_bytes[: error.start].count(b"\n") + 1
        raise ConfigError(
            [f"line {line}: not UTF-8 text (byte {raw_bytes[error.start]:#04x})"], source=str(path)
        ) from None
    loader = _UniqueKeyLoader(text)
    try:
        data = loader.get_single_data()
    except yaml.MarkedYAMLError as error:
        raise ConfigError([_yaml_problem(error)], source=str(path)) from error
    except yaml.YAMLError as error:
        raise ConfigError([f"not valid YAML: {error}"], source=str(path)) from error
    except RecursionError:  # PyYAML composes nested nodes recursively
        raise ConfigError(
            ["nested too deeply to be a campaign config (YAML parser recursion limit)"],
            source=str(path),
        ) from None
    finally:
        loader.dispose()
    if data is None:
        raise ConfigError(["the file is empty (expected hosts, targets, experiments)"], str(path))
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise ConfigError([f"the top level must be a mapping, not a {kind}"], source=str(path))
    if YTE_KEY in data:
        raise ConfigError([yte_problem(text)], source=str(path))
    if loader.leading_zeros:
        raise ConfigError(loader.leading_zeros, source=str(path))
    return data


_LEADING_ZERO = re.compile(r"[-+]?0[0-9_]+")


def _yaml_problem(error: yaml.MarkedYAMLError) -> str:
    """PyYAML's problem at the file's own line and column (its text says '<unicode string>')."""
    mark = error.problem_mark or error.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    started = ""
    if error.context and error.context_mark and error.problem_mark:
        context = error.context_mark
        started = f" ({error.context} at line {context.line + 1}, column {context.column + 1})"
    return f"{where}not valid YAML: {error.problem or error.context}{started}"


def leading_zero_problem(node) -> str | None:
    """A plain scalar written with a leading zero ('016'): YAML 1.1 reads it as octal (14) or,
    with an 8 or 9 in it, as text ('008'), so a zero-padded sweep silently runs other values."""
    if not _LEADING_ZERO.fullmatch(node.value):
        return None
    written = node.value.replace("_", "")
    try:
        read = f"octal, {int(written, 8)}"
    except ValueError:
        read = f"the text {node.value!r}"
    return (
        f"line {node.start_mark.line + 1}: {node.value} has a leading zero, which YAML"
        f" reads as {read}; write {int(written, 10)} (or quote it, as text)"
    )


YTE_KEY = "__use_yte__"


def yte_problem(text: str) -> str:
    """Why a config that asks for YTE is refused, naming the key's line."""
    line = next((n for n, row in enumerate(text.splitlines(), 1) if row.startswith(YTE_KEY)), None)
    where = f"line {line}: " if line else ""
    return (
        f"{where}{YTE_KEY}: this file asks Snakemake to evaluate it as a YTE template, which"
        " runs the Python expressions in it while Snakemake loads the file, before storbench"
        " sees it (under `snakemake` they have run already, even with -n). storbench refuses"
        " such configs: vet a config from someone else with `storbench check` first (it never"
        " evaluates them) and write plain YAML"
    )


def with_lines(error: ConfigError, files: list) -> ConfigError:
    """The error with each problem's line in the config files it was read from (a later
    file's key wins, as in Snakemake's merge of several --configfile)."""
    lines: dict[str, tuple[str, int]] = {}
    for path in files:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        lines.update((key, (str(path), line)) for key, line in key_lines(text).items())
    if not lines:
        return error
    several = len(files) > 1
    located = []
    for problem in error.problems:
        found = _line_of(problem.split(": ", 1)[0], lines)
        if found is None:
            located.append(problem)
            continue
        path, line = found
        located.append(f"{problem} ({path} line {line})" if several else f"{problem} (line {line})")
    return ConfigError(located, error.source)


def _line_of(key: str, lines: dict[str, tuple[str, int]]) -> tuple[str, int] | None:
    """The line of the key, else of the nearest key above it that the file has."""
    if key in lines:
        return lines[key]
    above = [k for k in lines if key.startswith(f"{k}.") or key.startswith(f"{k}[")]
    return lines[max(above, key=len)] if above else None


def key_lines(text: str) -> dict[str, int]:
    """Each key path of a YAML text ('experiments.demo.sweep.bs[1]', as problems name them)
    -> the 1-based line it is on; {} for a text that is not YAML."""
    try:
        root = yaml.compose(text, Loader=FAST_SAFE_LOADER)
    except (yaml.YAMLError, RecursionError):
        return {}
    lines: dict[str, int] = {}
    walked: set[int] = set()

    def walk(node, parts: tuple) -> None:
        if id(node) in walked:  # an alias: the lines are its anchor's, named already
            return
        walked.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key_node, value in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == MERGE_TAG:
                    continue  # '<<: *base': the merged keys' lines are the anchor's
                path = (*parts, key_node.value)
                lines.setdefault(key_path(path), key_node.start_mark.line + 1)
                walk(value, path)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                path = (*parts, index)
                lines.setdefault(key_path(path), item.start_mark.line + 1)
                walk(item, path)

    if root is not None:
        walk(root, ())
    return lines


def key_path(parts) -> str:
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "(top level)"


def configfile_arguments(argv: list[str]) -> list[str]:
    """The files a snakemake command line names with --configfile (or --configfiles)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--configfile", "--configfiles", nargs="+", action="extend", default=[])
    known, _ = parser.parse_known_args(argv)
    return known.configfile


def configfile_problems(argv: list[str]) -> list[str]:
    """Each --configfile of the command line that storbench cannot read as a config, with
    the problem's line: what Snakemake's SNAKEMAKE_CONFIGFILE_ERROR leaves out. A name that
    is no file (a target after the files, which nargs='+' takes too) is not one of them."""
    problems = []
    for path in configfile_arguments(argv):
        if not Path(path).is_file():
            continue
        try:
            load_yaml(path)
        except ConfigError as error:
            problems.append(str(error))
    return problems
