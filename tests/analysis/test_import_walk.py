"""`storbench import` of a folder as a user has it: files found by content, series kept.

The folder is laid out the way results travel between colleagues (renamed files, a tool's
output one folder down, a failed run among good ones, notes beside them); every number
checked here is the tool's own, read from the fixture independently of the import.
"""

from __future__ import annotations

import json
import shutil

import pyarrow.parquet as pq
import pytest

from storbench.cli import main
from tests.paths import FIXTURES


@pytest.fixture
def user_folder(tmp_path):
    folder = tmp_path / "from-a-colleague"
    (folder / "fio").mkdir(parents=True)
    # a status-interval output saved as .txt, under a name of its own
    shutil.copy(FIXTURES / "fio/status-interval.json.txt", folder / "fio/nightly-run.txt")
    shutil.copytree(FIXTURES / "iperf3", folder / "network")  # includes a refused run
    (folder / "warp").mkdir()
    shutil.copy(FIXTURES / "warp/analyze-mixed.json", folder / "warp/analyze-mixed.json")
    shutil.copytree(FIXTURES / "vdbench/output-fileloop", folder / "vdbench/output")
    shutil.copytree(FIXTURES / "elbencho/bigfile-rand4k", folder / "elbencho/bigfile")
    (folder / "notes.md").write_text("# what we ran\n")
    return folder


def import_folder(folder, tmp_path, capsys, *extra):
    output = tmp_path / "out" / "imported.parquet"
    code = main(["import", "-o", str(output), *extra, str(folder)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    rows = pq.read_table(output).to_pylist()
    series_path = output.with_name("imported.timeseries.parquet")
    series = pq.read_table(series_path).to_pylist() if series_path.exists() else []
    return rows, series, captured.out


def test_each_file_is_recognised_by_content_and_the_report_says_what_was_used(
    user_folder, tmp_path, capsys
):
    rows, _, report = import_folder(user_folder, tmp_path, capsys)
    assert {row["tool"] for row in rows} == {"fio", "iperf3", "warp", "vdbench", "elbencho"}
    assert f"used (fio): {user_folder / 'fio/nightly-run.txt'}" in report
    assert f"used (vdbench): {user_folder / 'vdbench/output'}" in report
    assert f"used (warp): {user_folder / 'warp/analyze-mixed.json'}" in report
    assert f"skipped: {user_folder / 'notes.md'} (no tool's output)" in report
    refused = user_folder / "network/client-error-connection-refused.json"
    assert f"skipped: {refused} (iperf3 failed: unable to connect to server" in report
    assert f"used (iperf3): {refused}" not in report
    iperf_runs = {row["run_id"] for row in rows if row["tool"] == "iperf3"}
    assert (
        "client-single-stream" in iperf_runs and "client-error-connection-refused" not in iperf_runs
    )


def test_series_are_the_tools_own_intervals(user_folder, tmp_path, capsys):
    rows, series, _ = import_folder(user_folder, tmp_path, capsys)
    # iperf3: one row per interval, bytes as iperf3 counted them
    document = json.loads((FIXTURES / "iperf3/client-single-stream.json").read_text())
    iperf = [r for r in series if r["tool"] == "iperf3" and r["run_id"] == "client-single-stream"]
    assert [r["bytes"] for r in iperf] == [i["sum"]["bytes"] for i in document["intervals"]]
    # fio: every status-interval document but the final one is an interval of the run
    text = (FIXTURES / "fio/status-interval.json.txt").read_text()
    documents = text.count('"fio version"')
    fio = [r for r in series if r["tool"] == "fio" and r["run_id"] == "nightly-run"]
    assert len({r["t_s"] for r in fio}) >= documents - 1 > 0
    # elbencho: the live CSV's 'Total' lines of each phase, by label
    live = (FIXTURES / "elbencho/bigfile-rand4k/live.csv").read_text().splitlines()[1:]
    totals = [line.split(",") for line in live if line.split(",")[4] == "Total"]
    elbencho = [r for r in series if r["tool"] == "elbencho"]
    assert len(elbencho) == len(totals)
    assert {r["run_id"] for r in elbencho} == {fields[1] for fields in totals}
    assert {r["run_id"] for r in elbencho} <= {r["run_id"] for r in rows}
    # vdbench: its interval lines, under the run ids of the rows
    vdbench = [r for r in series if r["tool"] == "vdbench"]
    assert vdbench and {r["run_id"] for r in vdbench} <= {r["run_id"] for r in rows}


def test_one_tool_only_and_a_named_file_of_another_tool(user_folder, tmp_path, capsys):
    rows, _, report = import_folder(user_folder / "network", tmp_path, capsys, "--tool", "iperf3")
    assert {row["tool"] for row in rows} == {"iperf3"}
    output = tmp_path / "other.parquet"
    named = user_folder / "warp/analyze-mixed.json"
    assert main(["import", "--tool", "fio", "-o", str(output), str(named)]) == 1
    assert f"{named}: warp output, not fio" in capsys.readouterr().err


def cut(source, target, keep) -> None:
    data = source.read_bytes()
    target.write_bytes(data[: keep(data)])


@pytest.mark.parametrize(
    ("source", "name", "keep", "message"),
    [
        # inside the quoted path of the last line: every field is still there
        ("elbencho/bigfile-rand4k/results.csv", "results.csv",
         lambda data: data.find(b'"', data.rstrip().rfind(b"\n")) + 5,
         "truncated: the last line ends without its newline"),
        ("warp/analyze-mixed.json", "analyze-mixed.json", lambda data: len(data) // 2,
         "truncated: the JSON document ends at byte"),
        ("warp/warp-put.json.zst", "warp-put.json.zst", lambda data: len(data) - 6,
         "truncated: the zstd data ends inside its frame"),
    ],
)  # fmt: skip
def test_a_truncated_output_is_named_not_imported(source, name, keep, message, tmp_path, capsys):
    folder = tmp_path / "outputs"
    folder.mkdir()
    cut(FIXTURES / source, folder / name, keep)
    output = tmp_path / "imported.parquet"
    assert main(["import", "-o", str(output), str(folder / name)]) == 1
    err = capsys.readouterr().err
    assert f"{folder / name}" in err and message in err, err
    assert not output.exists()
    # found one folder down, beside a good output: skipped, and the report says why
    shutil.copy(FIXTURES / "iperf3/client-single-stream.json", tmp_path)
    assert main(["import", "-o", str(output), str(tmp_path)]) == 0
    report = capsys.readouterr().out
    assert "skipped: " in report and message in report
    assert f"used (iperf3): {tmp_path / 'client-single-stream.json'}" in report


STORBENCH_RUNS = [
    "elbencho/storbench-service-4hosts-dir",
    "warp/storbench-distributed-4clients",
    "gosbench/storbench-service-4workers",
    "vdbench/storbench-service-4hosts",
    "vdbench/storbench-service-4hosts-fsd",
]
COMPARED = ("run_id", "host", "op", "bytes", "ios", "iops", "bw_bytes_s", "lat_mean_ns",
            "hosts_in_run", "step", "target", "start_time")  # fmt: skip


@pytest.mark.parametrize("fixture", STORBENCH_RUNS)
def test_a_run_folder_storbench_wrote_imports_as_its_parse_gives_it(fixture, tmp_path, capsys):
    """The folder as it is (run.json beside a1/, the job file beside it): the same rows and
    series as the workflow's own parse of the run in its results tree."""
    from storbench.analysis.ingest import iteration_rows
    from tests.tools.test_service_mode_outputs import staged

    parsed, parsed_series = iteration_rows(str(staged(tmp_path, fixture)), with_timeseries=True)
    rows, series, report = import_folder(FIXTURES / fixture, tmp_path, capsys)
    assert f"used (storbench): {FIXTURES / fixture}" in report

    def table(found):
        return sorted(tuple(str(row.get(key)) for key in COMPARED) for row in found)

    assert table(rows) == table(parsed)
    assert {row["experiment"] for row in rows} == {"imported"}
    assert len(series) == len(parsed_series or [])


def test_elbencho_console_output_names_no_host(tmp_path, capsys):
    """The console of a 2-host service run says neither host nor host count: its numbers
    are elbencho's totals, so they become 'all' rows only (the same as its results file's)."""
    console = read_rows_of(tmp_path, capsys, "elbencho/service-2hosts/console.stdout.txt")
    results = read_rows_of(tmp_path, capsys, "elbencho/service-2hosts/results.txt")
    assert {row["host"] for row in console} == {"all"}
    by_op = {row["op"]: row for row in results if row["host"] == "all"}
    for row in console:
        assert (row["iops"], row["bytes"]) == (by_op[row["op"]]["iops"], by_op[row["op"]]["bytes"])


def read_rows_of(tmp_path, capsys, fixture: str) -> list[dict]:
    output = tmp_path / f"{fixture.replace('/', '-')}.parquet"
    assert main(["import", "--tool", "elbencho", "-o", str(output), str(FIXTURES / fixture)]) == 0
    capsys.readouterr()
    return pq.read_table(output).to_pylist()


def test_a_real_fio_campaigns_raw_folder_imports_as_its_parse(tmp_path, capsys):
    """A campaign run here (fio, two runs x two iterations, status intervals): importing its
    results/<experiment>/raw folder as it is gives the rows and series its parse wrote."""
    from tests.workflow.test_workflow import snakemake, tiny_config

    config = tiny_config(tmp_path / "target")
    config["experiments"]["tiny"]["job"]["status_interval"] = "1s"
    config["report"] = {"pdf": False}
    snakemake(tmp_path, config, "results/tiny/summary.parquet", "results/tiny/timeseries.parquet")
    parsed = pq.read_table(tmp_path / "results/tiny/summary.parquet").to_pylist()
    parsed_series = pq.read_table(tmp_path / "results/tiny/timeseries.parquet").to_pylist()
    rows, series, report = import_folder(tmp_path / "results/tiny/raw", tmp_path, capsys)
    assert report.count("used (storbench): ") == 4  # two runs x two iterations

    def table(found, keys):
        return sorted(tuple(str(row.get(key)) for key in keys) for row in found)

    keys = (*COMPARED, "iteration", "p99_ns", "clat_mean_ns")
    assert table(rows, keys) == table(parsed, keys)
    series_keys = ("run_id", "iteration", "host", "op", "t_s", "bytes", "ios")
    assert table(series, series_keys) == table(parsed_series, series_keys)
    assert len(series) > 0
