"""warp adapter against real warp 1.1.3 output (see tests/fixtures/warp/README.md)."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

from storbench.config import campaign as config
from storbench.core import results
from storbench.core.schema_names import ALL_HOSTS
from storbench.plan import specs as plan
from storbench.run.render import RenderError, render_job
from storbench.tools import get_tool
from storbench.tools.base import ToolOutputError
from storbench.tools.warp import (
    ADAPTER,
    benchmark_flags,
    load_result,
    parse_go_duration,
    timeseries_rows,
)
from tests.manifests import as_manifest
from tests.minio import S3_DEMO_TARGET
from tests.paths import FIXTURES as SHARED_FIXTURES

FIXTURES = SHARED_FIXTURES / "warp"
BASE = {"experiment": "s3demo", "iteration": 1, "attempt": 1, "tool": "warp", "extra": "dropped"}
MIB = 1024 * 1024
CONSOLE_OPS = {"GET": "read", "PUT": "write", "DELETE": "delete", "STAT": "stat"}
TARGET = S3_DEMO_TARGET
SPEC = {
    "experiment": "s3demo",
    "run_id": "randrw_bs4k_nj4",
    "tool": "warp",
    "target": TARGET,
    "params": {"rw": "randrw", "bs": "4k", "numjobs": 4, "runtime": "10s", "objects": 200},
    "point": {"rw": "randrw"},
    "hosts": ["client01"],
    "template": None,
    "job_file": None,
}


def imported(name: str) -> dict:
    rows = ADAPTER.import_outputs([FIXTURES / name], BASE)
    return {row["op"]: row for row in rows}


def console_reports(text: str) -> dict:
    """{op: printed numbers} from warp's text reports ('Report: GET ...' blocks)."""
    reports, current = {}, None
    for line in text.splitlines():
        if match := re.match(r"^Report: (\w+)(?: \((\d+) reqs\))?\.", line):
            current = reports.setdefault(match.group(1), {})
            if match.group(2):
                current["reqs"] = int(match.group(2))
        if current is not None and (match := re.search(r"Concurrency: (\d+)", line)):
            current["concurrency"] = int(match.group(1))
        if current is not None and line.startswith(" * Average: "):
            match = re.match(r"^ \* Average: (?:([\d.]+) MiB/s, )?([\d.]+) obj/s", line)
            current["MiB/s"], current["obj/s"] = match.groups()
        if current is not None and line.startswith(" * Reqs: "):
            for part in line[len(" * Reqs: ") :].split(", "):
                key, value = part.split(": ")
                current[key] = value.removesuffix("ms")
    return reports


def ms(value_ns: float) -> str:
    return f"{value_ns / 1e6:.1f}"


# --- rows against warp's own printed reports ---------------------------------------------

CONSOLE_PAIRS = [
    ("warp-put.console.txt", "warp-put.json.zst"),
    ("analyze-put-verbose.txt", "warp-put.json.zst"),
    ("warp-get.console.txt", "warp-get.json.zst"),
    ("warp-mixed.console.txt", "warp-mixed.json.zst"),
    ("analyze-mixed.txt", "analyze-mixed.json"),
    ("analyze-put-full.txt", "analyze-put-full.json"),
]


@pytest.mark.parametrize(("console", "data"), CONSOLE_PAIRS)
def test_rows_match_what_warp_printed(console, data):
    reports = console_reports((FIXTURES / console).read_text())
    rows = imported(data)
    assert set(rows) == {CONSOLE_OPS[op] for op in reports if op != "Total"}
    for op, printed in reports.items():
        if op == "Total":
            continue
        row = rows[CONSOLE_OPS[op]]
        if printed["MiB/s"] is not None:
            assert f"{row['bw_bytes_s'] / MIB:.2f}" == printed["MiB/s"]
        assert f"{row['iops']:.2f}" == printed["obj/s"]
        assert ms(row["p50_ns"]) == printed["50%"]
        assert ms(row["p90_ns"]) == printed["90%"]
        assert ms(row["p99_ns"]) == printed["99%"]
        assert ms(row["lat_min_ns"]) == printed["Fastest"]
        assert ms(row["lat_max_ns"]) == printed["Slowest"]
        assert row["numjobs"] == printed["concurrency"] == 4
        assert row["ios"] == printed.get("reqs", row["ios"])
        assert row["pct_source"] == "tool" and row["lat_basis"] == "lat"
        # ios count every request ('reqs'): duration_s is the span they cover, not 'Ran: 7s'
        assert row["host"] == ALL_HOSTS and 9.9 < row["duration_s"] < 10.1


def test_mixed_rows_in_detail():
    rows = imported("analyze-mixed.json")
    # analyze-mixed.txt: 'Report: GET (5697 reqs)', 'Size: 4096 bytes', ' * Average: 2.09 MiB/s'
    get = rows["read"]
    assert (get["ios"], get["bytes"], get["errors"], get["bs"]) == (5697, 23334912, 0, 4096)
    # those requests ran from 06:05:42.754694336 to 06:05:52.755936594 (by_op_type.GET)
    assert get["duration_s"] == pytest.approx(10.001242, abs=1e-6)
    assert get["bw_bytes_s"] == pytest.approx(15330613.773646174 / 7)
    assert get["iops"] == pytest.approx(3742.8256283315854 / 7)  # 534.69 obj/s
    assert (get["job"], get["rw"], get["runtime_s"]) == ("mixed", "mixed", 10.0)
    # 'Report: DELETE (1265 reqs)', 'Report: STAT (3798 reqs)': no payload
    assert (rows["delete"]["ios"], rows["delete"]["bytes"]) == (1265, 0)
    assert (rows["stat"]["ios"], rows["stat"]["bytes"]) == (3798, 0)
    assert rows["write"]["ios"] == 1903
    assert rows["read"]["run_id"] == "analyze-mixed"
    assert "extra" not in rows["read"]


def test_benchdata_and_its_analysis_give_the_same_rows():
    # README: analyze --json prints the same aggregate structure as inside the .json.zst
    def numbers(name):
        return {op: {**row, "run_id": None, "raw_path": None} for op, row in imported(name).items()}

    assert numbers("warp-mixed.json.zst") == numbers("analyze-mixed.json")


def test_mean_is_pooled_over_request_segments_not_warps_unweighted_average():
    entry = load_result(FIXTURES / "warp-put.json.zst")["by_op_type"]["PUT"]
    segments = [s["single_sized_requests"] for s in entry["requests_by_client"]["zpHJ"]]
    assert [s["requests"] for s in segments] == [5427, 57]
    # warp-put.console.txt prints 'Avg: 10.1ms': the plain average of the two segments
    unweighted = (segments[0]["dur_avg_millis"] + segments[1]["dur_avg_millis"]) / 2
    assert f"{unweighted:.1f}" == "10.1"
    exact = (5427 * 7.228387 + 57 * 13.023992) / 5484
    assert imported("warp-put.json.zst")["write"]["lat_mean_ns"] == pytest.approx(exact * 1e6)


def test_stdev_is_the_pooled_sample_stdev():
    rows = imported("analyze-put-full.json")
    n1, m1, s1, n2, m2, s2 = 7821, 5.024731, 2.41462, 115, 5.499627, 1.917035
    mean = (n1 * m1 + n2 * m2) / (n1 + n2)
    squares = (n1 - 1) * s1**2 + n1 * (m1 - mean) ** 2 + (n2 - 1) * s2**2 + n2 * (m2 - mean) ** 2
    assert rows["write"]["lat_stdev_ns"] == pytest.approx((squares / (n1 + n2 - 1)) ** 0.5 * 1e6)


def test_analysis_of_full_data_has_no_command_line_but_keeps_size_and_concurrency():
    # analyze-put-full.json: commandline "" (README); 'Size: 4096 bytes. Concurrency: 4.'
    row = imported("analyze-put-full.json")["write"]
    assert (row["bs"], row["numjobs"], row["runtime_s"]) == (4096, 4, None)
    # its one operation type, PUT, names the benchmark: rw was missing ('nan' in a legend)
    assert (row["rw"], row["job"]) == ("put", "put")
    assert (row["ios"], row["bytes"]) == (7936, 32505856)  # 'Report: PUT (7936 reqs)'


def test_go_durations():
    assert parse_go_duration("10s") == 10.0
    assert parse_go_duration("1m30s") == 90.0
    assert parse_go_duration("18.199755783s") == pytest.approx(18.199755783)
    assert parse_go_duration("250ms") == 0.25
    with pytest.raises(ValueError):
        parse_go_duration("10 s")


# --- time series ---------------------------------------------------------------------------


def test_timeseries_segments_match_the_printed_split():
    document = load_result(FIXTURES / "analyze-put-full.json")
    rows = timeseries_rows(document, host=ALL_HOSTS, base=BASE, source="analyze-put-full.json")
    # analyze-put-full.txt: 'Throughput, split into 7 x 1s: Fastest: 3.7MiB/s, 949.15 obj/s
    # ... 50% Median: 3.5MiB/s, 903.88 obj/s ... Slowest: 2.5MiB/s, 642.98 obj/s'
    assert len(rows) == 7
    assert [row["t_s"] for row in rows] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    assert max(row["iops"] for row in rows) == 949.15
    assert sorted(row["iops"] for row in rows)[4] == 903.88  # warp's median: round(7 * 0.5)
    assert min(row["iops"] for row in rows) == 642.98
    assert f"{max(row['bw_bytes_s'] for row in rows) / MIB:.1f}" == "3.7"
    assert rows[0]["timestamp"] == "2026-11-21T06:05:57Z" and rows[0]["interval_s"] == 1.0
    assert {row["op"] for row in rows} == {"write"} and "extra" not in rows[0]


def test_timeseries_of_a_mixed_run_per_operation():
    document = load_result(FIXTURES / "analyze-mixed.json")
    rows = timeseries_rows(document, host="client01", base=BASE, source="x")
    gets = [row["iops"] for row in rows if row["op"] == "read"]
    # analyze-mixed.txt GET: 'split into 7 x 1s', fastest 710.16, slowest 421.84 obj/s
    assert (len(gets), max(gets), min(gets)) == (7, 710.16, 421.84)
    assert {row["op"] for row in rows} == {"read", "write", "delete", "stat"}


# --- parse() from a run's raw folder -------------------------------------------------------


def raw_run(tmp_path: Path, outputs: dict) -> tuple[dict, Path]:
    """A raw attempt folder whose host output folders link to fixture files."""
    raw_dir = tmp_path / "a1"
    hosts = []
    for host, (name, fixture) in outputs.items():
        folder = raw_dir / f"{host}.warp"
        folder.mkdir(parents=True)
        (folder / name).symlink_to(FIXTURES / fixture)
        version = "warp version 1.1.3 - 27b021d"  # warp-version.txt
        hosts.append({"name": host, "output": f"{host}.warp", "tool_version": version})
    manifest = {"hosts": hosts, "params": {"op": "put", "bs": "4k", "numjobs": 4, "runtime": "10s"}}
    return manifest, raw_dir


def test_parse_single_host_gives_host_and_all_rows(tmp_path):
    manifest, raw_dir = raw_run(tmp_path, {"client01": ("analyze.json", "analyze-put-full.json")})
    rows = ADAPTER.parse(as_manifest(manifest), raw_dir, {**BASE, "run_id": "r"})
    assert [(row["host"], row["op"]) for row in rows] == [
        ("client01", "write"),
        (ALL_HOSTS, "write"),
    ]
    host, total = rows
    assert {k: v for k, v in total.items() if k != "host"} == {
        k: v for k, v in host.items() if k != "host"
    }
    assert host["tool_version"] == "warp version 1.1.3 - 27b021d"
    assert (host["rw"], host["job"], host["bs"], host["runtime_s"]) == ("put", "put", 4096, 10.0)


def test_parse_reads_the_benchdata_when_there_is_no_analysis(tmp_path):
    manifest, raw_dir = raw_run(tmp_path, {"client01": ("warp.json.zst", "warp-get.json.zst")})
    rows = ADAPTER.parse(as_manifest(manifest), raw_dir, BASE)
    assert {(row["host"], row["op"]) for row in rows} == {("client01", "read"), (ALL_HOSTS, "read")}
    assert rows[0]["ios"] == 19434 and f"{rows[0]['iops']:.2f}" == "1927.92"  # warp-get.console.txt
    series = ADAPTER.parse_timeseries(as_manifest(manifest), raw_dir, BASE)
    assert {row["host"] for row in series} == {"client01"} and len(series) == 7


def test_parse_two_standalone_hosts_sums_into_all(tmp_path):
    analysis = ("analyze.json", "analyze-put-full.json")
    outputs = {"c1": analysis, "c2": analysis}
    manifest, raw_dir = raw_run(tmp_path, outputs)
    rows = {
        (row["host"], row["op"]): row for row in ADAPTER.parse(as_manifest(manifest), raw_dir, BASE)
    }
    total = rows[(ALL_HOSTS, "write")]
    assert total["ios"] == 2 * 7936 and total["bytes"] == 2 * 32505856
    assert total["iops"] == pytest.approx(2 * rows[("c1", "write")]["iops"])
    assert total["p99_ns"] is None  # printed percentiles of two hosts cannot be merged


def test_parse_without_any_output_is_an_error(tmp_path):
    manifest = {"hosts": [{"name": "c1", "output": "c1.warp"}], "params": {}}
    with pytest.raises(ToolOutputError, match="no warp output"):
        ADAPTER.parse(as_manifest(manifest), tmp_path, BASE)


# --- import errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (FIXTURES / "warp-put.stderr.txt", "empty file"),
        (FIXTURES / "warp-put.console.txt", "rounds every number"),
        (FIXTURES / "analyze-mixed.txt", "rounds every number"),
        (FIXTURES / "warp-put-full.csv.zst", "warp analyze --json"),
        (FIXTURES / "warp-version.txt", "not warp JSON"),
        (FIXTURES.parent / "fio" / "standalone-group.json", "no 'by_op_type'"),
        (FIXTURES.parent / "gosbench" / "run" / "server.console.txt", "not warp JSON"),
    ],
    ids=lambda value: value.name if isinstance(value, Path) else None,
)
def test_import_rejects_what_is_not_a_warp_result(path, message):
    with pytest.raises(ToolOutputError, match=re.escape(message)) as error:
        ADAPTER.import_outputs([path], BASE)
    assert str(path) in str(error.value)


def test_import_rejects_truncated_benchdata(tmp_path):
    truncated = tmp_path / "cut.json.zst"
    truncated.write_bytes((FIXTURES / "warp-mixed.json.zst").read_bytes()[:1500])
    with pytest.raises(ToolOutputError, match="cut.json.zst"):
        ADAPTER.import_outputs([truncated], BASE)


def test_import_rejects_an_intermediate_update(tmp_path):
    document = json.loads((FIXTURES / "analyze-mixed.json").read_text())
    path = tmp_path / "live.json"
    path.write_text(json.dumps({**document, "final": False}))
    with pytest.raises(ToolOutputError, match="intermediate"):
        ADAPTER.import_outputs([path], BASE)


def test_import_of_an_output_folder(tmp_path):
    (tmp_path / "run7").mkdir()
    (tmp_path / "run7" / "warp.json.zst").symlink_to(FIXTURES / "warp-put.json.zst")
    rows = ADAPTER.import_outputs([tmp_path / "run7"], BASE)
    assert [(row["run_id"], row["host"], row["op"], row["ios"]) for row in rows] == [
        ("run7", ALL_HOSTS, "write", 5484)  # analyze-put-verbose.txt: 'Report: PUT (5484 reqs)'
    ]


# --- job file and commands -----------------------------------------------------------------

EXPECTED_ARGS_FILE = """\
# storbench experiment s3demo, run randrw_bs4k_nj4
# warp arguments, one per line; storbench adds --benchdata (and --warp-client on a controller)
mixed
--host=127.0.0.1:9000
--region=us-east-1
--bucket=storbench-s3demo
--obj.size=4KiB
--concurrent=4
--duration=10s
--objects=200
--no-color
"""


def test_args_file_golden(monkeypatch):
    monkeypatch.setenv("S3_ACCESS_KEY", "fake-access-key-value")
    monkeypatch.setenv("S3_SECRET_KEY", "fake-secret-key-value")
    text = render_job(SPEC)
    assert text == EXPECTED_ARGS_FILE
    argv = ADAPTER.command("/w/job.warp", "/w/client01.warp", "client01")
    for rendered in (text, " ".join(argv)):
        assert "fake-access-key-value" not in rendered and "fake-secret-key-value" not in rendered
        assert "access-key" not in rendered and "secret-key" not in rendered
    assert ADAPTER.secret_env == {"WARP_ACCESS_KEY": "access_key", "WARP_SECRET_KEY": "secret_key"}


def test_args_for_https_mix_and_passed_through_options():
    target = {**TARGET, "endpoint": "https://s3.lab:443", "verify_tls": False}
    params = {
        "rw": "randrw", "rwmixread": 70, "bs": "1m", "runtime": "2m", "noclear": True,
        "obj_randsize": True, "disable_multipart": False, "host_select": "roundrobin",
        "part_size": "5m", "iodepth": 8,
    }  # fmt: skip
    lines = render_job({**SPEC, "target": target, "params": params}).splitlines()[2:]
    assert lines == [
        "mixed", "--host=s3.lab:443", "--tls", "--insecure", "--region=us-east-1",
        "--bucket=storbench-s3demo", "--obj.size=1MiB", "--duration=120s",
        "--get-distrib=70", "--put-distrib=30", "--delete-distrib=0", "--stat-distrib=0",
        "--noclear", "--obj.randsize", "--host-select=roundrobin", "--part.size=5MiB",
        "--no-color",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("params", "first_lines"),
    [
        ({"rw": "read"}, ["get"]),
        ({"rw": "randwrite", "objects": 50}, ["put"]),  # warp put has no --objects
        ({"op": "stat", "objects": 50}, ["stat"]),
        ({"op": "mixed", "get_distrib": 60, "stat_distrib": 40}, ["mixed"]),
    ],
)
def test_benchmark_from_op_or_rw(params, first_lines):
    lines = render_job({**SPEC, "params": params}).splitlines()[2:]
    assert lines[:1] == first_lines
    assert ("--objects=50" in lines) == (params.get("op") == "stat")
    if "get_distrib" in params:
        assert "--get-distrib=60" in lines and "--stat-distrib=40" in lines
        assert not any(line.startswith("--put-distrib") for line in lines)


@pytest.mark.parametrize(
    ("params", "target", "message"),
    [
        ({"rw": "trim"}, TARGET, "rw 'trim'"),
        ({"op": "copy"}, TARGET, "op 'copy'"),
        ({"bs": "4k"}, TARGET, "set op"),
        ({"op": "get", "access_key": "x"}, TARGET, "set by storbench"),
        ({"op": "get"}, {**TARGET, "endpoint": "http://h:9000/path"}, "host[:port] only"),
        ({"op": "get"}, {"name": "scratch", "type": "directory", "path": "/x"}, "not an s3"),
    ],
)
def test_render_errors(params, target, message):
    with pytest.raises(RenderError, match=re.escape(message)):
        render_job({**SPEC, "params": params, "target": target})


def test_service_mode_commands():
    assert ADAPTER.has_services and ADAPTER.default_port == 7761
    assert ADAPTER.service_start_command("client01", 7761) == ["warp", "client", ":7761"]
    assert ADAPTER.service_stop_command(["client01:7761"]) == []  # no quit: the runner kills
    argv = ADAPTER.controller_command(["/w/a.warp", "/w/b.warp"], "/w/out", ["c1:7761", "c2:7761"])
    assert argv[:2] == ["sh", "-c"] and argv[3:] == [
        "storbench-warp", "/w/a.warp", "/w/out", "--warp-client=c1:7761,c2:7761"
    ]  # fmt: skip
    assert ADAPTER.version_command() == ["warp", "--version"]
    assert get_tool("warp") is ADAPTER and ADAPTER.target_types == ("s3",)
    assert ADAPTER.output_name("client01") == "client01.warp" and ADAPTER.output_is_folder


# --- the command's shell script, with a stand-in warp --------------------------------------

FAKE_WARP = """\
#!/bin/sh
if [ "$1" = analyze ]; then
  cat "$WARP_FIXTURE"
  exit 0
fi
for argument in "$@"; do printf '%s\\n' "$argument"; done > "$WARP_ARGS"
for argument in "$@"; do
  case $argument in --benchdata=*) : > "${argument#--benchdata=}.json.zst" ;; esac
done
exit "${WARP_EXIT:-0}"
"""


def run_command(tmp_path: Path, argv: list[str], exit_code: int = 0):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "warp").write_text(FAKE_WARP)
    (bin_dir / "warp").chmod(stat.S_IRWXU)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "WARP_ARGS": str(tmp_path / "args.txt"),
        "WARP_FIXTURE": str(FIXTURES / "analyze-mixed.json"),
        "WARP_EXIT": str(exit_code),
    }
    return subprocess.run(argv, env=env, capture_output=True, text=True)


def test_command_passes_each_line_as_one_argument_and_analyzes(tmp_path):
    job = tmp_path / "job.warp"
    job.write_text("# comment\nget\n--prefix=a b \"c\" 'd' $HOME\n\n--no-color")  # no final newline
    out = tmp_path / "client01.warp"
    done = run_command(tmp_path, ADAPTER.command(str(job), str(out), "client01"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "args.txt").read_text().splitlines() == [
        "get", "--prefix=a b \"c\" 'd' $HOME", "--no-color", f"--benchdata={out}/warp"
    ]  # fmt: skip
    assert (out / "warp.json.zst").exists()
    assert load_result(out / "analyze.json")["commandline"].startswith("/srv/bench/bin/warp mixed")


def test_controller_command_appends_the_clients(tmp_path):
    job = tmp_path / "job.warp"
    job.write_text("put\n--host=127.0.0.1:9000\n")
    argv = ADAPTER.controller_command([str(job)], str(tmp_path / "out"), ["c1:7761", "c2:7761"])
    assert run_command(tmp_path, argv).returncode == 0
    assert (tmp_path / "args.txt").read_text().splitlines() == [
        "put", "--host=127.0.0.1:9000", "--warp-client=c1:7761,c2:7761",
        f"--benchdata={tmp_path}/out/warp",
    ]  # fmt: skip


def test_command_returns_warps_failure_without_analysing(tmp_path):
    job = tmp_path / "job.warp"
    job.write_text("get\n")
    out = tmp_path / "out"
    done = run_command(tmp_path, ADAPTER.command(str(job), str(out), "h"), exit_code=3)
    assert done.returncode == 3 and not (out / "analyze.json").exists()


def test_command_with_an_unreadable_job_file(tmp_path):
    done = run_command(
        tmp_path, ADAPTER.command(str(tmp_path / "missing"), str(tmp_path / "o"), "h")
    )
    assert done.returncode == 2 and "cannot read" in done.stderr


def test_rows_and_series_fit_the_result_schemas():
    rows = ADAPTER.import_outputs([FIXTURES / "analyze-mixed.json"], BASE)
    assert results.table_from_rows(rows).num_rows == 4
    series = timeseries_rows(
        load_result(FIXTURES / "analyze-mixed.json"), host="h", base=BASE, source="s"
    )
    assert results.table_from_rows(series, results.TIMESERIES_SCHEMA).num_rows == 4 * 7


def test_shipped_example_renders():
    campaign = config.load_campaign_file(
        Path(__file__).resolve().parents[2] / "config/examples/warp-s3.yaml"
    )
    for name in campaign.experiments:
        for run in campaign.experiment_runs(name):
            lines = render_job(plan.render_spec(campaign, name, run)).splitlines()
            assert lines[2] in ("get", "put", "mixed") and lines[-1] == "--no-color"
            assert f"--bucket=storbench-{name.replace('_', '-')}" in lines


def test_an_option_whose_flag_the_benchmark_lacks_is_refused_at_check():
    """warp 1.1.3's flags per benchmark (tools/data, from its source): a misspelt option went
    to warp as a flag it refuses, or that another benchmark has."""
    sections = [
        {"op": "get", "obj": 500, "obj_size": "1MiB", "concurrent": 4, "range": True},
        {"op": "mixed", "part_size": "5m", "get_distrib": 60},
        {"rw": "write", "objects": 50, "post": True, "access_key": "x"},
    ]
    assert ADAPTER.option_problems(sections) == {
        "obj": "warp get has no flag --obj (did you mean 'objects'?)",
        "part_size": "warp mixed has no flag --part.size",
    }
    assert {"get", "put", "mixed", "delete", "list", "stat"} == set(benchmark_flags())
    assert "versions" in benchmark_flags()["list"] and "post" in benchmark_flags()["put"]


def test_an_influxdb_url_holding_a_token_is_refused_at_check_without_showing_it():
    """warp takes InfluxDB's token inside the URL (http://<token>@host:port/bucket/org); as an
    option it would be kept in the job file, the rows' params and warp's argv on every host."""
    token = "INFLUXTOKENPLANTED"
    sections = [
        {"op": "put", "influxdb": f"http://{token}@127.0.0.1:8086/warp/org"},
        {"op": "get", "influxdb": "http://127.0.0.1:8086/warp/org"},  # no token: fine
    ]
    problems = ADAPTER.option_problems(sections)
    assert list(problems) == ["influxdb"]
    assert problems["influxdb"].startswith("the URL holds a token (before its '@')")
    assert "WARP_INFLUXDB_CONNECT" in problems["influxdb"] and token not in problems["influxdb"]
    assert ADAPTER.option_problems(sections[1:]) == {}
