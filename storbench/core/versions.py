"""A tool's versions among the hosts of a result, and the warning when they differ.

Numbers measured with two versions of a tool are not one experiment: preflight, the
experiment report and the comparison say which version ran where, in one line however many
hosts there are ('fio versions differ across hosts: fio-3.36 on 126 hosts
(client[003-128]); fio-3.28 on client001, client002'). Host names are folded into
ClusterShell ranges, as a config writes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

MAX_LISTED = 4  # up to this many hosts are named one by one, more are folded into ranges
MAX_HOSTS_TEXT = 80  # characters: beyond, a version's hosts are only counted


def hosts_by_version(pairs: Iterable[tuple[str, str | None]]) -> dict[str, list[str]]:
    """{version: sorted host names} of (host, version) pairs; a missing version is left out."""
    found: dict[str, set[str]] = {}
    for host, version in pairs:
        if version not in (None, ""):
            found.setdefault(str(version), set()).add(str(host))
    return {version: sorted(hosts) for version, hosts in found.items()}


def mixed(versions: Mapping[str, Iterable[str]]) -> bool:
    return len(versions) > 1


def differ_across_hosts(tool: str, versions: Mapping[str, Iterable[str]]) -> str | None:
    """The warning for a tool's versions by host, most hosts first; None for one version.
    A host under two versions (the tool changed between runs) is named as such."""
    if not mixed(versions):
        return None
    listed = {version: sorted(set(hosts)) for version, hosts in versions.items()}
    order = sorted(listed, key=lambda version: (-len(listed[version]), version))
    parts = [f"{version} on {hosts_text(listed[version])}" for version in order]
    seen: dict[str, int] = {}
    for hosts in listed.values():
        for host in hosts:
            seen[host] = seen.get(host, 0) + 1
    changed = sorted(host for host, count in seen.items() if count > 1)
    where = "across hosts and runs" if changed else "across hosts"
    text = f"{tool} versions differ {where}: {'; '.join(parts)}"
    if changed:
        text += f" ({hosts_text(changed)} ran more than one version: the tool changed between runs)"
    return text


def differ_between(
    tool: str, versions_by_side: Iterable[tuple[str, Iterable[str]]], between: str = "the sides"
) -> str | None:
    """The warning for a comparison whose sides (or a campaign whose experiments) ran other
    versions ('fio versions differ between the sides: fio-3.36 in baseline; fio-3.28 in
    fw-old'); None when they agree."""
    sides = [(side, sorted(set(versions))) for side, versions in versions_by_side]
    if len({tuple(versions) for _, versions in sides}) < 2:
        return None
    parts = [
        f"{' and '.join(versions) or 'no recorded version'} in {side}" for side, versions in sides
    ]
    return f"{tool} versions differ between {between}: {'; '.join(parts)}"


def hosts_text(hosts: Iterable[str]) -> str:
    """'client001, client002' (up to MAX_LISTED hosts); '126 hosts (client[003-128])' where
    more fold into ranges; '126 hosts' where the ranges would take more than MAX_HOSTS_TEXT."""
    names = sorted(set(hosts))
    if len(names) <= MAX_LISTED:
        return ", ".join(names)
    folded = ", ".join(_folded(names))
    if len(folded) > MAX_HOSTS_TEXT:
        return f"{len(names)} hosts"
    return f"{len(names)} hosts ({folded})"


def _folded(names: list[str]) -> list[str]:
    """The names as ClusterShell folds them ('client[001-004,007]'), one part per pattern."""
    # ClusterShell (75 ms to import) only when versions differ
    from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet

    try:
        text = str(NodeSet.fromlist(names, resolver=RESOLVER_NOGROUP))
    except Exception:  # a name NodeSet cannot hold (imported rows name hosts freely)
        return names
    return _top_level_parts(text)


def _top_level_parts(text: str) -> list[str]:
    """'a[1-2,4],b' -> ['a[1-2,4]', 'b']: commas outside brackets separate the parts."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return parts
