"""Tool adapters by name.

A new tool adds its module, its templates/<tool>/ folder and one line in _REGISTRY.
"""

from __future__ import annotations

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


def known_tools() -> list[str]:
    return sorted(_REGISTRY)


def preparation_tool() -> ToolAdapter:
    """The tool that lays out datasets and runs preconditioning recipes."""
    return next(
        get_tool(name) for name in known_tools() if get_tool(name).capabilities.preparation
    )


def get_tool(name: str) -> ToolAdapter:
    if name not in _REGISTRY:
        raise KeyError(f"unknown tool {name!r} (known: {', '.join(known_tools())})")
    return importlib.import_module(_REGISTRY[name]).ADAPTER
