"""fio JSON parsing against real fio 3.33 output (see tests/fixtures/fio/README.md)."""

from __future__ import annotations

import json
import math
import statistics

import pytest

from storbench.core import histogram, results
from storbench.core.schema_names import ALL_HOSTS, PERCENTILE_COLUMNS, PERCENTILES
from storbench.tools.fio_json import (
    FioOutputError,
    aggregate_hosts,
    load_documents,
    parse_outputs,
    rows_from_document,
)
from tests.paths import FIXTURES as SHARED_FIXTURES

FIXTURES = SHARED_FIXTURES / "fio"
CLIENT_NAMES = {"127.0.0.1:8765": "hostA", "127.0.0.1:8766": "hostB"}
BASE = {
    "experiment": "exp",
    "run_id": "randrw_bs4k",
    "iteration": 1,
    "attempt": 0,
    "tool": "fio",
    "params_json": '{"bs": "4k"}',
    "job_file_sha256": "ab" * 32,
    "command": "fio job.fio --output-format=json+",
    "raw_path": "raw/out.json",
    "start_time": "2026-11-21T06:00:00Z",
    "end_time": "2026-11-21T06:00:06Z",
    "not_a_column": "dropped",
}


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def document(name: str) -> dict:
    return load_documents(text(name), source=name)[-1]


def by_key(rows: list[dict]) -> dict:
    return {(row["host"], row["job"], row["op"]): row for row in rows}


def printed_percentiles(stats: dict) -> list[float]:
    return [float(stats["clat_ns"]["percentile"][f"{p:.6f}"]) for p in PERCENTILES]


def row_percentiles(row: dict) -> list:
    return [row[column] for column in PERCENTILE_COLUMNS]


# --- load_documents ----------------------------------------------------------------------


def test_status_interval_has_six_cumulative_documents_last_is_final():
    documents = load_documents(text("status-interval.json.txt"))
    runtimes = [doc["jobs"][0]["read"]["runtime"] for doc in documents]
    assert runtimes == [893, 1893, 2893, 3893, 4893, 5001]


def test_json_between_normal_format_text_is_found():
    documents = load_documents(text("standalone-group.normal+jsonplus.txt"))
    assert len(documents) == 1
    assert [job["jobname"] for job in documents[0]["jobs"]][0] == "randread-4k"


def test_leading_error_line_is_skipped():
    output = text("fail-einval-direct-io.stdout.txt")
    assert output.startswith("fio: pid=")
    assert load_documents(output)[0]["jobs"][0]["error"] == 22


def test_non_utf8_junk_decoded_with_replacement_is_tolerated():
    raw = b"\xff\xfe garbage from a wrapper\n" + (FIXTURES / "standalone-group.json").read_bytes()
    assert len(load_documents(raw.decode("utf-8", errors="replace"))) == 1


@pytest.mark.parametrize(
    "output",
    [
        "",
        "  \n\n",
        text("fail-missing-dir.stdout.txt"),
        text("standalone-group.jsonplus.json")[:40000],
        "{\n",
    ],
    ids=["empty", "blank", "missing-dir", "truncated", "open-brace"],
)
def test_no_complete_document_raises_naming_the_source(output):
    with pytest.raises(FioOutputError, match="run-7/host1.json"):
        load_documents(output, source="run-7/host1.json")


def test_missing_dir_error_quotes_fio_message():
    with pytest.raises(FioOutputError, match="func=lstat"):
        load_documents(text("fail-missing-dir.stdout.txt"))


def test_parse_outputs_error_names_the_host():
    with pytest.raises(FioOutputError, match="host node3"):
        parse_outputs([("node3", "")], base={})


def test_document_without_jobs_is_rejected():
    with pytest.raises(FioOutputError, match="neither 'jobs' nor 'client_stats'"):
        rows_from_document({"fio version": "fio-3.33"}, host="h", base={}, source="x")


# --- standalone, group_reporting ---------------------------------------------------------


def test_group_reporting_rows_equal_fio_values():
    doc = document("standalone-group.jsonplus.json")
    rows = rows_from_document(doc, host="node1", base=BASE)
    ops_per_job = [(row["job"], row["op"]) for row in rows]
    assert ops_per_job == [
        ("randread-4k", "read"),
        ("randwrite-4k", "write"),
        ("seqread-1m", "read"),
        ("randrw-70-30-4k", "read"),
        ("randrw-70-30-4k", "write"),
    ]
    entries = {entry["jobname"]: entry for entry in doc["jobs"]}
    for row in rows:
        stats = entries[row["job"]][row["op"]]
        assert row["host"] == "node1"
        assert row["bytes"] == stats["io_bytes"]
        assert row["ios"] == stats["total_ios"]
        assert row["duration_s"] == stats["runtime"] / 1000
        assert row["bw_bytes_s"] == stats["bw_bytes"]
        assert row["iops"] == stats["iops"]
        assert row["lat_mean_ns"] == stats["lat_ns"]["mean"]
        assert row["lat_stdev_ns"] == stats["lat_ns"]["stddev"]
        assert row["lat_min_ns"] == stats["lat_ns"]["min"]
        assert row["lat_max_ns"] == stats["lat_ns"]["max"]
        assert row_percentiles(row) == printed_percentiles(stats)
        assert (row["lat_basis"], row["pct_source"]) == ("clat", "histogram")
        assert row["hist_ns"] == sorted(row["hist_ns"])
        assert sum(row["hist_count"]) == stats["clat_ns"]["N"]
        assert row["errors"] == 0


def test_randread_values_from_the_json():
    rows = by_key(rows_from_document(document("standalone-group.jsonplus.json"), host="n", base={}))
    randread = rows[("n", "randread-4k", "read")]
    assert randread["bytes"] == 329834496
    assert randread["iops"] == 16101.979604
    assert randread["p99_ns"] == 3719168.0


def test_parameters_come_from_job_over_global_options():
    rows = by_key(rows_from_document(document("standalone-group.jsonplus.json"), host="n", base={}))
    mixed = rows[("n", "randrw-70-30-4k", "write")]
    assert (mixed["rw"], mixed["bs"], mixed["rwmixread"]) == ("randrw", 4096, 70)
    assert (mixed["iodepth"], mixed["numjobs"], mixed["size"]) == (4, 2, 32 * 1024**2)
    assert mixed["runtime_s"] == 5.0
    seqread = rows[("n", "seqread-1m", "read")]
    assert (seqread["rw"], seqread["bs"], seqread["rwmixread"]) == ("read", 1024**2, None)


def test_base_columns_are_copied_but_document_wins_for_parameters_and_version():
    base = {**BASE, "bs": "64k", "tool_version": "fio-0.0", "host": "ignored", "iodepth": 32}
    rows = rows_from_document(document("fail-einval-direct-io.stdout.txt"), host="n", base=base)
    (row,) = rows
    for column in BASE.keys() - {"not_a_column"}:
        assert row[column] == BASE[column]
    assert "not_a_column" not in row
    assert (row["host"], row["bs"], row["tool_version"]) == ("n", 1000, "fio-3.33")
    assert row["iodepth"] == 32  # absent from the job: falls back to base


def test_unparseable_bs_range_is_none():
    doc = document("standalone-group.jsonplus.json")
    doc["jobs"][0]["job options"]["bs"] = "4k-16k"
    rows = rows_from_document(doc, host="n", base={})
    assert rows[0]["bs"] is None


# --- standalone, clones reported separately ----------------------------------------------


def test_numjobs_clones_are_labelled_per_group():
    rows = rows_from_document(document("standalone-nogroup.jsonplus.json"), host="n", base={})
    assert sorted({row["job"] for row in rows}) == [
        "randread-4k[0]",
        "randread-4k[1]",
        "randrw-70-30-4k[0]",
        "randrw-70-30-4k[1]",
        "randwrite-4k[0]",
        "randwrite-4k[1]",
        "seqread-1m[0]",
        "seqread-1m[1]",
    ]


def test_aggregate_over_clones_sums_and_merges_bins():
    doc = document("standalone-nogroup.jsonplus.json")
    rows = parse_outputs([("n", text("standalone-nogroup.jsonplus.json"))], base=BASE)
    totals = by_key(row for row in rows if row["host"] == ALL_HOSTS)
    clones = [entry["read"] for entry in doc["jobs"] if entry["jobname"] == "randread-4k"]
    total = totals[(ALL_HOSTS, "randread-4k", "read")]
    assert len(clones) == 2
    assert total["bytes"] == sum(stats["io_bytes"] for stats in clones)
    assert total["ios"] == sum(stats["total_ios"] for stats in clones)
    assert total["iops"] == pytest.approx(sum(stats["iops"] for stats in clones))
    assert total["duration_s"] == max(stats["runtime"] for stats in clones) / 1000
    assert total["lat_min_ns"] == min(stats["lat_ns"]["min"] for stats in clones)
    assert total["lat_max_ns"] == max(stats["lat_ns"]["max"] for stats in clones)
    merged = histogram.merge(histogram.from_mapping(s["clat_ns"]["bins"]) for s in clones)
    assert (total["hist_ns"], total["hist_count"]) == merged
    assert row_percentiles(total) == histogram.percentiles(*merged, PERCENTILES)
    assert sum(total["hist_count"]) == total["ios"]
    assert (total["rw"], total["bs"], total["experiment"]) == ("randread", 4096, "exp")
    assert len(totals) == 5  # randread, randwrite, seqread, randrw read + write


# --- plain json ---------------------------------------------------------------------------


def test_plain_json_uses_fio_printed_percentiles():
    doc = document("standalone-group.json")
    rows = rows_from_document(doc, host="n", base={})
    entries = {entry["jobname"]: entry for entry in doc["jobs"]}
    for row in rows:
        assert (row["lat_basis"], row["pct_source"]) == ("clat", "tool")
        assert row["hist_ns"] is None and row["hist_count"] is None
        assert row_percentiles(row) == printed_percentiles(entries[row["job"]][row["op"]])


def test_printed_percentiles_are_never_combined_across_hosts():
    output = text("standalone-group.json")
    rows = parse_outputs([("a", output), ("b", output)], base={})
    totals = [row for row in rows if row["host"] == ALL_HOSTS]
    assert len(totals) == 5
    for total in totals:
        assert row_percentiles(total) == [None] * len(PERCENTILES)
        assert total["pct_source"] is None and total["hist_ns"] is None
        assert total["lat_mean_ns"] is not None


def test_single_row_aggregate_keeps_its_printed_percentiles():
    rows = parse_outputs([("a", text("standalone-group.json"))], base={})
    per_host = by_key(row for row in rows if row["host"] == "a")
    for total in (row for row in rows if row["host"] == ALL_HOSTS):
        row = per_host[("a", total["job"], total["op"])]
        assert row_percentiles(total) == row_percentiles(row)
        assert total["pct_source"] == "tool"


# --- client/server -------------------------------------------------------------------------


def test_client_server_rows_per_named_host():
    doc = document("client-server.jsonplus.json")
    rows = by_key(rows_from_document(doc, host=None, base={}, client_names=CLIENT_NAMES))
    assert sorted(rows) == [
        ("hostA", "randrw-70-30-4k", "read"),
        ("hostA", "randrw-70-30-4k", "write"),
        ("hostB", "randrw-70-30-4k", "read"),
        ("hostB", "randrw-70-30-4k", "write"),
    ]
    server_b = doc["client_stats"][1]
    assert server_b["port"] == 8766
    assert rows[("hostB", "randrw-70-30-4k", "read")]["bytes"] == server_b["read"]["io_bytes"]


def test_client_hosts_without_names_are_address_and_port():
    rows = rows_from_document(document("client-server.jsonplus.json"), host=None, base={})
    assert {row["host"] for row in rows} == {"127.0.0.1:8765", "127.0.0.1:8766"}


def test_client_name_by_hostname_only():
    doc = document("client-server.jobfile-only-after-last-client.jsonplus.json")
    rows = rows_from_document(doc, host=None, base={}, client_names={"127.0.0.1": "box"})
    assert {(row["host"], row["job"]) for row in rows} == {("box", "randrw-70-30-4k")}


def test_all_rows_match_fio_all_clients():
    output = text("client-server.jsonplus.json")
    all_clients = json.loads(output)["client_stats"][-1]
    assert all_clients["jobname"] == "All clients"
    rows = parse_outputs([(None, output)], base=BASE, client_names=CLIENT_NAMES)
    totals = [row for row in rows if row["host"] == ALL_HOSTS]
    assert [(row["job"], row["op"]) for row in totals] == [
        ("randrw-70-30-4k", "read"),
        ("randrw-70-30-4k", "write"),
    ]
    for total in totals:
        fio = all_clients[total["op"]]
        assert total["bytes"] == fio["io_bytes"]
        assert total["ios"] == fio["total_ios"]
        assert total["iops"] == pytest.approx(fio["iops"], rel=1e-9)
        # fio's All clients bw_bytes is total bytes / runtime, each host's rounded on its own
        assert abs(total["bw_bytes_s"] - fio["bw_bytes"]) <= 2
        # fio pools unrounded per-client stats; ours start from the 6-decimal printed ones
        assert total["lat_mean_ns"] == pytest.approx(fio["lat_ns"]["mean"], rel=1e-9)
        assert total["lat_stdev_ns"] == pytest.approx(fio["lat_ns"]["stddev"], rel=1e-9)
        assert (total["lat_min_ns"], total["lat_max_ns"]) == (
            fio["lat_ns"]["min"],
            fio["lat_ns"]["max"],
        )
        assert (total["lat_basis"], total["pct_source"]) == ("clat", "histogram")
        assert sum(total["hist_count"]) == fio["clat_ns"]["N"]
        assert row_percentiles(total) == histogram.percentiles(
            total["hist_ns"], total["hist_count"], PERCENTILES
        )


def test_client_server_nogroup_labels_clones_per_host_and_sums_every_job():
    output = text("client-server-nogroup.jsonplus.json")
    doc = json.loads(output)
    assert len(doc["client_stats"]) == 9
    rows = parse_outputs([(None, output)], base={}, client_names=CLIENT_NAMES)
    per_host = [row for row in rows if row["host"] != ALL_HOSTS]
    assert len(per_host) == 8
    assert {(row["host"], row["job"]) for row in per_host} == {
        (host, f"{job}[{k}]")
        for host in ("hostA", "hostB")
        for job in ("randread-4k", "randwrite-4k")
        for k in (0, 1)
    }
    totals = by_key(row for row in rows if row["host"] == ALL_HOSTS)
    assert sorted(totals) == [
        (ALL_HOSTS, "randread-4k", "read"),
        (ALL_HOSTS, "randwrite-4k", "write"),
    ]
    all_clients = doc["client_stats"][-1]  # sums every job of every group
    for (_, _, op), total in totals.items():
        assert total["bytes"] == all_clients[op]["io_bytes"]
        assert total["ios"] == all_clients[op]["total_ios"]
        assert sum(total["hist_count"]) == all_clients[op]["clat_ns"]["N"]


# --- no I/O, failed I/O --------------------------------------------------------------------


def test_create_only_yields_no_rows():
    assert parse_outputs([("n", text("create-only.jsonplus.json"))], base=BASE) == []


def test_failed_job_counts_an_error_and_has_no_latency():
    rows = parse_outputs([("n", text("fail-einval-direct-io.stdout.txt"))], base={})
    assert [(row["host"], row["op"], row["ios"], row["errors"]) for row in rows] == [
        ("n", "write", 1, 1),
        (ALL_HOSTS, "write", 1, 1),
    ]
    for row in rows:
        assert row["lat_mean_ns"] is None and row["p99_ns"] is None


def test_total_err_wins_over_error_flag():
    doc = document("standalone-group.jsonplus.json")
    doc["jobs"][0]["total_err"] = 5
    assert rows_from_document(doc, host="n", base={})[0]["errors"] == 5


# --- aggregate_hosts on synthetic rows ------------------------------------------------------


def synthetic_row(host: str, samples: list[int], **columns) -> dict:
    return {
        "host": host,
        "job": "j",
        "op": "read",
        "ios": len(samples),
        "lat_mean_ns": statistics.fmean(samples),
        "lat_stdev_ns": statistics.stdev(samples),
        "lat_min_ns": float(min(samples)),
        "lat_max_ns": float(max(samples)),
        **columns,
    }


def test_pooled_mean_and_stdev_equal_those_of_all_samples():
    first, second = [100, 120, 180, 90], [400, 410, 390, 500, 450, 470]
    (total,) = aggregate_hosts([synthetic_row("a", first), synthetic_row("b", second)])
    assert total["lat_mean_ns"] == pytest.approx(statistics.fmean(first + second), rel=1e-12)
    assert total["lat_stdev_ns"] == pytest.approx(statistics.stdev(first + second), rel=1e-12)
    assert (total["lat_min_ns"], total["lat_max_ns"]) == (90.0, 500.0)


def test_differing_provenance_is_joined_and_differing_parameters_dropped():
    rows = [
        synthetic_row("a", [1, 2], command="fio a", raw_path="a.json", rw="read", iteration=1),
        synthetic_row("b", [3, 4], command="fio b", raw_path="b.json", rw="randread", iteration=1),
    ]
    (total,) = aggregate_hosts(rows)
    assert (total["command"], total["raw_path"]) == ("fio a; fio b", "a.json; b.json")
    assert (total["rw"], total["iteration"]) == (None, 1)


def test_existing_all_rows_are_not_aggregated_again():
    rows = [synthetic_row("a", [1, 2]), synthetic_row(ALL_HOSTS, [1, 2])]
    (total,) = aggregate_hosts(rows)
    assert total["ios"] == 2


# --- schema ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "standalone-group.jsonplus.json",
        "standalone-nogroup.jsonplus.json",
        "standalone-group.json",
        "standalone-group.normal+jsonplus.txt",
        "client-server.jsonplus.json",
        "client-server-nogroup.jsonplus.json",
        "client-server.jobfile-only-after-last-client.jsonplus.json",
        "status-interval.json.txt",
        "create-only.jsonplus.json",
        "fail-einval-direct-io.stdout.txt",
        "logs/logs.jsonplus.json",
    ],
)
def test_rows_fit_the_result_schema(name):
    host = None if name.startswith("client-server") else "node1"
    rows = parse_outputs([(host, text(name))], base=BASE, client_names=CLIENT_NAMES)
    table = results.table_from_rows(rows)
    assert table.num_rows == len(rows)
    for row in rows:
        assert all(
            value is None or not isinstance(value, float) or math.isfinite(value)
            for value in row.values()
        )


# --- CPU (schema v6) -----------------------------------------------------------------------


def test_cpu_of_one_job_is_fios_usr_plus_sys_and_the_all_row_sums_the_jobs():
    rows = by_key(parse_outputs([("node1", text("standalone-nogroup.jsonplus.json"))], base=BASE))
    # standalone-nogroup.jsonplus.json, job randread-4k (the first of its two clones):
    #   "usr_cpu" : 3.240000,  "sys_cpu" : 25.320000   (lines 577-578)
    first = rows[("node1", "randread-4k[0]", "read")]
    assert first["cpu_pct"] == 3.24 + 25.32
    assert first["cpu_sys_pct"] == 25.32
    assert first["cpu_basis"] == "process"
    # the second clone: "usr_cpu" : 3.300000, "sys_cpu" : 25.180000   (lines 1205-1206)
    second = rows[("node1", "randread-4k[1]", "read")]
    assert second["cpu_pct"] == 3.30 + 25.18
    # the host's two jobs kept 57 % of one CPU busy: the aggregate sums them
    total = rows[(ALL_HOSTS, "randread-4k", "read")]
    assert total["cpu_pct"] == pytest.approx(3.24 + 25.32 + 3.30 + 25.18)
    assert total["cpu_sys_pct"] == pytest.approx(25.32 + 25.18)
    assert total["cpu_basis"] == "process"
    # a randrw job's CPU is the job's, on its read and its write row alike
    # ("usr_cpu" : 1.740000, "sys_cpu" : 10.860000, lines 4622-4623)
    for op in ("read", "write"):
        assert rows[("node1", "randrw-70-30-4k[0]", op)]["cpu_pct"] == 1.74 + 10.86


def test_cpu_of_a_group_reporting_entry_is_summed_over_its_jobs():
    rows = by_key(parse_outputs([("node1", text("standalone-group.jsonplus.json"))], base=BASE))
    # standalone-group.jsonplus.json (group_reporting, numjobs=2), randread-4k:
    #   "runtime" : 5001 (line 34, read), "job_runtime" : 10000, "usr_cpu" : 2.080000,
    #   "sys_cpu" : 21.380000 (lines 740-742): fio's mean per job over the two jobs' summed
    #   run time; times 10000 / 5001 is the two jobs together, about 2 x 23.46 %
    row = rows[("node1", "randread-4k", "read")]
    assert row["cpu_pct"] == pytest.approx((2.08 + 21.38) * 10000 / 5001)
    assert row["cpu_sys_pct"] == pytest.approx(21.38 * 10000 / 5001)
    assert row["cpu_pct"] == pytest.approx(46.91, abs=0.01)


def test_cpu_of_client_server_hosts_and_their_sum():
    rows = by_key(
        parse_outputs(
            [(None, text("client-server.jsonplus.json"))], base=BASE, client_names=CLIENT_NAMES
        )
    )
    # client-server.jsonplus.json, group_reporting: hostA "job_runtime" : 10000,
    # "usr_cpu" : 3.020000, "sys_cpu" : 11.990000 (lines 906-908), read/write "runtime" : 5001;
    # hostB "usr_cpu" : 2.350000, "sys_cpu" : 12.560000 (lines 1850-1852)
    host_a = (3.02 + 11.99) * 10000 / 5001
    host_b = (2.35 + 12.56) * 10000 / 5001
    for op in ("read", "write"):
        assert rows[("hostA", "randrw-70-30-4k", op)]["cpu_pct"] == pytest.approx(host_a)
        assert rows[("hostB", "randrw-70-30-4k", op)]["cpu_pct"] == pytest.approx(host_b)
        total = rows[(ALL_HOSTS, "randrw-70-30-4k", op)]
        assert total["cpu_pct"] == pytest.approx(host_a + host_b)
        assert total["cpu_sys_pct"] == pytest.approx((11.99 + 12.56) * 10000 / 5001)


def test_cpu_stays_null_without_fios_figures():
    doc = document("standalone-nogroup.jsonplus.json")
    for entry in doc["jobs"]:
        del entry["usr_cpu"]
    rows = rows_from_document(doc, host="node1", base=BASE)
    assert all(row.get("cpu_pct") is None and row.get("cpu_basis") is None for row in rows)
    assert all(row.get("cpu_pct") is None for row in aggregate_hosts(rows))
