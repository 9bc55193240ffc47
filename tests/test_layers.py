"""The package is layered by pipeline stage: a module imports only its own layer or lower ones,
and no import (top-level or inside a function) closes a circle."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "storbench"

# Lowest first: a layer may import itself and the layers before it, never one after it.
LAYERS = ("core", "tools", "hosts", "config", "plan", "run", "analysis", "report", "cli")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in ("cli", "__main__"):
        return "cli"
    return parts[1]


def package_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported_modules(path: Path, modules: dict[str, Path]) -> set[str]:
    """Every storbench module a file imports, wherever the import statement stands."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from storbench.run import runner` imports the module, not just the package
            names = [
                f"{node.module}.{alias.name}"
                if f"{node.module}.{alias.name}" in modules
                else node.module
                for alias in node.names
            ]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name.startswith("storbench") and name != "storbench":
                found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = package_modules()
    return {
        name: imported_modules(path, modules) - {name} - _parents(name)
        for name, path in modules.items()
    }


def _parents(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    rank = {layer: index for index, layer in enumerate(LAYERS)}
    return sorted(
        f"{module} ({layer_of(module)}) imports {target} ({layer_of(target)})"
        for module, targets in graph.items()
        for target in targets
        if rank[layer_of(target)] > rank[layer_of(module)]
    )


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_module_belongs_to_a_layer():
    unknown = [m for m in package_modules() if layer_of(m) not in LAYERS]
    assert unknown == []


def test_no_layer_imports_a_higher_one():
    assert upward_imports(import_graph()) == []


def test_no_import_cycles():
    assert cycles(import_graph()) == []


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": set()}, []),
    ],
)
def test_cycle_finder(graph, expected):
    assert cycles(graph) == expected


def test_upward_finder_names_both_layers():
    graph = {"storbench.core.units": {"storbench.run.engine"}, "storbench.run.engine": set()}
    assert upward_imports(graph) == [
        "storbench.core.units (core) imports storbench.run.engine (run)"
    ]


def test_function_level_imports_are_found(tmp_path):
    source = tmp_path / "storbench" / "core" / "late.py"
    source.parent.mkdir(parents=True)
    source.write_text("def f():\n    from storbench.run import engine\n    return engine\n")
    modules = {"storbench.run.engine": Path("x"), "storbench.core.late": source}
    assert imported_modules(source, modules) == {"storbench.run.engine"}


def test_the_core_names_no_tool():
    """A tool's capabilities live in its adapter: outside storbench/tools/ no module compares a
    tool name or imports a tool's own module (the registry lookup get_tool is the way in)."""
    from storbench.tools import known_tools

    names = "|".join(known_tools())
    named = re.compile(rf"""(==|!=|\bin)\s*\(?\s*["']({names})["']|["']({names})["']\s*(==|!=)""")
    imports = re.compile(rf"storbench\.tools\.({names})\b|from storbench\.tools import ({names})\b")
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent.name == "tools":
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if named.search(line) or imports.search(line):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}")
    assert found == []


def test_every_import_inside_a_function_says_why():
    """Imports belong at the top; one inside a function keeps something heavy off a light
    path and says so in a comment on its line or above its block of imports."""
    unexplained = []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text().splitlines()
        for function in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            imports = [n for n in ast.walk(function) if isinstance(n, (ast.Import, ast.ImportFrom))]
            starts = {node.lineno for node in imports}
            for node in imports:
                above = node.lineno - 2
                while above + 1 in starts and "#" not in lines[above]:
                    above -= 1  # an import right above: the block's comment counts
                if "#" not in lines[node.lineno - 1] and "#" not in lines[above]:
                    name = path.relative_to(PACKAGE.parent)
                    unexplained.append(f"{name}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    assert unexplained == []
