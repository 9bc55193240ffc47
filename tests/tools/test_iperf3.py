"""iperf3 adapter against real iperf 3.12 output (see tests/fixtures/iperf3/README.md).

Expected numbers are iperf3's own summary figures: ``end.sum_received`` / ``end.sum_sent``
and ``intervals[].sum`` of the fixture JSON files.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import jinja2
import pytest

from storbench.core import results
from storbench.core.schema_names import ALL_HOSTS
from storbench.tools import get_tool
from storbench.tools.base import ToolOutputError
from storbench.tools.iperf3 import (
    ADAPTER,
    check_document,
    client_arguments,
    command_for,
    interval_rows,
    job_text,
    load_result,
    transport_counters,
)
from tests.manifests import as_manifest
from tests.paths import FIXTURES as SHARED_FIXTURES

FIXTURES = SHARED_FIXTURES / "iperf3"
FIO_FIXTURES = FIXTURES.parent / "fio"
BASE = {
    "experiment": "net",
    "run_id": "streams-4",
    "iteration": 1,
    "attempt": 1,
    "tool": "iperf3",
    "params_json": '{"server": "10.0.0.9", "streams": 4}',
    "job_file_sha256": "cd" * 32,
    "command": "sh -c ... job.iperf3 hostA.json",
    "raw_path": "raw/a1",
    "start_time": "2026-11-21T06:02:05.000+00:00",
    "end_time": "2026-11-21T06:02:09.000+00:00",
    "not_a_column": "dropped",
}
SPEC = {
    "experiment": "net",
    "run_id": "streams-4",
    "tool": "iperf3",
    "target": {"name": "scratch", "type": "directory", "path": "/tmp"},
    "params": {"server": "10.0.0.9", "streams": 4, "runtime": "30s", "bs": "128k"},
    "point": {"streams": 4},
    "template": None,
    "job_file": None,
}


def manifest(**outputs: str) -> dict:
    return {"hosts": [{"name": name, "output": output} for name, output in outputs.items()]}


def parsed(**outputs: str) -> dict:
    rows = ADAPTER.parse(as_manifest(manifest(**outputs)), FIXTURES, BASE)
    return {(row["host"], row["op"]): row for row in rows}


def document(name: str) -> dict:
    return load_result(FIXTURES / name)


# --- registry and command line -----------------------------------------------------------


def test_registered_under_its_name():
    assert get_tool("iperf3") is ADAPTER
    assert ADAPTER.version_command() == ["iperf3", "--version"]
    assert ADAPTER.install_hint == "apt-get install iperf3"
    assert ADAPTER.default_template == "iperf3/job.iperf3.j2"
    assert ADAPTER.output_name("hostA") == "hostA.json"


def test_job_file_is_one_argument_per_line():
    assert job_text(SPEC) == (
        "# storbench experiment net, run streams-4\n"
        "--client\n10.0.0.9\n--port\n5201\n--parallel\n4\n--time\n30\n--length\n131072\n"
    )


def test_the_shipped_template_gives_the_same_lines():
    shipped = Path(__file__).resolve().parents[2] / "templates" / "iperf3" / "job.iperf3.j2"
    template = jinja2.Template(
        shipped.read_text(), undefined=jinja2.StrictUndefined, keep_trailing_newline=True
    )
    assert template.render(**ADAPTER.template_context(SPEC)) == job_text(SPEC)


def test_every_option_maps_to_its_iperf3_flag():
    options = {
        "streams": 8,
        "duration": 10,
        "omit": "2s",
        "reverse": True,
        "udp": "true",
        "bitrate": "200M",
        "window": "4M",
        "congestion": "bbr",
        "zerocopy": False,
        "no_delay": 1,
    }
    assert command_for("srv", 5300, options) == [
        "iperf3", "--json", "--client", "srv", "--port", "5300",
        "--parallel", "8", "--time", "10", "--omit", "2", "--reverse", "--udp", "--no-delay",
        "--bitrate", "200M", "--window", "4M", "--congestion", "bbr",
    ]  # fmt: skip


def test_generic_names_map_when_iperf3_names_are_absent():
    options = {"numjobs": 2, "runtime": "1m", "ramp_time": 3, "rw": "read", "bs": "64k"}
    assert client_arguments("srv", 5201, options) == [
        "--client", "srv", "--port", "5201", "--parallel", "2", "--time", "60",
        "--omit", "3", "--length", "65536", "--reverse",
    ]  # fmt: skip
    assert "--reverse" not in client_arguments("srv", 5201, {"rw": "write"})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"iodepth": 4}, "does not know option"),
        ({"runtime": "1500ms"}, "whole seconds"),
        ({"rw": "randrw"}, "read .reverse. or write"),
        ({"streams": 0}, "positive whole number"),
        ({"udp": "maybe"}, "true or false"),
    ],
)
def test_options_iperf3_cannot_honour_are_rejected(options, message):
    with pytest.raises(ValueError, match=message):
        client_arguments("srv", 5201, options)


def test_server_is_required():
    spec = {**SPEC, "params": {"streams": 2}}
    with pytest.raises(ValueError, match="needs option 'server'"):
        job_text(spec)


def test_command_reads_the_args_file_on_the_host():
    argv = ADAPTER.command("/w/a1/job.iperf3", "/w/a1/hostA.json", "hostA")
    assert argv[:2] == ["sh", "-c"]
    assert argv[3:] == ["storbench-iperf3", "/w/a1/job.iperf3", "/w/a1/hostA.json"]
    assert "exec iperf3 --json --logfile" in argv[2]


def test_command_passes_each_line_verbatim_to_iperf3(tmp_path):
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    fake = fake_bin / "iperf3"  # prints its arguments, one per line
    fake.write_text('#!/bin/sh\nfor a in "$@"; do printf "<%s>\\n" "$a"; done\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    job = tmp_path / "job.iperf3"
    job.write_text(job_text(SPEC) + '\n# note\n--title\nit\'s a "b c" $HOME\n--udp')
    done = subprocess.run(
        ADAPTER.command(str(job), str(tmp_path / "out.json"), "hostA"),
        env={**os.environ, "PATH": f"{fake_bin}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        check=True,
    )
    expected = [
        "--json", "--logfile", str(tmp_path / "out.json"),
        *command_for("10.0.0.9", 5201, {"streams": 4, "runtime": "30s", "bs": "128k"})[2:],
        "--title", 'it\'s a "b c" $HOME', "--udp",
    ]  # fmt: skip
    assert done.stdout.splitlines() == [f"<{argument}>" for argument in expected]


# --- parse: TCP --------------------------------------------------------------------------


def test_single_stream_row_is_the_receiver_figure():
    rows = parsed(hostA="client-single-stream.json")
    row = rows[("hostA", "send")]
    # end.sum_received: 6987186176 bytes in 3.003543 s at 18610517448.226978 bits/s
    assert row["bytes"] == 6987186176
    assert row["duration_s"] == 3.003543
    assert row["bw_bytes_s"] == 18610517448.226978 / 8
    # test_start: 1 stream, blksize 131072, duration 3
    assert (row["job"], row["numjobs"], row["bs"], row["runtime_s"]) == ("iperf3", 1, 131072, 3.0)
    assert (row["tool_version"], row["errors"]) == ("iperf 3.12", 0)
    for column in BASE.keys() - {"not_a_column"}:
        assert row[column] == BASE[column]
    assert "not_a_column" not in row
    assert rows[(ALL_HOSTS, "send")]["bw_bytes_s"] == row["bw_bytes_s"]
    assert rows[(ALL_HOSTS, "send")]["bytes"] == row["bytes"]


def test_receiver_bytes_are_what_the_server_received():
    client = parsed(hostA="client-single-stream.json")[("hostA", "send")]
    server = document("server-single-stream.json")["end"]["sum_received"]
    assert client["bytes"] == server["bytes"] == 6987186176
    # the sender counted 6987448320 bytes: 262144 were still buffered when the test stopped
    assert document("client-single-stream.json")["end"]["sum_sent"]["bytes"] == 6987448320


def test_parallel_streams_are_summed_by_iperf3():
    row = parsed(hostA="client-parallel-4.json")[("hostA", "send")]
    # end.sum_received: 6657146880 bytes, 3.001832 s, 17741557502.218647 bits/s
    assert (row["bytes"], row["duration_s"], row["numjobs"]) == (6657146880, 3.001832, 4)
    assert row["bw_bytes_s"] == 17741557502.218647 / 8
    streams = document("client-parallel-4.json")["end"]["streams"]
    assert sum(stream["receiver"]["bytes"] for stream in streams) == row["bytes"]


def test_reverse_run_is_receive_from_client_and_server_files():
    client = parsed(hostA="client-reverse.json")[("hostA", "receive")]
    # client file end.sum_received: 5022679040 bytes, 3.000104 s, 13393346470.655684 bits/s
    assert (client["bytes"], client["duration_s"]) == (5022679040, 3.000104)
    assert client["bw_bytes_s"] == 13393346470.655684 / 8
    # the server of a reverse run only sent: its file has sum_sent alone (3.00149 s)
    server = parsed(hostA="server-reverse.json")[("hostA", "receive")]
    assert (server["bytes"], server["duration_s"]) == (5022679040, 3.00149)
    assert server["bw_bytes_s"] == 13387161816.297905 / 8


def test_two_client_hosts_are_summed_in_the_all_row():
    rows = parsed(hostA="client-single-stream.json", hostB="client-parallel-4.json")
    total = rows[(ALL_HOSTS, "send")]
    assert total["bytes"] == 6987186176 + 6657146880
    assert total["bw_bytes_s"] == (18610517448.226978 + 17741557502.218647) / 8
    assert total["duration_s"] == 3.003543
    assert total["numjobs"] is None  # 1 and 4 streams: no common value
    assert len(rows) == 3


def test_transport_counters_tcp_retransmits():
    # end.sum_sent.retransmits of the client files
    assert transport_counters(document("client-single-stream.json")) == {"retransmits": 12}
    assert transport_counters(document("client-parallel-4.json")) == {"retransmits": 26}
    assert transport_counters(document("client-reverse.json")) == {"retransmits": 54}


# --- parse: UDP --------------------------------------------------------------------------


def test_udp_row_and_loss_counters():
    row = parsed(hostA="client-udp.json")[("hostA", "send")]
    # end.sum_received: 75005952 bytes in 3.000411 s at 199988473.57911965 bits/s (-b 200M)
    assert (row["bytes"], row["duration_s"], row["bs"]) == (75005952, 3.000411, 32768)
    assert row["bw_bytes_s"] == 199988473.57911965 / 8
    assert transport_counters(document("client-udp.json")) == {
        "retransmits": None,
        "lost_packets": 0,
        "packets": 2289,
        "lost_percent": 0,
        "jitter_ms": 0.25616498122666442,
    }
    server = parsed(hostA="server-udp.json")[("hostA", "send")]
    assert server["bw_bytes_s"] == row["bw_bytes_s"]


def test_rows_fit_the_result_schema():
    rows = list(parsed(hostA="client-udp.json", hostB="client-reverse.json").values())
    table = results.table_from_rows(rows)
    assert table.num_rows == 4
    assert set(table.column("op").to_pylist()) == {"send", "receive"}


# --- failures ----------------------------------------------------------------------------


def test_connection_refused_names_file_and_iperf3_message():
    with pytest.raises(ToolOutputError) as caught:
        ADAPTER.parse(
            as_manifest(manifest(hostA="client-error-connection-refused.json")), FIXTURES, BASE
        )
    message = str(caught.value)
    assert "client-error-connection-refused.json" in message
    assert "unable to connect to server: Connection refused" in message


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (FIO_FIXTURES / "standalone-group.json", "no start/intervals/end"),
        (FIXTURES / "client-error-connection-refused.stderr.txt", "empty file"),
        (FIXTURES / "client-parallel-4.text.txt", "not iperf3 JSON"),
        (FIXTURES / "iperf3-version.txt", "not iperf3 JSON"),
        (FIXTURES / "client-error-connection-refused.json", "Connection refused"),
    ],
    ids=["fio-json", "empty", "text-output", "version", "error-json"],
)
def test_import_rejects_what_is_not_a_successful_iperf3_json(path, message):
    with pytest.raises(ToolOutputError, match=message) as caught:
        ADAPTER.import_outputs([path], {"experiment": "imported"})
    assert str(path) in str(caught.value)


def test_truncated_json_is_rejected(tmp_path):
    truncated = tmp_path / "cut.json"
    truncated.write_text((FIXTURES / "client-udp.json").read_text()[:2000])
    with pytest.raises(ToolOutputError, match="cut.json: not iperf3 JSON output"):
        load_result(truncated)


def test_bidirectional_output_is_rejected():
    doc = document("client-single-stream.json")
    doc["end"]["sum_received_bidir_reverse"] = doc["end"]["sum_received"]
    with pytest.raises(ToolOutputError, match="x.json: bidirectional"):
        check_document(doc, "x.json")


# --- import ------------------------------------------------------------------------------


def test_import_one_run_per_file_seen_by_its_own_host():
    paths = [FIXTURES / "client-parallel-4.json", FIXTURES / "server-parallel-4.json"]
    rows = ADAPTER.import_outputs(paths, {"experiment": "imported", "iteration": 1})
    keys = [(row["run_id"], row["host"], row["op"]) for row in rows]
    assert keys == [
        ("client-parallel-4", "127.0.0.1", "send"),
        ("client-parallel-4", ALL_HOSTS, "send"),
        # the server's file alone: the server (its own address) received
        ("server-parallel-4", "127.0.0.1", "receive"),
        ("server-parallel-4", ALL_HOSTS, "receive"),
    ]
    # both sides report the receiver's 6657146880 bytes in 3.001832 s
    assert {row["bytes"] for row in rows} == {6657146880}
    assert {row["duration_s"] for row in rows} == {3.001832}
    assert rows[0]["raw_path"] == str(paths[0])
    assert rows[0]["experiment"] == "imported"


# --- time series -------------------------------------------------------------------------


def test_client_intervals_are_the_senders_and_add_up_to_sum_sent():
    rows = ADAPTER.parse_timeseries(
        as_manifest(manifest(hostA="client-single-stream.json")), FIXTURES, BASE
    )
    # intervals[].sum: end 1.000092 / 2.000164 / 3.001517 s
    assert [row["t_s"] for row in rows] == [1.000092, 2.000164, 3.001517]
    assert rows[0]["interval_s"] == 1.0000920295715332
    assert rows[0]["bytes"] == 2376335360
    assert rows[0]["bw_bytes_s"] == 19008933495.99506 / 8
    assert sum(row["bytes"] for row in rows) == 6987448320  # end.sum_sent.bytes
    assert {(row["host"], row["job"], row["op"]) for row in rows} == {("hostA", "iperf3", "send")}
    assert rows[0]["source"] == str(FIXTURES / "client-single-stream.json")
    assert "params_json" not in rows[0]
    assert results.table_from_rows(rows, results.TIMESERIES_SCHEMA).num_rows == 3


def test_server_intervals_include_the_short_trailing_one():
    doc = document("server-parallel-4.json")
    rows = interval_rows(doc, host="hostA", base={}, source="server-parallel-4.json")
    # 4 intervals on the server, the last 3.000109 -> 3.001832 s
    assert [row["t_s"] for row in rows] == [1.000183, 2.000205, 3.000109, 3.001832]
    assert sum(row["bytes"] for row in rows) == 6657146880  # end.sum_received.bytes


def test_reverse_client_intervals_are_receive_rows():
    doc = document("client-reverse.json")
    rows = interval_rows(doc, host="hostA", base={}, source="client-reverse.json")
    assert [row["op"] for row in rows] == ["receive"] * 3
    assert sum(row["bytes"] for row in rows) == 5022679040  # end.sum_received.bytes


def test_omitted_intervals_are_left_out():
    doc = json.loads((FIXTURES / "client-udp.json").read_text())
    doc["intervals"][0]["sum"]["omitted"] = True
    rows = interval_rows(doc, host="hostA", base={}, source="client-udp.json")
    assert [row["t_s"] for row in rows] == [2.000122, 3.000108]
    assert [row["bytes"] for row in rows] == [25001984, 25001984]


# --- CPU (schema v6) -----------------------------------------------------------------------


def test_cpu_is_the_files_own_iperf3_process_and_the_all_row_sums_the_hosts():
    rows = parsed(hostA="client-parallel-4.json", hostB="client-single-stream.json")
    # client-parallel-4.json, end.cpu_utilization_percent (lines 403-405):
    #   "host_total": 70.12154753508176, "host_user": 0.93335006468977033,
    #   "host_system": 69.1881309000083
    host_a = rows[("hostA", "send")]
    assert host_a["cpu_pct"] == 70.12154753508176
    assert host_a["cpu_sys_pct"] == 69.1881309000083
    assert host_a["cpu_basis"] == "process"
    # client-single-stream.json: "host_total": 98.4950527342255 (its other end's
    # remote_total 44.23 is the server's process, not this host's)
    assert rows[("hostB", "send")]["cpu_pct"] == 98.4950527342255
    total = rows[(ALL_HOSTS, "send")]
    assert total["cpu_pct"] == pytest.approx(70.12154753508176 + 98.4950527342255)
    assert total["cpu_basis"] == "process"


def test_an_imported_server_file_has_the_servers_cpu():
    (row, total) = ADAPTER.import_outputs([FIXTURES / "server-reverse.json"], {"iteration": 1})
    # server-reverse.json (lines 166-168): "host_total": 68.678772953320262,
    # "host_system": 67.121826797277834; its remote_* are 0 (a server does not get them)
    assert (row["op"], row["cpu_pct"], row["cpu_sys_pct"]) == (
        "send",
        68.678772953320262,
        67.121826797277834,
    )
    assert total["cpu_pct"] == row["cpu_pct"]
    results.table_from_rows([row, total])  # the measures check accepts them
