"""Host addresses in the forms the tools take them (storbench.core.addresses)."""

from __future__ import annotations

import pytest

from storbench.core.addresses import address_problem, bare, is_ipv6, split_endpoint, with_port


@pytest.mark.parametrize(
    ("address", "endpoint"),
    [
        ("[fd00::2]", "[fd00::2]:8765"),
        ("fd00::2", "[fd00::2]:8765"),
        ("::1", "[::1]:8765"),
        ("10.0.0.1", "10.0.0.1:8765"),
        ("client01-100g", "client01-100g:8765"),
    ],
)
def test_a_port_follows_an_ipv6_address_in_brackets(address, endpoint):
    assert with_port(address, 8765) == endpoint
    assert split_endpoint(endpoint) == (bare(address), "8765")


def test_only_ipv6_literals_are_ipv6():
    assert [is_ipv6(a) for a in ("[::1]", "fd00::2", "10.0.0.1", "host", "[host]", "")] == [
        True, True, False, False, False, False,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("[fd00::2]", None),
        ("fd00::2", None),
        ("10.0.0.1", None),
        ("[10.0.0.1]", "'[10.0.0.1]': brackets go around an IPv6 address only ('[fd00::2]')"),
        ("fd00::2]", "'fd00::2]': brackets go around an IPv6 address only ('[fd00::2]')"),
        ("host:22", "'host:22': a colon only in an IPv6 address (service_ports sets ports)"),
    ],
)
def test_address_problems(address, problem):
    assert address_problem(address) == problem
