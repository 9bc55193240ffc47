"""Tool adapters by name.

A new tool adds its module, its templates/<tool>/ folder and one line in _REGISTRY. A tool
kept outside this package registers itself as an entry point of the group
``storbench.tools`` (``name = "package.module:ADAPTER"``) in its own distribution.
"""

from __future__ import annotations

import functools
import importlib

from storbench.tools.base import ToolAdapter

_REGISTRY = {
    "fio": "storbench.tools.fio",
    "elbencho": "storbench.tools.elbencho",
    "vdbench": "storbench.tools.vdbench",
    "warp": "storbench.tools.warp",
    "gosbench": "storbench.tools.gosbench",
    "iperf3": "storbench.tools.iperf3",
}
ENTRY_POINT_GROUP = "storbench.tools"


class UnknownToolError(KeyError):
    """A tool name that is neither built in nor a plugin (a hand-written spec or manifest)."""

    def __str__(self) -> str:  # the message, not KeyError's repr of it
        return str(self.args[0])


@functools.cache
def _plugins() -> dict[str, str]:
    """Tools other distributions provide; a built-in name cannot be taken over."""
    from importlib.metadata import entry_points  # ~35 ms: only when a name is not built in

    found = {entry.name: entry.value for entry in entry_points(group=ENTRY_POINT_GROUP)}
    return {name: value for name, value in found.items() if name not in _REGISTRY}


def known_tools() -> list[str]:
    return sorted({*_REGISTRY, *_plugins()})


def preparation_tool() -> ToolAdapter:
    """The tool that lays out datasets and runs preconditioning recipes."""
    return next(get_tool(name) for name in known_tools() if get_tool(name).capabilities.preparation)


def network_tool() -> ToolAdapter:
    """The tool that measures the network between hosts (`snakemake network`)."""
    return next(
        get_tool(name) for name in known_tools() if get_tool(name).capabilities.network_check
    )


def get_tool(name: str) -> ToolAdapter:
    if name in _REGISTRY:
        return importlib.import_module(_REGISTRY[name]).ADAPTER
    if name in _plugins():
        module, _, attribute = _plugins()[name].partition(":")
        return getattr(importlib.import_module(module), attribute or "ADAPTER")
    raise UnknownToolError(f"unknown tool {name!r} (known: {', '.join(known_tools())})")
