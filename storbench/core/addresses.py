"""Host addresses in the forms the tools take them.

A config may write an IPv6 address bare (``fd00::2``) or in brackets (``[fd00::2]``). Where a
port follows, every tool needs the brackets (``[fd00::2]:8765``: Go's host:port, elbencho's
HTTP client); where the address stands alone (iperf3, ssh, a socket), none.
"""

from __future__ import annotations

import ipaddress


def bare(address: str) -> str:
    """'[fd00::2]' -> 'fd00::2'; any other address as it is."""
    if address.startswith("[") and address.endswith("]"):
        return address[1:-1]
    return address


def is_ipv6(address: str) -> bool:
    """Whether the address, bare or in brackets, is an IPv6 literal."""
    try:
        return isinstance(ipaddress.ip_address(bare(address)), ipaddress.IPv6Address)
    except ValueError:
        return False


def with_port(address: str, port: int | str) -> str:
    """host:port, with an IPv6 literal in brackets: '[fd00::2]:8765'."""
    host = bare(address)
    return f"[{host}]:{port}" if is_ipv6(host) else f"{host}:{port}"


def split_endpoint(endpoint: str) -> tuple[str, str]:
    """'[fd00::2]:8765' -> ('fd00::2', '8765'); 'host:8765' -> ('host', '8765')."""
    host, _, port = endpoint.rpartition(":")
    return bare(host), port


def address_problem(address: str) -> str | None:
    """Brackets only around a whole IPv6 address ('[host]' or '[fd00::2' is a mistake), and
    a colon only in one (a port has a key of its own)."""
    if ("[" in address or "]" in address) and not (
        address.startswith("[") and address.endswith("]") and is_ipv6(address)
    ):
        return f"{address!r}: brackets go around an IPv6 address only ('[fd00::2]')"
    if ":" in address and not is_ipv6(address):
        return f"{address!r}: a colon only in an IPv6 address (service_ports sets ports)"
    return None
