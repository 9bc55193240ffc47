"""`storbench import` refuses what would lose or falsify results, naming the file.

Each case copies a real output from tests/fixtures into tmp_path, damages the copy the way
the import audit did (a second import over the first, the same run twice, a NaN cell, a
negative count, a secret on the recorded command line) and checks the one-line refusal, or
the rows, against numbers read from the fixture itself.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from storbench.cli import main
from storbench.core.secrets import scrub_command
from tests.paths import FIXTURES

STATUS = FIXTURES / "fio/status-interval.json.txt"
NOGROUP = FIXTURES / "fio/standalone-nogroup.jsonplus.json"


def imported(capsys, *args: str) -> tuple[int, str]:
    code = main(["import", *args])
    captured = capsys.readouterr()
    return code, captured.err if code else captured.out


def refusal(capsys, *args: str) -> str:
    code, err = imported(capsys, *args)
    assert code == 1, err
    assert err.startswith("storbench: error: ") and err.count("\n") == 1, err
    return err.removeprefix("storbench: error: ").rstrip("\n")


def fio_final_ios(path: Path) -> int:
    """read + write total_ios of every job in the last (final) document of a fio output."""
    text = path.read_text()
    last = json.loads(text[text.rindex('{\n  "fio version"') :])
    return sum(job[op]["total_ios"] for job in last["jobs"] for op in ("read", "write"))


# --- outputs ----------------------------------------------------------------------------


def test_rows_and_series_never_share_a_file_and_the_series_keeps_the_whole_stem(tmp_path, capsys):
    series_named = tmp_path / "f1.timeseries.parquet"
    assert refusal(capsys, "--tool", "fio", "-o", str(series_named), str(STATUS)) == (
        f"-o {series_named} ends in .timeseries.parquet, the name of a series file (the series "
        f"would go to {tmp_path / 'f1.timeseries.timeseries.parquet'}); name the results file "
        "otherwise"
    )
    same = tmp_path / "f1b.parquet"
    assert refusal(
        capsys, "--tool", "fio", "-o", str(same), "--series", str(same), str(STATUS)
    ) == (
        f"-o {same} and --series {same} are the same file: the series would replace the rows; "
        "give them different names"
    )
    assert list(tmp_path.iterdir()) == []
    # run.v1 and run.v2 keep their own series (the text before the first dot was shared)
    for name in ("run.v1", "run.v2"):
        code, out = imported(
            capsys, "--tool", "fio", "-o", str(tmp_path / f"{name}.parquet"), str(STATUS)
        )
        assert code == 0, out
        assert f"{tmp_path / name}.timeseries.parquet: 6 interval rows" in out
    rows = pq.read_table(tmp_path / "run.v1.parquet").to_pylist()
    ios = sum(r["ios"] for r in rows if r["host"] != "all")
    assert ios == fio_final_ios(STATUS) == 157328
    assert pq.read_table(tmp_path / "run.v1.timeseries.parquet").num_rows == 6


def test_an_existing_output_is_kept_unless_replace_which_drops_its_stale_series(tmp_path, capsys):
    output = tmp_path / "st.parquet"
    series = tmp_path / "st.timeseries.parquet"
    assert imported(capsys, "--tool", "fio", "-o", str(output), str(STATUS))[0] == 0
    before = output.read_bytes(), series.read_bytes()
    gosbench = [str(FIXTURES / "gosbench/run"), str(FIXTURES / "gosbench/gosbench-config.yaml")]
    assert refusal(capsys, "--tool", "gosbench", "-o", str(output), *gosbench) == (
        f"{output} exists (results of an earlier import or of a campaign); give --replace to "
        "overwrite it, or another -o"
    )
    assert (output.read_bytes(), series.read_bytes()) == before
    # a stale series beside a new output name is refused as well
    other = tmp_path / "st2.parquet"
    shutil.copy(series, tmp_path / "st2.timeseries.parquet")
    assert refusal(capsys, "--tool", "gosbench", "-o", str(other), *gosbench).startswith(
        f"{tmp_path / 'st2.timeseries.parquet'} exists"
    )
    code, out = imported(capsys, "--tool", "gosbench", "-o", str(output), "--replace", *gosbench)
    assert code == 0, out
    assert f"{series}: removed (the series of the rows replaced; these have none)" in out
    assert {r["tool"] for r in pq.read_table(output).to_pylist()} == {"gosbench"}
    assert not series.exists()


@pytest.mark.parametrize("kept", ["campaign.yaml", "fio-output.json"])
def test_replace_overwrites_only_a_parquet_file(kept, tmp_path, capsys):
    """Before: `-o campaign.yaml --replace` wrote the rows over the config, and `-o` naming
    the raw output being imported wrote them over that output."""
    path = tmp_path / kept
    shutil.copy(STATUS, path)
    before = path.read_bytes()
    assert refusal(capsys, "--tool", "fio", "-o", str(path), "--replace", str(path)) == (
        f"{path} is not a Parquet file; --replace overwrites only results of an earlier import"
        " or of a campaign: give another -o"
    )
    assert path.read_bytes() == before and sorted(tmp_path.iterdir()) == [path]


def test_a_campaigns_summary_is_not_overwritten(tmp_path, capsys):
    summary = tmp_path / "results/lab/demo/summary.parquet"
    summary.parent.mkdir(parents=True)
    assert imported(capsys, "--tool", "fio", "-o", str(summary), str(NOGROUP))[0] == 0
    before = summary.read_bytes()
    fixture = str(FIXTURES / "fio/standalone-group.jsonplus.json")
    message = refusal(capsys, "--tool", "fio", "--experiment", "demo", "-o", str(summary), fixture)
    assert message.startswith(f"{summary} exists") and "--replace" in message
    assert summary.read_bytes() == before


# --- the same run twice -----------------------------------------------------------------


def test_a_file_reached_twice_is_read_once(tmp_path, capsys):
    folder = tmp_path / "h1"
    folder.mkdir()
    copy = folder / NOGROUP.name
    shutil.copy(NOGROUP, copy)
    once = tmp_path / "once.parquet"
    assert imported(capsys, "--tool", "fio", "-o", str(once), str(copy))[0] == 0
    expected = pq.read_table(once).to_pylist()
    twice = tmp_path / "twice.parquet"
    dotted = folder / ".." / "h1" / NOGROUP.name
    code, out = imported(
        capsys, "--tool", "fio", "-o", str(twice), str(copy), str(dotted), str(folder), str(copy)
    )
    assert code == 0, out
    rows = pq.read_table(twice).to_pylist()
    assert len(rows) == len(expected) == 15
    document = json.loads(NOGROUP.read_text())
    fio_ios = sum(job[op]["total_ios"] for job in document["jobs"] for op in ("read", "write"))
    assert sum(r["ios"] for r in rows if r["host"] != "all") == fio_ios
    assert out.count(f"used (fio): {copy}") == 1


def test_two_sources_of_one_run_are_refused_naming_both(tmp_path, capsys):
    loop = tmp_path / "output-fileloop"
    system = tmp_path / "output-filesystem"
    shutil.copytree(FIXTURES / "vdbench/output-fileloop", loop)
    shutil.copytree(FIXTURES / "vdbench/output-filesystem", system)
    output = tmp_path / "out.parquet"
    message = refusal(capsys, "--tool", "vdbench", "-o", str(output), str(loop), str(system))
    assert message.startswith("run rd1_xfersize-4k_rdpct-0 (host ")
    assert f"comes from both {loop} and {system}" in message
    assert "import them as separate experiments (--experiment)" in message
    assert not output.exists()
    # two campaigns' copies of one fio run, the second's numbers different
    for campaign in ("campA", "campB"):
        (tmp_path / campaign / "h1").mkdir(parents=True)
        shutil.copy(NOGROUP, tmp_path / campaign / "h1/rr.json")
    message = refusal(capsys, "--tool", "fio", "-o", str(output), str(tmp_path / "campA"),
                      str(tmp_path / "campB"))  # fmt: skip
    assert message.startswith("run rr (host h1, job ")
    assert f"{tmp_path / 'campA/h1/rr.json'} and {tmp_path / 'campB/h1/rr.json'}" in message


# --- vdbench cells ----------------------------------------------------------------------


def damaged_line(path: Path, number: int, old: str, new: str) -> None:
    lines = path.read_text().splitlines(keepends=True)
    assert old in lines[number - 1]
    lines[number - 1] = lines[number - 1].replace(old, new, 1)
    path.write_text("".join(lines))


def test_a_nan_read_percent_is_refused_not_read_as_all_writes(tmp_path, capsys):
    """storbench's own 4-host run: parsed by its manifest, as the campaign's parse step does."""
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "vdbench/storbench-service-4hosts", run)
    output = tmp_path / "ok.parquet"
    assert imported(capsys, "--tool", "vdbench", "-o", str(output), str(run))[0] == 0
    ops = {r["op"]: r["ios"] for r in pq.read_table(output).to_pylist() if r["host"] == "all"}
    assert ops == {"read": 2964811, "write": 1272529}  # vdbench's 69.9687 % of 1059335 I/O/s
    flatfile = run / "a1/controller.vdbench/flatfile.html"
    damaged_line(flatfile, 48, "    69.9687 ", "        NaN ")
    message = refusal(capsys, "--tool", "vdbench", "-o", str(tmp_path / "x.parquet"), str(run))
    assert message == (
        f"{flatfile}:48: read% is 'NaN', not a number from 0 to 100 (run rd1, rate 1059335.0000)"
    )


@pytest.mark.parametrize("value", ["-102204.25", "NaN"])
def test_a_negative_or_nan_rate_is_refused_not_dropped(value, tmp_path, capsys):
    folder = tmp_path / "output-filesystem"
    shutil.copytree(FIXTURES / "vdbench/output-filesystem", folder)
    damaged_line(folder / "flatfile.html", 132, " 102204.25 ", f" {value} ")
    output = tmp_path / "out.parquet"
    assert refusal(capsys, "--tool", "vdbench", "-o", str(output), str(folder)) == (
        f"{folder / 'flatfile.html'}:132: Read_rate is '{value}', not a number >= 0 (run rd1)"
    )
    assert not output.exists()


# --- impossible values, whatever the tool -----------------------------------------------


def elbencho_csv_only(tmp_path: Path, column: str | None, value: str | None) -> Path:
    """A copy of elbencho/dirmode read from its CSV alone, the WRITE row's column set to
    value (None: the column removed from every line)."""
    folder = tmp_path / "dirmode"
    shutil.copytree(FIXTURES / "elbencho/dirmode", folder)
    (folder / "results.json").unlink()
    (folder / "results.txt").unlink()
    lines = (folder / "results.csv").read_text().splitlines()
    header = lines[0].split(",")
    out = []
    for line in lines:
        fields = line.split(",", len(header) - 1)  # the command (last) is not CSV-quoted
        if column is not None and value is None:
            del fields[header.index(column)]
        elif column is not None and fields[header.index("operation")] == "WRITE":
            fields[header.index(column)] = value
        out.append(",".join(fields))
    (folder / "results.csv").write_text("\n".join(out) + "\n")
    return folder


@pytest.mark.parametrize(
    ("column", "value", "shown"),
    [("IOPS [last]", "-1116", "iops = -1116.0"), ("IOPS [last]", "nan", "iops = nan"),
     ("MiB/s [last]", "inf", "bw_bytes_s = inf"), ("MiB [last]", "-32", "bytes = -33554432")],
)  # fmt: skip
def test_an_impossible_elbencho_value_is_refused(column, value, shown, tmp_path, capsys):
    folder = elbencho_csv_only(tmp_path, column, value)
    assert refusal(
        capsys, "--tool", "elbencho", "-o", str(tmp_path / "o.parquet"), str(folder)
    ) == (
        f"{folder}: run dirmode-2t (host localhost): {shown} is not a number >= 0; is the "
        "tool's output corrupt?"
    )


@pytest.mark.parametrize("column", ["IOPS [last]", "MiB [last]"])
def test_an_elbencho_csv_without_a_measure_column_is_refused(column, tmp_path, capsys):
    folder = elbencho_csv_only(tmp_path, column, None)
    assert refusal(
        capsys, "--tool", "elbencho", "-o", str(tmp_path / "o.parquet"), str(folder)
    ) == (
        f"{folder / 'results.csv'}:1: the header lacks column(s) '{column}' (not elbencho's "
        "result CSV as storbench reads it)"
    )


def fio_damaged(tmp_path: Path, change) -> Path:
    document = json.loads((FIXTURES / "fio/standalone-group.jsonplus.json").read_text())
    change(document["jobs"][0]["read"])
    path = tmp_path / "h1" / "bad.json"
    path.parent.mkdir()
    path.write_text(json.dumps(document))  # Infinity and NaN as Python's json writes them
    return path


@pytest.mark.parametrize(
    ("change", "shown"),
    [(lambda read: read.update(iops=float("inf")), "iops = inf"),
     (lambda read: read["lat_ns"].update(mean=float("nan")), "lat_mean_ns = nan"),
     (lambda read: read["clat_ns"]["bins"].update({"100": -7}), "hist_count = -7")],
)  # fmt: skip
def test_an_impossible_fio_value_is_refused_naming_file_run_and_host(
    change, shown, tmp_path, capsys
):
    path = fio_damaged(tmp_path, change)
    assert refusal(capsys, "--tool", "fio", "-o", str(tmp_path / "o.parquet"), str(path)) == (
        f"{path}: run bad (host h1): {shown} is not a number >= 0; is the tool's output corrupt?"
    )


def test_a_count_too_large_names_the_file_and_a_short_value(tmp_path, capsys):
    path = fio_damaged(tmp_path, lambda read: read.update(io_bytes=10**300))
    assert refusal(capsys, "--tool", "fio", "-o", str(tmp_path / "o.parquet"), str(path)) == (
        f"{path}: run bad (host h1): bytes = 100000000000000000000000... (301 characters) does "
        "not fit the result schema (int64); is the tool's output corrupt?"
    )


def test_warp_and_iperf3_counts_below_zero_are_refused(tmp_path, capsys):
    warp = json.loads((FIXTURES / "warp/analyze-mixed.json").read_text())
    get = next(entry for entry in warp["by_op_type"].values() if entry.get("total_requests"))
    op_type = next(name for name, entry in warp["by_op_type"].items() if entry is get)
    get["total_requests"] = -5
    path = tmp_path / "neg-req.json"
    path.write_text(json.dumps(warp))
    assert refusal(capsys, "--tool", "warp", "-o", str(tmp_path / "w.parquet"), str(path)) == (
        f"{path}: {op_type}.total_requests is -5, not a number >= 0"
    )
    get["total_requests"] = float("nan")
    path.write_text(json.dumps(warp))
    assert refusal(capsys, "--tool", "warp", "-o", str(tmp_path / "w.parquet"), str(path)) == (
        f"{path}: {op_type}.total_requests is nan, not a number >= 0"
    )
    iperf = json.loads((FIXTURES / "iperf3/client-single-stream.json").read_text())
    iperf["end"]["sum_sent"]["bytes"] = iperf["end"]["sum_received"]["bytes"] = -100
    path = tmp_path / "neg.json"
    path.write_text(json.dumps(iperf))
    message = refusal(capsys, "--tool", "iperf3", "-o", str(tmp_path / "i.parquet"), str(path))
    assert message.startswith(f"{path}: run neg (host ") and "bytes = -100 is not" in message
    iperf["end"]["sum_sent"]["bytes"] = 1
    iperf["start"]["version"] = "iperf 4.0"
    path.write_text(json.dumps(iperf))
    assert refusal(capsys, "--tool", "iperf3", "-o", str(tmp_path / "i.parquet"), str(path)) == (
        f"{path}: iperf JSON output of version 'iperf 4.0'; storbench reads iperf 3.x"
    )


# --- secrets and messages ---------------------------------------------------------------


def test_secret_options_on_a_recorded_command_line_become_stars(tmp_path, capsys):
    folder = elbencho_csv_only(tmp_path, None, None)
    csv = folder / "results.csv"
    keys = '"--s3key" "AKIAFAKEKEY123" "--s3secret" "SuperSecret987xyz" "--label"'
    csv.write_text(csv.read_text().replace('"--label"', keys))
    output = tmp_path / "sec.parquet"
    assert imported(capsys, "--tool", "elbencho", "-o", str(output), str(folder))[0] == 0
    commands = {r["command"] for r in pq.read_table(output).to_pylist()}
    assert len(commands) == 1
    (command,) = commands
    assert '"--cpu" "--s3key" "***" "--s3secret" "***" "--label" "dirmode-2t"' in command
    assert b"SuperSecret987xyz" not in output.read_bytes()
    assert b"AKIAFAKEKEY123" not in output.read_bytes()
    assert scrub_command("warp get --access-key=AK1 --secret-key SK2 --host h:9000") == (
        "warp get --access-key=*** --secret-key *** --host h:9000"
    )
    assert scrub_command("WARP_SECRET_KEY=SK2 warp put --obj.size 4KiB") == (
        "WARP_SECRET_KEY=*** warp put --obj.size 4KiB"
    )


def test_a_utf16_elbencho_csv_is_named_not_text(tmp_path, capsys):
    folder = elbencho_csv_only(tmp_path, None, None)
    csv = folder / "results.csv"
    csv.write_bytes(csv.read_text().encode("utf-16"))
    assert refusal(
        capsys, "--tool", "elbencho", "-o", str(tmp_path / "o.parquet"), str(folder)
    ) == (
        f"{csv}: not UTF-8 text (byte 0), not an elbencho result CSV (binary data, or text in "
        "another encoding such as UTF-16)"
    )


def test_a_broken_gosbench_config_given_is_named_without_its_line(tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "gosbench/run", run)
    config = tmp_path / "gosbench-config.yaml"
    text = (FIXTURES / "gosbench/gosbench-config.yaml").read_text()
    line = next(n for n, ln in enumerate(text.splitlines(), 1) if "secret_key:" in ln)
    lines = text.splitlines()
    lines[line - 1] = lines[line - 1] + ": GosSecret42"
    config.write_text("\n".join(lines) + "\n")
    message = refusal(capsys, "--tool", "gosbench", "-o", str(tmp_path / "g.parquet"), str(run),
                      str(config))  # fmt: skip
    assert message.startswith(f"{config}:{line}:")
    assert "not a readable gosbench config (YAML: mapping values are not allowed here" in message
    assert "GosSecret42" not in message


def test_a_status_interval_output_cut_between_two_reports_is_refused(tmp_path, capsys):
    """Cut after its fifth report, fio's output still decodes: its last report is a status
    report at 4.893 s of the 5 s time-based run, whose 153,840 I/Os (not the final 157,328)
    would be imported as the run's."""
    text = STATUS.read_text()
    cut = tmp_path / "localhost" / "cut.json"
    cut.parent.mkdir()
    cut.write_text(text[: text.rindex('{\n  "fio version"')])
    assert fio_final_ios(cut) == 153840
    assert refusal(capsys, "--tool", "fio", "-o", str(tmp_path / "o.parquet"), str(cut)) == (
        f"{cut}: its last whole report is a status report at 4.893 s of the 5 s time-based"
        " job 'randread-4k': the final report is missing (the output cut short?)"
    )
    assert not (tmp_path / "o.parquet").exists()
