"""The rows storbench makes of the real fio fixtures equal, field by field and in the same
key order, the rows it made before the ingest speed-up (tests/fixtures/ingest-reference/)."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import pytest

from storbench.analysis.ingest import manifest_rows
from storbench.core import histogram
from storbench.core.schema_names import CPU_COLUMNS
from storbench.core.specs import Manifest
from storbench.tools.fio_json import (
    FIO_BIN_KEYS,
    REQUIRED_OP_FIELDS,
    FioOutputError,
    _document_text,
    _op_stats,
    final_document,
    load_documents,
    parse_outputs,
    rows_from_document,
)
from tests.paths import FIXTURES, REPO
from tests.tools.test_fio_json import BASE as FIO_TEST_BASE
from tests.tools.test_fio_json import CLIENT_NAMES

FIO = FIXTURES / "fio"
REFERENCE = FIXTURES / "ingest-reference" / "rows.json"
# the row base of the fio parser's own tests, without its column the parser drops
BASE = {key: value for key, value in FIO_TEST_BASE.items() if key != "not_a_column"}
STANDALONE = (
    "standalone-group.json",
    "standalone-group.jsonplus.json",
    "standalone-nogroup.jsonplus.json",
    "standalone-group.normal+jsonplus.txt",
    "status-interval.json.txt",
    "fail-einval-direct-io.stdout.txt",
    "logs/logs.jsonplus.json",
)
CLIENT_SERVER = (
    "client-server.jsonplus.json",
    "client-server-nogroup.jsonplus.json",
    "client-server.jobfile-only-after-last-client.jsonplus.json",
)


def standalone_rows(*names: str) -> list[dict]:
    outputs = [(f"node{k + 1}", (FIO / name).read_text()) for k, name in enumerate(names)]
    return parse_outputs(outputs, base=BASE)


def client_server_rows(name: str) -> list[dict]:
    return parse_outputs([(None, (FIO / name).read_text())], base=BASE, client_names=CLIENT_NAMES)


def service_manifest_rows(name: str) -> list[dict]:
    """A service-mode iteration whose controller output is the fixture (manifest -> rows)."""
    hosts = [
        {
            "name": host,
            "endpoint": endpoint,
            "command": ["fio", "--output-format=json+"],
            "exit_code": 0,
            "start_time": f"2026-11-21T06:00:0{k}+00:00",
            "end_time": "2026-11-21T06:00:09+00:00",
            "output": name,
        }
        for k, (endpoint, host) in enumerate(CLIENT_NAMES.items())
    ]
    manifest = {
        "experiment": "exp",
        "run_id": "cs",
        "iteration": 1,
        "attempt": 1,
        "tool": "fio",
        "execution": "service",
        "params": {"bs": "4k", "numjobs": 2, "rate_iops": 100},
        "job_file": "job.fio",
        "job_file_sha256": "",
        "raw_dir": ".",
        "controller": {"output": name},
        "hosts": hosts,
        "target": {"name": "t", "type": "directory", "path": "/tmp/t"},
    }
    rows, _ = manifest_rows(Manifest.from_dict(manifest), FIO)
    return [{**row, "raw_path": _relative(row["raw_path"])} for row in rows]


def _relative(path: str) -> str:
    return str(Path(path).relative_to(REPO))


CASES = {
    **{name: lambda name=name: standalone_rows(name) for name in STANDALONE},
    **{name: lambda name=name: client_server_rows(name) for name in CLIENT_SERVER},
    "two hosts: standalone-group + standalone-nogroup jsonplus": lambda: standalone_rows(
        "standalone-group.jsonplus.json", "standalone-nogroup.jsonplus.json"
    ),
    "two hosts: standalone-nogroup jsonplus twice": lambda: standalone_rows(
        "standalone-nogroup.jsonplus.json", "standalone-nogroup.jsonplus.json"
    ),
    "service manifest: client-server-nogroup.jsonplus.json": lambda: service_manifest_rows(
        "client-server-nogroup.jsonplus.json"
    ),
}


def reference() -> dict:
    return json.loads(REFERENCE.read_text())


@pytest.mark.parametrize("case", sorted(CASES))
def test_rows_equal_those_made_before_the_speed_up(case):
    expected = reference()[case]
    # the CPU columns (schema v6) came after the reference; tests/tools/test_fio_json.py
    # asserts them against fio's own figures
    rows = [{k: v for k, v in row.items() if k not in CPU_COLUMNS} for row in CASES[case]()]
    assert len(rows) == len(expected)
    for index, (row, wanted) in enumerate(zip(rows, expected, strict=True)):
        assert list(row) == list(wanted), f"row {index}: columns"
        for column, value in wanted.items():
            assert same(row[column], value), f"row {index} {column}: {row[column]!r} != {value!r}"


def same(value, wanted) -> bool:
    """Equal with the same JSON type (1 is not 1.0); NaN equals NaN."""
    if isinstance(wanted, float) and math.isnan(wanted):
        return isinstance(value, float) and math.isnan(value)
    return type(value) is type(wanted) and value == wanted


def test_every_reference_case_is_checked():
    assert sorted(reference()) == sorted(CASES)


def write_reference() -> None:
    """Only for a deliberate change of the parsed values; never to make the test pass."""
    cases = [
        f"{json.dumps(case)}: [\n" + ",\n".join(json.dumps(row) for row in make()) + "\n]"
        for case, make in sorted(CASES.items())
    ]
    REFERENCE.write_text("{\n" + ",\n".join(cases) + "\n}\n")  # a row a line


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    write_reference()


# --- the fast paths against the code they replaced ----------------------------------------


def from_mapping_before(bins: dict) -> tuple[list, list]:
    pairs = sorted(zip(map(int, bins), map(int, bins.values()), strict=True))
    return [v for v, _ in pairs], [c for _, c in pairs]


def merge_before(histograms) -> tuple[list, list]:
    totals: dict = {}
    for values, counts in histograms:
        for value, count in zip(values, counts, strict=True):
            totals[value] = totals.get(value, 0) + count
    ordered = sorted(totals.items())
    return [int(v) for v, _ in ordered], [int(c) for _, c in ordered]


def without_note_lines_before(text: str, start: int) -> str:
    body = text[start:].rstrip()
    if "\n<" in body:
        body = "\n".join(line for line in body.split("\n") if not line.startswith("<"))
    return body


ODD_BINS = [
    {},
    {"7": 1},
    {"20": 1, "10": 2, "30": 3},  # not in order
    {"1": 1, "01": 2, "2": 1},  # two keys of one value
    {"5": 1.0, "6": True, "7": 2},  # counts fio never writes
    {"129": 4, "131": 1, "17112760320": 2},
]


def typed(histogram: tuple[list, list]) -> list:
    return [[(type(x), x) for x in part] for part in histogram]


@pytest.mark.parametrize("bins", ODD_BINS)
def test_bins_convert_as_before(bins):
    expected = typed(from_mapping_before(bins))
    assert typed(histogram.from_mapping(bins)) == expected
    shared = histogram.BinValues(FIO_BIN_KEYS)
    for earlier in ODD_BINS:  # a document's earlier histograms fill the shared keys
        histogram.from_mapping(earlier, shared)
    assert typed(histogram.from_mapping(bins, shared)) == expected


def test_merge_is_as_before():
    histograms = [from_mapping_before(bins) for bins in ODD_BINS]
    histograms.append(([1.0, 2.5], [3, 4.0]))
    assert typed(histogram.merge(histograms)) == typed(merge_before(histograms))


def test_every_fixture_bin_is_one_of_fio_bins():
    keys = set()
    for path in FIO.rglob("*.json"):
        for document in load_documents(path.read_text(), source=str(path)):
            for entry in document.get("jobs", []) + document.get("client_stats", []):
                for op in ("read", "write", "trim"):
                    for basis in ("lat_ns", "clat_ns"):
                        keys |= set(((entry.get(op) or {}).get(basis) or {}).get("bins") or {})
    assert keys and keys <= set(FIO_BIN_KEYS)
    assert all(int(key) == value and str(value) == key for key, value in FIO_BIN_KEYS.items())


@pytest.mark.parametrize(
    "text",
    [
        "<a> note\n{\n<b> x\n<c> y\n  1\n<d>}\n \n",
        "{\n<\n}",
        "{<not a note\n}\n<tail",
        "{\r\n<a\r\n}\r\n\x1c",
        "{}" + " " * 9000,
    ],
)
def test_document_text_is_the_body_as_before(text):
    start = text.index("{")
    assert _document_text(text, start) == without_note_lines_before(text, start)


def fio_stats(**changes) -> dict:
    stats = {
        "io_bytes": 4096, "total_ios": 1, "runtime": 5, "bw_bytes": 819.2, "iops": 0.2,
        "lat_ns": {}, "clat_ns": {},
    }  # fmt: skip
    return {**stats, **changes}


@pytest.mark.parametrize("field", REQUIRED_OP_FIELDS)
@pytest.mark.parametrize("bad", [None, -1, True, "7", math.nan])
def test_quick_check_never_accepts_what_the_full_check_rejects(field, bad):
    with pytest.raises(FioOutputError):
        _op_stats({"read": fio_stats(**{field: bad})}, "read", "job", None, "fio output")


def test_quick_check_needs_a_latency_too():
    stats = fio_stats()
    del stats["lat_ns"], stats["clat_ns"]
    with pytest.raises(FioOutputError, match="lat_ns"):
        _op_stats({"read": stats}, "read", "job", None, "fio output")
    assert _op_stats({"read": fio_stats()}, "read", "job", None, "fio output")["iops"] == 0.2


FIO_OUTPUTS = sorted(FIO.rglob("*.json")) + sorted(FIO.glob("*.txt"))
ODD_OUTPUTS = [
    b'\xff\xfe junk\n{"jobs": []}\n',  # not UTF-8: the text's way
    b'{"jobs": []}\n\x1c',  # trailing bytes str.rstrip takes and bytes.rstrip does not
    b'<h> note\n{"jobs": [\n<h> note\n]}\n',  # note lines in the document
    b'{"a": "<b>"}',
    b'{"jobs": []}\n{"jobs": [1]}\n',  # two documents (status-interval reports)
    b"[1, 2]",
    b'{"jobs": [',
]


@pytest.mark.parametrize("raw", [p.read_bytes() for p in FIO_OUTPUTS] + ODD_OUTPUTS)
def test_documents_from_bytes_equal_those_from_the_text(raw):
    text = raw.decode("utf-8", errors="replace")
    try:
        expected = load_documents(text, source="out")
    except FioOutputError as error:
        with pytest.raises(FioOutputError) as raised:
            load_documents(raw, source="out")
        assert str(raised.value) == str(error)
        return
    assert load_documents(raw, source="out") == expected


@pytest.mark.parametrize(
    "text", ["<a> note\n{\n<b> x\n<c> y\n  1\n<d>}\n \n", "{\n<\n}", "{<not a note\n}\n<tail"]
)
def test_document_text_of_bytes_is_that_of_the_text(text):
    start = text.index("{")
    assert bytes(_document_text(text.encode(), start)) == _document_text(text, start).encode()


def document_count(path: Path) -> int:
    try:
        return len(load_documents(path.read_bytes()))
    except FioOutputError:  # an output of a failed fio, without a document
        return 0


SINGLE_DOCUMENTS = [path for path in FIO_OUTPUTS if document_count(path) == 1]


@pytest.mark.parametrize("path", SINGLE_DOCUMENTS, ids=lambda p: p.name)
def test_fio_output_takes_the_typed_decoder_and_gives_the_same_rows(path):
    raw = path.read_bytes()
    document, bin_values = final_document(raw, source=path.name)
    general = load_documents(raw, source=path.name)[-1]
    kwargs = {"host": "node1", "base": BASE, "client_names": CLIENT_NAMES, "source": path.name}
    try:
        expected = rows_from_document(general, **kwargs)
    except FioOutputError as error:  # fail-einval: no jobs; the same error either way
        with pytest.raises(FioOutputError, match=re.escape(str(error))):
            rows_from_document(document, bin_values=bin_values, **kwargs)
        return
    if path.suffix == ".json":  # fio's document alone (text around it: the general way)
        assert bin_values is histogram.INT_KEYS
    rows = rows_from_document(document, bin_values=bin_values, **kwargs)
    assert rows == expected
    if any(row["hist_ns"] for row in expected):  # a json+ output: its bins, from int keys
        assert any(row["hist_count"] for row in rows)


def jsonplus_with(change) -> str:
    document = json.loads((FIO / "standalone-nogroup.jsonplus.json").read_text())
    change(document["jobs"][0]["read"])
    return json.dumps(document)


@pytest.mark.parametrize(
    "change, error",
    [
        (lambda read: read["clat_ns"]["bins"].update({"x": 1}), "invalid literal for int"),
        (lambda read: read["clat_ns"]["bins"].update({"1024": 1.5}), None),
        (lambda read: read.update({"lat_ns": None}), None),
        (lambda read: read.update({"total_ios": "7"}), "'read.total_ios' is '7'"),
    ],
)
def test_a_document_of_other_types_is_read_the_general_way(change, error):
    text = jsonplus_with(change)
    document, bin_values = final_document(text, source="out")
    if error is None:  # what the general way accepts, the same rows as before
        assert bin_values is not histogram.INT_KEYS
        rows = parse_outputs([("n", text)], base=BASE)
        assert rows[0]["ios"] == load_documents(text)[-1]["jobs"][0]["read"]["total_ios"]
        return
    with pytest.raises(FioOutputError, match=re.escape(error)):
        parse_outputs([("n", text)], base=BASE)
