"""Host groups: a group's node set expanded into hosts (ClusterShell ranges, without its
group resolver), each host's connection settings and data address, and the checks that a
host is reached one way and taken once by an experiment.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys

from storbench.config.values import positive_duration
from storbench.core.addresses import address_problem
from storbench.core.model import Host, parse_jump
from storbench.core.schema_names import ALL_HOSTS, CONTROLLER
from storbench.tools import get_tool, known_tools

MAX_HOSTS_PER_GROUP = 4096
# host 'all' is the aggregate row, 'controller' the service-mode controller's output, and
# results/telemetry/logs/ holds the telemetry logs
RESERVED_HOST_NAMES = frozenset({ALL_HOSTS, CONTROLLER, "logs"})


# how a host is reached and where its files go: the same in every group that has the host
WAY_IN = (
    "transport", "user", "port", "jump", "identity", "known_hosts", "connection", "gateway",
    "gateway_python", "workdir",
)  # fmt: skip
# a key a group leaves out is the host's default: `connection: persistent` in one group and
# nothing in another reach the host the same way
WAY_IN_DEFAULTS = {field.name: field.default for field in dataclasses.fields(Host)}


def check_hosts_in_several_groups(host_groups: dict, problems: list[str]) -> None:
    """Groups may overlap (rack1, all; clients and storage nodes), each with its own data
    and service settings, but a host is reached one way: the steps that are a host's own (its
    telemetry, its set-up) take whichever group comes first."""
    first: dict[str, dict] = {}
    for group, hosts in host_groups.items():
        for host in hosts:
            seen = first.setdefault(host["name"], host)
            differ = [key for key in WAY_IN if _way_in(seen, key) != _way_in(host, key)]
            if differ:
                problems.append(
                    f"hosts.{group}: host {host['name']} is in hosts.{seen['group']} too, with"
                    f" another {', '.join(differ)}; a host is reached the same way in every"
                    " group"
                )


def _user_problem(user, nodes: list[str]) -> str | None:
    """A login with a host of the group in it (root@client01), or a line break, is no login;
    'jdoe@corp.example.com' (a directory's login) is one, and so, quoted, is one with blanks."""
    if not isinstance(user, str):
        return None
    if not user.isprintable():
        return f"{user!r} is not a login name (control characters)"
    login, at, host = user.rpartition("@")
    if at and host in nodes:
        return f"{user!r} holds a host of the group: the login alone ({login!r}) goes here"
    return None


def _login_in_name(name: str) -> str:
    """What an ssh destination's parts in a host name mean here (root@client01:2222)."""
    user, at, host = name.rpartition("@")
    if at and user and host:
        return f"; the login goes under user: ({user!r}), the host alone under nodes:"
    host, colon, port = name.rpartition(":")
    if colon and port.isdigit() and host and ":" not in host:
        return f"; the port goes under port: ({port}), the host alone under nodes:"
    return ""


def _way_in(host: dict, key: str):
    return host.get(key, WAY_IN_DEFAULTS[key])


def check_each_host_once(key: str, groups: tuple, host_groups: dict, problems: list[str]) -> None:
    """An experiment's groups may not share a host: it would run the job twice there, into
    the same output files."""
    group_of: dict[str, str] = {}
    for group in groups:
        for host in host_groups.get(group) or []:
            other = group_of.setdefault(host["name"], group)
            if other != group:
                problems.append(
                    f"{key}.hosts: host {host['name']} is in both {other} and {group}; an"
                    " experiment takes each host once"
                )
                return


def expand_group(name: str, group: dict, problems: list[str]) -> list[dict]:
    key = f"hosts.{name}"
    nodes = _expand_node_list(f"{key}.nodes", group.get("nodes", name), problems)
    if not nodes:
        return []
    if not _gateway_fits(key, group, problems):
        return []
    if isinstance(group.get("jump"), str):
        try:
            parse_jump(group["jump"])
        except ValueError as error:
            problems.append(f"{key}.jump: {error}")
            return []
    if group["transport"] == "local" and len(nodes) != 1:
        problems.append(f"{key}.nodes: a local group is exactly one host, not {len(nodes)}")
        return []
    connect_timeout = positive_duration(
        f"{key}.connect_timeout", group.get("connect_timeout", 10), problems
    )
    unresponsive = positive_duration(
        f"{key}.unresponsive_after", group.get("unresponsive_after", 30), problems
    )
    if connect_timeout is None or unresponsive is None:
        return []
    if problem := _user_problem(group.get("user"), nodes):
        problems.append(f"{key}.user: {problem}")
        return []
    specs: list[dict] = []
    for node in nodes:
        spec = {"name": node, "group": name, "transport": group["transport"]}
        for option in (
            "user",
            "port",
            "jump",
            "gateway",
            "gateway_python",
            "host_key_check",
            "connection",
            "workdir",
            "keep_attempts",
            "service_ports",
            "controller_address",
        ):
            if option in group:
                spec[option] = group[option]
        for option in ("identity", "known_hosts"):
            if option in group:
                spec[option] = os.path.expanduser(group[option])
        spec["connect_timeout"] = connect_timeout
        if "unresponsive_after" in group:
            spec["unresponsive_s"] = unresponsive
        if "data_address" in group:
            spec["data_address"] = _data_address(group["data_address"], node, len(specs) + 1)
        specs.append(spec)
    if "data_address" in group and (problem := _data_address_problem(group["data_address"])):
        problems.append(f"{key}.data_address: {problem}")
    for option in ("data_address", "controller_address"):
        wrong = [problem for spec in specs if (problem := address_problem(spec.get(option, "")))]
        if wrong:  # one line a group: every node's address has the same form
            problems.append(f"{key}.{option}: {wrong[0]}")
    for tool in group.get("service_ports", {}):
        if tool not in known_tools() or not get_tool(tool).has_services:
            services = [n for n in known_tools() if get_tool(n).has_services]
            problems.append(
                f"{key}.service_ports.{tool}: not a tool with a service"
                f" (tools: {', '.join(services)})"
            )
    identity = specs[0].get("identity") if group["transport"] == "ssh" else None
    if identity and (problem := private_file_problem(identity)):
        problems.append(f"{key}.identity: {problem}")
    return specs


DATA_ADDRESS_FIELD = re.compile(r"\{([^{}]*)\}")


def _data_address(pattern: str, node: str, position: int) -> str:
    """'{name}-100g' -> 'client001-100g', '192.168.100.{n}' -> the node's 1-based position."""
    return DATA_ADDRESS_FIELD.sub(
        lambda m: node if m.group(1) == "name" else str(position), pattern
    )


def _data_address_problem(pattern: str) -> str | None:
    unknown = [f for f in DATA_ADDRESS_FIELD.findall(pattern) if f not in ("name", "n")]
    if unknown:
        return f"unknown field {{{unknown[0]}}} (fields: {{name}}, {{n}})"
    return None


def private_file_problem(path: str) -> str | None:
    """A key file that is missing or unreadable is a problem; one others may read, a warning."""
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        return f"cannot read the key file {path}: {error.strerror}"
    if not os.access(path, os.R_OK):
        return f"cannot read the key file {path}: permission denied"
    if mode & 0o077:
        print(
            f"storbench: warning: key file {path} can be read by other users (mode"
            f" {mode & 0o777:o}); OpenSSH refuses such keys: chmod 600 {path}",
            file=sys.stderr,
        )
    return None


HOST_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}$")  # <host>.json is a file name
_NODE_RANGE = re.compile(r"\[([^\[\]]*)\]")
_RANGE_PART = re.compile(r"^(\d+)(?:-(\d+)(?:/(\d+))?)?$")
_NODESET_OPERATORS = re.compile(r"[!&^]")


def _expand_node_list(key: str, nodes: str | list[str], problems: list[str]) -> list[str]:
    """The host names of a node set, or of a list of them in the list's order; [] with a
    problem when one is unusable, or names a host another names too."""
    if isinstance(nodes, str):
        return _expand_nodes(key, nodes, problems)
    most = sum(_most_nodes(text) for text in nodes)
    if most > MAX_HOSTS_PER_GROUP:
        problems.append(
            f"{key}: the list expands to up to {most} hosts (more than MAX_HOSTS_PER_GROUP ="
            f" {MAX_HOSTS_PER_GROUP}; split the group)"
        )
        return []
    names: list[str] = []
    where: dict[str, int] = {}
    for index, text in enumerate(nodes):
        expanded = _expand_nodes(f"{key}[{index}]", text, problems)
        if not expanded:
            return []
        for node in expanded:
            if node in where:
                problems.append(
                    f"{key}[{index}]: host {node} is already in {key}[{where[node]}]; a group"
                    " names each host once"
                )
                return []
            where[node] = index
            names.append(node)
    return names


def _expand_nodes(key: str, nodes_text: str, problems: list[str]) -> list[str]:
    """The host names of a ClusterShell node set; [] with a problem when it is unusable."""
    # lazy: loads ClusterShell
    from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetException

    most = _most_nodes(nodes_text)
    if most > MAX_HOSTS_PER_GROUP:  # checked before expanding: node[1-1000000000] fills memory
        bound = "up to " if _NODESET_OPERATORS.search(nodes_text) else ""
        problems.append(
            f"{key}: {nodes_text!r} expands to {bound}{most} hosts "
            f"(more than MAX_HOSTS_PER_GROUP = {MAX_HOSTS_PER_GROUP}; split the group)"
        )
        return []
    try:
        # no group resolver: '@group' and '*' would run ClusterShell's group upcall commands
        nodes = list(NodeSet(nodes_text, resolver=RESOLVER_NOGROUP))
    except NodeSetException as error:
        problems.append(f"{key}: malformed host range {nodes_text!r}: {error}")
        return []
    if not nodes:
        problems.append(f"{key}: {nodes_text!r} expands to no host")
        return []
    bad = [node for node in nodes if not HOST_NAME.fullmatch(node)]
    if bad:
        within = f" in {nodes_text!r}" if bad[0] != nodes_text else ""
        problems.append(
            f"{key}: bad host name {bad[0]!r}{within} (up to 200 letters, digits, '.', '-', "
            "'_', first not '.' or '-'; ClusterShell groups such as '@rack1' are not resolved)"
            + _login_in_name(bad[0])
        )
        return []
    reserved = [node for node in nodes if node in RESERVED_HOST_NAMES]
    if reserved:
        problems.append(
            f"{key}: host name {reserved[0]!r} is storbench's own (reserved:"
            f" {', '.join(sorted(RESERVED_HOST_NAMES))}); name the host otherwise: by its IP"
            " address, or by an alias in ~/.ssh/config"
        )
        return []
    return nodes


def _most_nodes(nodes_text: str) -> int:
    """How many names a node set has at most, counted from its ranges without expanding them."""
    terms = re.split(r"[,!&^](?![^\[]*\])", nodes_text)  # separators outside brackets
    total = 0
    for term in terms:
        count = 1
        for ranges in _NODE_RANGE.findall(term):
            count *= sum(_range_length(part) for part in ranges.split(","))
        total += count
    return total


def _range_length(part: str) -> int:
    match = _RANGE_PART.match(part.strip())
    if not match:
        return 1  # not a range NodeSet reads: it reports the error itself
    first, last, step = match.groups()
    if last is None:
        return 1
    return max(0, (int(last) - int(first)) // int(step or 1) + 1)


def _gateway_fits(key: str, group: dict, problems: list[str]) -> bool:
    """A gateway is how connection tree reaches the hosts: neither makes sense alone."""
    tree = group.get("connection") == "tree"
    if tree != ("gateway" in group):
        where = f"{key}.gateway" if tree else f"{key}.connection"
        problems.append(f"{where}: connection tree and a gateway go together")
        return False
    if tree and (group["transport"] != "ssh" or "jump" in group):
        problems.append(f"{key}.gateway: a gateway reaches ssh hosts, with no jump host")
        return False
    return True
