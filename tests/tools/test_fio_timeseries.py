"""fio time series against real fio 3.33 output (see tests/fixtures/fio/README.md, c).

Expected numbers are fio's own: the cumulative counters of the status-interval documents,
the final document's totals, the log lines, and logs.jsonplus.json's bw/iops sample stats.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from storbench.core import results
from storbench.tools.base import ToolOutputError
from storbench.tools.fio_json import load_documents
from storbench.tools.fio_timeseries import rows_from_logs, rows_from_status_interval
from tests.paths import FIXTURES as SHARED_FIXTURES

FIXTURES = SHARED_FIXTURES / "fio"
LOGS = FIXTURES / "logs"
BASE = {
    "experiment": "exp",
    "run_id": "randread_bs4k",
    "iteration": 2,
    "attempt": 1,
    "tool": "fio",
    "params_json": '{"bs": "4k"}',  # not a time-series column: dropped
    "raw_path": "raw/a1",
}


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def status_rows() -> list[dict]:
    return rows_from_status_interval(
        text("status-interval.json.txt"), host="node1", base=BASE, source="si.json"
    )


def log_lines(path: Path) -> list[list[str]]:
    return [line.split(", ") for line in path.read_text().splitlines()]


# --- --status-interval JSON --------------------------------------------------------------


def test_status_interval_rows_are_deltas_at_each_runtime():
    rows = status_rows()
    # read.runtime of the 6 documents: 893, 1893, 2893, 3893, 4893, final 5001 ms
    assert [row["t_s"] for row in rows] == [0.893, 1.893, 2.893, 3.893, 4.893, 5.001]
    assert [row["interval_s"] for row in rows] == [0.893, 1.0, 1.0, 1.0, 1.0, 0.108]
    # read.io_bytes 120913920 (1st document) and 235585536 (2nd)
    assert rows[0]["bytes"] == 120913920
    assert rows[1]["bytes"] == 235585536 - 120913920
    assert rows[1]["bw_bytes_s"] == 114671616.0  # over exactly 1.000 s
    # read.total_ios 29540 then 57520
    assert (rows[0]["ios"], rows[1]["ios"]) == (29540, 57520 - 29540)
    assert rows[1]["iops"] == 27980.0
    assert {(r["host"], r["job"], r["op"]) for r in rows} == {("node1", "randread-4k", "read")}


def test_status_intervals_add_up_to_the_final_document():
    rows = status_rows()
    final = load_documents(text("status-interval.json.txt"))[-1]["jobs"][0]["read"]
    assert sum(row["bytes"] for row in rows) == final["io_bytes"] == 644415488
    assert sum(row["ios"] for row in rows) == final["total_ios"] == 157328
    assert sum(row["interval_s"] for row in rows) == pytest.approx(5.001)
    # the interval latency means, weighted by their counts, give fio's overall lat mean
    documents = load_documents(text("status-interval.json.txt"))
    counts = [doc["jobs"][0]["read"]["lat_ns"]["N"] for doc in documents]
    weights = [now - before for now, before in zip(counts, [0, *counts], strict=False)]
    pooled = sum(w * row["lat_mean_ns"] for w, row in zip(weights, rows, strict=True))
    assert pooled / counts[-1] == pytest.approx(126452.092603, rel=1e-9)


def test_first_interval_latency_is_the_first_documents_mean():
    # lat_ns.mean of the first document (N 29536): 120232.337182 ns
    assert status_rows()[0]["lat_mean_ns"] == pytest.approx(120232.337182, rel=1e-12)


def test_status_interval_timestamps_and_base_columns():
    rows = status_rows()
    # timestamp_ms 1795240894067 (first) and 1795240898219 (final)
    assert rows[0]["timestamp"] == "2026-11-21T06:01:34.067+00:00"
    assert rows[-1]["timestamp"] == "2026-11-21T06:01:38.219+00:00"
    assert rows[0]["experiment"] == "exp"
    assert (rows[0]["iteration"], rows[0]["attempt"]) == (2, 1)
    assert "params_json" not in rows[0] and "raw_path" not in rows[0]
    assert rows[0]["source"] == "si.json"
    assert results.table_from_rows(rows, results.TIMESERIES_SCHEMA).num_rows == 6


def test_single_final_document_gives_one_interval_per_job_and_direction():
    rows = rows_from_status_interval(text("standalone-group.json"), host="n", base={})
    by_key = {(row["job"], row["op"]): row for row in rows}
    assert sorted(by_key) == [
        ("randread-4k", "read"),
        ("randrw-70-30-4k", "read"),
        ("randrw-70-30-4k", "write"),
        ("randwrite-4k", "write"),
        ("seqread-1m", "read"),
    ]
    # standalone-group.json: seqread-1m read 4442816512 bytes, 4237 ios in 5010 ms
    seqread = by_key[("seqread-1m", "read")]
    assert (seqread["bytes"], seqread["ios"], seqread["t_s"]) == (4442816512, 4237, 5.01)
    assert by_key[("randrw-70-30-4k", "write")]["bytes"] == 195682304
    assert rows[0]["source"] == "fio output"  # neither source nor raw_path given


def test_client_server_output_gives_rows_per_server():
    rows = rows_from_status_interval(text("client-server.jsonplus.json"), host=None, base={})
    hosts = {(row["host"], row["op"]): row["bytes"] for row in rows}
    # client_stats: read 321273856 / 320868352, write 137945088 / 137789440; All clients skipped
    assert hosts == {
        ("127.0.0.1:8765", "read"): 321273856,
        ("127.0.0.1:8765", "write"): 137945088,
        ("127.0.0.1:8766", "read"): 320868352,
        ("127.0.0.1:8766", "write"): 137789440,
    }
    assert {row["timestamp"] for row in rows} == {None}  # client/server output has none


def test_counters_reset_after_ramp_time_start_a_new_baseline():
    documents = load_documents(text("status-interval.json.txt"))[:3]
    ramp_end = json.loads(json.dumps(documents[0]))  # as if fio reset the stats after ramp
    output = "\n".join(json.dumps(doc) for doc in [documents[1], ramp_end, documents[2]])
    rows = rows_from_status_interval(output, host="n", base={})
    assert [row["t_s"] for row in rows] == [1.893, 0.893, 2.893]
    assert [row["bytes"] for row in rows] == [235585536, 120913920, 362045440 - 120913920]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("fail-missing-dir.stdout.txt", "no complete fio JSON document"),
        ("status-interval.terse.txt", "no complete fio JSON document"),
        ("../iperf3/client-single-stream.json", "neither 'jobs' nor 'client_stats'"),
    ],
)
def test_not_fio_json_is_rejected_naming_the_source(name, message):
    with pytest.raises(ToolOutputError, match=message) as caught:
        rows_from_status_interval(text(name), host="n", base={}, source=name)
    assert name in str(caught.value)


# --- write_*_log files -------------------------------------------------------------------


def test_one_row_per_log_line_with_kib_converted_to_bytes():
    path = LOGS / "logs_bw.1.log"
    rows = rows_from_logs([path], host="node1", base=BASE)
    lines = log_lines(path)
    assert len(rows) == len(lines) == 18
    # first lines: "500, 55192, 0, 0, 0" and "500, 23920, 1, 0, 0"
    assert (rows[0]["t_s"], rows[0]["op"], rows[0]["bw_bytes_s"]) == (0.5, "read", 55192 * 1024)
    assert (rows[1]["t_s"], rows[1]["op"], rows[1]["bw_bytes_s"]) == (0.5, "write", 23920 * 1024)
    assert [row["bw_bytes_s"] for row in rows] == [int(line[1]) * 1024.0 for line in lines]
    assert {(row["host"], row["job"]) for row in rows} == {("node1", "logs.1")}
    assert rows[0]["source"] == str(path)
    assert rows[0]["experiment"] == "exp" and "params_json" not in rows[0]


def test_bw_and_iops_logs_match_the_sample_stats_of_the_json_summary():
    summary = json.loads((LOGS / "logs.jsonplus.json").read_text())["jobs"]
    for number, job in enumerate(summary, start=1):
        bw = rows_from_logs([LOGS / f"logs_bw.{number}.log"], host="n", base={})
        iops = rows_from_logs([LOGS / f"logs_iops.{number}.log"], host="n", base={})
        for op in ("read", "write"):
            stats = job[op]
            bw_kib = [row["bw_bytes_s"] / 1024 for row in bw if row["op"] == op]
            assert len(bw_kib) == stats["bw_samples"] == 9
            assert statistics.mean(bw_kib) == pytest.approx(stats["bw_mean"], abs=1e-6)
            assert (min(bw_kib), max(bw_kib)) == (stats["bw_min"], stats["bw_max"])
            values = [row["iops"] for row in iops if row["op"] == op]
            assert statistics.mean(values) == pytest.approx(stats["iops_mean"], abs=1e-6)


def test_latency_log_rows_are_ns_with_intervals_between_samples():
    path = LOGS / "logs_lat.2.log"
    rows = rows_from_logs([path], host="n", base={})
    assert len(rows) == len(log_lines(path)) == 21
    # first line "500, 195995, 0, 0, 0": total latency in ns
    assert (rows[0]["t_s"], rows[0]["op"], rows[0]["lat_mean_ns"]) == (0.5, "read", 195995.0)
    assert [row["lat_mean_ns"] for row in rows] == [float(line[1]) for line in log_lines(path)]
    writes = [row for row in rows if row["op"] == "write"]
    # write samples at 500, 1000, ..., 5000, then a second one stamped 5000
    assert [row["interval_s"] for row in writes[:2]] == [0.5, 0.5]
    assert writes[-1]["t_s"] == 5.0 and writes[-1]["interval_s"] is None


def test_all_logs_of_the_run_clat_slat_and_histograms_skipped():
    paths = sorted(LOGS.glob("*.log"))
    rows = rows_from_logs(paths, host="n", base=BASE)
    kept = [p for p in paths if p.name.split("_")[1].split(".")[0] in ("bw", "iops", "lat")]
    assert len(kept) == 6
    assert len(rows) == sum(len(log_lines(p)) for p in kept) == 115
    assert {row["source"] for row in rows} == {str(p) for p in kept}
    assert results.table_from_rows(rows, results.TIMESERIES_SCHEMA).num_rows == 115


def test_log_without_job_number_uses_the_prefix(tmp_path):
    log = tmp_path / "run7_iops.log"  # per_job_logs=0
    log.write_text("1000, 250, 1, 4096, 0\n")
    (row,) = rows_from_logs([log], host="n", base={})
    assert (row["job"], row["op"], row["iops"], row["t_s"]) == ("run7", "write", 250.0, 1.0)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("x_bw.1.log", "", "empty fio log"),
        ("x_bw.1.log", "500, 10, 0, 0, 0\n1000, ten, 0, 0, 0\n", r"x_bw.1.log:2: not a fio log"),
        ("x_bw.1.log", "500, 10\n", "fewer than 4 fields"),
        ("x_iops.1.log", "500, 10, 7, 0, 0\n", "data direction 7"),
        ("x_lat.1.log", "1795240894067, 10, 0, 0, 0\n", "log_unix_epoch"),
        ("results.csv", "500, 10, 0, 0, 0\n", "not a fio log file name"),
    ],
)
def test_bad_log_files_are_rejected_naming_the_file(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ToolOutputError, match=message) as caught:
        rows_from_logs([path], host="n", base={})
    assert str(path) in str(caught.value)


def test_fixture_files_that_are_not_logs_are_rejected():
    for path in (FIXTURES / "status-interval.terse.txt", LOGS / "logs.jsonplus.json"):
        with pytest.raises(ToolOutputError, match="not a fio log file name"):
            rows_from_logs([path], host="n", base={})
