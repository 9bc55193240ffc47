"""Job parameters as expressions over host facts: values, refusals, config check."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storbench.core import hostfacts
from storbench.core.hostfacts import HostFactError, check, evaluate, expression_names, resolve
from storbench.run.telemetry import collect_host

GIB = 2**30
NAMES = {
    "cores": 8,
    "sockets": 2,
    "mem": 16 * GIB,
    "mem_gib": 16.0,
    "nic_speed": 25000,
    "hosts": 4,
    "host_index": 3,
}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("{cores}", 8),
        ("{2 * mem / cores}", 4294967296),
        ("{cores // 2}", 4),
        ("{max(1, cores / 2)}", 4),
        ("{max(1, cores / 16)}", 1),
        ("{cores / 3}", 8 / 3),  # not whole: kept as a float
        ("{ceil(cores / 3)}", 3),
        ("{floor(mem_gib / 3)}", 5),
        ("{round(mem_gib / 3, 2)}", 5.33),
        ("{int(nic_speed / 8)}", 3125),
        ("{abs(-cores) % 5}", 3),
        ("{-sockets + +hosts}", 2),
        ("{2 ** 10}", 1024),
        ("{(hosts - host_index) * 1.5}", 1.5),
        ("{ mem // (cores * hosts) }", 536870912),
    ],
)
def test_an_expression_alone_gives_a_number(text, value):
    result = evaluate(text, NAMES)
    assert result == value
    assert type(result) is type(value)


def test_expressions_inside_text_are_substituted():
    assert evaluate("file-{host_index}", NAMES) == "file-3"
    assert evaluate("{hosts}x{cores // 2}", NAMES) == "4x4"
    assert evaluate("/data/{{literal}}/{cores / 16}", NAMES) == "/data/{literal}/0.5"
    assert evaluate("{{cores}}", NAMES) == "{cores}"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            "{__import__('os').system('x')}",
            "only min, max, round, int, ceil, floor, abs can be called",
        ),
        ("{cores.real}", "attribute access is not allowed"),
        ("{'a'*9}", "only numbers are allowed, not str 'a'"),
        ("{2**10**10}", "too large"),
        ("{cores ** 1000}", "too large"),
        ("{10.0 ** 400}", "result is too large"),
        ("{round(5, -10**18)}", "round() digits must be an integer from -100 to 100"),
        ("{memory}", "unknown name 'memory'"),
        ("{cores / 0}", "division by zero"),
        ("{cores % (hosts - 4)}", "division by zero"),
        ("{(-8) ** 0.5}", "not a real number"),
        ("{cores[0]}", "subscripts are not allowed"),
        ("{(lambda: 1)()}", "only min, max, round, int, ceil, floor, abs can be called"),
        ("{cores if hosts else 1}", "if/else is not allowed"),
        ("{cores > 2}", "comparisons are not allowed"),
        ("{max}", "max is a function"),
        ("{max(1)}", "bad arguments to max()"),
        ("{max(*[1, 2])}", "max() takes plain arguments only"),
        ("{True}", "only numbers are allowed, not bool"),
        ("{1 +}", "syntax error"),
        ("{}", "empty expression"),
        ("{cores", "unmatched '{'"),
        ("x-{cores}}", "unmatched '}'"),
        ("{cores << 2}", "operator LShift is not allowed"),
        ("{[cores]}", "List is not allowed"),
    ],
)
def test_anything_else_is_refused_naming_the_expression(text, reason):
    with pytest.raises(HostFactError) as error:
        evaluate(text, NAMES)
    assert reason in str(error.value)
    if text.count("{") == text.count("}") == 1:
        assert str(error.value).startswith(text)


def test_nothing_is_executed(tmp_path):
    marker = tmp_path / "ran"
    with pytest.raises(HostFactError):
        evaluate(f"{{__import__('pathlib').Path('{marker}').touch()}}", NAMES)
    assert not marker.exists()


def test_a_fact_the_host_did_not_report_is_named():
    names = dict(NAMES, sockets=None)
    assert evaluate("{cores}", names) == 8
    with pytest.raises(HostFactError, match=r"\{sockets\}: sockets is not known for this host"):
        evaluate("{sockets}", names)


def test_resolve_computes_expression_values_and_keeps_the_rest():
    params = {"numjobs": "{cores}", "size": "{2 * mem / cores}", "bs": "4k", "iodepth": 16,
              "filename_format": "f-{host_index}.$jobnum", "direct": True}  # fmt: skip
    assert resolve(params, NAMES) == {
        "numjobs": 8,
        "size": 4294967296,
        "bs": "4k",
        "iodepth": 16,
        "filename_format": "f-3.$jobnum",
        "direct": True,
    }
    with pytest.raises(HostFactError, match=r"^numjobs: \{cores // 0\}: division by zero$"):
        resolve({"numjobs": "{cores // 0}"}, NAMES)


def test_has_expression():
    assert hostfacts.has_expression("{cores}")
    assert hostfacts.has_expression("a{x}b")
    assert hostfacts.has_expression("{}")
    assert not hostfacts.has_expression("{{literal}}")
    assert not hostfacts.has_expression("4k")
    assert not hostfacts.has_expression(8)
    assert not hostfacts.has_expression(None)


def test_check_names_the_key_without_any_facts():
    params = {
        "numjobs": "{cores}",
        "size": "{2 * mem / coers}",
        "iodepth": "{cores.real}",
        "bs": "4k",
        "runtime": "{1 +}",
        "nrfiles": "{min}",
        "offset": "{cores / 0}",  # only computing finds this one
    }
    problems = check(params, "experiments.demo.job")
    assert problems == [
        "experiments.demo.job.size: {2 * mem / coers}: unknown name 'coers' (known: cores, "
        "sockets, mem, mem_gib, nic_speed, hosts, host_index, storage_nodes, storage_cores, "
        "storage_mem, storage_mem_gib)",
        "experiments.demo.job.iodepth: {cores.real}: attribute access is not allowed",
        "experiments.demo.job.runtime: {1 +}: syntax error: invalid syntax",
        "experiments.demo.job.nrfiles: {min}: min is a function: call it, e.g. min(...)",
    ]
    assert check({"numjobs": "{cores}", "bs": "4k"}, "experiments.demo.job") == []


def test_names_from_synthetic_facts():
    facts = {
        "cores": 64,
        "sockets": 2,
        "mem_bytes": 512 * GIB,
        "nics": [{"name": "eth0", "speed_mbps": None}, {"name": "eth1", "speed_mbps": 100000},
                 {"name": "eth2", "speed_mbps": 25000}],
    }  # fmt: skip
    names = expression_names(facts, hosts_in_run=20, host_index=7)
    assert names == {
        "cores": 64,
        "sockets": 2,
        "mem": 512 * GIB,
        "mem_gib": 512.0,
        "nic_speed": 100000,
        "hosts": 20,
        "host_index": 7,
    }
    assert set(names) == set(hostfacts.HOST_NAMES)
    no_speed = expression_names({"nics": [{"name": "eth0", "speed_mbps": None}]},
                                hosts_in_run=1, host_index=0)  # fmt: skip
    assert no_speed["nic_speed"] == 0
    assert no_speed["cores"] is None


def test_expressions_over_this_machines_telemetry():
    facts = collect_host({"name": "localhost", "transport": "local"}, target=None, tools=[])
    names = expression_names(facts, hosts_in_run=2, host_index=1)
    mem_kib = next(
        int(line.split()[1])
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal:")
    )
    job = {"numjobs": "{cores}", "size": "{2 * mem // cores}", "filename": "f{host_index}"}
    assert resolve(job, names) == {
        "numjobs": os.cpu_count(),
        "size": 2 * mem_kib * 1024 // os.cpu_count(),
        "filename": "f1",
    }
