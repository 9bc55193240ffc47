"""`storbench import`: outputs made outside storbench, from every tool, into the one schema."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from storbench.cli import main
from tests.paths import FIXTURES

# (tool, fixture paths, expected (run_id, op) pairs among the host='all' rows)
IMPORTS = [
    ("fio", ["fio/standalone-group.jsonplus.json"], {("standalone-group.jsonplus", "read")}),
    ("elbencho", ["elbencho/bigfile-rand4k"], {("bigfile-randread-4k", "read")}),
    ("vdbench", ["vdbench/output-fileloop"], {("rd1_xfersize-4k_rdpct-70", "read")}),
    ("warp", ["warp/analyze-mixed.json"], {("analyze-mixed", "read")}),
    ("gosbench", ["gosbench/run", "gosbench/gosbench-config.yaml"], {("run", "write")}),
    ("iperf3", ["iperf3/client-single-stream.json"], {("client-single-stream", "send")}),
]


@pytest.mark.parametrize(("tool", "paths", "expected"), IMPORTS, ids=[t[0] for t in IMPORTS])
def test_import_writes_rows_in_the_common_schema(tool, paths, expected, tmp_path, capsys):
    output = tmp_path / "imported.parquet"
    code = main(["import", "--tool", tool, "-o", str(output), *[str(FIXTURES / p) for p in paths]])
    assert code == 0, capsys.readouterr().err
    rows = pq.read_table(output).to_pylist()
    assert {row["tool"] for row in rows} == {tool}
    assert {row["experiment"] for row in rows} == {"imported"}
    pairs = {(row["run_id"], row["op"]) for row in rows if row["host"] == "all"}
    assert expected <= pairs
    assert all(row["bw_bytes_s"] is None or row["bw_bytes_s"] >= 0 for row in rows)


@pytest.mark.parametrize("tool", ["elbencho", "vdbench", "warp", "gosbench", "iperf3"])
def test_a_fio_file_is_refused_by_every_other_tool(tool, tmp_path, capsys):
    output = tmp_path / "out.parquet"
    fio_file = FIXTURES / "fio/standalone-group.json"
    assert main(["import", "--tool", tool, "-o", str(output), str(fio_file)]) == 1
    message = capsys.readouterr().err
    assert message.startswith("storbench: error: ") and "standalone-group.json" in message
    assert not output.exists()


def test_fio_refuses_an_iperf3_file_and_unknown_tools(tmp_path, capsys):
    output = tmp_path / "out.parquet"
    iperf = FIXTURES / "iperf3/client-udp.json"
    assert main(["import", "--tool", "fio", "-o", str(output), str(iperf)]) == 1
    assert "client-udp.json: iperf3 output, not fio" in capsys.readouterr().err
    assert main(["import", "--tool", "bonnie", "-o", str(output), str(iperf)]) == 1
    assert "unknown tool 'bonnie'" in capsys.readouterr().err
    assert not output.exists()


def test_a_file_no_tool_recognises_is_refused_with_what_the_tool_reads(tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("fio ran at 3 GB/s\n")
    output = tmp_path / "out.parquet"
    assert main(["import", "--tool", "fio", "-o", str(output), str(notes)]) == 1
    assert capsys.readouterr().err.strip() == (
        f"storbench: error: {notes}: not fio output (recognised by content; fio reads json, json+,"
        " terse (--minimal))"
    )
    assert not output.exists()


def test_a_cut_off_fio_file_is_named_with_what_it_lacks(tmp_path, capsys, monkeypatch):
    """A file named in the current folder: its host is that folder's name."""
    monkeypatch.chdir(tmp_path)
    Path("cut.json").write_bytes((FIXTURES / "fio/standalone-group.json").read_bytes()[:3000])
    output = tmp_path / "out.parquet"
    assert main(["import", "--tool", "fio", "-o", str(output), "cut.json"]) == 1
    assert capsys.readouterr().err.strip() == (
        f"storbench: error: cut.json: not fio JSON output (fio output of host {tmp_path.name}: "
        "no complete fio JSON document (first line: '{'))"
    )
    assert not output.exists()


def test_a_standalone_fio_files_host_is_its_folders_name(tmp_path, capsys, monkeypatch):
    """fio's standalone JSON names no host; a file named from its own folder has one too."""
    host_folder = tmp_path / "client07"
    host_folder.mkdir()
    monkeypatch.chdir(host_folder)
    Path("randread.json").write_bytes((FIXTURES / "fio/standalone-group.json").read_bytes())
    output = tmp_path / "out.parquet"
    assert main(["import", "--tool", "fio", "-o", str(output), "randread.json"]) == 0
    rows = pq.read_table(output).to_pylist()
    assert {row["host"] for row in rows} == {"client07", "all"}
    assert {row["run_id"] for row in rows} == {"randread"}


def test_imported_rows_know_how_many_hosts_their_run_had(tmp_path, capsys):
    """A fio client/server output: hosts_in_run is its number of servers on every row."""
    fixture = FIXTURES / "fio/client-server.jsonplus.json"
    output = tmp_path / "imported.parquet"
    assert main(["import", "--tool", "fio", "-o", str(output), str(fixture)]) == 0
    rows = pq.read_table(output).to_pylist()
    hosts = {row["host"] for row in rows} - {"all"}
    assert len(hosts) > 1 and {row["hosts_in_run"] for row in rows} == {len(hosts)}


def read_rows(tmp_path, capsys, fixture: str) -> list[dict]:
    output = tmp_path / f"{fixture.replace('/', '-')}.parquet"
    assert main(["import", "-o", str(output), str(FIXTURES / fixture)]) == 0, (
        capsys.readouterr().err
    )
    return pq.read_table(output).to_pylist()


def test_fio_keeps_both_means_its_error_code_and_its_own_all_clients(tmp_path, capsys):
    import json

    # standalone-group.json: percentiles of clat only; the means keep their own names
    rows = read_rows(tmp_path, capsys, "fio/standalone-group.json")
    job = json.loads((FIXTURES / "fio/standalone-group.json").read_text())["jobs"][0]
    (read,) = [r for r in rows if r["host"] != "all" and r["job"] == job["jobname"]]
    assert read["lat_basis"] == "clat"
    assert read["lat_mean_ns"] == job["read"]["lat_ns"]["mean"] == 210957.733827
    assert read["clat_mean_ns"] == job["read"]["clat_ns"]["mean"] == 202338.107613
    # a job that failed with EINVAL keeps fio's errno
    failed = read_rows(tmp_path, capsys, "fio/fail-einval-direct-io.stdout.txt")
    assert {r["error_code"] for r in failed} == {22} and {r["errors"] for r in failed} == {1}
    # client/server: 'all' is storbench's sum; fio's 'All clients' is kept beside it
    served = read_rows(tmp_path, capsys, "fio/client-server.jsonplus.json")
    (total,) = [r for r in served if r["host"] == "all" and r["op"] == "read"]
    assert total["bw_bytes_s"] == 64241922 + 64160838
    assert total["tool_bw_bytes_s"] == 128402761  # fio's own, 1 B/s over the sum here
    hosts = [r for r in served if r["host"] != "all"]
    assert all(r["tool_bw_bytes_s"] is None for r in hosts)
