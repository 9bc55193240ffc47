"""Bad raw tool output: parsed as the tool wrote it, or refused naming the file; no partial Parquet.

Every case starts from a real output in tests/fixtures (read in place, never edited) and
writes its damaged copy into tmp_path: non-UTF-8 bytes, a cut at several points, an empty
file, output of another fio version with fields renamed or removed. `storbench parse` reads
it through a run manifest laid out as the runner writes one; `storbench import` reads the
other tools' files; Snakemake reparses a finished campaign whose raw output was damaged.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from storbench import cli
from tests.paths import FIXTURES as SHARED_FIXTURES
from tests.workflow.test_workflow import snakemake, tiny_config

SHARED = SHARED_FIXTURES
FIO = SHARED / "fio"
GROUP = "standalone-group.jsonplus.json"  # 4 jobs; randrw has reads and writes
STATUS = "status-interval.json.txt"  # 5 interim reports, then the final one


def fixture(name: str = GROUP) -> bytes:
    return (FIO / name).read_bytes()


def fixture_doc(name: str = GROUP) -> dict:
    return json.loads(fixture(name))


def write_iteration(folder: Path, outputs: dict, params: dict | None = None) -> Path:
    """it<k>/ as the runner leaves it: a1/<host>.json per host (None: missing) and run.json."""
    (folder / "a1").mkdir(parents=True)
    for host, data in outputs.items():
        if data is not None:
            (folder / "a1" / f"{host}.json").write_bytes(data)
    hosts = [
        {"name": host, "command": ["fio", "job.fio"], "exit_code": 0, "output": f"{host}.json",
         "start_time": "2026-11-21T06:00:00+00:00", "end_time": "2026-11-21T06:00:06+00:00"}
        for host in outputs
    ]  # fmt: skip
    manifest = {
        "experiment": "bad", "run_id": "randread_bs4k", "iteration": 1, "attempt": 1,
        "tool": "fio", "raw_dir": "a1", "job_file": "../../jobs/randread_bs4k.fio",
        "job_file_sha256": "0" * 64, "params": params or {"bs": "4k"},
        "target": {"name": "scratch", "type": "directory", "path": "/srv"}, "hosts": hosts,
    }  # fmt: skip
    (folder / "run.json").write_text(json.dumps(manifest))
    return folder / "run.json"


def parse(manifest: Path, capsys) -> tuple[int, str, list[str]]:
    """(exit code, stderr, files in the output folder) of `storbench parse`."""
    out = manifest.parent.parent / "parsed"
    code = cli.main(["parse", "--manifest", str(manifest), "--output", str(out / "it1.parquet"),
                     "--timeseries", str(out / "it1.timeseries.parquet")])  # fmt: skip
    published = sorted(p.name for p in out.iterdir()) if out.exists() else []
    return code, capsys.readouterr().err, published


def refused(manifest: Path, capsys, *expected: str) -> str:
    code, err, published = parse(manifest, capsys)
    assert code == 1 and err.startswith("storbench: error: ") and "Traceback" not in err
    assert published == []  # no Parquet, no temp file left behind
    for text in expected:
        assert text in err, err
    return err


def fio_numbers(doc: dict) -> dict:
    """(job, op) -> (bytes, ios, iops) of every direction with I/O, as fio printed them."""
    return {
        (job["jobname"], op): (job[op]["io_bytes"], job[op]["total_ios"], job[op]["iops"])
        for job in doc["jobs"]
        for op in ("read", "write", "trim")
        if job[op]["total_ios"] > 0
    }


def row_numbers(parquet: Path, host: str = "h1") -> dict:
    rows = [r for r in pq.read_table(parquet).to_pylist() if r["host"] == host]
    return {(r["job"], r["op"]): (r["bytes"], r["ios"], r["iops"]) for r in rows}


def versions(parquet: Path) -> set:
    return set(pq.read_table(parquet, columns=["tool_version"]).column(0).to_pylist())


# --- damaged fio output: refused, naming the file ---------------------------------------------


def edited(edit) -> bytes:
    doc = fixture_doc()
    edit(doc)
    return json.dumps(doc, indent=1).encode()


def each_direction(doc: dict, edit) -> None:
    for job in doc["jobs"]:
        for op in ("read", "write", "trim"):
            edit(doc, job[op], op)


def old_fio_layout(doc, stats, op):
    """fio 2.x: latencies in µs under 'lat'/'clat', no '*_ns'."""
    doc["fio version"] = "fio-2.2.10"
    stats["lat"], stats["clat"] = stats.pop("lat_ns"), stats.pop("clat_ns")


@pytest.mark.parametrize(
    ("damaged", "expected"),
    [
        (b"", "no complete fio JSON document (output is empty)"),
        (b"\n  \n", "no complete fio JSON document (output is empty)"),
        (fixture()[:10], "no complete fio JSON document (first line: '{')"),
        (fixture()[: len(fixture()) // 2], "no complete fio JSON document"),
        (fixture()[:-3], "no complete fio JSON document"),
        (b"fio: engine libaio not loadable\n", "(first line: 'fio: engine libaio not loadable')"),
        (b"\xff\xfe\x00\x81", "no complete fio JSON document (first line: '\ufffd\ufffd"),
        (b"[1, 2]\n", "no complete fio JSON document"),
        (fixture(STATUS)[:-200], "truncated: the JSON document starting at character"),
        (edited(lambda d: each_direction(d, old_fio_layout)),
         "job 'randread-4k': no 'read.lat_ns' or 'read.clat_ns' (output of fio-2.2.10; "
         "storbench reads fio 3.x json/json+)"),
        (edited(lambda d: each_direction(d, lambda _, s, __: s.__setitem__(
            "ios_total", s.pop("total_ios")))), "job 'randread-4k': no 'read.total_ios'"),
        (edited(lambda d: d["jobs"][2]["read"].pop("io_bytes")),
         "job 'seqread-1m': no 'read.io_bytes' (output of fio-3.33"),
        (edited(lambda d: d["jobs"][0]["read"].update(iops="fast")),
         "job 'randread-4k': 'read.iops' is 'fast', not a number >= 0"),
        (edited(lambda d: d["jobs"][1]["write"].update(total_ios=-5)),
         "job 'randwrite-4k': 'write.total_ios' is -5, not a whole number >= 0"),
        (edited(lambda d: d["jobs"][0]["read"].update(io_bytes="123")),
         "'read.io_bytes' is '123', not a whole number >= 0"),
        (edited(lambda d: d.update(jobs=[])), "the JSON document lists no jobs"),
        (edited(lambda d: d.update(jobs=5)), "unexpected fio JSON layout (output of fio-3.33"),
        (edited(lambda d: (d.pop("fio version"), d["jobs"][0].pop("read"))),
         "job 'randread-4k' has no 'read' statistics\n"),
        (edited(lambda d: d.update({"jobs": None, "client_stats": None})),
         "unexpected fio JSON layout"),
    ],
    ids=[
        "empty", "blank", "cut-at-10-bytes", "cut-in-half", "cut-before-last-brace",
        "error-text-only", "binary-junk", "json-array", "status-interval-final-cut",
        "fio-2-layout", "total-ios-renamed", "io-bytes-removed", "iops-not-a-number",
        "negative-count", "count-as-text", "no-jobs", "jobs-not-a-list", "no-version-no-read",
        "null-sections",
    ],
)  # fmt: skip
def test_damaged_output_is_refused_naming_the_file(damaged, expected, tmp_path, capsys):
    manifest = write_iteration(tmp_path / "it1", {"h1": damaged}, params={"status_interval": "1s"})
    raw_file = tmp_path / "it1/a1/h1.json"
    refused(manifest, capsys, f"{raw_file} (fio output of host h1): ", expected)


def test_one_bad_host_fails_the_iteration_naming_that_host(tmp_path, capsys):
    good, cut = fixture(), fixture()[:5000]
    manifest = write_iteration(tmp_path / "it1", {"h1": good, "h2": cut, "h3": good})
    err = refused(manifest, capsys, f"{tmp_path}/it1/a1/h2.json (fio output of host h2)")
    assert "h1.json" not in err and "h3.json" not in err


def test_missing_output_file_is_named(tmp_path, capsys):
    manifest = write_iteration(tmp_path / "it1", {"h1": fixture(), "h2": None})
    refused(manifest, capsys, f"{tmp_path}/it1/a1/h2.json: cannot read fio output: No such file")


@pytest.mark.parametrize(
    ("manifest_text", "expected"),
    [(None, "cannot read the run manifest: No such file"), ('{"tool": "fi', "not a run manifest"),
     ("[]", "not a run manifest (a JSON object)")],
    ids=["missing", "cut", "array"],
)  # fmt: skip
def test_bad_manifest_is_named(manifest_text, expected, tmp_path, capsys):
    manifest = write_iteration(tmp_path / "it1", {"h1": fixture()})
    if manifest_text is None:
        manifest.unlink()
    else:
        manifest.write_text(manifest_text)
    refused(manifest, capsys, f"{manifest}: {expected}")


NOT_AS_WRITTEN = "not a run manifest as storbench writes it"


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda m: m.update(hosts=[]), f"{NOT_AS_WRITTEN} (IndexError: tuple index out of range)"),
        (lambda m: m.update(target="scratch"),
         'not a run manifest: manifest spec: target must be a mapping, not "scratch"'),
        (lambda m: m["hosts"][0].update(start_time="yesterday"),
         f"{NOT_AS_WRITTEN} (ValueError: Invalid isoformat string: 'yesterday')"),
        (lambda m: m.update(tool="fioo"),
         f"{NOT_AS_WRITTEN} (UnknownToolError: unknown tool 'fioo' (known: elbencho, fio, "
         "gosbench, iperf3, vdbench, warp))"),
    ],
    ids=["no-hosts", "target-a-name", "start-time-no-time", "unknown-tool"],
)  # fmt: skip
def test_a_manifest_edited_out_of_shape_is_named(edit, expected, tmp_path, capsys):
    """Found by mutating a manifest at random: each stopped the parse with a traceback."""
    manifest = write_iteration(tmp_path / "it1", {"h1": fixture()})
    spec = json.loads(manifest.read_text())
    edit(spec)
    manifest.write_text(json.dumps(spec))
    assert refused(manifest, capsys) == f"storbench: error: {manifest}: {expected}\n"


def test_cut_client_server_output_names_the_controller_file(tmp_path, capsys):
    manifest = write_iteration(tmp_path / "it1", {"h1": None})
    (tmp_path / "it1/a1/controller.json").write_bytes(fixture("client-server.jsonplus.json")[:999])
    spec = json.loads(manifest.read_text())
    spec.update(execution="service", controller={"output": "controller.json"})
    spec["hosts"][0]["endpoint"] = "127.0.0.1:8765"
    manifest.write_text(json.dumps(spec))
    refused(manifest, capsys, f"{tmp_path}/it1/a1/controller.json (fio client output)")


def test_parse_exits_1_as_a_process(tmp_path):
    manifest = write_iteration(tmp_path / "it1", {"h1": fixture()[:777]})
    result = subprocess.run(
        [sys.executable, "-m", "storbench", "parse", "--manifest", str(manifest),
         "--output", str(tmp_path / "parsed/it1.parquet")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{tmp_path}/it1/a1/h1.json (fio output of host h1)" in result.stderr
    assert not (tmp_path / "parsed").exists()


# --- output that differs but still parses, with its own version recorded ---------------------


def test_intact_fixture_gives_fio_numbers(tmp_path, capsys):
    manifest = write_iteration(tmp_path / "it1", {"h1": fixture()})
    assert parse(manifest, capsys)[:1] == (0,)
    parsed = tmp_path / "parsed/it1.parquet"
    assert row_numbers(parsed) == fio_numbers(fixture_doc())
    assert len(row_numbers(parsed)) == 5 and versions(parsed) == {"fio-3.33"}


def test_non_utf8_junk_around_the_json_is_tolerated(tmp_path, capsys):
    junk = b"\xff\xfe\x00 wrapper noise \x81\n" + fixture() + b"\n\xc3\x28 trailing noise\n"
    manifest = write_iteration(tmp_path / "it1", {"h1": junk})
    assert parse(manifest, capsys)[:1] == (0,)
    assert row_numbers(tmp_path / "parsed/it1.parquet") == fio_numbers(fixture_doc())


def test_non_utf8_bytes_in_a_job_name_become_replacement_characters(tmp_path, capsys):
    raw = fixture().replace(b'"jobname" : "seqread-1m"', b'"jobname" : "seq\xffread-1m"', 1)
    manifest = write_iteration(tmp_path / "it1", {"h1": raw})
    assert parse(manifest, capsys)[:1] == (0,)
    expected = {
        (job.replace("seqread", "seq\ufffdread"), op): numbers
        for (job, op), numbers in fio_numbers(fixture_doc()).items()
    }
    assert row_numbers(tmp_path / "parsed/it1.parquet") == expected


def test_other_fio_version_with_unused_fields_changed_parses_and_records_it(tmp_path, capsys):
    def newer_fio(doc):
        doc["fio version"] = "fio-3.41"
        doc.pop("disk_util")
        for job in doc["jobs"]:
            job["latency_buckets"] = job.pop("latency_ns")  # renamed: storbench does not read it
            for op in ("read", "write", "trim"):
                job[op]["slat"] = job[op].pop("slat_ns")
                job[op]["new_counter"] = 7

    manifest = write_iteration(tmp_path / "it1", {"h1": edited(newer_fio)})
    assert parse(manifest, capsys)[:1] == (0,)
    parsed = tmp_path / "parsed/it1.parquet"
    assert row_numbers(parsed) == fio_numbers(fixture_doc())
    assert versions(parsed) == {"fio-3.41"}


def test_status_interval_output_uses_the_final_report(tmp_path, capsys):
    manifest = write_iteration(
        tmp_path / "it1", {"h1": fixture(STATUS)}, params={"status_interval": "1s"}
    )
    assert parse(manifest, capsys)[:1] == (0,)
    (final_read,) = [row for row in row_numbers(tmp_path / "parsed/it1.parquet").values()]
    final = json.loads("{" + fixture(STATUS).decode().rsplit("\n{", 1)[1])["jobs"][0]["read"]
    assert final_read == (final["io_bytes"], final["total_ios"], final["iops"])
    assert final["runtime"] == 5001  # the last of the six documents, not an interim one


# --- other tools' outputs through `storbench import` -----------------------------------------

# tool -> (fixture file or folder, the file in it to damage, extra paths for the import,
#          text the last result starts with; default: the last line)
IMPORTS = {
    "iperf3": ("iperf3/client-single-stream.json", None, (), None),
    "warp": ("warp/analyze-put-full.json", None, (), None),
    "elbencho": ("elbencho/bigfile-rand4k", "results.json", (), None),
    "vdbench": ("vdbench/output-fileloop", "flatfile.html", (), None),
    "gosbench": ("gosbench/run", "server.console.txt", ("gosbench/gosbench-config.yaml",),
                 b'time="2026-11-21T06:07:22Z" level=info msg="PERF RESULTS"'),
}  # fmt: skip


@pytest.mark.parametrize(
    "damage", ["empty", "cut-in-half", "last-result-cut", "last-result-dropped"]
)
@pytest.mark.parametrize("tool", sorted(IMPORTS))
def test_damaged_output_of_every_tool_is_refused_on_import(tool, damage, tmp_path, capsys):
    source, inner, extras, last_result = IMPORTS[tool]
    copy = tmp_path / Path(source).name
    if inner:
        shutil.copytree(SHARED / source, copy)
    else:
        shutil.copy(SHARED / source, copy)
    extra_copies = [shutil.copy(SHARED / extra, tmp_path) for extra in extras]
    damaged = copy / inner if inner else copy
    data = damaged.read_bytes()
    start = data.rfind(last_result) if last_result else data.rstrip().rfind(b"\n") + 1
    end = data.find(b"\n", start) % (len(data) + 1)  # the end of that line, or of the file
    cut = {
        "empty": 0,
        "cut-in-half": len(data) // 2,
        "last-result-cut": (start + end) // 2,
        "last-result-dropped": start,  # cut at a line boundary: each line left is whole
    }
    damaged.write_bytes(data[: cut[damage]])
    output = tmp_path / "out" / "imported.parquet"
    code = cli.main(["import", "--tool", tool, "-o", str(output), str(copy), *extra_copies])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("storbench: error: ") and "Traceback" not in err
    assert str(copy) in err, err
    assert not output.parent.exists()


# --- under Snakemake: a damaged raw output fails its parse job and publishes nothing ----------


def test_snakemake_reparse_of_damaged_output_fails_and_publishes_nothing(tmp_path):
    config = tiny_config(tmp_path / "target dir with spaces", rw=("write",))
    config["experiments"]["tiny"]["iterations"] = 1
    snakemake(tmp_path, config)
    iteration = tmp_path / "results/tiny/raw/write_bs4k_nj1/it1"
    raw_file = iteration / json.loads((iteration / "run.json").read_text())["raw_dir"]
    raw_file = raw_file / "localhost.json"
    parsed = tmp_path / "results/tiny/parsed/write_bs4k_nj1/it1.parquet"
    written = json.loads(raw_file.read_text())["jobs"][0]["write"]["io_bytes"]
    assert pq.read_table(parsed).column("bytes").to_pylist() == [written, written]  # host, all
    raw_file.write_bytes(raw_file.read_bytes()[:3000])
    parsed.unlink()
    result = snakemake(tmp_path, config, str(parsed.relative_to(tmp_path)), check=False)
    assert result.returncode != 0
    log = (tmp_path / "results/tiny/logs/parse/write_bs4k_nj1.it1.log").read_text()
    named = f"{raw_file.relative_to(tmp_path)} (fio output of host localhost): no complete fio"
    assert log.startswith(f"storbench: error: {named} JSON document"), log
    assert not parsed.parent.exists() or list(parsed.parent.iterdir()) == []


# --- shapes the parsers did not expect (found by mutating the fixtures at random) -----------


def test_a_count_too_large_for_its_column_is_named_with_its_run_and_host(tmp_path, capsys):
    doc = fixture_doc()
    doc["jobs"][0]["read"]["total_ios"] = 10**20  # beyond int64: pyarrow's OverflowError before
    manifest = write_iteration(tmp_path / "it1", {"h1": json.dumps(doc).encode()})
    err = refused(manifest, capsys)
    assert err == (
        f"storbench: error: {manifest}: {manifest.parent / 'a1'}: run randread_bs4k (host h1): "
        "ios = 100000000000000000000 does not fit the result schema (int64); is the tool's output "
        "corrupt?\n"
    )


def infinite_histogram_count() -> bytes:
    text = fixture().decode()
    bins = fixture_doc()["jobs"][0]["read"]["clat_ns"]["bins"]
    latency, count = next(iter(bins.items()))
    damaged = text.replace(f'"{latency}" : {count}', f'"{latency}" : 1e400', 1)
    assert damaged != text
    return damaged.encode()


def test_an_infinite_histogram_count_is_refused_naming_the_raw_folder(tmp_path, capsys):
    manifest = write_iteration(tmp_path / "it1", {"h1": infinite_histogram_count()})
    err = refused(manifest, capsys)
    assert err == (
        f"storbench: error: {tmp_path / 'it1/a1'}: not fio output as storbench reads it "
        "(OverflowError: cannot convert float infinity to integer); is it cut off or from "
        "another version?\n"
    )


def without_interval_sums(text: str) -> str:
    doc = json.loads(text)
    intervals = [{k: v for k, v in i.items() if k != "sum"} for i in doc["intervals"]]
    return json.dumps({**doc, "intervals": intervals})


@pytest.mark.parametrize(
    ("tool", "source", "damage", "problem"),
    [
        (
            "iperf3",
            "iperf3/server-parallel-4.json",
            lambda text: without_interval_sums(text),
            "not iperf3 output as storbench reads it (KeyError: 'sum'); is it cut off or from "
            "another version?",
        ),
        (
            "warp",
            "warp/analyze-mixed.json",
            lambda text: text.replace('"start": "2026-11-', '"start": "2026-nan-'),
            "not an RFC 3339 time: '2026-nan-21T06:05:42Z'",
        ),
        (
            "fio",
            "fio/standalone-group.jsonplus.json",
            lambda text: infinite_histogram_count().decode(),
            "not fio output as storbench reads it (OverflowError: cannot convert float infinity "
            "to integer)",
        ),
    ],
    ids=["iperf3-interval-without-sum", "warp-month-nan", "fio-infinite-count"],
)  # fmt: skip
def test_an_output_of_a_shape_the_parser_does_not_expect_is_named_on_import(
    tool, source, damage, problem, tmp_path, capsys
):
    damaged = tmp_path / "h1" / Path(source).name
    damaged.parent.mkdir()
    text = (SHARED / source).read_text()
    damaged.write_text(damage(text))
    assert damaged.read_text() != text
    output = tmp_path / "out" / "imported.parquet"
    code = cli.main(["import", "--tool", tool, "-o", str(output), str(damaged)])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert err.startswith(f"storbench: error: {damaged}: {problem}"), err
    assert not output.parent.exists()


def test_an_impossible_measure_is_refused_by_the_parse_step_too(tmp_path, capsys):
    """The one check on rows before they are written: a NaN mean latency or an infinite IOPS
    (both pass fio's own 'value >= 0' test or were never looked at) names the raw folder."""
    doc = fixture_doc()
    doc["jobs"][0]["read"]["lat_ns"]["mean"] = float("nan")
    manifest = write_iteration(tmp_path / "it1", {"h1": json.dumps(doc).encode()})
    assert refused(manifest, capsys) == (
        f"storbench: error: {manifest}: {manifest.parent / 'a1'}: run randread_bs4k (host h1): "
        "lat_mean_ns = nan is not a number >= 0; is the tool's output corrupt?\n"
    )
