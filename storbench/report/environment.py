"""The controller's environment for a report's appendix: what made and analysed the numbers.

``controller_environment()`` lists (label, value) pairs: storbench, Python, the operating
system and the versions of the packages that run the workflow, talk to the hosts and compute
the statistics and figures. The client hosts' own facts are in their telemetry
(``storbench.run.telemetry``); the tool versions are in the result rows.
"""

from __future__ import annotations

import platform
from importlib import metadata

PACKAGES = ("snakemake", "fabric", "paramiko", "pyarrow", "pandas", "numpy", "matplotlib", "jinja2")


def package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def controller_environment() -> list[tuple[str, str]]:
    """(label, value) rows; no host names or addresses (a report may be published)."""
    uname = platform.uname()
    rows = [
        ("storbench", package_version("storbench")),
        ("Python", f"{platform.python_implementation()} {platform.python_version()}"),
        ("Operating system", f"{uname.system} {uname.release} ({uname.machine})"),
        ("C library", " ".join(platform.libc_ver()).strip() or "unknown"),
    ]
    rows += [(name, package_version(name)) for name in PACKAGES]
    return rows
