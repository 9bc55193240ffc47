"""A tool's versions by host: the warning's words at 128 hosts, and each adapter's version
read from what its version command printed (captured real outputs)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd

from storbench.core import versions
from storbench.report.toolkit import version_warnings
from storbench.tools import get_tool

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CLIENTS = [f"client{n:03d}" for n in range(1, 129)]


def test_two_odd_hosts_of_128_are_named_and_the_rest_folded():
    found = {"fio-3.36": CLIENTS[:40] + CLIENTS[42:], "fio-3.28": CLIENTS[40:42]}
    assert versions.differ_across_hosts("fio", found) == (
        "fio versions differ across hosts: fio-3.36 on 126 hosts (client[001-040,043-128]);"
        " fio-3.28 on client041, client042"
    )


def test_hosts_that_fold_into_no_short_ranges_are_counted():
    found = {"fio-3.36": CLIENTS[::2], "fio-3.28": CLIENTS[1::2]}
    assert versions.differ_across_hosts("fio", found) == (
        "fio versions differ across hosts: fio-3.28 on 64 hosts; fio-3.36 on 64 hosts"
    )


def test_one_version_is_no_warning():
    assert versions.differ_across_hosts("fio", {"fio-3.36": CLIENTS}) is None


def test_a_host_that_ran_two_versions_is_named():
    found = versions.hosts_by_version([("a", "fio-3.36"), ("b", "fio-3.36"), ("a", "fio-3.28")])
    assert versions.differ_across_hosts("fio", found) == (
        "fio versions differ across hosts and runs: fio-3.36 on a, b; fio-3.28 on a"
        " (a ran more than one version: the tool changed between runs)"
    )


def test_each_tool_reads_its_version_from_what_it_printed():
    elbencho = (FIXTURES / "elbencho/elbencho-version.txt").read_text()
    vdbench = (FIXTURES / "vdbench/output-fileloop.console.txt").read_text()
    warp = (FIXTURES / "warp/warp-version.txt").read_text()
    assert get_tool("elbencho").version_of(elbencho) == "3.1-10"  # its first line: 'elbencho'
    assert get_tool("vdbench").version_of(vdbench) == "vdbench50407"
    assert get_tool("warp").version_of(warp) == "warp version 1.1.3 - 27b021d"
    # gosbench has no --version: its version script prints its binaries' content hashes
    assert get_tool("gosbench").version_of(f"{GOSBENCH_A}\n") == GOSBENCH_A


GOSBENCH_A = "gosbench server sha256:28bb79294424 worker sha256:18086daa2cb0"
GOSBENCH_B = "gosbench server sha256:28bb79294424 worker sha256:a74a002bed96"


def test_the_report_flags_gosbench_builds_that_differ():
    rows = pd.DataFrame(
        {"tool": ["gosbench"] * 3, "host": ["a", "b", "c"],
         "tool_version": [GOSBENCH_A, GOSBENCH_A, GOSBENCH_B]}
    )  # fmt: skip
    assert version_warnings(rows) == [
        f"gosbench versions differ across hosts: {GOSBENCH_A} on a, b; {GOSBENCH_B} on c"
    ]
    assert version_warnings(rows.assign(tool_version=GOSBENCH_A)) == []


def test_the_report_leaves_out_a_tool_that_prints_no_version(monkeypatch):
    """A tool whose adapter says it prints no version (Capabilities.version): what its rows
    record is not compared."""
    tool = get_tool("warp")
    monkeypatch.setattr(tool, "capabilities", replace(tool.capabilities, version=False))
    rows = pd.DataFrame(
        {"tool": ["warp"] * 2, "host": ["a", "b"], "tool_version": ["/usr/bin/warp", "/opt/warp"]}
    )
    assert version_warnings(rows) == []
    monkeypatch.undo()
    assert len(version_warnings(rows)) == 1
