"""`storbench import`: outputs made outside storbench, from every tool, into the one schema."""

from __future__ import annotations

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


def test_imported_rows_know_how_many_hosts_their_run_had(tmp_path, capsys):
    """A fio client/server output: hosts_in_run is its number of servers on every row."""
    fixture = FIXTURES / "fio/client-server.jsonplus.json"
    output = tmp_path / "imported.parquet"
    assert main(["import", "--tool", "fio", "-o", str(output), str(fixture)]) == 0
    rows = pq.read_table(output).to_pylist()
    hosts = {row["host"] for row in rows} - {"all"}
    assert len(hosts) > 1 and {row["hosts_in_run"] for row in rows} == {len(hosts)}
