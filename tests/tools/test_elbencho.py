"""elbencho adapter against real elbencho 3.1-10 output (see tests/fixtures/elbencho/README.md).

Expected numbers are copied from the fixtures' own result files; each assertion names the line.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from storbench.core import results
from storbench.core.schema_names import ALL_HOSTS
from storbench.run.render import RenderError, render_job
from storbench.tools import get_tool
from storbench.tools.base import ToolOutputError
from storbench.tools.elbencho import config_file_options
from storbench.tools.elbencho_results import (
    MIB,
    human_latency_us,
    read_csv,
    read_folder,
    read_json,
    read_live_csv,
    read_text,
    version_from_text,
)
from tests.manifests import as_manifest
from tests.paths import FIXTURES as SHARED_FIXTURES

FIXTURES = SHARED_FIXTURES / "elbencho"
ADAPTER = get_tool("elbencho")
BASE = {
    "experiment": "elb",
    "run_id": "r1",
    "iteration": 1,
    "attempt": 1,
    "tool": "elbencho",
    "params_json": "{}",
    "job_file_sha256": "ab" * 32,
    "command": "sh -c ... elbencho -c job.elbencho",
    "raw_path": "raw/a1",
    "start_time": "2026-11-21T06:02:55Z",
    "end_time": "2026-11-21T06:03:00Z",
    "not_a_column": "dropped",
}
IMPORT_BASE = {"experiment": "imported", "iteration": 1, "attempt": 1, "tool": "elbencho"}
COMPLETE_FOLDERS = [
    "dirmode",
    "dirmode-separate-runs",
    "bigfile-rand4k",
    "service-2hosts",
    "service-2hosts-bigfile-rand4k",
    "nonexistent-path-created-as-file",
]


def manifest(folder: str, hosts=("node1",), params=None, **extra) -> dict:
    return {
        "run_id": "r1",
        "params": params or {},
        "hosts": [
            {"name": name, "output": folder, "tool_version": " * Version: 3.1-10", **extra}
            for name in hosts
        ],
    }


def parse(folder: str, **kwargs) -> list[dict]:
    return ADAPTER.parse(as_manifest(manifest(folder, **kwargs)), FIXTURES, BASE)


def row(rows: list[dict], host: str, op: str, job: str | None = None) -> dict:
    found = [r for r in rows if r["host"] == host and r["op"] == op and job in (None, r["job"])]
    assert len(found) == 1, [(r["host"], r["job"], r["op"]) for r in rows]
    return found[0]


# --- the three result files agree ------------------------------------------------------------


@pytest.mark.parametrize("folder", COMPLETE_FOLDERS)
def test_json_csv_and_text_agree_for_every_phase(folder):
    path = FIXTURES / folder
    phases = zip(
        read_json(path / "results.json"),
        read_csv(path / "results.csv"),
        read_text(path / "results.txt"),
        strict=True,
    )
    for from_json, from_csv, from_text in phases:
        assert from_json.name == from_csv.name == from_text.name
        assert from_json.label == from_csv.label == from_text.label
        assert from_json.start == from_csv.start  # ms precision in both
        assert from_json.version == from_csv.version == "3.1-10"
        j, c, t = from_json.main, from_csv.main, from_text.main
        assert j.elapsed_ms == c.elapsed_ms == t.elapsed_ms
        assert j.iops == c.iops == t.iops
        assert j.entries == c.entries == t.entries
        assert j.entries_per_s == c.entries_per_s == t.entries_per_s
        if j.bytes is not None:  # the CSV and text have whole MiB, the JSON bytes
            assert c.bytes == t.bytes == j.bytes // MIB * MIB
            assert c.bytes_per_s == t.bytes_per_s == j.bytes_per_s // MIB * MIB
        for kind in ("io", "entry"):
            exact = getattr(j, f"{kind}_latency_us")
            if exact is None:
                continue
            assert getattr(c, f"{kind}_latency_us") == exact
            printed = getattr(t, f"{kind}_latency_us")  # 3 significant digits
            assert printed == pytest.approx(exact, rel=0.006)


def test_human_latency_units():
    # results.txt formats: 'min=54us', 'max=7.88ms', 'avg=753ms', '1.01s' style
    assert human_latency_us("54us") == 54
    assert human_latency_us("7.88ms") == 7880
    assert human_latency_us("753ms") == 753000
    assert human_latency_us("1.01s") == 1010000


# --- dirmode: one invocation, all phases -----------------------------------------------------


def test_dirmode_rows_per_phase_from_results_files():
    rows = parse("dirmode", params={"rw": "read", "numjobs": 2, "runtime": "30s"})
    assert [(r["host"], r["op"]) for r in rows] == [
        (host, op)
        for host in ("node1", ALL_HOSTS)
        for op in ("mkdir", "write", "read", "delete", "rmdir")
    ]
    write = row(rows, "node1", "write")
    # results.txt WRITE: Elapsed 28ms, IOPS 1116, Throughput MiB/s 1116, Total MiB 32
    # results.json WRITE last_done: bytes 33554432, bytes/s 1170244899
    assert write["duration_s"] == 0.028
    assert write["iops"] == 1116
    assert write["bytes"] == 33554432 and write["ios"] == 32  # 8 files x 4 MiB in 1 MiB blocks
    assert write["bw_bytes_s"] == 1170244899
    assert int(write["bw_bytes_s"] // MIB) == 1116
    # results.csv WRITE: IO lat us min 654, avg 1299, max 11910 (text: avg=1.30ms)
    assert (write["lat_min_ns"], write["lat_mean_ns"], write["lat_max_ns"]) == (
        654000,
        1299000,
        11910000,
    )
    # results.txt: IO lat % us : [ 1%<=724 50%<=861 75%<=1024 99%<=13777 ]
    assert (write["p50_ns"], write["p90_ns"], write["p99_ns"]) == (861000, None, 13777000)
    assert (write["pct_source"], write["lat_basis"]) == ("tool", "lat")
    assert write["job"] == "dirmode-2t"  # elbencho's --label
    assert (write["bs"], write["size"], write["numjobs"], write["iodepth"]) == (
        1048576,
        4194304,
        2,
        1,
    )
    assert (write["rw"], write["runtime_s"], write["errors"]) == ("read", 30.0, 0)
    assert write["tool_version"] == "3.1-10"
    assert write["experiment"] == "elb" and "not_a_column" not in write

    mkdirs = row(rows, "node1", "mkdir")
    # MKDIRS: Dirs/s 1291, Dirs total 2, Dirs latency [ min=29us avg=32us max=35us ],
    # Dirs lat % us : [ 1%<=32 50%<=32 75%<=38 99%<=38 ]
    assert (mkdirs["ios"], mkdirs["iops"], mkdirs["bytes"]) == (2, 1291, None)
    assert mkdirs["lat_mean_ns"] == 32000 and mkdirs["lat_max_ns"] == 35000
    assert (mkdirs["p50_ns"], mkdirs["p99_ns"]) == (32000, 38000)
    delete = row(rows, "node1", "delete")  # RMFILES: Files/s 3189, Files total 8, avg=216us
    assert (delete["ios"], delete["iops"], delete["lat_mean_ns"]) == (8, 3189, 216000)
    rmdir = row(rows, "node1", "rmdir")  # RMDIRS: Dirs/s 1121, Dirs total 2, avg=432us
    assert (rmdir["ios"], rmdir["iops"], rmdir["lat_mean_ns"]) == (2, 1121, 432000)


def test_single_host_all_rows_equal_the_host_rows():
    rows = parse("dirmode")
    for op in ("mkdir", "write", "read", "delete", "rmdir"):
        host, total = row(rows, "node1", op), row(rows, ALL_HOSTS, op)
        for column in ("bytes", "ios", "iops", "bw_bytes_s", "lat_mean_ns", "p50_ns", "p99_ns"):
            assert total[column] == host[column]


def test_rows_fit_the_result_schema():
    for folder in COMPLETE_FOLDERS:
        table = results.table_from_rows(parse(folder))
        assert table.num_rows > 0


def test_two_standalone_hosts_are_summed():
    """Two hosts with their own result folder (here the same fixture twice)."""
    man = {
        "run_id": "r1",
        "params": {},
        "hosts": [
            {"name": "node1", "output": "dirmode"},
            {"name": "node2", "output": "dirmode-separate-runs"},
        ],
    }
    rows = ADAPTER.parse(as_manifest(man), FIXTURES, BASE)
    node1 = row(rows, "node1", "write")
    node2 = row(rows, "node2", "write")
    total = row(rows, ALL_HOSTS, "write", job="dirmode-2t")
    assert node2["job"] == "write-run"  # jobs are elbencho's labels, so they stay apart
    assert total["bytes"] == node1["bytes"]
    assert row(rows, ALL_HOSTS, "write", job="write-run")["bytes"] == 134217728


# --- bigfile-rand4k: histogram ---------------------------------------------------------------


def test_random_read_percentiles_from_the_histogram_match_elbencho():
    rows = parse("bigfile-rand4k")
    read = row(rows, "node1", "read")
    # results.txt READ: Elapsed 3.845s, IOPS 34080, Total MiB 512,
    # IO latency [ min=54us avg=233us max=7.88ms ] (JSON: max_us 7883)
    assert read["job"] == "bigfile-randread-4k"
    assert (read["rw"], read["bs"], read["iodepth"]) == ("randread", 4096, 4)
    assert (read["duration_s"], read["iops"], read["bytes"]) == (3.845, 34080, 536870912)
    assert read["bw_bytes_s"] == 139592746  # results.json bytes/s
    assert (read["lat_min_ns"], read["lat_mean_ns"], read["lat_max_ns"]) == (54e3, 233e3, 7883e3)
    # IO lat hist: [ 64: 8, 76: 11, ..., 8192: 8 ] -> upper bounds in ns, every I/O counted
    assert read["hist_ns"][:3] == [64000, 76000, 91000] and read["hist_ns"][-1] == 8192000
    assert sum(read["hist_count"]) == read["ios"] == 536870912 // 4096
    # IO lat % us : [ 1%<=128 50%<=256 75%<=304 99%<=609 ]: the same rule gives the same values
    assert (read["p50_ns"], read["p99_ns"]) == (256000, 609000)
    assert read["p90_ns"] == 304000 and read["pct_source"] == "histogram"


def test_write_without_lat_takes_the_latency_from_the_csv():
    rows = parse("bigfile-rand4k")
    write = row(rows, "node1", "write")
    # no --lat: results.json and results.txt have no latency; results.csv always has it:
    # IO lat us [min|avg|max] = 1074,1523,3181
    assert (write["lat_min_ns"], write["lat_mean_ns"], write["lat_max_ns"]) == (
        1074000,
        1523000,
        3181000,
    )
    assert write["p50_ns"] is None and write["pct_source"] is None
    # Elapsed 196ms, IOPS 1301, bytes 268435456, bytes/s 1364451958
    assert (write["duration_s"], write["iops"], write["bytes"]) == (0.196, 1301, 268435456)
    assert write["rw"] == "write" and write["job"] == "bigfile-prepare-seqwrite"


# --- appended invocations --------------------------------------------------------------------


def test_separate_runs_appended_to_one_folder_keep_their_labels():
    rows = parse("dirmode-separate-runs")
    jobs = [(r["job"], r["op"]) for r in rows if r["host"] == "node1"]
    assert jobs == [
        ("write-run", "mkdir"),
        ("write-run", "write"),
        ("read-run", "read"),
        ("cleanup-run", "delete"),
        ("cleanup-run", "rmdir"),
    ]
    read = row(rows, "node1", "read")
    # read-run READ: Elapsed 1.037s, IOPS 123, Total MiB 128, IO lat avg 2052us (CSV),
    # IO lat % us : [ 1%<=1218 50%<=2048 75%<=2896 99%<=4096 ]
    assert (read["duration_s"], read["iops"], read["bytes"]) == (1.037, 123, 134217728)
    assert read["lat_mean_ns"] == 2052000
    assert (read["p50_ns"], read["p99_ns"]) == (2048000, 4096000)
    assert read["command"] == BASE["command"]  # a storbench run keeps its own command


# --- service mode ----------------------------------------------------------------------------


def test_service_mode_gives_elbencho_totals_as_the_all_rows():
    rows = parse("service-2hosts", hosts=("nodeA", "nodeB"))
    assert {r["host"] for r in rows} == {ALL_HOSTS}
    assert [r["op"] for r in rows] == ["mkdir", "write", "read", "delete", "rmdir"]
    write = row(rows, ALL_HOSTS, "write")
    # results.txt WRITE: Elapsed 3.013s, IOPS 84, Total MiB 256, Files total 16,
    # IO latency [ min=938us avg=2.36ms max=6.61ms ] (CSV 938,2356,6612),
    # IO lat % us : [ 1%<=1218 50%<=2435 75%<=2896 99%<=5793 ]
    assert (write["duration_s"], write["iops"], write["bytes"]) == (3.013, 84, 268435456)
    assert write["bw_bytes_s"] == 89090939  # results.json bytes/s
    assert (write["lat_min_ns"], write["lat_mean_ns"]) == (938000, 2356000)
    assert (write["p50_ns"], write["p99_ns"]) == (2435000, 5793000)
    assert write["numjobs"] == 2  # threads per service
    mkdirs = row(rows, ALL_HOSTS, "mkdir")  # Dirs total 4 (2 per service), Dirs/s 4825
    assert (mkdirs["ios"], mkdirs["iops"]) == (4, 4825)


def test_service_mode_random_read_totals():
    rows = parse("service-2hosts-bigfile-rand4k", hosts=("nodeA", "nodeB"))
    (read,) = rows
    # READ: Elapsed 3.190s, IOPS 41087, Total MiB 512, IO latency avg=387us,
    # IO lat % us : [ 1%<=181 50%<=362 75%<=512 99%<=1218 ]; results.json bytes/s 168293554
    assert (read["host"], read["rw"], read["bs"]) == (ALL_HOSTS, "randread", 4096)
    assert (read["duration_s"], read["iops"], read["bytes"]) == (3.19, 41087, 536870912)
    assert read["bw_bytes_s"] == 168293554 and read["lat_mean_ns"] == 387000
    assert (read["p50_ns"], read["p99_ns"], read["pct_source"]) == (362000, 1218000, "tool")


def test_controller_entry_in_the_manifest_is_read_once():
    man = {"run_id": "r1", "params": {}, "hosts": [], "controller": {"output": "service-2hosts"}}
    rows = ADAPTER.parse(as_manifest(man), FIXTURES, BASE)
    assert len(rows) == 5 and {r["host"] for r in rows} == {ALL_HOSTS}


# --- failures and edge cases -----------------------------------------------------------------


def test_unreachable_service_wrote_no_result_file():
    with pytest.raises(ToolOutputError, match="no elbencho result file"):
        parse("fail-service-unreachable")


def test_header_only_files_mean_no_completed_phase():
    # fail-write-without-mkdirs: results.csv has only the header, results.txt only the table head
    with pytest.raises(ToolOutputError, match="results.csv: no completed phase"):
        parse("fail-write-without-mkdirs")
    with pytest.raises(ToolOutputError, match="results.txt: no completed phase"):
        read_text(FIXTURES / "fail-write-without-mkdirs/results.txt")


def test_missing_path_created_as_a_file_is_a_valid_write():
    (write, total) = parse("nonexistent-path-created-as-file")
    # WRITE: Elapsed 1ms, IOPS 953, Total MiB 1; CSV: path type file, IO lat us 673,673,673
    assert (write["op"], write["bytes"], write["iops"], write["ios"]) == ("write", 1048576, 953, 1)
    assert write["lat_mean_ns"] == 673000 and write["job"] == "r1"  # no --label: the run id
    assert total["host"] == ALL_HOSTS and total["bytes"] == write["bytes"]


def test_missing_result_folder_is_named():
    with pytest.raises(ToolOutputError, match="no-such-folder: elbencho result folder is missing"):
        parse("no-such-folder")


def test_files_of_different_runs_in_one_folder_are_rejected(tmp_path):
    shutil.copy(FIXTURES / "dirmode/results.json", tmp_path / "results.json")
    shutil.copy(FIXTURES / "bigfile-rand4k/results.csv", tmp_path / "results.csv")
    with pytest.raises(ToolOutputError, match="results.csv: lists phases"):
        read_folder(tmp_path)


def test_truncated_files_are_rejected(tmp_path):
    json_text = (FIXTURES / "dirmode/results.json").read_text()
    (tmp_path / "results.json").write_text(json_text[: json_text.index("\n") + 200])
    with pytest.raises(ToolOutputError, match=r"results.json:2: .*truncated"):
        read_json(tmp_path / "results.json")
    csv_text = (FIXTURES / "dirmode/results.csv").read_text()
    (tmp_path / "results.csv").write_text(csv_text[: csv_text.index("MKDIRS") + 10])
    with pytest.raises(ToolOutputError, match=r"results.csv:2: .*truncated"):
        read_csv(tmp_path / "results.csv")
    text = (FIXTURES / "dirmode/results.txt").read_text()
    (tmp_path / "results.txt").write_text(text[: text.index("IOPS")])
    with pytest.raises(ToolOutputError, match="phase WRITE has no closing '---'"):
        read_text(tmp_path / "results.txt")


def test_service_console_output_is_readable_as_text():
    # service-port1611.console.txt: both distributed runs as this service saw them
    phases = read_text(FIXTURES / "service-2hosts/service-port1611.console.txt")
    assert [(p.name, p.label) for p in phases][-2:] == [
        ("RMDIRS", "svc-2hosts"),
        ("READ", "svc-2hosts-randread-4k"),
    ]
    assert phases[-1].main.iops == 20543  # READ IOPS 20526 20543


def test_version_from_version_output():
    assert version_from_text((FIXTURES / "elbencho-version.txt").read_text()) == "3.1-10"
    assert version_from_text(None) is None


# --- time series (live.csv) ------------------------------------------------------------------


def test_live_csv_rows_of_a_single_host():
    rows = ADAPTER.parse_timeseries(as_manifest(manifest("bigfile-rand4k")), FIXTURES, BASE)
    # live.csv: 7 READ 'Total' rows at 500..3500 ms
    assert [r["t_s"] for r in rows] == [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5]
    assert {(r["host"], r["op"], r["job"]) for r in rows} == {
        ("node1", "read", "bigfile-randread-4k")
    }
    first, second = rows[:2]
    # 500 ms: DoneBytes 71872512, MiB/s 137, IOPS 35094, Lat IO us 226
    assert (first["bytes"], first["interval_s"]) == (71872512, 0.5)
    assert (first["bw_bytes_s"], first["iops"], first["lat_mean_ns"]) == (137 * MIB, 35094, 226e3)
    assert second["bytes"] == 149303296 - 71872512
    assert first["timestamp"] == "2026-11-21T06:03:00.204+00:00"
    assert first["source"].endswith("bigfile-rand4k/live.csv")
    assert results.table_from_rows(rows, results.TIMESERIES_SCHEMA).num_rows == 7


def test_live_csv_with_only_a_header_has_no_rows():
    # dirmode finished each phase in less than --liveint: header line only
    assert read_live_csv(FIXTURES / "dirmode/live.csv") == []
    assert ADAPTER.parse_timeseries(as_manifest(manifest("dirmode")), FIXTURES, BASE) == []


def test_live_csv_skips_thread_rows_and_splits_phases():
    rows = ADAPTER.parse_timeseries(as_manifest(manifest("dirmode-separate-runs")), FIXTURES, BASE)
    # 6 WRITE and 2 READ 'Total' rows; the Rank 0/1 rows are threads, not hosts
    assert [(r["job"], r["op"], r["t_s"]) for r in rows] == [
        *[("write-run", "write", t / 2) for t in range(1, 7)],
        ("read-run", "read", 0.5),
        ("read-run", "read", 1.0),
    ]
    # WRITE DoneBytes 41943040, 41943040, 83886080, 83886080, 125829120, 125829120
    assert [r["bytes"] for r in rows[:6]] == [41943040, 0] * 3
    assert rows[1]["lat_mean_ns"] is None  # Lat IO us 0: nothing completed in that interval


def test_live_csv_of_service_mode_gives_all_and_host_rows():
    man = manifest("service-2hosts-bigfile-rand4k", hosts=("nodeA",), endpoint="127.0.0.1:1611")
    man["hosts"].append(
        {"name": "nodeB", "output": "service-2hosts-bigfile-rand4k", "endpoint": "127.0.0.1:1612"}
    )
    rows = ADAPTER.parse_timeseries(as_manifest(man), FIXTURES, BASE)
    assert len(rows) == 18  # 6 time points x (Total + 2 services)
    by_time: dict = {}
    for r in rows:
        by_time.setdefault(r["t_s"], {})[r["host"]] = r
    assert set(by_time[0.5]) == {ALL_HOSTS, "nodeA", "nodeB"}
    for hosts in by_time.values():  # the services' bytes add up to the Total row's
        assert hosts["nodeA"]["bytes"] + hosts["nodeB"]["bytes"] == hosts[ALL_HOSTS]["bytes"]
    # 500 ms: 127.0.0.1:1611 DoneBytes 45469696; Total MiB/s 173, IOPS 44304
    assert by_time[0.5]["nodeA"]["bytes"] == 45469696
    assert by_time[0.5]["nodeA"]["bw_bytes_s"] == 45469696 / 0.5
    assert (by_time[0.5][ALL_HOSTS]["bw_bytes_s"], by_time[0.5][ALL_HOSTS]["iops"]) == (
        173 * MIB,
        44304,
    )


def test_live_csv_services_without_endpoints_keep_elbencho_names():
    rows = ADAPTER.parse_timeseries(
        as_manifest(manifest("service-2hosts", hosts=("a", "b"))), FIXTURES, BASE
    )
    assert {r["host"] for r in rows} == {ALL_HOSTS, "127.0.0.1:1611", "127.0.0.1:1612"}
    assert len(rows) == 24  # 8 time points (6 WRITE, 2 READ) x 3


def test_a_runs_phases_follow_each_other_in_time():
    """Each phase's RuntimeMS starts at 0 again: the read phase's rows were at 0.5 and 1.0 s,
    on the write phase's, and a time-series figure summed the two into one interval."""
    rows = ADAPTER.parse_timeseries(
        as_manifest(manifest("service-2hosts", hosts=("a", "b"))), FIXTURES, BASE
    )
    totals = [(r["op"], r["t_s"]) for r in rows if r["host"] == ALL_HOSTS]
    # live.csv: WRITE 500..3000 ms, its first row 06:03:06.167 (so begun at 05.667); READ's
    # first row 500 ms at 06:03:09.211 (begun at 08.711): 3.044 s after the write phase began
    assert totals == [
        *[("write", t / 2) for t in range(1, 7)],
        ("read", 3.544),
        ("read", 4.044),
    ]
    assert [r["interval_s"] for r in rows if r["host"] == ALL_HOSTS][-2:] == [0.5, 0.5]


def test_results_csv_is_not_a_live_csv():
    with pytest.raises(ToolOutputError, match="not an elbencho live CSV"):
        read_live_csv(FIXTURES / "dirmode/results.csv")


# --- import ----------------------------------------------------------------------------------


def test_import_folder_takes_run_ids_from_labels():
    rows = ADAPTER.import_outputs([FIXTURES / "dirmode-separate-runs"], IMPORT_BASE)
    assert sorted({r["run_id"] for r in rows}) == ["cleanup-run", "read-run", "write-run"]
    read = row([r for r in rows if r["run_id"] == "read-run"], "localhost", "read")
    assert read["raw_path"] == str(FIXTURES / "dirmode-separate-runs")
    assert read["command"].startswith('"/srv/bench/bin/elbencho" "-r" "--limitread" "40m"')
    assert read["start_time"] == "2026-11-21T06:02:58.411+00:00"  # ISO date 06:02:58.411+0000
    assert read["experiment"] == "imported" and read["iops"] == 123
    assert row([r for r in rows if r["run_id"] == "read-run"], ALL_HOSTS, "read")["iops"] == 123


def test_import_without_label_uses_the_folder_name():
    rows = ADAPTER.import_outputs([FIXTURES / "nonexistent-path-created-as-file"], IMPORT_BASE)
    assert {r["run_id"] for r in rows} == {"nonexistent-path-created-as-file"}


@pytest.mark.parametrize("name", ["results.json", "results.csv", "results.txt"])
def test_import_single_files(name):
    rows = ADAPTER.import_outputs([FIXTURES / "dirmode" / name], IMPORT_BASE)
    write = row(rows, "localhost", "write")
    assert write["run_id"] == "dirmode-2t"
    assert write["iops"] == 1116 and write["bytes"] == 33554432  # Total MiB 32
    assert write["raw_path"].endswith(f"dirmode/{name}")
    # the text carries no block size; its COMMAND LINE ("-b" "1m") does
    assert write["bs"] == 1048576 and write["ios"] == 32


def test_import_of_service_mode_text_gives_all_rows_only():
    rows = ADAPTER.import_outputs([FIXTURES / "service-2hosts/results.txt"], IMPORT_BASE)
    # COMMAND LINE: "--hosts" "127.0.0.1:1611,127.0.0.1:1612"
    assert {r["host"] for r in rows} == {ALL_HOSTS}
    assert row(rows, ALL_HOSTS, "read")["iops"] == 225  # READ IOPS 226 225


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (FIXTURES.parent / "fio" / "standalone-group.json", "not elbencho's one object per line"),
        (FIXTURES / "dirmode/console.stderr.txt", "file is empty"),
        (FIXTURES / "fail-write-without-mkdirs/results.csv", "no completed phase"),
        (FIXTURES / "fail-write-without-mkdirs/console.stderr.txt", "not an elbencho result"),
        (FIXTURES / "dirmode/live.csv", "live CSV"),
        (FIXTURES / "fail-service-unreachable", "no elbencho result file"),
        (FIXTURES / "no-such-file.csv", "no such file or folder"),
    ],
    ids=["fio-json", "empty", "header-only", "error-text", "live-csv", "no-results", "missing"],
)
def test_import_rejects_what_is_not_an_elbencho_result(path, message):
    with pytest.raises(ToolOutputError, match=message):
        ADAPTER.import_outputs([path], IMPORT_BASE)


def test_import_rejects_a_json_document_without_phase(tmp_path):
    (tmp_path / "results.json").write_text('{"jobs": []}\n')
    with pytest.raises(ToolOutputError, match="no 'phase_type'"):
        ADAPTER.import_outputs([tmp_path / "results.json"], IMPORT_BASE)


# --- render and commands ---------------------------------------------------------------------

DIRECTORY_SPEC = {
    "experiment": "elb",
    "run_id": "randread_bs4k_qd4_nj2",
    "tool": "elbencho",
    "target": {"name": "elbencho_scratch", "type": "directory", "path": "/mnt/nfs/storbench"},
    "params": {
        "size": "64MiB",
        "rw": "randread",
        "bs": "4k",
        "iodepth": 4,
        "numjobs": 2,
        "files": 4,
        "dirs": 1,
        "runtime": "30s",
        "direct": 1,
        "blockvarpct": 0,
    },
    "point": {"rw": "randread", "bs": "4k"},
    "hosts": ["node1"],
    "template": None,
    "job_file": None,
}
S3_SPEC = {
    **DIRECTORY_SPEC,
    "run_id": "read_bs1m_nj8",
    "target": {
        "name": "minio",
        "type": "s3",
        "endpoint": "http://127.0.0.1:9000",
        "region": "us-east-1",
        "bucket_prefix": "storbench",
        "bucket": "storbench-elb",
        "credentials": {"access_key_env": "S3_ACCESS_KEY", "secret_key_env": "S3_SECRET_KEY"},
    },
    "params": {"rw": "read", "bs": "1m", "numjobs": 8, "files": 16},
}


def test_directory_job_file_golden():
    assert render_job(DIRECTORY_SPEC) == (
        "# storbench experiment elb, run randread_bs4k_qd4_nj2: elbencho -c <this file> <path>\n"
        "# elbencho reads no path from a config file; storbench's command passes this one\n"
        "# ({host}: the host's name; in service mode elbencho separates the hosts itself).\n"
        "#storbench-path=/mnt/nfs/storbench/{host}\n"
        "label=randread_bs4k_qd4_nj2\n"
        "mkdirs=1\n"
        "write=1\n"
        "read=1\n"
        "delfiles=1\n"
        "deldirs=1\n"
        "threads=2\n"
        "dirs=1\n"
        "files=4\n"
        "size=64m\n"
        "block=4k\n"
        "iodepth=4\n"
        "rand=1\n"
        "timelimit=30\n"
        "direct=1\n"
        "blockvarpct=0\n"
        "lat=1\n"
        "latpercent=1\n"
        "lathisto=1\n"
        "cpu=1\n"
        "liveint=1000\n"
    )


def test_s3_job_file_golden_has_no_secret(monkeypatch):
    monkeypatch.setenv("S3_ACCESS_KEY", "AKIA-FAKE-ACCESS")
    monkeypatch.setenv("S3_SECRET_KEY", "fake/secret+key")
    text = render_job(S3_SPEC)
    assert text == (
        "# storbench experiment elb, run read_bs1m_nj8: elbencho -c <this file> <path>\n"
        "# elbencho reads no path from a config file; storbench's command passes this one\n"
        "# ({host}: the host's name; in service mode elbencho separates the hosts itself).\n"
        "#storbench-path=storbench-elb\n"
        "label=read_bs1m_nj8\n"
        "write=1\n"
        "read=1\n"
        "delfiles=1\n"
        "threads=8\n"
        "files=16\n"
        "block=1m\n"
        "size=1m\n"
        "s3endpoints=http://127.0.0.1:9000\n"
        "s3region=us-east-1\n"
        "lat=1\n"
        "latpercent=1\n"
        "lathisto=1\n"
        "cpu=1\n"
        "liveint=1000\n"
    )
    argv = [
        *ADAPTER.command("/w/job.elbencho", "/w/out", "node1"),
        *ADAPTER.controller_command("/w/job.elbencho", "/w/out", ["node1:1611"]),
        *ADAPTER.service_start_command("node1", 1611),
    ]
    for secret in ("AKIA-FAKE-ACCESS", "fake/secret+key"):
        assert secret not in text and all(secret not in arg for arg in argv)
    assert not any(arg.startswith(("--s3key", "--s3secret")) for arg in argv)
    # elbencho reads these (ProgArgs.cpp: S3_ENV_ACCESS_KEY / S3_ENV_SECRET_KEY)
    assert ADAPTER.secret_env == {
        "AWS_ACCESS_KEY_ID": "access_key",
        "AWS_SECRET_ACCESS_KEY": "secret_key",
    }


OUTPUTS = [
    "--resfile",
    "/w/out/results.txt",
    "--csvfile",
    "/w/out/results.csv",
    "--jsonfile",
    "/w/out/results.json",
    "--livecsv",
    "/w/out/live.csv",
    "--livecsvex",
]


def test_command_lines_golden():
    script = ADAPTER.command("/w/job.elbencho", "/w/out", "node1")[2]
    assert ADAPTER.command("/w/job.elbencho", "/w/out", "node1") == [
        "sh", "-c", script, "elbencho-job", "/w/job.elbencho", "node1",
        "elbencho", "-c", "/w/job.elbencho", *OUTPUTS,
    ]  # fmt: skip
    assert ADAPTER.controller_command(["/w/job.elbencho"] * 2, "/w/out", ["a:1611", "b:1611"]) == [
        "sh", "-c", script, "elbencho-job", "/w/job.elbencho", "",
        "elbencho", "--hosts", "a:1611,b:1611", "-c", "/w/job.elbencho", *OUTPUTS,
    ]  # fmt: skip
    assert ADAPTER.service_start_command("a", 1611) == [
        "elbencho", "--service", "--foreground", "--port", "1611",
    ]  # fmt: skip
    assert ADAPTER.service_stop_command(["a:1611", "b:1612"]) == [
        "elbencho", "--hosts", "a:1611,b:1612", "--quit",
    ]  # fmt: skip
    assert ADAPTER.version_command() == ["elbencho", "--version"]
    assert ADAPTER.output_name("node1") == "node1-elbencho"


@pytest.fixture
def fake_elbencho(tmp_path, monkeypatch):
    """An 'elbencho' on PATH that prints its arguments, one per line."""
    program = tmp_path / "bin" / "elbencho"
    program.parent.mkdir()
    program.write_text('#!/bin/sh\nfor arg in "$@"; do echo "$arg"; done\n')
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{program.parent}{os.pathsep}{os.environ['PATH']}")
    return tmp_path


def test_command_passes_the_path_from_the_job_file(fake_elbencho):
    job = fake_elbencho / "job.elbencho"
    job.write_text(render_job(DIRECTORY_SPEC))
    out = fake_elbencho / "out"
    standalone = subprocess.run(
        ADAPTER.command(str(job), str(out), "node1"), capture_output=True, text=True, check=True
    )
    assert standalone.stdout.splitlines() == [
        "-c", str(job), *[arg.replace("/w/out", str(out)) for arg in OUTPUTS],
        "/mnt/nfs/storbench/node1",
    ]  # fmt: skip
    controller = subprocess.run(
        ADAPTER.controller_command([str(job)], str(out), ["a:1611"]),
        capture_output=True,
        text=True,
        check=True,
    )
    assert controller.stdout.splitlines()[-1] == "/mnt/nfs/storbench/"


def test_command_fails_clearly_without_a_path_line(fake_elbencho):
    job = fake_elbencho / "own.elbencho"
    job.write_text("threads=1\n")
    done = subprocess.run(ADAPTER.command(str(job), "/o", "n"), capture_output=True, text=True)
    assert done.returncode == 2 and "no #storbench-path= line" in done.stderr


def test_path_with_spaces_stays_one_argument(fake_elbencho):
    target = {"name": "t", "type": "directory", "path": "/mnt/my data", "per_host_subdir": False}
    job = fake_elbencho / "job.elbencho"
    job.write_text(render_job({**DIRECTORY_SPEC, "target": target}))
    done = subprocess.run(
        ADAPTER.command(str(job), "/o", "n"), capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines()[-1] == "/mnt/my data"


def option_lines(text: str) -> dict:
    return dict(line.split("=", 1) for line in text.splitlines() if not line.startswith("#"))


@pytest.mark.parametrize(
    ("target", "params", "phases"),
    [
        ("directory", {"rw": "write"}, ["mkdirs", "write", "delfiles", "deldirs"]),
        ("directory", {"rw": "read", "phases": "write, stat"}, ["write", "stat"]),
        ("block", {"rw": "randread"}, ["read"]),
        ("block", {"rw": "randrw", "rwmixread": 70}, ["write"]),
        ("s3", {"rw": "write"}, ["write", "delfiles"]),
    ],
)
def test_phases_from_rw_and_target(target, params, phases):
    targets = {
        "directory": DIRECTORY_SPEC["target"],
        "block": {"name": "nvme", "type": "block", "path": "/dev/nvme0n1"},
        "s3": S3_SPEC["target"],
    }
    options = option_lines(
        render_job({**DIRECTORY_SPEC, "target": targets[target], "params": params})
    )
    flags = ["mkdirs", "write", "stat", "read", "delfiles", "deldirs"]
    assert [flag for flag in flags if options.get(flag) == "1"] == phases


def test_mixed_workload_on_a_block_device():
    spec = {
        **DIRECTORY_SPEC,
        "target": {"name": "nvme", "type": "block", "path": "/dev/nvme0n1"},
        "params": {"rw": "randrw", "rwmixread": 70, "bs": "4k"},
    }
    text = render_job(spec)
    assert "#storbench-path=/dev/nvme0n1\n" in text
    assert option_lines(text)["rwmixpct"] == "70" and option_lines(text)["rand"] == "1"
    assert ADAPTER.target_directory(spec["target"], "node1") is None


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"rw": "read", "ramp_time": "5s"}, "ramp_time: elbencho has no ramp time"),
        ({"rw": "read", "s3secret": "x"}, "s3secret: keys come from the target"),
        ({"rw": "read", "threads": 4}, "threads: use storbench's option 'numjobs'"),
        ({"rw": "read", "label": "x"}, "label: set by storbench"),
        ({"rw": "randrw"}, "no default phases"),
        ({"rw": "trim"}, "rw 'trim'"),
        ({"phases": "write,dropcache"}, "phases 'write,dropcache': known are"),
        ({"phases": "mkdir,write"}, r"phases 'mkdir,write' \('mkdir': did you mean 'mkdirs'\?\)"),
        ({"bs": "4k"}, "set rw"),
        ({"rw": "read", "runtime": "1500ms"}, "whole s"),
        ({"rw": "read", "opslog": "/tmp/a#b"}, "opslog: elbencho.s config file parser cuts"),
    ],
)
def test_job_option_errors(params, message):
    with pytest.raises(RenderError, match=message):
        render_job({**DIRECTORY_SPEC, "params": params})


def test_mixed_workload_on_s3_is_rejected():
    with pytest.raises(RenderError, match="cannot mix reads and writes on S3"):
        render_job({**S3_SPEC, "params": {"rw": "randrw"}})


def test_target_directories():
    target = DIRECTORY_SPEC["target"]
    assert ADAPTER.target_directory(target, "node1") == "/mnt/nfs/storbench/node1"
    shared = {**target, "per_host_subdir": False}
    assert ADAPTER.target_directory(shared, "node1") == "/mnt/nfs/storbench"
    assert ADAPTER.target_directory(S3_SPEC["target"], "node1") is None


def test_adapter_declares_its_capabilities():
    assert ADAPTER.target_types == ("directory", "block", "s3")
    assert (ADAPTER.has_services, ADAPTER.default_port) == (True, 1611)
    assert ADAPTER.output_is_folder and ADAPTER.job_suffix == ".elbencho"
    assert "https://github.com/breuner/elbencho" in ADAPTER.install_hint


def test_a_target_set_gives_elbencho_every_path_in_one_run(fake_elbencho):
    """elbencho takes several benchmark paths; a target set's members are each one of them."""
    members = [
        {"name": "lun1", "type": "block", "path": "/dev/mapper/lun1"},
        {"name": "lun2", "type": "block", "path": "/dev/mapper/lun 2"},
    ]
    target = {"name": "luns", "type": "block", "path": "/dev/mapper/lun1", "members": members}
    spec = {**DIRECTORY_SPEC, "target": target, "params": {"rw": "randread", "bs": "4k"}}
    job = fake_elbencho / "job.elbencho"
    job.write_text(render_job(spec))
    done = subprocess.run(
        ADAPTER.command(str(job), "/o", "n"), capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines()[-2:] == ["/dev/mapper/lun1", "/dev/mapper/lun 2"]
    assert ADAPTER.capabilities.target_sets


def test_an_option_elbenchos_config_file_does_not_take_is_refused_at_check():
    """elbencho 3.1-10's options (tools/data, from its source): 'file: 256' failed the run."""
    sections = [
        {"file": 256, "files": 3, "bs": "4k", "rw": "read", "direct": 1, "blocksize": "1m"},
        {"numjobs": 2, "s3objprefix": "x", "iodepth": 4, "lat": 1},
    ]
    assert ADAPTER.option_problems(sections) == {
        "file": "elbencho has no option 'file' (did you mean 'files'?)",
        "blocksize": "elbencho has no option 'blocksize' (did you mean 'bs'?)",
    }
    assert {"block", "threads", "timelimit", "s3endpoints"} <= config_file_options()


def test_dirs_and_files_elbencho_would_not_read_as_a_count_are_refused_at_check():
    """Whole numbers, with elbencho's unit letter if any (ProgArgs' numDirsOrigStr)."""
    sections = [{"dirs": "abc", "files": 16}, {"dirs": 4, "files": -1}, {"files": "4k"}]
    assert ADAPTER.option_problems(sections) == {
        "dirs": "elbencho's dirs is a whole number of directories per thread (a unit letter"
        " allowed, as 4k), not 'abc'",
        "files": "elbencho's files is a whole number of files per directory (a unit letter"
        " allowed, as 4k), not -1",
    }
    assert ADAPTER.option_problems([{"dirs": 0, "files": "2K"}, {"dirs": 2.5}]) == {
        "dirs": "elbencho's dirs is a whole number of directories per thread (a unit letter"
        " allowed, as 4k), not 2.5",
    }


# --- CPU (schema v6) -----------------------------------------------------------------------


def test_cpu_is_elbenchos_last_done_host_cpu():
    rows = parse("bigfile-rand4k")
    # results.txt line 23 (READ, --cpu): "CPU util %       :          26          26";
    # results.json last_done "cpu%":"26"
    read = row(rows, "node1", "read")
    assert (read["cpu_pct"], read["cpu_sys_pct"], read["cpu_basis"]) == (26, None, "host")
    # the write phase ran without --cpu: results.txt prints no CPU line, results.json
    # last_done "cpu%":"39" and results.csv "CPU% [last]" 39 have it all the same
    assert row(rows, "node1", "write")["cpu_pct"] == 39
    # one host: the 'all' row is that host's
    assert row(rows, ALL_HOSTS, "read", job="bigfile-randread-4k")["cpu_pct"] == 26


def test_cpu_of_the_three_result_files_agree():
    path = FIXTURES / "bigfile-rand4k"
    read_phases = [
        phases[1]
        for phases in (
            read_json(path / "results.json"),
            read_csv(path / "results.csv"),
            read_text(path / "results.txt"),
        )
    ]
    assert [phase.cpu_pct for phase in read_phases] == [26, 26, 26]


def test_a_zero_cpu_of_a_phase_shorter_than_a_tick_is_no_measurement():
    rows = parse("dirmode")
    # results.txt: WRITE "Elapsed time : 15ms 28ms", "CPU util % : 75 85";
    # READ "Elapsed time : 1ms 7ms", "CPU util % : 0 0": under one /proc/stat tick (10 ms)
    assert row(rows, "node1", "write")["cpu_pct"] == 85
    assert row(rows, "node1", "read").get("cpu_pct") is None
    assert row(rows, "node1", "read").get("cpu_basis") is None


def test_service_mode_cpu_is_elbenchos_mean_over_its_services():
    (read,) = parse("service-2hosts-bigfile-rand4k", hosts=("nodeA", "nodeB"))
    # results.json last_done "cpu%":"31": elbencho's master averages its services' CPU
    assert (read["host"], read["cpu_pct"], read["cpu_basis"]) == (ALL_HOSTS, 31, "host")
