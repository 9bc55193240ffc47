"""Pivot tables of report.tables from summary cells built here (numbers checked by hand)."""

from pathlib import Path

import pandas as pd
import yaml

from storbench.core.schema_names import PIVOT_VALUES
from storbench.report import pivot

SCHEMA = Path(__file__).parents[2] / "config" / "schema.yaml"


def cell(run_id, op, bs, iops, bw, lat_ns, p99_ns=None, **extra):
    return {
        "experiment": "e", "run_id": run_id, "job": "j", "op": op, "tool": "fio",
        "rw": extra.pop("rw", "randread"), "bs": bs, "iodepth": 1, "numjobs": 1,
        "rwmixread": None, "target": "t", "step": None, "hosts_in_run": 2,
        "prep_state": None, "bw_bytes_s_mean": bw, "iops_mean": iops, "lat_mean_ns": lat_ns,
        "p99_ns": p99_ns, **extra,
    }  # fmt: skip


SUMMARY = pd.DataFrame(
    [
        cell("r4k", "read", 4096, 1000.0, 4.096e6, 1.0e6, 2.0e6),
        cell("r64k", "read", 65536, 500.0, 32.768e6, 2.0e6, 3.0e6),
        # a 70/30 mix: two cells of one run
        cell("m4k", "read", 4096, 700.0, 2.8672e6, 1.0e6, 2.0e6, rw="randrw"),
        cell("m4k", "write", 4096, 300.0, 1.2288e6, 3.0e6, 5.0e6, rw="randrw"),
    ]
)
RAW = SUMMARY.assign(params_json="{}")


def table(spec, meta=None):
    return pivot.pivot_table("t", spec, SUMMARY, RAW, meta or {})


def test_where_reads_sizes_and_cells_are_per_run():
    built = table({"rows": ["rw"], "values": ["iops", "p99"], "where": {"bs": "4k"}})
    assert built.columns == ["rw", "IOPS", "p99 (ms)"]
    # the mix: IOPS summed over its read and write; no percentile across operations
    assert built.rows == [["randread", "1000", "2.00"], ["randrw", "1000", None]]


def test_mixed_latency_is_weighted_by_ios_and_op_splits_it():
    built = table({"rows": ["rw"], "values": ["lat_mean"], "where": {"rw": "randrw"}})
    assert built.rows == [["randrw", "1.60"]]  # (700 * 1 ms + 300 * 3 ms) / 1000
    by_op = table({"rows": ["op"], "values": ["lat_mean"], "where": {"rw": "randrw"}})
    assert by_op.rows == [["read", "1.00"], ["write", "3.00"]]


def test_per_storage_node_divides_throughput_only():
    built = table(
        {"rows": ["bs"], "values": ["bw", "lat_mean"], "per": ["system", "storage_node"],
         "where": {"rw": "randread"}, "bandwidth_unit": "MB/s"},
        {"storage": {"nodes": 4}},
    )  # fmt: skip
    assert built.columns == ["bs", "MB/s", "mean latency (ms)", "MB/s per node"]
    assert built.rows == [["4k", "4.10", "1.00", "1.02"], ["64k", "32.77", "2.00", "8.19"]]


def test_a_crowded_cell_shows_each_run_and_names_what_differs():
    built = table({"rows": ["rw"], "values": ["iops"], "where": {"rw": "randread"}})
    assert built.rows == [["randread", "1000 / 500"]]
    assert any("they differ in bs" in note for note in built.notes)


def test_bandwidth_follows_report_units_unless_the_table_sets_one():
    spec = {"rows": ["bs"], "values": ["bw"], "where": {"rw": "randread"}}
    decimal = table(spec)
    assert decimal.columns == ["bs", "GB/s"]
    assert decimal.rows == [["4k", "0.00410"], ["64k", "0.03277"]]  # 4.096e6 and 32.768e6 B/s
    binary = table(spec, {"units": "binary"})
    assert binary.columns == ["bs", "GiB/s"]
    assert binary.rows == [["4k", "0.00381"], ["64k", "0.03052"]]  # / 2^30
    chosen = table({**spec, "bandwidth_unit": "MB/s"}, {"units": "binary"})
    assert chosen.columns == ["bs", "MB/s"]


def test_the_schema_offers_exactly_the_values_units_and_splits_the_tables_know():
    schema = yaml.safe_load(SCHEMA.read_text())
    table = schema["properties"]["report"]["properties"]["tables"]["additionalProperties"]
    offered = table["properties"]
    assert offered["values"]["items"]["enum"] == list(PIVOT_VALUES)
    assert offered["per"]["items"]["enum"] == list(pivot.PER)
    assert offered["latency_unit"]["enum"] == list(pivot.LATENCY_UNITS)
    assert offered["bandwidth_unit"]["enum"] == list(pivot.BANDWIDTH_UNITS)


def test_a_where_that_matches_no_run_says_what_the_runs_have():
    built = table({"rows": ["bs"], "values": ["iops"], "where": {"rw": "randred"}})
    assert built.rows == []
    assert built.notes[0] == (
        "No run matches where {'rw': 'randred'}; the runs have rw: randread, randrw."
    )
