"""Host telemetry from the machine itself (local and over real sshd), and host comparison."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from pathlib import Path

import pytest

from storbench.run import telemetry
from storbench.run.telemetry import TelemetryError, collect, collect_host, differences, hosts_table
from tests.sshd import free_port

LOCAL = {"name": "localhost", "transport": "local", "group": "controller"}
TOOLS = ["fio", "iperf3"]


def first_line(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    return (done.stdout.strip() or done.stderr.strip()).splitlines()[0]


def mem_total_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no MemTotal in /proc/meminfo")


def mount_entry(path) -> dict:
    """The /proc/mounts entry of the mount point holding path, found with os.path.ismount."""
    mount_point = os.path.realpath(path)
    while not os.path.ismount(mount_point):
        mount_point = os.path.dirname(mount_point)
    entries = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    source, _, fstype, options = [e for e in entries if e[1] == mount_point][-1][:4]
    return {"path": mount_point, "source": source, "fstype": fstype, "options": options}


def ip_links() -> dict[str, dict]:
    """Interfaces as `ip -j link` reports them (iproute2, independent of sysfs reads)."""
    done = subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True, check=True)
    links = json.loads(done.stdout)
    return {link["ifname"]: link for link in links if link["ifname"] != "lo"}


def directory_target(path) -> dict:
    return {"name": "scratch", "type": "directory", "path": str(path)}


@pytest.fixture(scope="module")
def local_facts(tmp_path_factory) -> dict:
    target = tmp_path_factory.mktemp("target") / "not" / "yet" / "there"
    return collect_host(LOCAL, target=directory_target(target), tools=TOOLS)


def test_local_facts_are_the_machines_own(local_facts):
    facts = local_facts
    assert facts["host"] == "localhost"
    assert facts["group"] == "controller"
    assert facts["hostname"] == platform.node()
    assert facts["kernel"] == platform.release()
    assert facts["arch"] == platform.machine()
    assert facts["os_release"] == platform.freedesktop_os_release()["PRETTY_NAME"]
    assert facts["cores"] == os.cpu_count()
    assert facts["mem_bytes"] == mem_total_bytes()
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    models = [line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")]
    if models:
        assert facts["cpu_model"] == models[0]
    packages = {line.split(":")[1].strip() for line in cpuinfo if line.startswith("physical id")}
    if packages:
        assert facts["sockets"] == len(packages)


def sysfs_speed(name: str) -> int | None:
    try:
        speed = int(Path(f"/sys/class/net/{name}/speed").read_text())
    except OSError:  # EINVAL: a virtual or down link has no speed
        return None
    return speed if speed > 0 else None


def test_local_nics_match_ip_link(local_facts):
    links = ip_links()
    assert [nic["name"] for nic in local_facts["nics"]] == sorted(links)
    for nic in local_facts["nics"]:
        assert nic["mtu"] == links[nic["name"]]["mtu"]
        assert nic["state"] == links[nic["name"]]["operstate"].lower()
        assert nic["speed_mbps"] == sysfs_speed(nic["name"])
        device_driver = f"/sys/class/net/{nic['name']}/device/driver"
        expected_driver = (
            os.path.basename(os.readlink(device_driver)) if os.path.islink(device_driver) else None
        )
        assert nic["driver"] == expected_driver


def test_target_mount_is_the_mount_holding_the_not_yet_created_target(local_facts):
    target_path = local_facts["target_path"]
    assert target_path.endswith("/not/yet/there")
    assert not os.path.exists(target_path)
    assert local_facts["target_mount"] == mount_entry(os.path.dirname(os.path.dirname(target_path)))


def test_tool_versions_are_the_first_line_of_the_tools_own_output(local_facts):
    assert local_facts["tool_versions"] == {
        "fio": first_line(["fio", "--version"]),
        "iperf3": first_line(["iperf3", "--version"]),
    }
    assert local_facts["tool_versions"]["fio"].startswith("fio-")


def test_a_missing_tool_has_no_version_and_an_s3_target_no_mount():
    s3 = {"name": "minio", "type": "s3", "endpoint": "http://127.0.0.1:9000"}
    facts = collect_host(LOCAL, target=s3, tools=["vdbench"])  # vdbench is not installed here
    assert facts["tool_versions"] == {"vdbench": None}
    assert facts["target_mount"] is None
    assert collect_host(LOCAL, target=None, tools=[])["target_mount"] is None


def test_without_findmnt_the_mount_comes_from_proc_mounts(tmp_path, monkeypatch, local_facts):
    bin_dir = tmp_path / "bin"  # PATH with every command the machine has, except findmnt
    bin_dir.mkdir()
    for directory in (
        "/usr/local/sbin",
        "/usr/local/bin",
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
    ):
        for name in os.listdir(directory) if os.path.isdir(directory) else []:
            if name != "findmnt" and not (bin_dir / name).exists():
                (bin_dir / name).symlink_to(os.path.join(directory, name))
    monkeypatch.setenv("PATH", str(bin_dir))
    assert shutil.which("findmnt") is None
    facts = collect_host(LOCAL, target=directory_target(tmp_path / "new"), tools=["fio"])
    assert facts["target_mount"] == mount_entry(tmp_path)
    assert facts["tool_versions"]["fio"] == local_facts["tool_versions"]["fio"]


def test_a_block_device_target_has_no_mount(tmp_path):
    devices = [f"/dev/{name}" for name in sorted(os.listdir("/sys/class/block"))]
    device = next((d for d in devices if os.path.exists(d)), None)
    if device is None:
        pytest.skip("no block device node in /dev")
    block = {"name": "disk", "type": "block", "path": device}
    assert collect_host(LOCAL, target=block, tools=[])["target_mount"] is None
    as_file = {"name": "file", "type": "block", "path": str(tmp_path / "disk.img")}
    assert collect_host(LOCAL, target=as_file, tools=[])["target_mount"] == mount_entry(tmp_path)


def test_mount_of_and_escapes_follow_proc_mounts(tmp_path):
    proc_mounts = Path("/proc/mounts").read_text()
    assert telemetry.mount_of(os.path.realpath(tmp_path), proc_mounts) == mount_entry(tmp_path)
    lines = (
        "/dev/sda1 / ext4 rw 0 0\n"
        "srv:/export /mnt/my\\040data nfs4 rw,vers=4.2,clientaddr=127.0.0.5 0 0\n"
        "tmpfs /mnt/my\\040data/sub tmpfs rw 0 0\n"
    )
    mount = telemetry.mount_of("/mnt/my data/x", lines)
    assert mount == {"path": "/mnt/my data", "source": "srv:/export", "fstype": "nfs4",
                     "options": "rw,vers=4.2,clientaddr=127.0.0.5"}  # fmt: skip
    assert telemetry.mount_of("/mnt/my datax", lines)["path"] == "/"
    assert telemetry.unescape_mount_field("/a\\x20b\\040c") == "/a b c"
    assert telemetry.parse_cpu_list("0-3,8-11,16") == 9


# -- several hosts ------------------------------------------------------------------------


def test_collect_over_ssh_writes_one_file_per_host_with_the_machines_facts(
    ssh_hosts, local_facts, tmp_path
):
    hosts = [spec.to_dict() | {"group": "clients"} for spec in ssh_hosts]
    target = directory_target(local_facts["target_path"])
    facts = collect(hosts, target=target, tools=TOOLS, output_dir=tmp_path)
    names = [spec.name for spec in ssh_hosts]
    assert list(facts) == names
    assert sorted(path.name for path in tmp_path.iterdir()) == [f"{n}.json" for n in names]
    loaded = telemetry.load([tmp_path / f"{name}.json" for name in names])
    assert loaded == facts == telemetry.load(tmp_path)
    for name in names:  # the sshd run on this machine: the same facts as the local collect
        host_facts = loaded[name]
        assert host_facts["host"] == name
        assert host_facts["group"] == "clients"
        for fact in ("hostname", "kernel", "os_release", "cpu_model", "cores", "sockets",
                     "mem_bytes", "nics", "target_mount", "tool_versions"):  # fmt: skip
            assert host_facts[fact] == local_facts[fact], fact
    assert differences(loaded) == {}


def test_an_unreachable_host_is_named_and_gets_no_file(tmp_path):
    unreachable = {"name": "127.0.0.9", "transport": "ssh", "port": free_port("127.0.0.9"),
                   "connect_timeout": 3.0}  # fmt: skip
    (tmp_path / "127.0.0.9.json").write_text('{"host": "127.0.0.9"}')  # from an earlier capture
    with pytest.raises(TelemetryError) as error:
        collect([LOCAL, unreachable], target=None, tools=["fio"], output_dir=tmp_path)
    message = str(error.value)
    assert message.startswith("telemetry failed on 1 of 2 host(s)")
    assert "host 127.0.0.9: unreachable at 127.0.0.9:" in message
    assert "localhost" not in message
    assert sorted(path.name for path in tmp_path.iterdir()) == ["localhost.json"]
    good = json.loads((tmp_path / "localhost.json").read_text())
    assert good["kernel"] == platform.release()


def test_bad_host_lists_are_refused_before_any_host_is_contacted(tmp_path):
    with pytest.raises(ValueError, match="hosts listed twice: localhost"):
        collect([LOCAL, LOCAL], target=None, tools=[], output_dir=tmp_path)
    with pytest.raises(KeyError, match="unknown tool 'nosuchtool'"):
        collect([LOCAL], target=None, tools=["nosuchtool"], output_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_load_names_a_bad_file(tmp_path):
    (tmp_path / "a.json").write_text("{not json")
    with pytest.raises(TelemetryError, match="a.json: not a telemetry file"):
        telemetry.load([tmp_path / "a.json"])
    (tmp_path / "a.json").write_text('{"host": "h1"}')
    (tmp_path / "b.json").write_text('{"host": "h1"}')
    with pytest.raises(TelemetryError, match="b.json: host h1 already loaded"):
        telemetry.load(tmp_path)


# -- comparing hosts (synthetic facts) ----------------------------------------------------

GIB = 2**30


def host_facts(name: str, **changes) -> dict:
    facts = {
        "host": name,
        "group": "clients",
        "kernel": "6.1.0-18-amd64",
        "os_release": "Debian GNU/Linux 12 (bookworm)",
        "cpu_model": "AMD EPYC 7543 32-Core Processor",
        "cores": 64,
        "sockets": 1,
        "mem_bytes": 256 * GIB - 300 * 2**20,
        "nics": [
            {"name": "eth0", "speed_mbps": 100000, "mtu": 9000, "state": "up", "driver": "mlx5"},
            {"name": "eth1", "speed_mbps": None, "mtu": 1500, "state": "down", "driver": "igb"},
        ],
        "target_mount": {"path": "/mnt/nfs", "source": "srv:/export", "fstype": "nfs4",
                         "options": f"rw,vers=4.2,rsize=1048576,clientaddr=10.0.0.{len(name)}"},
        "tool_versions": {"fio": "fio-3.33", "iperf3": "iperf 3.12"},
    }  # fmt: skip
    facts.update(changes)
    return facts


def test_differences_flag_the_hosts_that_differ_from_the_majority():
    facts = {name: host_facts(name) for name in ("c1", "c2", "c3", "c4")}
    facts["c2"]["kernel"] = "6.1.0-17-amd64"
    facts["c3"]["mem_bytes"] = 128 * GIB
    facts["c3"]["nics"][0]["mtu"] = 1500
    facts["c4"]["tool_versions"]["fio"] = "fio-3.36"
    facts["c4"]["target_mount"]["options"] += ",noac"
    facts["c1"]["mem_bytes"] -= 20 * 2**20  # a few MiB of kernel reservation: same as shown
    facts["c1"]["nics"][1]["mtu"] = 9000  # a down link does not count
    facts["c2"]["target_mount"]["options"] = facts["c2"]["target_mount"]["options"].replace(
        "clientaddr=10.0.0.2", "clientaddr=10.0.0.99"
    )  # NFS clientaddr is each host's own address
    assert differences(facts) == {
        "c2": ["kernel"],
        "c3": ["memory_gib", "nics"],
        "c4": ["mount", "tool:fio"],
    }
    assert telemetry.no_majority(facts) == {}


def test_two_hosts_that_differ_have_no_majority_and_flag_nobody():
    facts = {"a": host_facts("a"), "b": host_facts("b", kernel="6.8.0")}
    assert differences(facts) == {}
    assert telemetry.no_majority(facts) == {"kernel": {"6.1.0-18-amd64": ["a"], "6.8.0": ["b"]}}
    three = facts | {"c": host_facts("c", kernel="6.9.0")}
    assert differences(three) == {}
    assert list(telemetry.no_majority(three)) == ["kernel"]
    assert differences({"a": host_facts("a")}) == {}


def test_a_host_without_a_tool_differs_in_that_tool():
    facts = {name: host_facts(name) for name in ("c1", "c2", "c3")}
    facts["c3"]["tool_versions"] = {"fio": "fio-3.33"}
    assert differences(facts) == {"c3": ["tool:iperf3"]}


def test_hosts_table_rows_and_highlighted_columns():
    facts = {name: host_facts(name) for name in ("c1", "c2", "c3")}
    facts["c2"]["cores"] = 32
    facts["c2"]["tool_versions"]["iperf3"] = None
    rows = hosts_table(facts)
    assert [row["host"] for row in rows] == ["c1", "c2", "c3"]
    first = rows[0]
    assert first["kernel"] == "6.1.0-18-amd64"
    assert first["os"] == "Debian GNU/Linux 12 (bookworm)"
    assert first["cpu"] == "AMD EPYC 7543 32-Core Processor"
    assert first["cores"] == 64
    assert first["memory_gib"] == 255.7
    assert first["nics"] == "eth0 100000 Mb/s mtu 9000, eth1 speed unknown mtu 1500 (down)"
    assert first["mount"] == (
        "srv:/export on /mnt/nfs type nfs4 (rw,vers=4.2,rsize=1048576,clientaddr=10.0.0.2)"
    )
    assert first["tools"] == "fio: fio-3.33; iperf3: iperf 3.12"
    assert first["differs"] == []
    assert rows[1]["tools"] == "fio: fio-3.33; iperf3: missing"
    assert rows[1]["differs"] == ["cores", "tools"]
