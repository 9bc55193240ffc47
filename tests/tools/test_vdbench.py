"""vdbench: parameter files, command, and parsing of real vdbench 5.04.07 output folders.

Fixtures: tests/fixtures/vdbench (README.md there). ``output-fileloop`` is a raw
SD/WD run (6 runs: forxfersize=(4k,64k) x forrdpct=(0,70,100)), ``output-filesystem`` an
FSD/FWD run (4 runs: forxfersize=(4k,64k) x forrdpct=(0,70)), both 5 s at interval=1.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from storbench.config import campaign as config
from storbench.core import results
from storbench.core.schema_names import ALL_HOSTS, PERCENTILE_COLUMNS
from storbench.plan import specs as plan
from storbench.run.render import render_job
from storbench.tools import get_tool
from storbench.tools.base import ToolOutputError
from storbench.tools.vdbench import ADAPTER, VdbenchJobError
from storbench.tools.vdbench_output import parse_version, read_runs
from tests.manifests import as_manifest
from tests.paths import FIXTURES as SHARED_FIXTURES

FIXTURES = SHARED_FIXTURES / "vdbench"
FILELOOP = FIXTURES / "output-fileloop"
FILESYSTEM = FIXTURES / "output-filesystem"
REPO = Path(__file__).resolve().parents[2]
IMPORT_BASE = {"experiment": "imported", "iteration": 1, "attempt": 1, "tool": "vdbench"}
MIB = 1024 * 1024
FILELOOP_POINTS = [("4k", 0), ("4k", 70), ("4k", 100), ("64k", 0), ("64k", 70), ("64k", 100)]
FILESYSTEM_POINTS = [("4k", 0), ("4k", 70), ("64k", 0), ("64k", 70)]


def imported(folder: Path) -> list[dict]:
    return ADAPTER.import_outputs([folder], IMPORT_BASE)


def host_rows(rows: list[dict]) -> dict:
    return {(row["job"], row["op"]): row for row in rows if row["host"] != ALL_HOSTS}


def label(xfersize: str, rdpct: int) -> str:
    return f"rd1_xfersize-{xfersize}_rdpct-{rdpct}"


def totals_averages(folder: Path) -> dict:
    """The avg_ line after each 'Starting RD=rd1' of totals.html, split into its columns."""
    averages = {}
    run = None
    for line in (folder / "totals.html").read_text().splitlines():
        if start := re.search(r"Starting RD=(rd1)\b.*For loops: (.*)</b>", line):
            loops = dict(pair.split("=") for pair in start.group(2).split())
            run = label(loops["xfersize"], int(loops["rdpct"]))
        elif run and re.match(r"^\S+\s+avg_\d+-\d+\s", line):
            averages[run] = line.split()[2:]  # without tod and interval
            run = None
    return averages


def close_to_printed(value: float, printed: str) -> bool:
    """vdbench prints rounded (raw) or truncated (file system) values: one last-digit unit."""
    decimals = len(printed.partition(".")[2])
    return abs(value - float(printed)) <= 10**-decimals + 1e-9


# --- raw (SD/WD) output: output-fileloop ---------------------------------------------------


def test_fileloop_six_runs_map_to_the_xfersize_rdpct_points():
    rows = imported(FILELOOP)
    runs = list(dict.fromkeys(row["run_id"] for row in rows))
    assert runs == [label(x, r) for x, r in FILELOOP_POINTS]  # SD_format is skipped
    by_run = {row["run_id"]: row for row in rows if row["host"] == "localhost"}
    for xfersize, rdpct in FILELOOP_POINTS:
        row = by_run[label(xfersize, rdpct)]
        assert row["bs"] == {"4k": 4096, "64k": 65536}[xfersize]
        assert row["rwmixread"] == rdpct
        assert row["iodepth"] == 4  # sd=sd1,...,threads=4
        assert row["rw"] == {0: "randwrite", 70: "randrw", 100: "randread"}[rdpct]
        assert json.loads(row["params_json"]) == {"bs": xfersize, "rwmixread": rdpct}
        assert row["size"] == 64 * MIB  # flatfile lunsize 0.0625 (GB)
        assert row["runtime_s"] == 5.0  # 'elapsed=5' in the Starting RD= line
        assert row["tool_version"] == "vdbench50407"  # logfile.html
        assert row["errors"] == 0  # errorlog.html holds no message


def test_fileloop_ops_follow_rdpct():
    ops = {(row["run_id"], row["op"]) for row in imported(FILELOOP) if row["host"] == ALL_HOSTS}
    expected = set()
    for xfersize, rdpct in FILELOOP_POINTS:
        if rdpct > 0:
            expected.add((label(xfersize, rdpct), "read"))
        if rdpct < 100:
            expected.add((label(xfersize, rdpct), "write"))
    assert ops == expected


def test_fileloop_averages_match_the_avg_lines_of_totals_html():
    # totals.html, e.g. '06:09:24.047  avg_2-5  26220.5  102.42  4096  69.77  0.150  0.153
    # 0.144  67.59  67.62  0.427 ...' (rate MB/sec bytes read% resp read_resp write_resp
    # read_max write_max resp_std queue cpu cpu) for xfersize=4k rdpct=70.
    rows = host_rows(imported(FILELOOP))
    averages = totals_averages(FILELOOP)
    assert len(averages) == 6
    for run, printed in averages.items():
        rate, mb, _, read_pct, _, read_resp, write_resp, read_max, write_max = printed[:9]
        read, write = rows.get((run, "read")), rows.get((run, "write"))
        ops = [row for row in (read, write) if row]
        assert close_to_printed(sum(row["iops"] for row in ops), rate)
        assert close_to_printed(sum(row["bw_bytes_s"] for row in ops) / MIB, mb)
        if read:
            assert close_to_printed(100 * read["iops"] / float(rate), read_pct)
            assert close_to_printed(read["lat_mean_ns"] / 1e6, read_resp)
            assert close_to_printed(read["lat_max_ns"] / 1e6, read_max)
        if write:
            assert close_to_printed(write["lat_mean_ns"] / 1e6, write_resp)
            assert close_to_printed(write["lat_max_ns"] / 1e6, write_max)


def test_fileloop_mixed_run_numbers():
    rows = host_rows(imported(FILELOOP))
    read = rows[(label("4k", 70), "read")]
    write = rows[(label("4k", 70), "write")]
    # flatfile avg_2-5 row: rate 26220.5, read% 69.7737, read_resp 0.1529, write_resp 0.1444,
    # read_max 67.589, write_max 67.615, read_std 0.4414, write_std 0.3934
    assert read["iops"] == pytest.approx(26220.5 * 0.697737)
    assert read["lat_mean_ns"] == 152_900.0 and write["lat_mean_ns"] == 144_400.0
    assert read["lat_max_ns"] == 67_589_000.0 and write["lat_max_ns"] == 67_615_000.0
    assert read["lat_stdev_ns"] == 441_400.0 and write["lat_stdev_ns"] == 393_400.0
    # histogram.html 'Reads:' and 'Writes:' buckets sum to 73,180 and 31,702 I/Os
    assert (read["ios"], write["ios"]) == (73_180, 31_702)
    assert read["ios"] + write["ios"] == round(26220.5 * 4)  # 'Reads and writes' = rate x 4 s
    assert read["bytes"] == 73_180 * 4096 and read["duration_s"] == 4.0  # avg_2-5


def test_fileloop_write_percentiles_from_histogram_html():
    row = host_rows(imported(FILELOOP))[(label("4k", 0), "write")]
    # histogram.html, 'Only writes done': cum% 16.3337 at '0.060 < 0.080', 94.8078 at
    # '0.100 < 0.200', 99.6997 at '0.200 < 0.400', 99.8780 at '0.800 < 1.000', 99.9470 at
    # '1.000 < 2.000', 99.9864 at '2.000 < 4.000', 99.9984 at '4.000 < 6.000'.
    assert [row[column] for column in PERCENTILE_COLUMNS] == [
        200_000.0,
        200_000.0,
        400_000.0,
        2_000_000.0,
        6_000_000.0,
    ]
    assert row["pct_source"] == "histogram" and row["lat_basis"] == "lat"
    assert row["hist_ns"][:3] == [20_000, 40_000, 60_000]
    assert row["hist_count"][:3] == [28, 1_250, 5_520]
    assert len(row["hist_ns"]) == 27
    assert row["hist_ns"][-1] == 2_000_000_000  # '2000.000 < max' is empty: its lower bound
    assert sum(row["hist_count"]) == row["ios"] == 124_552 == 31138 * 4


def test_fileloop_all_rows_equal_the_single_host():
    manifest = {"hosts": [{"name": "client01", "output": FILELOOP.name, "tool_version": ""}]}
    base = {
        "experiment": "e",
        "run_id": "randread_bs4k_qd4",
        "iteration": 1,
        "attempt": 1,
        "tool": "vdbench",
        "params_json": json.dumps({"rw": "randread", "bs": "4k"}),
    }
    rows = ADAPTER.parse(as_manifest(manifest), FIXTURES, base)
    assert len(rows) == 2 * 8  # 8 (run, op) pairs, once for client01 and once for 'all'
    hosts = {(row["job"], row["op"]): row for row in rows if row["host"] == "client01"}
    for row in rows:
        if row["host"] == ALL_HOSTS:
            host = hosts[(row["job"], row["op"])]
            for column in ("ios", "bytes", "iops", "bw_bytes_s", "lat_mean_ns", "p99_ns"):
                assert row[column] == host[column]
    row = hosts[(label("4k", 70), "read")]
    assert row["run_id"] == "randread_bs4k_qd4"  # storbench's run; the job is vdbench's run
    assert row["rw"] == "randrw"
    assert json.loads(row["params_json"]) == {"bs": "4k", "rw": "randrw", "rwmixread": 70}
    results.table_from_rows(rows)  # every key is a schema column


def test_fileloop_time_series_has_five_intervals_per_run():
    manifest = {"hosts": [{"name": "client01", "output": FILELOOP.name}]}
    base = {"experiment": "e", "run_id": "r", "iteration": 1, "attempt": 1, "tool": "vdbench"}
    rows = ADAPTER.parse_timeseries(as_manifest(manifest), FIXTURES, base)
    results.table_from_rows(rows, results.TIMESERIES_SCHEMA)
    for xfersize, rdpct in FILELOOP_POINTS:
        ops = {"read"} if rdpct == 100 else {"write"} if rdpct == 0 else {"read", "write"}
        for op in ops:
            series = [r for r in rows if r["job"] == label(xfersize, rdpct) and r["op"] == op]
            assert [r["t_s"] for r in series] == [1.0, 2.0, 3.0, 4.0, 5.0]
    second = next(
        r for r in rows if r["job"] == label("4k", 70) and r["t_s"] == 2.0 and r["op"] == "read"
    )
    # flatfile: '06:09:21.011 11/21/2026-06:09:21-UTC rd1 2 9999988 29677 115.9258 4096 69.879'
    assert second["iops"] == pytest.approx(29677 * 0.69879)
    assert second["lat_mean_ns"] == 135_400.0  # read_resp 0.1354
    assert second["timestamp"] == "2026-11-21T06:09:21.011+00:00"
    assert second["host"] == "client01" and second["interval_s"] == 1.0


# --- file-system (FSD/FWD) output: output-filesystem ---------------------------------------


def test_filesystem_four_runs_and_their_ops():
    rows = imported(FILESYSTEM)
    assert list(dict.fromkeys(r["run_id"] for r in rows)) == [
        label(x, r) for x, r in FILESYSTEM_POINTS
    ]  # the format_for_rd1 run before each is skipped
    ops = {(r["run_id"], r["op"]) for r in rows if r["host"] == "localhost"}
    assert ops == {
        (label("4k", 0), "write"),
        (label("4k", 70), "read"),
        (label("4k", 70), "write"),
        (label("64k", 0), "write"),
        (label("64k", 70), "read"),
        (label("64k", 70), "write"),
    }


def test_an_imported_file_system_output_takes_random_from_its_parameter_file():
    """parmfile.html: 'fwd=fwd1,...,fileio=random,...': the rows' rw was missing ('nan' in the
    report's bandwidth legend) where an output folder came without storbench's params."""
    rows = imported(FILESYSTEM)
    assert {(r["run_id"], r["rw"]) for r in rows} == {
        (label("4k", 0), "randwrite"),
        (label("4k", 70), "randrw"),
        (label("64k", 0), "randwrite"),
        (label("64k", 70), "randrw"),
    }


def test_filesystem_averages_match_the_avg_lines_of_totals_html():
    # totals.html for xfersize=4k rdpct=70: 'avg_2-5 475719 0.003 92.3 55.7 70.0 333129 0.002
    # 142589 0.004 1301 556.9 1858.2 4096 ...' (rate resp cpu sys read% read_rate read_resp
    # write_rate write_resp mb_read mb_write mb_total xfersize ...)
    rows = host_rows(imported(FILESYSTEM))
    averages = totals_averages(FILESYSTEM)
    assert len(averages) == 4
    for run, printed in averages.items():
        rate, read_rate, read_resp, write_rate, write_resp, mb_read, mb_write = (
            printed[i] for i in (0, 5, 6, 7, 8, 9, 10)
        )
        read, write = rows.get((run, "read")), rows.get((run, "write"))
        assert close_to_printed(sum(r["iops"] for r in (read, write) if r), rate)
        if read:
            assert close_to_printed(read["iops"], read_rate)
            assert close_to_printed(read["lat_mean_ns"] / 1e6, read_resp)
            assert close_to_printed(read["bw_bytes_s"] / MIB, mb_read)
        assert close_to_printed(write["iops"], write_rate)
        assert close_to_printed(write["lat_mean_ns"] / 1e6, write_resp)
        assert close_to_printed(write["bw_bytes_s"] / MIB, mb_write)


def test_filesystem_numbers_and_histogram_use():
    rows = host_rows(imported(FILESYSTEM))
    write_only = rows[(label("4k", 0), "write")]
    # flatfile avg_2-5: Write_rate 359861, Write_resp 0.0038, Write_resp_std 0.0525,
    # Write_resp_max 13.902, MB_write 1405.707
    assert write_only["iops"] == 359_861.0 and write_only["ios"] == 359_861 * 4
    assert write_only["lat_mean_ns"] == 3_800.0 and write_only["lat_stdev_ns"] == 52_500.0
    assert write_only["lat_max_ns"] == 13_902_000.0
    assert write_only["bytes"] == round(1405.707 * MIB * 4)
    # histogram.html 'Total of all requested operations since warmup': 1,439,444 = the writes;
    # cum% 97.2105 below 0.020 ms, 99.7612 below 0.040, 99.9050 below 0.060, 99.9881 below
    # 2.000, 99.9910 below 4.000 ms
    assert write_only["pct_source"] == "histogram"
    assert (write_only["p50_ns"], write_only["p99_ns"]) == (20_000.0, 40_000.0)
    assert write_only["p99_9_ns"] == 60_000.0 and write_only["p99_99_ns"] == 4_000_000.0
    mixed = rows[(label("4k", 70), "read")]
    # one histogram for reads and writes together: no per-op percentiles
    assert mixed["pct_source"] is None and mixed["p50_ns"] is None and mixed["hist_ns"] is None
    assert mixed["ios"] == round(333_129.5 * 4)  # Read_rate 333129.5
    assert mixed["lat_basis"] == "lat"
    assert mixed["rwmixread"] == 70 and mixed["bs"] == 4096
    assert mixed["runtime_s"] == 5.0


def test_filesystem_parameters_from_the_run_params():
    manifest = {"hosts": [{"name": "nfs01", "output": FILESYSTEM.name}]}
    params = {
        "workload": "filesystem",
        "rw": "randread",
        "bs": "4k",
        "numjobs": 2,
        "forxfersize": "4k,64k",
        "forrdpct": "0,70",
    }
    base = {
        "experiment": "fs",
        "run_id": "randread_bs4k_nj2",
        "iteration": 1,
        "attempt": 1,
        "tool": "vdbench",
        "params_json": json.dumps(params),
    }
    rows = host_rows(ADAPTER.parse(as_manifest(manifest), FIXTURES, base))
    write = rows[(label("64k", 0), "write")]
    assert (write["rw"], write["bs"], write["rwmixread"]) == ("randwrite", 65536, 0)
    assert write["numjobs"] == 2 and write["iodepth"] is None  # fwd threads=2
    assert json.loads(write["params_json"]) == {
        **params,
        "bs": "64k",
        "rwmixread": 0,
        "rw": "randwrite",
    }


def test_filesystem_time_series():
    manifest = {"hosts": [{"name": "nfs01", "output": FILESYSTEM.name}]}
    base = {"experiment": "fs", "run_id": "r", "iteration": 1, "attempt": 1, "tool": "vdbench"}
    rows = ADAPTER.parse_timeseries(as_manifest(manifest), FIXTURES, base)
    assert len(rows) == 5 * (1 + 2 + 1 + 2)  # intervals x ops of the 4 runs
    first = rows[0]
    # flatfile: '06:09:55.043 ... rd1 1 4096 ... Write_rate 194694 ... Write_resp 0.0042'
    assert (first["job"], first["op"], first["t_s"]) == (label("4k", 0), "write", 1.0)
    assert first["iops"] == 194_694.0 and first["lat_mean_ns"] == 4_200.0
    assert first["bw_bytes_s"] == pytest.approx(760.5234 * MIB)


# --- import and failures -------------------------------------------------------------------


def test_import_accepts_the_flatfile_path_and_a_lone_flatfile(tmp_path):
    from_folder = imported(FILELOOP)
    from_flatfile = imported(FILELOOP / "flatfile.html")
    assert [r["iops"] for r in from_flatfile] == [r["iops"] for r in from_folder]
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "flatfile.html").symlink_to(FILELOOP / "flatfile.html")
    rows = imported(lone)  # no totals.html: loop values from the varying flatfile columns
    assert list(dict.fromkeys(r["run_id"] for r in rows)) == [
        label(x, r) for x, r in FILELOOP_POINTS
    ]
    assert {r["pct_source"] for r in rows} == {None}  # no histogram.html either
    assert all(r["host"] in ("localhost", ALL_HOSTS) for r in rows)


def test_fio_json_is_not_vdbench_output():
    fio_output = FIXTURES.parent / "fio" / "standalone-group.json"
    with pytest.raises(ToolOutputError, match="not a vdbench flatfile"):
        ADAPTER.import_outputs([fio_output], IMPORT_BASE)


def test_folder_without_flatfile_is_rejected(tmp_path):
    with pytest.raises(ToolOutputError, match="no such file"):
        ADAPTER.import_outputs([tmp_path], IMPORT_BASE)


def test_empty_flatfile_is_rejected(tmp_path):
    (tmp_path / "flatfile.html").write_text("")
    with pytest.raises(ToolOutputError, match="empty"):
        ADAPTER.import_outputs([tmp_path], IMPORT_BASE)


def flatfile_cut_after(tmp_path: Path, marker: str) -> Path:
    """The fixture flatfile up to the line holding marker (a run vdbench never finished)."""
    text = (FILELOOP / "flatfile.html").read_text()
    cut = tmp_path / "flatfile.html"
    cut.write_text(text[: text.index(marker) + len(marker)] + "\n")
    return cut


def test_flatfile_ending_inside_a_run_is_truncated(tmp_path):
    cut = flatfile_cut_after(tmp_path, "06:09:22.017 11/21/2026-06:09:22-UTC rd1 3 9999988 28272")
    with pytest.raises(ToolOutputError, match="truncated or malformed data row 11"):
        read_runs(cut)  # the last row stops mid-line
    cut = flatfile_cut_after(
        tmp_path, "4096 4 70 0 0 100 0.0625 n/a 1 n/a 3.9343 32.9412 8.8235 24.1176 0 0"
    )
    with pytest.raises(ToolOutputError, match="rd1.*3 interval row.*no avg_ row"):
        read_runs(cut)


def test_flatfile_shorter_than_totals_html_is_truncated(tmp_path):
    text = (FILELOOP / "flatfile.html").read_text()
    last_average = "06:09:42.022 11/21/2026-06:09:42-UTC rd1  avg_2-5"
    cut = tmp_path / "flatfile.html"
    cut.write_text(
        text[: text.index(last_average)] + text[text.index(last_average) :].split("\n")[0] + "\n"
    )
    (tmp_path / "totals.html").symlink_to(FILELOOP / "totals.html")
    with pytest.raises(ToolOutputError, match="do not match the 'Starting RD=' lines"):
        read_runs(cut)


def test_header_only_flatfile_is_truncated(tmp_path):
    text = (FILELOOP / "flatfile.html").read_text()
    cut = tmp_path / "flatfile.html"
    cut.write_text(text[: text.index("06:09:12.110")])
    with pytest.raises(ToolOutputError, match="no completed run"):
        read_runs(cut)


# --- parameter files -----------------------------------------------------------------------


def campaign(target: dict, experiments: dict) -> config.Campaign:
    return config.load_campaign(
        {
            "hosts": {"localhost": {"transport": "local"}},
            "targets": {"t": target},
            "experiments": {
                name: {"tool": "vdbench", "hosts": "localhost", "target": "t", **spec}
                for name, spec in experiments.items()
            },
        }
    )


def rendered(loaded: config.Campaign, name: str) -> list[str]:
    return [render_job(plan.render_spec(loaded, name, run)) for run in loaded.experiment_runs(name)]


def definitions(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("*")]


def test_fixture_parmfile_fileloop_from_an_experiment():
    loaded = campaign(
        {"type": "directory", "path": "/srv/bench/vdbench/data", "per_host_subdir": False},
        {
            "fileloop": {
                "job": {
                    "rw": "randread",
                    "bs": "4k",
                    "iodepth": 4,
                    "size": "64m",
                    "direct": 1,
                    "runtime": "5s",
                    "forxfersize": "4k,64k",
                    "forrdpct": "0,70,100",
                }
            }
        },
    )
    [text] = rendered(loaded, "fileloop")
    expected = (FIXTURES / "parmfiles" / "fileloop.parm").read_text()
    assert definitions(text) == definitions(expected)


def test_fixture_parmfile_filesystem_from_an_experiment():
    loaded = campaign(
        {"type": "directory", "path": "/srv/bench/vdbench", "per_host_subdir": False},
        {
            "filesystem": {
                "job": {
                    "workload": "filesystem",
                    "rw": "randread",
                    "bs": "4k",
                    "numjobs": 2,
                    "depth": 1,
                    "width": 2,
                    "files": 4,
                    "size": "4m",
                    "runtime": 5,
                    "forxfersize": "4k,64k",
                    "forrdpct": "0,70",
                }
            }
        },
    )
    [text] = rendered(loaded, "filesystem")
    expected = (FIXTURES / "parmfiles" / "filesystem.parm").read_text()
    assert definitions(text) == definitions(expected)


AFA_PRECONDITION = """\
* storbench experiment afa_precondition, run write_bs128k_qd16
sd=sd1,lun=/dev/mapper/afa_lun0,threads=16,openflags=o_direct
wd=fill,sd=sd1,xfersize=128k,rdpct=0,seekpct=eof
rd=precondition,wd=fill,iorate=max,elapsed=67500,interval=30
"""

# The tutorial's 4kb_20_80_seq.cfg, 8kb_65_35_ran.cfg, 64kb_65_35_ran.cfg and
# 128kb_80_20_seq.cfg on one LUN: sd (o_direct), wd (seekpct), rd (iorate=max,
# elapsed=7200, interval=1); rdpct/xfersize in the wd and threads in the sd instead of
# one-value for-loops.
AFA_BASELINE = {
    "rw_bs4k_qd32_mix20": ("32", "4k", "20", "0"),
    "randrw_bs8k_qd16_mix65": ("16", "8k", "65", "100"),
    "randrw_bs64k_qd8_mix65": ("8", "64k", "65", "100"),
    "rw_bs128k_qd4_mix80": ("4", "128k", "80", "0"),
}
AFA_BASELINE_TEMPLATE = """\
* storbench experiment afa_baseline, run {run_id}
sd=sd1,lun=/dev/mapper/afa_lun0,threads={threads},openflags=o_direct
wd=wd1,sd=sd1,xfersize={xfersize},rdpct={rdpct},seekpct={seekpct}
rd=rd1,wd=wd1,iorate=max,elapsed=7200,interval=1
"""


def test_afa_example_renders_the_precondition_and_four_baseline_files():
    loaded = config.load_campaign_file(REPO / "config/examples/vdbench-afa-baseline.yaml")
    assert loaded.experiments["afa_baseline"].target == {
        "type": "block",
        "path": "/dev/mapper/afa_lun0",
    }
    assert rendered(loaded, "afa_precondition") == [AFA_PRECONDITION]
    runs = loaded.experiment_runs("afa_baseline")
    assert [run.run_id for run in runs] == list(AFA_BASELINE)
    assert rendered(loaded, "afa_baseline") == [
        AFA_BASELINE_TEMPLATE.format(run_id=run_id, threads=t, xfersize=x, rdpct=r, seekpct=s)
        for run_id, (t, x, r, s) in AFA_BASELINE.items()
    ]


def test_afa_example_runs_the_phases_in_order_with_the_thread_optimization_scripts():
    """Phase 2's scripts: elapsed=300, pause=5, forrdpct (20,80) sequential and (35,65)
    random, forxfersize=(8k,16k,32k,128k), forthreads=(1,16,d); after the precondition."""
    loaded = config.load_campaign_file(REPO / "config/examples/vdbench-afa-baseline.yaml")
    order = {name: list(experiment.after) for name, experiment in loaded.experiments.items()}
    assert order == {
        "afa_precondition": [],
        "afa_threads": ["afa_precondition"],
        "afa_baseline": ["afa_threads"],
    }
    assert loaded.experiments["afa_threads"].wait_s == 5
    files = [definitions(text) for text in rendered(loaded, "afa_threads")]
    assert files == [
        [
            f"sd=sd1,lun=/dev/mapper/afa_lun0,threads={threads},openflags=o_direct",
            f"wd=wd1,sd=sd1,xfersize={xfersize},rdpct={rdpct},seekpct={seekpct}",
            "rd=rd1,wd=wd1,iorate=max,elapsed=300,interval=1",
        ]
        for rdpct, seekpct in (("20", "0"), ("80", "0"), ("35", "100"), ("65", "100"))
        for xfersize in ("8k", "16k", "32k", "128k")
        for threads in (1, 2, 4, 8, 16)
    ]


def test_idc_multihost_example_runs_each_cfg_file_once_on_all_luns_with_its_threads():
    """The tutorial's .cfg files list every SD and set forthreads 32, 16, 8, 4 and interval=1."""
    loaded = config.load_campaign_file(REPO / "config/examples/idc-vdbench-multihost.yaml")
    name = "afa_baseline_multihost"
    files = {
        run.run_id: [
            line
            for line in render_job(plan.render_spec(loaded, name, run)).splitlines()
            if line.startswith(("sd=default", "wd=", "rd="))
        ]
        for run in loaded.experiment_runs(name)
    }
    assert files == {
        f"{run_id}_t-all": [
            f"sd=default,threads={threads},openflags=o_direct",
            f"wd=wd1,sd=sd*,xfersize={xfersize},rdpct={rdpct},seekpct={seekpct}",
            "rd=rd1,wd=wd1,iorate=max,elapsed=7200,interval=1",
        ]
        for run_id, (threads, xfersize, rdpct, seekpct) in AFA_BASELINE.items()
    }


SPEC = {
    "experiment": "multi",
    "run_id": "randrw_bs8k_qd16_mix70",
    "tool": "vdbench",
    "target": {"name": "nfs", "type": "directory", "path": "/mnt/nfs/bench"},
    "params": {
        "rw": "randrw",
        "bs": "8k",
        "iodepth": 16,
        "rwmixread": 70,
        "size": "1g",
        "runtime": "60s",
        "ramp_time": "10s",
        "interval": 5,
        "compratio": 2,
        "rd_pause": 5,
    },
    "point": {},
    "hosts": ["client01"],
    "template": None,
    "job_file": None,
}


def test_per_host_file_lun_uses_the_host_argument():
    assert render_job(SPEC) == (
        "* storbench experiment multi, run randrw_bs8k_qd16_mix70\n"
        "compratio=2\n"
        "sd=sd1,lun=/mnt/nfs/bench/$storbench_host/vdb.file,size=1g,threads=16\n"
        "wd=wd1,sd=sd1,xfersize=8k,rdpct=70,seekpct=100\n"
        "rd=rd1,wd=wd1,iorate=max,elapsed=60,warmup=10,interval=5,pause=5\n"
    )


def test_standalone_file_ignores_the_spec_hosts():
    assert render_job({**SPEC, "hosts": ["client01", "client02"]}) == render_job(SPEC)


def test_multihost_gives_hd_definitions_for_the_spec_hosts():
    spec = {
        **SPEC,
        "hosts": ["client01", "client02"],
        "params": {
            **SPEC["params"],
            "multihost": True,
            "hd_user": "bench",
            "vdbench_dir": "/srv/vdbench",
        },
    }
    assert definitions(render_job(spec)) == [
        "compratio=2",
        "hd=default,vdbench=/srv/vdbench,user=bench,shell=ssh",
        "hd=hd1,system=client01",
        "hd=hd2,system=client02",
        "sd=default,size=1g,threads=16",
        "sd=sd1,host=hd1,lun=/mnt/nfs/bench/client01/vdb.file",
        "sd=sd2,host=hd2,lun=/mnt/nfs/bench/client02/vdb.file",
        "wd=wd1,sd=sd*,xfersize=8k,rdpct=70,seekpct=100",
        "rd=rd1,wd=wd1,iorate=max,elapsed=60,warmup=10,interval=5,pause=5",
    ]


def test_hd_system_is_the_hosts_tool_address_when_the_spec_gives_one():
    spec = {
        **SPEC,
        "hosts": ["client01", "client02"],
        "execution": "service",
        "addresses": {"client01": "192.168.100.1", "client02": "192.168.100.2"},
    }
    hd_lines = [line for line in definitions(render_job(spec)) if line.startswith("hd=hd")]
    assert hd_lines == ["hd=hd1,system=192.168.100.1", "hd=hd2,system=192.168.100.2"]
    # the per-host paths and the SDs keep the hosts' names
    assert "sd=sd2,host=hd2,lun=/mnt/nfs/bench/client02/vdb.file" in definitions(render_job(spec))


def test_hd_system_is_an_ipv6_address_without_brackets():
    """vdbench's master reaches the host with ssh, which takes the address alone."""
    spec = {**SPEC, "hosts": ["client01"], "execution": "service"}
    spec["addresses"] = {"client01": "[fd00::1]"}
    assert "hd=hd1,system=fd00::1" in definitions(render_job(spec))


def test_an_address_vdbench_would_read_as_two_parameters_is_refused():
    spec = {
        **SPEC,
        "hosts": ["client01"],
        "execution": "service",
        "addresses": {"client01": "10.0.0.1,10.0.0.2"},
    }
    with pytest.raises(VdbenchJobError, match=r"host client01: system '10.0.0.1,10.0.0.2': "):
        render_job(spec)


def test_vdbench_hosts_give_a_multi_host_filesystem_file():
    spec = {
        **SPEC,
        "hosts": ["master"],
        "params": {
            "workload": "filesystem",
            "rw": "write",
            "bs": "1m",
            "numjobs": 4,
            "files": 100,
            "size": "10m",
            "runtime": 30,
            "format": False,
            "vdbench_hosts": "c1, c2",
        },
    }
    assert definitions(render_job(spec)) == [
        "hd=default,vdbench=/opt/vdbench,user=root,shell=ssh",
        "hd=hd1,system=c1",
        "hd=hd2,system=c2",
        "fsd=default,depth=1,width=1,files=100,size=10m",
        "fsd=fsd1,anchor=/mnt/nfs/bench/c1/fsd",
        "fsd=fsd2,anchor=/mnt/nfs/bench/c2/fsd",
        "fwd=default,operation=write,xfersize=1m,fileio=sequential,fileselect=random,threads=4",
        "fwd=fwd1_hd1,fsd=fsd1,host=hd1",
        "fwd=fwd1_hd2,fsd=fsd2,host=hd2",
        "rd=rd1,fwd=fwd1_*,fwdrate=max,format=no,elapsed=30,interval=1",
    ]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"ioengine": "libaio"}, "unknown option.*ioengine"),
        ({"numjobs": 4}, "no numjobs"),
        ({"runtime": "7s", "interval": 2}, "multiple of interval"),
        ({"runtime": "1.5s"}, "whole seconds"),
        ({"workload": "objects"}, "workload must be raw or filesystem"),
        ({"workload": "filesystem", "size": "1m"}, "set files"),
        ({"rw": "trim"}, "unsupported rw"),
        # rendered as rdpct=-1 before, and rdpct=150
        ({"rw": "randrw", "rwmixread": -1}, r"rwmixread is a percentage of 0 to 100, got -1$"),
        ({"rw": "randrw", "rwmixread": 150}, r"rwmixread is a percentage of 0 to 100, got 150$"),
    ],
)
def test_options_vdbench_cannot_take_are_errors(params, message):
    spec = {**SPEC, "params": {"size": "1g", **params}}
    with pytest.raises(VdbenchJobError, match=message):
        render_job(spec)


def test_directory_target_needs_a_size_and_block_needs_none():
    with pytest.raises(VdbenchJobError, match="needs size"):
        render_job({**SPEC, "params": {"rw": "read"}})
    block = {"name": "lun", "type": "block", "path": "/dev/sdb"}
    assert definitions(render_job({**SPEC, "target": block, "params": {"rw": "read"}}))[0] == (
        "sd=sd1,lun=/dev/sdb"
    )


# --- command, version, adapter attributes --------------------------------------------------


def fake_vdbench(tmp_path: Path, script: str) -> dict:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "vdbench"
    fake.write_text("#!/bin/sh\n" + script)
    fake.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def test_command_passes_the_host_only_to_a_job_that_uses_it(tmp_path):
    env = fake_vdbench(tmp_path, 'for a in "$@"; do printf "<%s>\\n" "$a"; done\n')
    job = tmp_path / "job.vdb"
    out = str(tmp_path / "client01.vdbench")
    job.write_text(render_job(SPEC))
    argv = ADAPTER.command(str(job), out, "client01")
    printed = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
    assert printed.split() == ["<-f>", f"<{job}>", "<-o>", f"<{out}>", "<storbench_host=client01>"]
    job.write_text("sd=sd1,lun=/dev/sdb\n")  # e.g. an own job file
    printed = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
    assert printed.split() == ["<-f>", f"<{job}>", "<-o>", f"<{out}>"]


def test_version_command_prints_the_distribution_line(tmp_path):
    banner = (FIXTURES / "output-fileloop.console.txt").read_text()
    env = fake_vdbench(tmp_path, f"cat <<'EOF'\n{banner}\nEOF\nexit 255\n")
    done = subprocess.run(ADAPTER.version_command(), env=env, capture_output=True, text=True)
    assert done.returncode == 0
    assert done.stdout.strip() == "Vdbench distribution: vdbench50407 Tue June 05  9:49:29 MDT 2018"
    assert parse_version(done.stdout) == "vdbench50407"


def test_version_command_without_vdbench_exits_127(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}
    done = subprocess.run(
        ["/bin/sh", *ADAPTER.version_command()[1:]], env=env, capture_output=True, text=True
    )
    assert done.returncode == 127 and "not found" in done.stderr


def test_adapter_attributes():
    assert get_tool("vdbench") is ADAPTER
    assert ADAPTER.target_types == ("directory", "block") and ADAPTER.output_is_folder
    assert ADAPTER.output_name("client01") == "client01.vdbench"
    assert "oracle.com/downloads/server-storage/vdbench-downloads.html" in ADAPTER.install_hint
    assert ADAPTER.target_directory(SPEC["target"], "client01") == "/mnt/nfs/bench/client01"
    assert ADAPTER.target_directory({"type": "block", "path": "/dev/sdb"}, "c") is None
    assert (REPO / "templates" / ADAPTER.default_template).is_file()


# --- the whole workflow with a stand-in vdbench ------------------------------------------


def test_workflow_runs_parses_and_reports_a_vdbench_experiment(tmp_path, monkeypatch):
    from tests.workflow.test_workflow import snakemake

    # Stands in for vdbench: the version banner, or the fixture's output folder as its -o.
    console = FIXTURES / "output-fileloop.console.txt"
    env = fake_vdbench(
        tmp_path,
        'case "$*" in */dev/null/*) cat "' + str(console) + '"; exit 255;; esac\n'
        'mkdir -p "$4" && cp -R "' + str(FILELOOP) + '/." "$4/" && chmod -R u+w "$4"\n'
        'cp "$2" "$4/job.seen"; printf "%s\\n" "$@" > "$4/args.seen"\n',
    )
    monkeypatch.setenv("PATH", env["PATH"])
    workdir = tmp_path / "campaign"
    workdir.mkdir()
    job = {
        "rw": "randread",
        "bs": "4k",
        "iodepth": 4,
        "size": "64m",
        "direct": 1,
        "runtime": "5s",
        "forxfersize": "4k,64k",
        "forrdpct": "0,70,100",
    }
    snakemake(
        workdir,
        {
            "hosts": {"localhost": {"transport": "local"}},
            "targets": {"scratch": {"type": "directory", "path": str(tmp_path / "target")}},
            "experiments": {
                "loop": {"tool": "vdbench", "hosts": "localhost", "target": "scratch", "job": job}
            },
        },
    )
    [output] = (workdir / "results/loop/raw").glob("*/it1/a1/localhost.vdbench")
    assert (output / "args.seen").read_text().split() == [
        "-f",
        str(output.parent / "job.vdb"),
        "-o",
        str(output),
        "storbench_host=localhost",
    ]
    assert (
        f"lun={tmp_path / 'target'}/$storbench_host/vdb.file," in (output / "job.seen").read_text()
    )
    rows = results.read_parquet(workdir / "results/loop/summary.parquet").to_pylist()
    jobs = {(row["host"], row["job"], row["op"]) for row in rows}
    assert len(jobs) == 16  # 8 (run, op) pairs of the 6 for-loop runs, localhost and all
    write = next(r for r in rows if r["host"] == "all" and r["job"] == label("4k", 0))
    assert write["ios"] == 124_552 and write["tool_version"] == "vdbench50407"
    series = results.read_parquet(
        workdir / "results/loop/timeseries.parquet", results.TIMESERIES_SCHEMA
    )
    assert series.num_rows == 40  # 5 intervals x 8 (run, op) pairs
    assert (workdir / "reports/loop/index.html").is_file()


def test_service_mode_drives_every_host_with_an_sd_per_host_and_lun():
    """One master for the run's hosts: hd= per host, sdH_L per host H and LUN L of the set."""
    luns = [{"name": f"lun{n}", "type": "block", "path": f"/dev/mapper/lun{n}"} for n in (1, 2)]
    spec = {
        "experiment": "afa", "run_id": "rw_t-all", "tool": "vdbench", "execution": "service",
        "hosts": ["c1", "c2"], "point": {},
        "target": {"name": "set", "type": "block", "members": luns, "path": luns[0]["path"]},
        "params": {"rw": "rw", "bs": "4k", "rwmixread": 20, "iodepth": 16, "runtime": "60s"},
    }  # fmt: skip
    lines = render_job(spec).splitlines()
    assert lines[1:4] == [
        "hd=default,vdbench=/opt/vdbench,user=root,shell=ssh",
        "hd=hd1,system=c1",
        "hd=hd2,system=c2",
    ]
    assert [line for line in lines if line.startswith("sd=")] == [
        "sd=default,threads=16",
        "sd=sd1_1,host=hd1,lun=/dev/mapper/lun1",
        "sd=sd1_2,host=hd1,lun=/dev/mapper/lun2",
        "sd=sd2_1,host=hd2,lun=/dev/mapper/lun1",
        "sd=sd2_2,host=hd2,lun=/dev/mapper/lun2",
    ]
    assert "wd=wd1,sd=sd*,xfersize=4k,rdpct=20,seekpct=0" in lines
    # the master runs once, on the controller, without the per-host variable
    argv = ADAPTER.controller_command(["/w/c1.vdb", "/w/c2.vdb"], "/w/out", ["c1:5570", "c2:5570"])
    assert argv[3:] == ["storbench-vdbench", "/w/c1.vdb", "/w/out", ""]
    assert ADAPTER.worker_command("ctl", 5570, 0) == [] and ADAPTER.service_per_run


def test_latency_slo_search_holds_vdbench_iorate():
    """vdbench's rd iorate holds an offered rate: closed-loop probes set threads, open-loop
    ones iorate with exponential (Poisson) or deterministic (linear) arrivals."""
    from storbench.config.campaign import ConfigError, load_campaign

    job = {"rw": "randread", "bs": "4k", "runtime": "30s", "direct": 1}
    assert ADAPTER.search_job_problems(job) == []
    assert ADAPTER.search_job_problems({**job, "rate": 100, "workload": "filesystem"}) == [
        "rate: set by the search for each probe; remove it",
        "workload: a search holds a raw workload's iorate (not fwdrate)",
    ]
    closed = ADAPTER.probe_options(job, 8, None, None)
    assert closed == {**job, "iodepth": 8}
    block = {"name": "lun", "type": "block", "path": "/dev/mapper/lun1"}
    params = ADAPTER.probe_options(job, 8, 25000, "poisson")
    spec = {**SPEC, "params": params, "point": {}, "target": block}
    lines = render_job(spec).splitlines()
    assert any(
        line.startswith("rd=rd1,wd=wd1,iorate=25000,elapsed=30,interval=1") for line in lines
    )
    assert any(line.startswith("rd=rd1,") and "distribution=exponential" in line for line in lines)
    assert ADAPTER.probe_options(job, 8, 10, "linear")["rd_distribution"] == "deterministic"
    raw = {
        "hosts": {"h": {"transport": "local"}},
        "targets": {"lun": {"type": "block", "path": "/dev/mapper/lun1"}},
        "experiments": {
            "slo": {"tool": "vdbench", "hosts": "h", "target": "lun", "job": job,
                    "search": {"objective": {"metric": "iops", "latency": "p99",
                                             "limit": "2ms"}}},
        },
    }  # fmt: skip
    assert load_campaign(raw).experiments["slo"].search["arrivals"] == "poisson"
    raw["experiments"]["slo"]["job"] = {**job, "iodepth": 4}
    with pytest.raises(ConfigError, match=r"experiments\.slo\.job\.iodepth: set by the search"):
        load_campaign(raw)


def test_a_run_without_for_loops_has_no_loop_named_none():
    """vdbench writes 'For loops: None' for a run without any: the run id stays 'rd1'."""
    from storbench.tools import vdbench_output

    line = "Starting RD=rd1; I/O rate: Uncontrolled MAX; elapsed=10; For loops: None"
    (start,) = [vdbench_output._run_start(m) for m in vdbench_output._START.finditer(line)]
    assert start.loops == {} and vdbench_output.run_label(start.name, start.loops) == "rd1"
    line = "Starting RD=rd1; I/O rate: Uncontrolled MAX; elapsed=10; For loops: xfersize=4k"
    (start,) = [vdbench_output._run_start(m) for m in vdbench_output._START.finditer(line)]
    assert start.loops == {"xfersize": "4k"}


def test_an_imported_folder_reads_its_parameter_log_and_error_files_once(monkeypatch):
    """Six runs in one output folder read parmfile.html, logfile.html and errorlog.html
    once, not once per run."""
    from storbench.tools import vdbench_output

    reads = []
    original = vdbench_output.parmfile_fileio
    monkeypatch.setattr(vdbench_output, "parmfile_fileio", lambda f: reads.append(f) or original(f))
    folder = FIXTURES / "output-fileloop"
    rows = get_tool("vdbench").import_outputs([folder], {"experiment": "imported"})
    assert len({row["run_id"] for row in rows}) == 6
    assert reads == [folder]


# --- CPU (schema v6) -----------------------------------------------------------------------


def test_fileloop_cpu_is_vdbenchs_host_cpu_on_every_row_of_the_run():
    rows = imported(FILELOOP)
    # totals.html line 23 (rd1, xfersize=4k rdpct=0): avg_2-5 ... cpu% sys+u 51.6, sys 39.5;
    # flatfile.html line 53, unrounded: cpu_used 51.5732 cpu_user 12.0383 cpu_kernel 39.5349
    write = host_rows(rows)[(label("4k", 0), "write")]
    assert write["cpu_pct"] == pytest.approx(51.5732)
    assert write["cpu_sys_pct"] == 39.5349
    assert write["cpu_basis"] == "host"
    assert close_to_printed(write["cpu_pct"], "51.6") and close_to_printed(39.5349, "39.5")
    # a mixed run (4k, rdpct=70: flatfile cpu_used 38.0818, cpu_kernel 29.7602; totals.html
    # 38.1 29.8): the host's CPU on its read and its write row, and on the 'all' rows
    mixed = [row for row in rows if row["job"] == label("4k", 70)]
    assert len(mixed) == 4  # read and write of the host and of 'all'
    assert {round(row["cpu_pct"], 4) for row in mixed} == {38.0818}
    assert {row["cpu_sys_pct"] for row in mixed} == {29.7602}


def test_filesystem_cpu_matches_totals_html():
    rows = imported(FILESYSTEM)
    # totals.html, the last run (64k, rdpct=70): avg_2-5 145872 0.009 89.1 63.6 (cpu% total,
    # sys); flatfile.html: cpu_used 89.0625 = cpu_user 25.3906 + cpu_kernel 63.6719
    read = host_rows(rows)[(label("64k", 70), "read")]
    assert read["cpu_pct"] == pytest.approx(89.0625)
    assert read["cpu_sys_pct"] == 63.6719
    assert close_to_printed(read["cpu_pct"], "89.1") and close_to_printed(63.6719, "63.6")
