"""The data path model: rates, the theoretical maximum per client step, config checks."""

from __future__ import annotations

import pytest

from storbench.config import datapath
from storbench.config.datapath import DataPathError, RateError
from storbench.core.units import UnitError

GB = 1e9


@pytest.mark.parametrize(
    ("text", "bytes_per_s"),
    [
        ("10Gbit/s", 1.25e9),
        ("10Gb/s", 1.25e9),
        ("10 Gbit/s", 1.25e9),
        ("10Gbps", 1.25e9),
        ("25Gbits/s", 3.125e9),
        ("100GbE", 12.5e9),
        ("10GbE", 1.25e9),
        ("400Mbit/s", 50e6),
        ("12.5GB/s", 12.5e9),
        ("12.5GBps", 12.5e9),
        ("800MB/s", 800e6),
        ("1.5TB/s", 1.5e12),
        ("2GiB/s", 2 * 2**30),
        ("512KiB/s", 512 * 1024),
        ("100B/s", 100.0),
        (800, 800.0),
        (2.5e9, 2.5e9),
        ("1e9", 1e9),
        ("3000000000", 3e9),
    ],
)
def test_parse_rate(text, bytes_per_s):
    assert datapath.parse_rate(text) == pytest.approx(bytes_per_s, rel=1e-15)


@pytest.mark.parametrize("text", ["10Gbt/s", "fast", "", "10G", "10Gbit", "12.5GBE", "G/s"])
def test_unreadable_rates_are_refused_quoting_the_text(text):
    with pytest.raises(RateError) as error:
        datapath.parse_rate(text)
    assert repr(text) in str(error.value)
    assert isinstance(error.value, UnitError)  # the CLI reports UnitErrors without a traceback


@pytest.mark.parametrize("value", [0, -5, "0Gbit/s", True, float("inf")])
def test_rates_must_be_positive_numbers(value):
    with pytest.raises(RateError, match="rate"):
        datapath.parse_rate(value)


def test_rate_label_is_in_bits():
    assert datapath.rate_label(1.25e9) == "10 Gbit/s"
    assert datapath.rate_label(12.5e9) == "100 Gbit/s"
    assert datapath.rate_label(50e6) == "400 Mbit/s"


def clients(count: int, group: str = "clients", first: int = 1) -> list[dict]:
    return [{"name": f"c{index:02d}", "group": group} for index in range(first, first + count)]


def test_two_and_four_hosts_with_10gbit_links_and_a_3_gb_cluster():
    path = {"client_link": "10Gbit/s", "limits": [{"name": "cluster", "rate": "3GB/s"}]}
    assert datapath.theoretical_max(path, clients(2)) == (2.5e9, "client links (2 x 10 Gbit/s)")
    assert datapath.theoretical_max(path, clients(4)) == (3e9, "cluster")


def test_guide_table_14_100gbe_clients():
    """VAST/Intel guide, Table 10 and 14: 100GbE clients, 16 x 100 Gbit uplinks, 120 GB/s."""
    path = {
        "client_link": "100GbE",
        "limits": [
            {"name": "Arista <-> VAST uplinks", "rate": "1600Gbit/s"},
            {"name": "VAST cluster", "rate": "120GB/s"},
        ],
    }
    expected = [25, 50, 75, 100, 120, 120, 120, 120, 120, 120]  # GB/s, as printed in the guide
    got = [datapath.theoretical_max(path, clients(n))[0] / GB for n in range(2, 21, 2)]
    assert got == pytest.approx(expected, rel=1e-12)
    assert datapath.theoretical_max(path, clients(8))[1] == "client links (8 x 100 Gbit/s)"
    assert datapath.theoretical_max(path, clients(10))[1] == "VAST cluster"


def test_guide_table_15_10gbe_clients():
    path = {
        "client_link": "10GbE",
        "limits": [
            {"name": "Extreme <-> Arista uplinks", "rate": "1120Gbit/s"},
            {"name": "VAST cluster", "rate": "960Gbit/s"},
        ],
    }
    expected = [12.5, 25, 37.5, 50, 62.5, 75, 87.5, 100, 112.5, 120]
    got = [datapath.theoretical_max(path, clients(n))[0] / GB for n in range(10, 101, 10)]
    assert got == pytest.approx(expected, rel=1e-12)


def test_client_link_per_host_group():
    path = {"client_link": {"fast": "100GbE", "slow": "10GbE"}}
    hosts = clients(1, "fast") + clients(2, "slow", first=2)
    assert datapath.theoretical_max(path, hosts) == (
        15e9,
        "client links (2 x 10 Gbit/s + 1 x 100 Gbit/s)",
    )


def test_limits_alone_and_ties():
    assert datapath.theoretical_max({"limits": [{"name": "nas", "rate": 5e8}]}, []) == (5e8, "nas")
    tie = {"client_link": "10Gbit/s", "limits": [{"name": "switch", "rate": "2.5GB/s"}]}
    assert datapath.theoretical_max(tie, clients(2))[1].startswith("client links")


def test_theoretical_max_names_what_is_missing():
    with pytest.raises(DataPathError, match=r"no rate for host group 'other' \(host 'c01'\)"):
        datapath.theoretical_max({"client_link": {"clients": "10GbE"}}, clients(1, "other"))
    with pytest.raises(DataPathError, match=r"the group of host 'h1' is unknown"):
        datapath.theoretical_max({"client_link": {"clients": "10GbE"}}, [{"name": "h1"}])
    with pytest.raises(DataPathError, match=r"data_path.client_link.clients: not a rate: '10 GE'"):
        datapath.theoretical_max({"client_link": {"clients": "10 GE"}}, clients(1))
    with pytest.raises(DataPathError, match=r"data_path.limits\[0\]: missing rate"):
        datapath.theoretical_max({"limits": [{"name": "x"}]}, clients(1))
    with pytest.raises(DataPathError, match="needs client_link or limits"):
        datapath.theoretical_max({}, clients(1))


def test_check_accepts_a_good_section():
    good = {
        "client_link": {"clients": "10Gbit/s", "fat": "100GbE"},
        "limits": [{"name": "uplinks", "rate": "1120Gbit/s"}, {"name": "cluster", "rate": 1.2e11}],
    }
    assert datapath.check(good, ["clients", "fat", "localhost"]) == []
    assert datapath.check({"client_link": "25GbE"}, []) == []


def test_check_lists_every_problem_with_its_key():
    bad = {
        "client_link": {"clients": "10Gbt/s", "ghosts": "10GbE"},
        "limits": [
            {"name": "cluster", "rate": "3GB/s"},
            {"name": "cluster", "rate": -1},
            {"rate": "1GB/s"},
            {"name": "uplink"},
            "fast",
        ],
        "extra": 1,
    }
    problems = datapath.check(bad, ["clients", "servers"], required_groups=["clients", "servers"])
    assert problems == [
        "data_path.extra: unknown key",
        "data_path.client_link.clients: not a rate: '10Gbt/s' (expected e.g. 10Gbit/s, 100GbE, "
        "12.5GB/s, 2GiB/s, or bytes/s as a number)",
        "data_path.client_link.ghosts: unknown host group 'ghosts' (known: clients, servers)",
        "data_path.client_link: no rate for host group 'servers'",
        "data_path.limits[1].name: duplicate 'cluster'",
        "data_path.limits[1].rate: rate must be a positive number: -1",
        "data_path.limits[2].name: missing",
        "data_path.limits[3].rate: missing",
        "data_path.limits[4]: must be a mapping with name and rate",
    ]


def test_check_of_an_empty_or_wrong_section():
    assert datapath.check({}, ["a"]) == ["data_path: needs client_link or limits"]
    assert datapath.check("10GbE", ["a"]) == [
        "data_path: must be a mapping with client_link and/or limits"
    ]
    assert datapath.check({"limits": {"name": "x"}}, []) == [
        "data_path.limits: must be a list of {name, rate}"
    ]


def test_describe_for_the_methodology():
    path = {"client_link": {"a": "10GbE"}, "limits": [{"name": "cluster", "rate": "3GB/s"}]}
    assert datapath.describe(path) == "client link (a) 10GbE; cluster 3GB/s"
