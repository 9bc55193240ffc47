"""Config validation: every problem names its key path, and nothing runs before it passes."""

import copy

import pytest

from storbench.config.campaign import load_campaign
from storbench.config.source import ConfigError, load_yaml
from storbench.core.secrets import redacted_yaml

VALID = {
    "hosts": {
        "localhost": {"transport": "local"},
        "clients": {"nodes": "client[01-04]", "transport": "ssh", "user": "root", "port": 22},
    },
    "targets": {"scratch": {"type": "directory", "path": "/var/tmp/storbench/scratch"}},
    "experiments": {
        "demo": {
            "tool": "fio",
            "hosts": "localhost",
            "target": "scratch",
            "iterations": 3,
            "job": {"size": "256MiB", "runtime": "5s", "ramp_time": "1s", "numjobs": 1},
            "sweep": {"rw": ["read", "write"], "bs": ["4k", "1m"], "iodepth": [1, 16]},
        }
    },
}


def problems_of(mutate) -> list[str]:
    raw = copy.deepcopy(VALID)
    mutate(raw)
    with pytest.raises(ConfigError) as caught:
        load_campaign(raw)
    return caught.value.problems


def test_valid_config_expands_host_ranges():
    campaign = load_campaign(copy.deepcopy(VALID))
    names = [h["name"] for h in campaign.host_groups["clients"]]
    assert names == ["client01", "client02", "client03", "client04"]
    assert campaign.host_groups["clients"][0]["user"] == "root"
    assert campaign.host_groups["localhost"] == [
        {"name": "localhost", "group": "localhost", "transport": "local", "connect_timeout": 10.0}
    ]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda c: c["experiments"]["demo"].update(colour="red"),
            "experiments.demo.colour: unknown key",
        ),
        (lambda c: c.update(extra=1), "extra: unknown key"),
        (
            lambda c: c["experiments"]["demo"].update(iterations="three"),
            "experiments.demo.iterations: 'three' is not of type 'integer'",
        ),
        (
            lambda c: c["experiments"]["demo"]["job"].update(bs="4kk"),
            "experiments.demo.job.bs: not a size: '4kk'",
        ),
        (
            lambda c: c["experiments"]["demo"]["sweep"].update(bs=["4k", "1mm"]),
            "experiments.demo.sweep.bs[1]: not a size: '1mm'",
        ),
        (
            lambda c: c["experiments"]["demo"]["job"].update(runtime="5 parsecs"),
            "experiments.demo.job.runtime: not a duration",
        ),
        (
            lambda c: c["hosts"]["clients"].update(nodes="client[01-"),
            "hosts.clients.nodes: malformed host range 'client[01-'",
        ),
        (
            lambda c: c["hosts"]["clients"].update(nodes="n[1-5000]"),
            "hosts.clients.nodes: 'n[1-5000]' expands to 5000 hosts",
        ),
        (
            lambda c: c["experiments"]["demo"].update(hosts="nosuchgroup"),
            "experiments.demo.hosts: unknown host group 'nosuchgroup'",
        ),
        (
            lambda c: c["experiments"]["demo"].update(hosts="client02"),
            "experiments.demo.hosts: unknown host group 'client02' (defined: localhost, clients);"
            " client02 is a host of clients: an experiment names host groups",
        ),
        (
            lambda c: c["experiments"]["demo"].update(target="nvme9"),
            "experiments.demo.target: unknown target 'nvme9'",
        ),
        (
            lambda c: c["experiments"]["demo"].update(tool="iozone"),
            "experiments.demo.tool: unknown tool 'iozone'",
        ),
        (
            lambda c: c["hosts"]["clients"].update(port=70000),
            "hosts.clients.port: 70000 is greater than the maximum of 65535",
        ),
        (
            lambda c: c["targets"]["scratch"].update(path="relative/dir"),
            "targets.scratch.path: 'relative/dir' is not an absolute path (from /)",
        ),
        (
            lambda c: c["experiments"]["demo"]["job"].update(filename="a\n[evil]"),
            "experiments.demo.job.filename: control characters",
        ),
        (
            lambda c: c["experiments"]["demo"]["sweep"].update(
                zip={"bs": ["4k"], "numjobs": [1, 2]}
            ),
            "experiments.demo.sweep: zip lists must have equal lengths",
        ),
        (lambda c: c.update(run=["nope"]), "run[0]: unknown experiment 'nope'"),
        (lambda c: c["experiments"]["demo"].pop("target"), "'target' is a required property"),
        (
            lambda c: c.update(report={"units": "MiB"}),
            "report.units: 'MiB' is not one of ['decimal', 'binary']",
        ),
    ],
)
def test_each_problem_names_its_key(mutate, expected):
    problems = problems_of(mutate)
    assert any(expected in p for p in problems), problems


def test_a_group_lists_its_hosts_in_the_order_written():
    raw = copy.deepcopy(VALID)
    raw["hosts"]["clients"]["nodes"] = ["client09", "client[01-03]", "10.0.0.7"]
    names = [h["name"] for h in load_campaign(raw).host_groups["clients"]]
    assert names == ["client09", "client01", "client02", "client03", "10.0.0.7"]


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        (["client[01-03]", "client02"], "hosts.clients.nodes[1]: host client02 is already in"),
        (["client01", 7], "hosts.clients.nodes[1]: 7 is not of type 'string'"),
        (["client01", "client[01-"], "hosts.clients.nodes[1]: malformed host range"),
        ([], "hosts.clients.nodes: [] should be non-empty"),
        (["n[1-4000]", "m[1-97]"], "the list expands to up to 4097 hosts (more than"),
    ],
)
def test_a_list_of_hosts_names_the_entry_at_fault(nodes, expected):
    problems = problems_of(lambda c: c["hosts"]["clients"].update(nodes=nodes))
    assert any(expected in p for p in problems), problems


def test_report_units_are_decimal_unless_the_config_says_binary():
    assert load_campaign(copy.deepcopy(VALID)).report_settings["units"] == "decimal"
    raw = {**copy.deepcopy(VALID), "report": {"units": "binary"}}
    settings = load_campaign(raw).report_settings
    assert settings["units"] == "binary" and settings["name"] == "campaign"


def test_error_message_lists_every_problem():
    def two_problems(c):
        c["experiments"]["demo"]["job"]["bs"] = "4kk"
        c["experiments"]["demo"]["target"] = "nvme9"

    raw = copy.deepcopy(VALID)
    two_problems(raw)
    with pytest.raises(ConfigError) as caught:
        load_campaign(raw)
    message = str(caught.value)
    assert "experiments.demo.job.bs" in message and "experiments.demo.target" in message


def test_malformed_yaml_names_the_file(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("hosts: {localhost: [\n")
    with pytest.raises(ConfigError) as caught:
        load_yaml(path)
    assert str(path) in str(caught.value) and "not valid YAML" in str(caught.value)


def test_malformed_yaml_is_placed_by_line_and_column_of_the_file(tmp_path):
    """PyYAML's own text says 'in "<unicode string>", line 3, column 1'."""
    path = tmp_path / "broken.yaml"
    path.write_text("hosts: [\n  a: b\n")
    with pytest.raises(ConfigError) as caught:
        load_yaml(path)
    assert caught.value.problems == [
        "line 3, column 1: not valid YAML: expected ',' or ']', but got '<stream end>'"
        " (while parsing a flow sequence at line 1, column 8)"
    ]


def test_redaction_hides_secret_values():
    text = redacted_yaml({"targets": {"s3": {"secret_key": "hunter2", "access_key": "AKIA"}}})
    assert "hunter2" not in text and "AKIA" not in text and "secret_key" in text


S3_CAMPAIGN = {
    "hosts": {"clients": {"transport": "ssh", "nodes": "c[1-2]"}},
    "targets": {
        "minio": {
            "type": "s3",
            "endpoint": "http://127.0.0.1:9000",
            "bucket_prefix": "sb",
            "credentials": {"access_key_env": "A", "secret_key_env": "B"},
        }
    },
    "experiments": {"obj": {"tool": "warp", "hosts": "clients", "target": "minio"}},
}


def test_s3_on_several_hosts_runs_in_service_mode():
    with pytest.raises(ConfigError, match=r"experiments\.obj\.execution: an S3 experiment on 2"):
        load_campaign(copy.deepcopy(S3_CAMPAIGN))
    for tool in ("warp", "elbencho"):
        raw = copy.deepcopy(S3_CAMPAIGN)
        raw["experiments"]["obj"].update(tool=tool, execution="service", job={"rw": "write"})
        campaign = load_campaign(raw)
        assert campaign.experiments["obj"].execution == "service"


def test_gosbench_workers_need_the_controllers_address():
    raw = copy.deepcopy(S3_CAMPAIGN)
    raw["experiments"]["obj"].update(tool="gosbench", execution="service")
    with pytest.raises(ConfigError) as caught:
        load_campaign(raw)
    assert caught.value.problems == [
        "hosts.clients.controller_address: gosbench workers on these hosts dial the controller "
        "(experiment obj); give the controller's address as these hosts reach it"
    ]
    raw["hosts"]["clients"]["controller_address"] = "10.0.0.1"
    hosts = load_campaign(raw).hosts_of("obj")
    assert {host["controller_address"] for host in hosts} == {"10.0.0.1"}


def test_service_ports_per_host_group():
    raw = copy.deepcopy(S3_CAMPAIGN)
    raw["experiments"]["obj"]["execution"] = "service"
    raw["hosts"]["clients"]["service_ports"] = {"warp": 7800, "dd": 1}
    assert problems_of_raw(raw) == [
        "hosts.clients.service_ports.dd: not a tool with a service "
        "(tools: elbencho, fio, gosbench, vdbench, warp)"
    ]
    raw["hosts"]["clients"]["service_ports"] = {"warp": 7800}
    from storbench.hosts.services import endpoint

    hosts = load_campaign(raw).hosts_of("obj")
    assert [endpoint(host, 7761, "warp") for host in hosts] == ["c1:7800", "c2:7800"]
    assert [endpoint(host, 8765, "fio") for host in hosts] == ["c1:8765", "c2:8765"]


def problems_of_raw(raw) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_campaign(raw)
    return caught.value.problems


def test_tool_must_support_the_target_type():
    raw = {
        "hosts": {"localhost": {"transport": "local"}},
        "targets": {"t": {"type": "block", "path": "/dev/null"}},
        "experiments": {"e": {"tool": "warp", "hosts": "localhost", "target": "t"}},
    }
    with pytest.raises(ConfigError, match=r"experiments\.e\.target: warp cannot benchmark a block"):
        load_campaign(raw)


def test_a_soak_needs_a_tool_with_per_interval_series():
    raw = copy.deepcopy(S3_CAMPAIGN)
    raw["hosts"]["clients"]["nodes"] = "c1"
    raw["experiments"]["obj"].update(
        tool="gosbench", job={"rw": "write", "bs": "4k"}, soak={"duration": "1h", "chunk": "5m"}
    )
    assert problems_of_raw(raw) == [
        "experiments.obj.soak: gosbench reports no per-interval series, which a soak is judged "
        "by (tools with one: elbencho, fio, iperf3, vdbench, warp)"
    ]
    raw["experiments"]["obj"]["tool"] = "warp"
    assert load_campaign(raw).experiments["obj"].soak["chunks"] == 12


def test_a_soak_that_is_not_whole_chunks_runs_one_more_and_says_so(capsys):
    raw = copy.deepcopy(S3_CAMPAIGN)
    raw["hosts"]["clients"]["nodes"] = "c1"
    raw["experiments"]["obj"].update(tool="warp", soak={"duration": "2m", "chunk": "45s"})
    assert load_campaign(raw).experiments["obj"].soak["chunks"] == 3
    assert (
        "storbench: warning: experiments.obj.soak: 2m is not a whole number of 45s chunks; the"
        " soak runs 3 of them, 135 s"
    ) in capsys.readouterr().err


def test_constant_groups_that_do_not_divide_the_hosts_are_warned_about(capsys):
    raw = {
        "hosts": {"clients": {"transport": "ssh", "nodes": "c[1-4]"}},
        "targets": {"t": {"type": "directory", "path": "/mnt/t"}},
        "experiments": {
            "e": {"tool": "fio", "hosts": "clients", "target": "t",
                  "steps": {"mode": "constant", "size": 3}},
        },
    }  # fmt: skip
    load_campaign(raw)
    assert (
        "storbench: warning: experiments.e.steps: 4 hosts in groups of 3: the last group has 1,"
        " so its bandwidth is not comparable with the others'"
    ) in capsys.readouterr().err
    raw["experiments"]["e"]["steps"]["size"] = 2
    load_campaign(raw)
    assert "groups of" not in capsys.readouterr().err


def test_incremental_steps_of_counts_run_on_the_first_hosts_of_each_count():
    """Doubling host counts (1, 2, 4 of 6): the counts as written, not ending with all hosts."""
    raw = {
        "hosts": {"clients": {"transport": "ssh", "nodes": "c[1-6]"}},
        "targets": {"t": {"type": "directory", "path": "/mnt/t"}},
        "experiments": {
            "e": {"tool": "fio", "hosts": "clients", "target": "t", "job": {"rw": "read"},
                  "steps": {"mode": "incremental", "counts": [1, 2, 4]}},
        },
    }  # fmt: skip
    campaign = load_campaign(raw)
    runs = campaign.experiment_runs("e")
    assert [(run.run_id, run.step, run.hosts) for run in runs] == [
        ("read_h1", "h1", ("c1",)),
        ("read_h2", "h2", ("c1", "c2")),
        ("read_h4", "h4", ("c1", "c2", "c3", "c4")),
    ]


def test_any_tool_runs_on_a_preconditioned_block_device():
    """The IDC plan: fio preconditions the LUN, vdbench (or elbencho) measures it."""
    raw = {
        "hosts": {"loadgen": {"transport": "local"}},
        "targets": {
            "lun": {"type": "block", "path": "/dev/mapper/afa_lun0", "capacity": "1TiB"},
            "dir": {"type": "directory", "path": "/mnt/afa", "capacity": "1TiB"},
        },
        "preconditioning": {
            "afa": {
                "target": "lun", "hosts": "loadgen",
                "passes": [{"name": "fill", "fraction": "100%", "bs": "128k"}],
            },
            "afa_dir": {
                "target": "dir", "hosts": "loadgen",
                "passes": [{"name": "fill", "fraction": "100%", "bs": "1m"}],
            },
        },
        "experiments": {
            "baseline": {
                "tool": "vdbench", "hosts": "loadgen", "target": "lun", "precondition": "afa",
                "job": {"rw": "randrw", "rwmixread": 65, "bs": "8k", "runtime": "2h"},
            },
        },
    }  # fmt: skip
    assert load_campaign(copy.deepcopy(raw)).experiments["baseline"].precondition == "afa"
    raw["experiments"]["baseline"].update(target="dir", precondition="afa_dir")
    raw["experiments"]["baseline"]["job"]["size"] = "1g"
    assert problems_of_raw(raw) == [
        "experiments.baseline.precondition: vdbench runs use a preconditioned block target; "
        "a directory's region files are read by fio only"
    ]


def test_any_tool_measures_before_and_after_a_flush_only_recipe_on_a_directory():
    """The VAST guide's Table 16: elbencho file reads before and after the write buffer
    flushes, on the NFS mount; a recipe without passes writes no region file to read."""
    flush_only = {"target": "nfs", "flush": {"wait": "10m"}}
    runs = {
        "tool": "elbencho",
        "hosts": "clients",
        "target": "nfs",
        "precondition": "optane",
        "job": {"rw": "randread", "bs": "4k", "files": 8, "size": "5g", "runtime": "60s"},
    }
    raw = {
        "hosts": {"clients": {"transport": "local"}},
        "targets": {"nfs": {"type": "directory", "path": "/mnt/vast", "capacity": "1TiB"}},
        "preconditioning": {"optane": flush_only},
        "experiments": {"before": {**runs, "flush": "before"}, "after": {**runs, "flush": "after"}},
    }  # fmt: skip
    loaded = load_campaign(copy.deepcopy(raw))
    phases = {name: e.flush_phase for name, e in loaded.experiments.items()}
    assert phases == {"before": "before", "after": "after"}
    assert "filename" not in loaded.experiments["before"].job
    raw["preconditioning"]["optane"]["passes"] = [{"name": "fill", "fraction": "5%", "bs": "1m"}]
    assert problems_of_raw(raw) == [
        f"experiments.{name}.precondition: elbencho runs use a preconditioned block target; "
        "a directory's region files are read by fio only"
        for name in ("before", "after")
    ]


def queued(raw: dict) -> dict:
    """raw whose swept queue depths an engine reaches (fio's default psync is warned about)."""
    raw["experiments"]["demo"]["job"]["ioengine"] = "io_uring"
    return raw


def test_runs_shorter_than_the_guides_minimums_are_warned_about(capsys):
    load_campaign(queued(copy.deepcopy(VALID)))  # 5 s runs on a directory
    assert capsys.readouterr().err == (
        "storbench: warning: experiments.demo: runs of 5 s; the reference guides measure "
        "directory targets for at least 60 s (fine for trying a config, short for a report)\n"
    )
    raw = queued(copy.deepcopy(VALID))
    raw["experiments"]["demo"]["job"]["runtime"] = "2m"
    load_campaign(raw)
    assert capsys.readouterr().err == ""


def test_a_tool_that_logs_in_itself_is_warned_about_the_groups_ssh_settings(capsys):
    """vdbench's master logs in with the controller's ssh: the group's port and key are not
    its (an hd= line takes a user only)."""
    raw = copy.deepcopy(VALID)
    raw["targets"]["lun"] = {"type": "block", "path": "/dev/mapper/afa_lun1"}
    raw["experiments"]["afa"] = {
        "tool": "vdbench", "hosts": "clients", "target": "lun", "execution": "service",
        "job": {"rw": "randrw", "bs": "4k", "runtime": "60s"},
    }  # fmt: skip
    load_campaign(copy.deepcopy(raw))  # port 22 and no key of its own: nothing to say
    assert "logs in to the hosts" not in capsys.readouterr().err
    raw["hosts"]["clients"].update(port=2222, jump="ops@bastion")
    load_campaign(copy.deepcopy(raw))
    assert capsys.readouterr().err.splitlines()[-1] == (
        "storbench: warning: experiments.afa: vdbench logs in to the hosts of hosts.clients"
        " itself, with this controller's ssh and the group's user but not its port, jump; set"
        " those for these hosts in ~/.ssh/config"
    )
    raw["experiments"]["afa"]["execution"] = "standalone"  # one vdbench on each host
    load_campaign(raw)
    assert "logs in to the hosts" not in capsys.readouterr().err


def test_groups_may_overlap_but_reach_a_host_one_way():
    """Before, a host in two groups with other ports was planned in both: an experiment on
    both ran its job twice there (into the same files), and the host's own steps took
    either group's settings."""
    raw = copy.deepcopy(VALID)
    raw["hosts"]["rack2"] = {"nodes": "client[03-04]", "transport": "ssh", "user": "root",
                             "port": 22, "data_address": "10.0.2.{n}"}  # fmt: skip
    campaign = load_campaign(copy.deepcopy(raw))  # the same way in; its own data addresses
    assert [h["data_address"] for h in campaign.host_groups["rack2"]] == ["10.0.2.1", "10.0.2.2"]
    # spelling out what the other group leaves to the defaults is the same way in
    load_campaign(
        {
            **raw,
            "hosts": {
                **raw["hosts"],
                "rack2": {
                    **raw["hosts"]["rack2"],
                    "connection": "persistent",
                    "workdir": "/tmp/storbench",
                },
            },
        }
    )
    per_step = {**raw["hosts"]["rack2"], "connection": "per-step"}
    assert problems_of_raw({**raw, "hosts": {**raw["hosts"], "rack2": per_step}})[:1] == [
        "hosts.rack2: host client03 is in hosts.clients too, with another connection; a host"
        " is reached the same way in every group"
    ]
    raw["hosts"]["rack2"]["port"] = 2222
    raw["experiments"]["demo"]["hosts"] = ["clients", "rack2"]
    assert [line.split(" (line")[0] for line in problems_of_raw(raw)] == [
        "hosts.rack2: host client03 is in hosts.clients too, with another port; a host is"
        " reached the same way in every group",
        "hosts.rack2: host client04 is in hosts.clients too, with another port; a host is"
        " reached the same way in every group",
        "experiments.demo.hosts: host client03 is in both clients and rack2; an experiment"
        " takes each host once",
    ]


def test_one_campaign_service_per_host_is_looked_for_at_one_address():
    """fio's service starts once per campaign on a host, with one group's data_address: an
    experiment naming the host through a group with another address would not find it."""
    raw = copy.deepcopy(VALID)
    raw["hosts"]["clients"]["data_address"] = "10.0.1.{n}"
    raw["hosts"]["rack2"] = {"nodes": "client[03-04]", "transport": "ssh", "user": "root",
                             "port": 22, "data_address": "10.0.2.{n}"}  # fmt: skip
    demo = raw["experiments"]["demo"]
    raw["experiments"]["wide"] = {**demo, "hosts": "clients", "execution": "service"}
    raw["experiments"]["rack2"] = {**demo, "hosts": "rack2"}
    load_campaign(copy.deepcopy(raw))  # standalone on rack2: no service to share
    raw["experiments"]["rack2"]["execution"] = "service"
    assert [line.split(" (line")[0] for line in problems_of_raw(raw)] == [
        "hosts.rack2: host client03 runs one fio service for the campaign, which hosts.clients"
        " gives another data_address or service port (experiment rack2); give both groups the"
        " same"
    ]


def test_service_mode_on_hosts_behind_a_jump_host_is_warned_about(capsys):
    raw = queued(copy.deepcopy(VALID))
    raw["hosts"]["clients"]["jump"] = "ops@bastion:22"
    raw["experiments"]["demo"].update(hosts="clients", execution="service")
    raw["experiments"]["demo"]["job"]["runtime"] = "2m"
    load_campaign(copy.deepcopy(raw))
    assert capsys.readouterr().err == (
        "storbench: warning: experiments.demo: service mode on hosts.clients, reached through"
        " jump host ops@bastion:22: the tool's client connects from this controller to each"
        " host's service port, not through the jump host; where the controller cannot reach"
        " them, give data_address or run standalone\n"
    )
    raw["hosts"]["clients"]["data_address"] = "10.0.0.{n}"
    load_campaign(copy.deepcopy(raw))
    raw["hosts"]["clients"].pop("data_address")
    raw["experiments"]["demo"]["execution"] = "standalone"
    load_campaign(raw)
    assert capsys.readouterr().err == ""


def test_after_names_other_experiments_without_a_circle():
    raw = copy.deepcopy(VALID)
    demo = raw["experiments"]["demo"]
    raw["experiments"] = {
        "a": {**demo, "after": "c", "job": {**demo["job"], "runtime": "2m"}},
        "b": {**demo, "after": ["a"], "ordered": True, "wait": "30s"},
        "c": {**demo, "after": ["b"]},
        "d": {**demo, "after": ["d", "nosuch"]},
    }
    problems = problems_of_raw(raw)
    assert problems == [
        "experiments.d.after: an experiment cannot wait for itself",
        "experiments.d.after: unknown experiment 'nosuch' (defined: a, b, c, d)",
        "experiments.a.after: a circle: a -> c -> b -> a",
    ]
    raw["experiments"]["a"].pop("after")
    raw["experiments"]["d"]["after"] = "c"
    experiments = load_campaign(raw).experiments
    assert experiments["b"].after == ("a",) and experiments["b"].ordered
    assert experiments["b"].wait_s == 30.0 and experiments["a"].wait_s is None


def test_a_data_path_address_per_host_apart_from_its_ssh_name():
    raw = copy.deepcopy(VALID)
    raw["hosts"]["clients"]["data_address"] = "192.168.100.{n}"
    raw["hosts"]["fast"] = {"nodes": "c[1-2]", "transport": "ssh", "data_address": "{name}-100g"}
    campaign = load_campaign(raw)
    from storbench.core.model import Host

    clients = [Host.from_dict(h) for h in campaign.host_groups["clients"]]
    assert [(h.address, h.tool_address) for h in clients[:2]] == [
        ("client01", "192.168.100.1"),
        ("client02", "192.168.100.2"),
    ]
    assert [h["data_address"] for h in campaign.host_groups["fast"]] == ["c1-100g", "c2-100g"]
    raw["hosts"]["fast"]["data_address"] = "{name}-{rack}"
    assert problems_of_raw(raw) == [
        "hosts.fast.data_address: unknown field {rack} (fields: {name}, {n})"
    ]
    raw["hosts"]["fast"]["data_address"] = "fd00::{n}"  # IPv6
    assert [h["data_address"] for h in load_campaign(raw).host_groups["fast"]] == [
        "fd00::1",
        "fd00::2",
    ]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        # each tool takes the address in a list (elbencho --hosts a,b), a job file line
        # (vdbench hd=...,system=) or host:port: a comma or blank would make it two
        ("data_address", "10.0.0.{n}, 10.0.1.{n}"),
        ("data_address", "10.0.0.{n} "),
        ("controller_address", "10.0.0.254;reboot"),
    ],
)
def test_an_address_that_is_no_host_name_or_ip_is_refused(key, value):
    raw = copy.deepcopy(VALID)
    raw["hosts"]["clients"][key] = value
    (problem,) = problems_of_raw(raw)
    assert problem.startswith(f"hosts.clients.{key}: {value!r} is not a host name or IP address")


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        # the tools' host:port lists would read the port twice, or a host name as IPv6
        ("data_address", "10.0.0.{n}:8765", "'10.0.0.1:8765': a colon only in an IPv6 address"),
        ("controller_address", "ctl:2000", "'ctl:2000': a colon only in an IPv6 address"),
        ("data_address", "[{name}]", "'[client01]': brackets go around an IPv6 address only"),
        ("controller_address", "[fd00::1", "'[fd00::1': brackets go around an IPv6 address only"),
    ],
)
def test_a_port_or_brackets_in_an_address_are_refused(key, value, problem):
    raw = copy.deepcopy(VALID)
    raw["hosts"]["clients"][key] = value
    assert [line.split(" (")[0] for line in problems_of_raw(raw)] == [
        f"hosts.clients.{key}: {problem}"
    ]


@pytest.mark.parametrize(
    ("data", "controller", "first"),
    [
        ("::1", "::1", "::1"),
        ("[fd00::{n}]", "[fd00::ff]", "[fd00::1]"),
        ("fd00::{n}", "fd00::ff", "fd00::1"),
    ],
)
def test_ipv6_addresses_bare_or_in_brackets(data, controller, first):
    raw = copy.deepcopy(VALID)
    raw["hosts"]["clients"]["data_address"] = data
    raw["hosts"]["clients"]["controller_address"] = controller
    (host, *_) = load_campaign(raw).host_groups["clients"]
    assert (host["data_address"], host["controller_address"]) == (first, controller)


def test_a_target_set_together_only_never_runs_one_target_alone():
    raw = copy.deepcopy(VALID)
    raw["targets"]["disk2"] = {"type": "directory", "path": "/var/tmp/storbench/disk2"}
    demo = raw["experiments"]["demo"]
    demo["target"] = ["scratch", "disk2"]
    runs = load_campaign(copy.deepcopy(raw)).experiment_runs("demo")
    assert len(runs) == 8 * 3
    demo["together_only"] = True
    runs = load_campaign(raw).experiment_runs("demo")
    assert len(runs) == 8 and {run.targets for run in runs} == {("scratch", "disk2")}
    assert runs[0].run_id.endswith("_t-all")


def test_storage_facts_in_job_values_and_the_cached_data_warning(capsys):
    """Elastifile's rules (threads = cluster cores / 2, files = cluster cores) as expressions,
    and a warning when a run's data fits in 3 x the cluster's memory."""
    from storbench.plan import specs as plan_specs
    from storbench.run.render import with_host_facts

    raw = copy.deepcopy(VALID)
    demo = raw["experiments"]["demo"]
    demo["job"] = {**demo["job"], "runtime": "2m", "iodepth": "{storage_cores // 2}"}
    demo["sweep"] = {"rw": ["read"]}
    assert problems_of_raw(copy.deepcopy(raw)) == [
        "experiments.demo.job.iodepth: storage_cores needs the storage cluster declared in "
        "storage: (nodes, cores, memory)"
    ]
    raw["storage"] = {"nodes": 4, "cores": 16, "memory": "1GiB"}
    campaign = load_campaign(raw)
    assert campaign.storage["storage_cores"] == 64 and campaign.storage["storage_mem"] == 4 << 30
    (run,) = campaign.experiment_runs("demo")
    spec = plan_specs.render_spec(campaign, "demo", run, host="localhost")
    facts = {"cores": 8, "mem_bytes": 1 << 34}
    assert with_host_facts(spec, facts).params["iodepth"] == 32
    plain = load_campaign(copy.deepcopy(VALID))
    plain_spec = plan_specs.render_spec(plain, "demo", plain.experiment_runs("demo")[0])
    assert "storage" not in plain_spec.to_dict()
    err = capsys.readouterr().err
    assert "experiments.demo: 0.3 GB of data in its smallest run, under 3 x the storage" in err


def test_setup_steps_are_checked_against_their_hosts_and_names():
    raw = copy.deepcopy(VALID)
    raw["setup"] = {
        "mounts": {"hosts": "clients", "command": "mount vip{host_index % 4 + 1}:/ /mnt/x",
                   "check": "mountpoint -q /mnt/x", "undo": "umount /mnt/x"},
        "bad": {"hosts": "clients", "command": "echo {cores}"},
    }  # fmt: skip
    raw["experiments"]["demo"]["setup"] = ["mounts", "nosuch"]
    assert problems_of_raw(copy.deepcopy(raw)) == [
        "setup.bad.command: cores comes from the host's telemetry, which runs after the set-up "
        "(its mounts); use host_index, hosts or storage_*",
        "experiments.demo.setup: step 'mounts' does not run on localhost (its hosts: "
        "client01, client02, client03, client04)",
        "experiments.demo.setup: unknown setup step 'nosuch' (defined: mounts, bad)",
    ]
    raw["setup"].pop("bad")
    raw["setup"]["mounts"]["hosts"] = ["localhost", "clients"]
    raw["experiments"]["demo"]["setup"] = "mounts"
    campaign = load_campaign(raw)
    assert [h["name"] for h in campaign.setups["mounts"].hosts][:2] == ["localhost", "client01"]
    assert campaign.experiments["demo"].setup == ("mounts",)


def test_a_network_mesh_and_streams_per_group():
    from storbench.plan import specs as plan_specs

    raw = copy.deepcopy(VALID)
    raw["network"] = {"mesh": ["clients"], "parallel": {"clients": 4}, "duration": "5s"}
    spec = plan_specs.network_spec(load_campaign(raw))
    assert [h["name"] for h in spec["mesh"]] == ["client01", "client02", "client03", "client04"]
    assert "server" not in spec and spec["parallel"] == {"clients": 4}
    raw["network"] = {"mesh": ["localhost"], "server": "localhost", "parallel": {"nosuch": 2}}
    assert problems_of_raw(raw) == [
        "network: server and clients go together (one server check)",
        "network.mesh: a mesh needs at least 2 hosts",
        "network.parallel.nosuch: unknown host group",
    ]


def test_plan_prints_the_campaigns_expected_wall_time():
    from storbench.run.show_plan import describe_wall_time

    raw = copy.deepcopy(VALID)  # 8 runs x 3 iterations of 5 s + 1 s ramp
    raw["experiments"]["demo"]["wait"] = "4s"
    lines = describe_wall_time(load_campaign(raw), ["demo"])
    assert lines[2].split() == ["demo", "8", "run(s)", "x", "3", "4m", "00s"]  # 8 x 3 x 10 s
    assert lines[3].split() == ["campaign", "4m", "00s"]


def test_fio_refuses_misspelt_options_and_values_at_check_time():
    """`fio --parse-only` (fio is installed here) names each bad option and the nearest."""
    raw = copy.deepcopy(VALID)
    raw["experiments"]["demo"]["job"].update(ioengin="libaio", io_depth=4)
    raw["experiments"]["demo"]["sweep"]["rw"] = ["read", "randred"]
    assert problems_of_raw(raw) == [
        "experiments.demo.job.ioengin: fio has no option 'ioengin' (did you mean 'ioengine'?)",
        "experiments.demo.job.io_depth: fio has no option 'io_depth' (did you mean 'iodepth'?)",
        "experiments.demo.sweep.rw: fio does not take rw='randred' (did you mean 'randread'?); "
        "valid: read, write, trim, randread, randwrite, randtrim, rw, readwrite, randrw, "
        "trimwrite, randtrimwrite",
    ]


def test_a_misspelt_ioengine_is_named_at_check_time_and_another_name_left_to_preflight():
    """fio --parse-only of a job file does not load the engine: a name close to one of fio's
    is refused here; any other may be a plugin of the hosts' fio, which preflight asks."""
    raw = copy.deepcopy(VALID)
    raw["experiments"]["demo"]["job"]["ioengine"] = "libaoi"
    raw["experiments"]["demo"]["sweep"]["ioengine"] = ["io_uring", "io-uring"]
    assert problems_of_raw(raw) == [
        "experiments.demo.sweep.ioengine: fio has no ioengine 'io-uring' (did you mean"
        " 'io_uring'?)",
    ]
    raw["experiments"]["demo"]["sweep"].pop("ioengine")
    assert problems_of_raw(raw) == [
        "experiments.demo.job.ioengine: fio has no ioengine 'libaoi' (did you mean 'libaio'?)",
    ]
    raw["experiments"]["demo"]["job"]["ioengine"] = "spdk"  # SPDK's plugin, LD_PRELOADed
    assert load_campaign(raw).experiments["demo"].job["ioengine"] == "spdk"


def test_without_fio_the_pinned_versions_option_list_catches_misspellings():
    from storbench.tools import fio_options

    sections = [{"ioengin": "libaio", "rw": "randred", "hipri": 1, "iodepth": 4}]
    problems = fio_options._by_list(sections, frozenset())
    assert problems["ioengin"] == "fio has no option 'ioengin' (did you mean 'ioengine'?)"
    assert problems["rw"].startswith("fio does not take rw='randred' (did you mean 'randread'?)")
    assert set(problems) == {"ioengin", "rw"}  # an engine option (hipri) is not refused


def test_two_host_fact_values_of_one_option_get_distinct_run_ids():
    raw = copy.deepcopy(VALID)
    raw["experiments"]["demo"]["sweep"] = {"numjobs": ["{cores}", "{cores * 2}", 4], "rw": ["read"]}
    runs = load_campaign(raw).experiment_runs("demo")
    assert [run.run_id for run in runs] == ["read_njhost-cores", "read_njhost-cores-2", "read_nj4"]
    raw["experiments"]["demo"]["sweep"] = {"numjobs": ["{cores}"], "rw": ["read", "write"]}
    runs = load_campaign(raw).experiment_runs("demo")
    assert [run.run_id for run in runs] == ["read_njhost", "write_njhost"]  # ids as before
    # words alike ('cores-2' twice): their operators too, the others' ids as before
    raw["experiments"]["demo"]["sweep"] = {
        "numjobs": ["{cores}", "{cores * 2}", "{cores // 2}", "{(cores - 1) ** 2}", 4]
    }
    runs = load_campaign(raw).experiment_runs("demo")
    assert [run.run_id for run in runs] == [
        "njhost-cores",
        "njhost-cores-x-2",
        "njhost-cores-div-2",
        "njhost-cores-1-2",
        "nj4",
    ]


def test_the_chunks_of_a_soak_run_in_order():
    """A soak's chunks are one series: chunk k waits for chunk k-1 (not so other iterations)."""
    from storbench.plan.workflow import WorkflowPlan

    raw = copy.deepcopy(VALID)
    demo = raw["experiments"]["demo"]
    demo.pop("iterations")
    demo["job"].pop("runtime")
    demo["soak"] = {"duration": "3m", "chunk": "1m"}
    demo["sweep"] = {"rw": ["randread"]}
    plan = WorkflowPlan(load_campaign(raw))
    (run_id,) = plan.runs["demo"]
    assert plan.runs_before("demo", run_id, 1) == []
    assert plan.runs_before("demo", run_id, 3) == [f"results/demo/raw/{run_id}/it2/run.json"]
    plain = WorkflowPlan(load_campaign(copy.deepcopy(VALID)))
    assert plain.runs_before("demo", next(iter(plain.runs["demo"])), 2) == []


TOGETHER = "connection tree and a gateway go together"


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"gateway": "gw1"}, "hosts.clients.connection: " + TOGETHER),
        ({"connection": "tree"}, "hosts.clients.gateway: " + TOGETHER),
        (
            {"connection": "tree", "gateway": "gw1", "jump": "bastion"},
            "hosts.clients.gateway: a gateway reaches ssh hosts, with no jump host",
        ),
    ],
)
def test_a_gateway_comes_with_connection_tree(options, expected):
    raw = copy.deepcopy(VALID)
    raw["hosts"]["clients"].update(options)
    assert problems_of_raw(raw) == [expected]
    raw["hosts"]["clients"].update(connection="tree", gateway="gw1", gateway_python="python3.11")
    raw["hosts"]["clients"].pop("jump", None)
    (host, *_) = load_campaign(raw).host_groups["clients"]
    assert (host["gateway"], host["gateway_python"], host["connection"]) == (
        "gw1",
        "python3.11",
        "tree",
    )


def test_a_queue_depth_the_engine_never_reaches_is_warned_about(capsys):
    """fio's default psync keeps one I/O in flight per job; libaio queues only direct I/O."""
    raw = {
        "hosts": {"local": {"transport": "local"}},
        "targets": {"t": {"type": "directory", "path": "/mnt/t"}},
        "experiments": {
            "e": {"tool": "fio", "hosts": "local", "target": "t", "job": {"rw": "randread"},
                  "sweep": {"iodepth": [1, 8, 32]}},
        },
    }  # fmt: skip
    load_campaign(raw)
    assert (
        "storbench: warning: experiments.e.sweep.iodepth: 32 with ioengine psync (fio's"
        " default): a synchronous engine keeps one I/O in flight per job whatever iodepth"
        " says; set ioengine: libaio or io_uring for a queue depth (numjobs for more jobs)"
    ) in capsys.readouterr().err
    raw["experiments"]["e"]["job"]["ioengine"] = "libaio"
    load_campaign(raw)
    assert (
        "storbench: warning: experiments.e.job.ioengine: libaio without direct: 1: Linux queues"
        " native AIO only for direct I/O; buffered, each I/O completes as it is submitted, so"
        " iodepth is not the I/Os in flight"
    ) in capsys.readouterr().err
    raw["experiments"]["e"]["job"]["direct"] = 1
    load_campaign(raw)
    assert "warning" not in capsys.readouterr().err


def test_a_searchs_queue_depth_ladder_through_a_synchronous_engine_is_warned_about(capsys):
    raw = {
        "hosts": {"local": {"transport": "local"}},
        "targets": {"t": {"type": "directory", "path": "/mnt/t"}},
        "experiments": {
            "slo": {"tool": "fio", "hosts": "local", "target": "t",
                    "job": {"rw": "randread", "runtime": "10s", "ioengine": "psync"},
                    "search": {"objective": {"metric": "iops", "latency": "p99", "limit": "2ms"},
                               "max_iodepth": 8}},
        },
    }  # fmt: skip
    load_campaign(raw)
    assert (
        "storbench: warning: experiments.slo.search.max_iodepth: 8 with ioengine psync: a"
        " synchronous engine keeps one I/O in flight per job"
    ) in capsys.readouterr().err
