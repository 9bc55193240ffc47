"""An IPv6 data address reaches each tool in the form that tool reads.

fio reads ``ip:`` as IPv4 (``fio: failed to resolve <::1>``), so it gets ``ip6:``; a port
after an IPv6 address needs brackets (Go's host:port for warp and GOSBench, elbencho's HTTP
client); iperf3 and vdbench's ssh take the address alone. fio and iperf3 are run over ::1 in
tests/run/test_service_ipv6.py; the others are checked here by their command lines.
"""

from __future__ import annotations

from storbench.hosts import services
from storbench.tools import get_tool

HOSTS = [
    {"name": "c1", "transport": "ssh", "data_address": "[fd00::1]"},
    {"name": "c2", "transport": "ssh", "data_address": "fd00::2"},  # bare is the same
]


def endpoints(tool: str) -> list[str]:
    return [services.endpoint(host, get_tool(tool).default_port, tool) for host in HOSTS]


def test_fio_servers_and_clients_are_ip6():
    fio = get_tool("fio")
    assert fio.service_start_command("[fd00::1]", 8765) == ["fio", "--server=ip6:fd00::1,8765"]
    assert fio.service_start_command("10.0.0.1", 8765) == ["fio", "--server=ip:10.0.0.1,8765"]
    assert endpoints("fio") == ["[fd00::1]:8765", "[fd00::2]:8765"]
    argv = fio.controller_command(["c1.fio", "c2.fio"], "out.json", endpoints("fio"))
    assert argv[3:] == [
        "--client=ip6:fd00::1,8765",
        "c1.fio",
        "--client=ip6:fd00::2,8765",
        "c2.fio",
    ]


def test_a_port_follows_an_ipv6_address_in_brackets():
    elbencho = get_tool("elbencho")
    assert elbencho.service_stop_command(endpoints("elbencho")) == [
        "elbencho", "--hosts", "[fd00::1]:1611,[fd00::2]:1611", "--quit",
    ]  # fmt: skip
    warp = get_tool("warp").controller_command(["a.warp", "b.warp"], "out", endpoints("warp"))
    assert warp[-1] == "--warp-client=[fd00::1]:7761,[fd00::2]:7761"
    gosbench = get_tool("gosbench")
    assert gosbench.worker_command("fd00::ff", 2000, 8888)[1:3] == ["-s", "[fd00::ff]:2000"]


def test_iperf3_takes_the_address_alone():
    iperf3 = get_tool("iperf3")
    assert iperf3.network_server_command("[fd00::1]", 5201, "log")[2:4] == ["--bind", "fd00::1"]
    assert "--client\nfd00::1\n" in iperf3.network_job("[fd00::1]", 5201, 10, 4)
