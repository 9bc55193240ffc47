"""The data path model: theoretical maximum bandwidth of a set of client hosts.

A config's ``data_path`` section names the rate of each client's link (one rate, or a rate
per host group) and shared limits along the path (switch uplinks, the storage cluster). The
theoretical maximum of a client step is the smallest of: the sum of its clients' links, and
every shared limit -- "the maximum bandwidth will be limited by the minimum value of the
entire data path".

Rates: ``10Gbit/s``, ``10Gb/s``, ``10Gbps``, ``100GbE`` are bits per second; ``12.5GB/s``,
``800MB/s``, ``12.5GBps`` are bytes per second with decimal prefixes (as network rates are
quoted); ``2GiB/s`` is binary; a bare number is bytes per second. All results are bytes/s.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

from storbench.core.units import UnitError

_RATE = re.compile(
    r"""^\s*(?P<number>\d+(?:\.\d*)?|\.\d+)\s*
    (?P<prefix>[kKmMgGtTpP]?)(?P<binary>i?)
    (?P<unit>bits?|Bytes?|bytes?|b|B)
    (?P<per>/s|/sec|ps|E)\s*$""",
    re.VERBOSE,
)
_NUMBER = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*$")
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}
_BIT_PREFIXES = ((1e15, "Pbit/s"), (1e12, "Tbit/s"), (1e9, "Gbit/s"), (1e6, "Mbit/s"))
KNOWN_KEYS = ("client_link", "limits")
CLIENT_LINKS = "client links"


class RateError(UnitError):
    """A rate that cannot be read; the message quotes the text."""


class DataPathError(ValueError):
    """A data path that cannot give a theoretical maximum for the hosts asked about."""


def parse_rate(value) -> float:
    """'10Gbit/s' -> 1.25e9, '100GbE' -> 1.25e10, '2GiB/s' -> 2147483648.0, 800 -> 800.0."""
    if isinstance(value, bool):
        raise RateError(f"not a rate: {value!r}")
    if isinstance(value, (int, float)):
        rate = float(value)
    elif _NUMBER.match(str(value)):
        rate = float(str(value))
    else:
        rate = _parse_rate_text(str(value))
    if not math.isfinite(rate) or rate <= 0:
        raise RateError(f"rate must be a positive number: {value!r}")
    return rate


def _parse_rate_text(text: str) -> float:
    match = _RATE.match(text)
    if not match:
        raise RateError(
            f"not a rate: {text!r} (expected e.g. 10Gbit/s, 100GbE, 12.5GB/s, 2GiB/s, "
            "or bytes/s as a number)"
        )
    unit, per = match["unit"], match["per"]
    bits = unit[0] == "b" and not unit.lower().startswith("byte")
    if per == "E" and not bits:
        raise RateError(f"not a rate: {text!r} (Ethernet speeds are in bits: 100GbE)")
    base = 1024 if match["binary"] else 1000
    rate = float(match["number"]) * base ** _POWERS[match["prefix"].lower()]
    return rate / 8 if bits else rate


def rate_label(bytes_per_s: float) -> str:
    """A link rate as network people write it: 1.25e9 -> '10 Gbit/s'."""
    bits = bytes_per_s * 8
    for scale, unit in _BIT_PREFIXES:
        if bits >= scale:
            return f"{bits / scale:.4g} {unit}"
    return f"{bits:.4g} bit/s"


def theoretical_max(data_path: Mapping, hosts: Iterable[Mapping]) -> tuple[float, str]:
    """(bytes/s, bottleneck name): the smallest total along the path for these client hosts.

    ``hosts``: dicts with ``name`` and ``group``. The client-link total is named like
    'client links (4 x 10 Gbit/s)'; a shared limit by its configured name. On a tie the
    client links win (they are listed first).
    """
    hosts = list(hosts)
    candidates = []
    if data_path.get("client_link") is not None:
        if not hosts:
            raise DataPathError("data_path: no client hosts to sum the client links of")
        links = [_client_link(data_path["client_link"], host) for host in hosts]
        candidates.append((sum(links), _links_name(links)))
    for index, limit in enumerate(data_path.get("limits") or []):
        try:
            candidates.append((parse_rate(limit["rate"]), str(limit["name"])))
        except (KeyError, TypeError, RateError) as exc:
            raise DataPathError(f"data_path.limits[{index}]: {_reason(exc)}") from exc
    if not candidates:
        raise DataPathError("data_path: needs client_link or limits")
    return min(candidates, key=lambda candidate: candidate[0])


def _client_link(client_link, host: Mapping) -> float:
    if not isinstance(client_link, Mapping):
        try:
            return parse_rate(client_link)
        except RateError as exc:
            raise DataPathError(f"data_path.client_link: {exc}") from exc
    group = host.get("group")
    if group is None:
        raise DataPathError(
            "data_path.client_link: rates are per host group, but the group of host "
            f"{host.get('name')!r} is unknown"
        )
    if group not in client_link:
        raise DataPathError(
            f"data_path.client_link: no rate for host group {group!r} (host {host.get('name')!r})"
        )
    try:
        return parse_rate(client_link[group])
    except RateError as exc:
        raise DataPathError(f"data_path.client_link.{group}: {exc}") from exc


def _links_name(links: list[float]) -> str:
    """'client links (4 x 10 Gbit/s)', or '(2 x 10 Gbit/s + 1 x 100 Gbit/s)' when mixed."""
    counts: dict[float, int] = {}
    for rate in links:
        counts[rate] = counts.get(rate, 0) + 1
    parts = [f"{count} x {rate_label(rate)}" for rate, count in sorted(counts.items())]
    return f"{CLIENT_LINKS} ({' + '.join(parts)})"


def _reason(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"missing {exc.args[0]}"
    if isinstance(exc, TypeError):
        return "must be a mapping with name and rate"
    return str(exc)


def check(
    data_path, host_groups: Iterable[str], *, required_groups: Iterable[str] = ()
) -> list[str]:
    """Problems of a ``data_path`` section, each with its key path; [] when it is usable.

    ``host_groups``: the configured host group names. ``required_groups``: groups whose
    hosts are stepped (a per-group client_link must name each of them).
    """
    if not isinstance(data_path, Mapping):
        return ["data_path: must be a mapping with client_link and/or limits"]
    groups = list(host_groups)
    problems = [f"data_path.{key}: unknown key" for key in data_path if key not in KNOWN_KEYS]
    if data_path.get("client_link") is None and not data_path.get("limits"):
        problems.append("data_path: needs client_link or limits")
    if data_path.get("client_link") is not None:
        problems += _check_client_link(data_path["client_link"], groups, list(required_groups))
    problems += _check_limits(data_path.get("limits"))
    return problems


def _check_client_link(client_link, groups: list[str], required: list[str]) -> list[str]:
    if not isinstance(client_link, Mapping):
        return _rate_problems("data_path.client_link", client_link)
    problems = []
    for group, rate in client_link.items():
        if group not in groups:
            known = ", ".join(groups) or "none"
            problems.append(
                f"data_path.client_link.{group}: unknown host group {group!r} (known: {known})"
            )
        problems += _rate_problems(f"data_path.client_link.{group}", rate)
    problems += [
        f"data_path.client_link: no rate for host group {group!r}"
        for group in required
        if group not in client_link
    ]
    return problems


def _check_limits(limits) -> list[str]:
    if limits is None:
        return []
    if not isinstance(limits, list):
        return ["data_path.limits: must be a list of {name, rate}"]
    problems, seen = [], set()
    for index, limit in enumerate(limits):
        where = f"data_path.limits[{index}]"
        if not isinstance(limit, Mapping):
            problems.append(f"{where}: must be a mapping with name and rate")
            continue
        name = limit.get("name")
        if not name:
            problems.append(f"{where}.name: missing")
        elif name in seen:
            problems.append(f"{where}.name: duplicate {name!r}")
        seen.add(name)
        if "rate" not in limit:
            problems.append(f"{where}.rate: missing")
        else:
            problems += _rate_problems(f"{where}.rate", limit["rate"])
    return problems


def _rate_problems(where: str, value) -> list[str]:
    try:
        parse_rate(value)
    except RateError as exc:
        return [f"{where}: {exc}"]
    return []


def describe(data_path: Mapping) -> str:
    """One line for the methodology: 'client link 10 Gbit/s; cluster 3 GB/s'."""
    parts = []
    client_link = data_path.get("client_link")
    if isinstance(client_link, Mapping):
        parts += [f"client link ({group}) {rate}" for group, rate in client_link.items()]
    elif client_link is not None:
        parts.append(f"client link {client_link}")
    parts += [f"{limit.get('name')} {limit.get('rate')}" for limit in data_path.get("limits") or []]
    return "; ".join(parts)
