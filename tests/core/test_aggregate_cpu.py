"""The CPU columns of an 'all' row (core.aggregate.aggregate_cpu)."""

from __future__ import annotations

import pytest

from storbench.core.aggregate import aggregate_cpu, aggregate_hosts


def cpu_row(host, pct, sys_pct, basis, op="read") -> dict:
    return {"host": host, "job": "j", "op": op, "cpu_pct": pct, "cpu_sys_pct": sys_pct,
            "cpu_basis": basis}  # fmt: skip


def test_host_cpu_is_the_mean_over_hosts_each_counted_once():
    # vdbench's four hosts (storbench-service-4hosts hd1..hd4.html: 80.1 80.3 80.1 80.5,
    # sys 47.4 47.7 47.3 47.5); vdbench's own total is 80.2494 / 47.4701
    group = [cpu_row(f"h{k}", pct, sys, "host") for k, (pct, sys) in
             enumerate([(80.1, 47.4), (80.3, 47.7), (80.1, 47.3), (80.5, 47.5)])]  # fmt: skip
    group.append(cpu_row("h0", 80.1, 47.4, "host"))  # h0's second row (a clone) counts once
    total = aggregate_cpu(group)
    assert total["cpu_pct"] == pytest.approx(80.25)
    assert total["cpu_sys_pct"] == pytest.approx(47.475)
    assert total["cpu_basis"] == "host"


def test_process_cpu_sums_and_a_missing_or_mixed_figure_leaves_it_empty():
    # fio standalone-nogroup, randread-4k's two jobs: 3.24 + 25.32 and 3.30 + 25.18
    jobs = [cpu_row("a", 28.56, 25.32, "process"), cpu_row("a", 28.48, 25.18, "process")]
    total = aggregate_cpu(jobs)
    assert total["cpu_pct"] == pytest.approx(57.04)
    assert total["cpu_sys_pct"] == pytest.approx(50.5)
    assert total["cpu_basis"] == "process"
    empty = {"cpu_pct": None, "cpu_sys_pct": None, "cpu_basis": None}
    missing = [jobs[0], cpu_row("b", None, None, None)]
    assert aggregate_cpu(missing) == empty  # a part would read as the whole
    mixed = [jobs[0], cpu_row("b", 50.0, 9.0, "host")]
    assert aggregate_cpu(mixed) == empty


def test_rows_without_cpu_columns_give_an_all_row_without_them():
    rows = [{"host": "a", "job": "j", "op": "read", "ios": 1}]
    assert "cpu_pct" not in aggregate_hosts(rows)[0]
