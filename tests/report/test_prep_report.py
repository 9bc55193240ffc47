"""The preconditioning page: stage and steady-state tables, verdict text, figures, determinism.

Synthetic markers: a purge, pass 1 'precondition' (85 %, 2 repeats × 2 chunks, a write
cliff at 6 s), pass 2 'condition' (1 repeat × 2 chunks), 7 rounds reaching steady state
with window rounds 3–7, rounds 8 and 9 skipped, and a cache flush.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from storbench.report import preparation as prep_report
from tests.report.exported import pipe_table_rows

MIB = 1024**2
VARIABLE = "randwrite_bs4k.iops"
ROUND_VALUES = [5000.0, 3000.0, 2100.0, 2000.0, 1900.0, 2000.0, 2000.0]
# Window rounds 3–7 = [2100, 2000, 1900, 2000, 2000]: average 2000, range 200 (10 %);
# least squares over x = 3..7: slope -200/10 = -20, intercept 2000 + 20·5 = 2100,
# excursion |-20|·4 = 80 (4 %).
ACHIEVED = {
    "status": "achieved",
    "achieved": True,
    "rounds": 7,
    "window_size": 5,
    "max_rounds": 25,
    "range_limit": 0.2,
    "slope_limit": 0.1,
    "steady_round": 7,
    "window": [3, 7],
    "variables": [
        {
            "name": VARIABLE,
            "values": ROUND_VALUES,
            "window_values": ROUND_VALUES[2:],
            "average": 2000.0,
            "range": 200.0,
            "range_ratio": 0.1,
            "range_ok": True,
            "slope": -20.0,
            "intercept": 2100.0,
            "excursion": 80.0,
            "excursion_ratio": 0.04,
            "slope_ok": True,
            "steady": True,
        }
    ],
}
# Pass 1 chunk bandwidths (MiB/s per 1 s interval): the cliff is in chunk r1-c2.
PASS1_CHUNKS = [
    (1, 1, [1000, 1000, 1000, 1000]),
    (1, 2, [1000, 1000, 300, 300]),
    (2, 1, [300, 300, 300, 300]),
    (2, 2, [300, 300, 300, 300]),
]
PASS2_CHUNKS = [(1, 1, [300, 300]), (1, 2, [300, 300])]
CLIFF = {
    "t_s": 6.0,
    "bytes_written": 6000 * MIB,
    "plateau_bw_bytes_s": 1000.0 * MIB,
    "after_bw_bytes_s": 300.0 * MIB,
    "fraction": 0.3,
    "interval_index": 6,
}
RECIPE_SPEC = {
    "purge": {"method": "blkdiscard"},
    "passes": [{"name": "precondition", "fraction": 0.85, "repeats": 2, "chunks": 2}],
    "flush": {"method": "wait", "api_token": "hunter2"},
}


def write_json(path, obj):
    path.write_text(json.dumps(obj))
    return path


def stage_marker(stage: str, kind: str, index: int, **fields) -> dict:
    return {
        "target": "scratch",
        "recipe": "afa",
        "stage": stage,
        "kind": kind,
        "index": index,
        "skipped": False,
        "started": "2026-11-21T10:00:00.000+00:00",
        "finished": "2026-11-21T10:00:04.000+00:00",
        **fields,
    }


def pass_marker(index, name, number, repeats, chunks, fraction, repeat, chunk, bandwidths):
    written = sum(bandwidths) * MIB
    info = {
        "name": name,
        "number": number,
        "repeat": repeat,
        "repeats": repeats,
        "chunk": chunk,
        "chunks": chunks,
        "fraction": fraction,
        "bs": 131072,
        "pattern": "sequential",
        "bytes": written,
    }
    series = [
        {"t_s": float(t), "interval_s": 1.0, "bytes": bw * MIB, "bw_bytes_s": float(bw * MIB)}
        for t, bw in enumerate(bandwidths, start=1)
    ]
    return stage_marker(
        f"p{number}-{name}-r{repeat}-c{chunk}",
        "pass",
        index,
        **{
            "pass": info,
            "elements": {"write": {"bw_bytes_s": written / len(bandwidths), "bytes": written}},
            "series": series,
            "duration_s": float(len(bandwidths)),
        },
    )


def round_marker(index: int, number: int, verdict: dict, skipped: bool = False) -> dict:
    if skipped:
        return stage_marker(f"round-{number}", "round", index, round=number, skipped=True)
    iops = ROUND_VALUES[number - 1]
    element = {"iops": iops, "bw_bytes_s": iops * 4096, "lat_mean_ns": 80_000.0}
    element["bytes"] = int(iops * 4096 * 60)
    return stage_marker(
        f"round-{number}",
        "round",
        index,
        round=number,
        elements={"randwrite_bs4k": element},
        steady_state=verdict,
        duration_s=60.0,
    )


def prepared_marker(verdict, passes=True) -> dict:
    return {
        "target": "scratch",
        "recipe": "afa",
        "capacity_bytes": 268435456,
        "hosts": ["localhost"],
        "steady_state": verdict,
        "passes": [
            {
                "name": "precondition",
                "number": 1,
                "repeats": 2,
                "chunks": 2,
                "fraction": 0.85,
                "bs": 131072,
                "pattern": "sequential",
                "bytes_written": 9000 * MIB,
                "duration_s": 16.0,
                "cliff": CLIFF,
            },
            {
                "name": "condition",
                "number": 2,
                "repeats": 1,
                "chunks": 2,
                "fraction": 0.05,
                "bs": 131072,
                "pattern": "sequential",
                "bytes_written": 1200 * MIB,
                "duration_s": 4.0,
                "cliff": None,
            },
        ]
        if passes
        else [],
        "recipe_spec": RECIPE_SPEC,
    }


def pass_stage_markers(first_index: int) -> list[dict]:
    markers = []
    for repeat, chunk, bandwidths in PASS1_CHUNKS:
        index = first_index + len(markers)
        markers.append(pass_marker(index, "precondition", 1, 2, 2, 0.85, repeat, chunk, bandwidths))
    for repeat, chunk, bandwidths in PASS2_CHUNKS:
        index = first_index + len(markers)
        markers.append(pass_marker(index, "condition", 2, 1, 2, 0.05, repeat, chunk, bandwidths))
    return markers


FLUSH = stage_marker(
    "flush",
    "flush",
    16,
    flush={"method": "wait", "command": "", "polls": 4, "waited_s": 12.0},
    duration_s=12.5,
)


def write_campaign(directory, verdict=ACHIEVED, passes=True, rounds=True):
    """Markers in ``directory``; returns (stage paths, prepared path, flush path)."""
    directory.mkdir(parents=True, exist_ok=True)
    markers = [stage_marker("purge", "purge", 0, duration_s=2.0)]
    if passes:
        markers += pass_stage_markers(1)
    if rounds:
        first = len(markers)
        markers += [round_marker(first + r - 1, r, verdict) for r in range(1, 8)]
        markers += [round_marker(first + r - 1, r, verdict, skipped=True) for r in (8, 9)]
    # Written in reverse: the report must order stages by their index, not by argument order.
    paths = [write_json(directory / f"{m['stage']}.json", m) for m in reversed(markers)]
    prepared = write_json(directory / "prepared.json", prepared_marker(verdict, passes))
    flushed = write_json(directory / "flushed.json", FLUSH)
    return paths, prepared, flushed


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    base = tmp_path_factory.mktemp("campaign")
    paths, prepared, flushed = write_campaign(base / "markers")
    written = prep_report.build_precondition_report(
        paths,
        prepared,
        base / "report",
        flushed=flushed,
        meta={"title": "AFA campaign", "tool_version": "fio-3.41"},
    )
    return {"paths": paths, "prepared": prepared, "flushed": flushed, "written": written}


def read_csv(path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_the_hand_verdict_is_a_consistent_snia_window():
    """Guards the fixture: its numbers are what the SNIA criteria give for the window."""
    window = ROUND_VALUES[2:]
    slope, intercept = np.polyfit([3, 4, 5, 6, 7], window, 1)
    assert slope == pytest.approx(-20.0)
    assert intercept == pytest.approx(2100.0)
    assert np.mean(window) == 2000.0
    assert max(window) - min(window) == 200.0


def test_all_files_are_written(campaign):
    figures = [
        f"{name}.{ext}"
        for name in ("write_cliff", "convergence", "window")
        for ext in ("png", "svg")
    ]
    expected = {"index.html", "stages.csv", "stages.md", "steady_state.csv", *figures}
    assert set(campaign["written"]) == expected
    for name, path in campaign["written"].items():
        assert path.name == name and path.stat().st_size > 0
    assert campaign["written"]["write_cliff.png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in campaign["written"]["window.svg"].read_bytes()


def test_steady_state_csv_equals_the_verdict(campaign):
    (row,) = read_csv(campaign["written"]["steady_state.csv"])
    variable = ACHIEVED["variables"][0]
    assert row["variable"] == VARIABLE
    assert (row["window_first"], row["window_last"]) == ("3", "7")
    for column in ("average", "range", "range_ratio", "slope", "intercept", "excursion"):
        assert float(row[column]) == variable[column], column
    assert float(row["excursion_ratio"]) == 0.04
    assert row["steady"] == "True"


def test_stages_csv_has_every_stage_in_index_order(campaign):
    rows = read_csv(campaign["written"]["stages.csv"])
    # purge + 6 pass chunks + 9 rounds (2 skipped) + flush
    assert len(rows) == 17
    assert [int(row["index"]) for row in rows] == list(range(17))
    assert [row["kind"] for row in rows] == ["purge"] + ["pass"] * 6 + ["round"] * 9 + ["flush"]
    passes = [row for row in rows if row["kind"] == "pass"]
    assert [int(row["bytes"]) for row in passes] == [
        4000 * MIB,
        2600 * MIB,
        1200 * MIB,
        1200 * MIB,
        600 * MIB,
        600 * MIB,
    ]
    assert float(passes[1]["bw_bytes_s"]) == 650.0 * MIB
    rounds = [row for row in rows if row["kind"] == "round"]
    assert [float(row[VARIABLE]) for row in rounds[:7]] == ROUND_VALUES
    assert int(rounds[0]["bytes"]) == 5000 * 4096 * 60
    assert [row["skipped"] for row in rounds] == ["False"] * 7 + ["True"] * 2
    assert rounds[7]["bytes"] == "" and rounds[7][VARIABLE] == ""


def test_stages_markdown_matches_the_table(campaign):
    markdown = campaign["written"]["stages.md"].read_text()
    lines = [line for line in markdown.splitlines() if line.startswith("|")]
    assert len(lines) == 2 + 17
    rows = pipe_table_rows(markdown)
    assert [
        "p1-precondition-r1-c2",
        "pass",
        "precondition #1, repeat 1, chunk 2",
        "2.5 GiB",
        "4.0",
        "681.6",  # 650 MiB/s in decimal MB/s
        "",
    ] in rows
    assert ["round-3", "round", "round 3", "492.2 MiB", "60.0", f"{VARIABLE} = 2,100.0", ""] in rows
    assert ["round-8", "round", "round 8", "–", "–", "–", "skipped"] in rows


def test_binary_units_show_mib_per_second(campaign, tmp_path):
    written = prep_report.build_precondition_report(
        campaign["paths"],
        campaign["prepared"],
        tmp_path,
        flushed=campaign["flushed"],
        meta={"units": "binary"},
    )
    markdown = written["stages.md"].read_text()
    rows = pipe_table_rows(markdown)
    assert "Bandwidth (MiB/s) / tracked" in rows[0]
    assert ["2.5 GiB", "4.0", "650.0", ""] in [row[3:] for row in rows]  # chunk r1-c2
    html = written["index.html"].read_text()
    assert "<td>at 6.0 s, after 5.9 GiB: 1,000.0 → 300.0 MiB/s</td>" in html
    assert "binary units (1 GiB/s = 2^30 bytes/s" in html  # the write-cliff caption


def test_html_shows_verdict_tables_flush_and_recipe(campaign):
    html = campaign["written"]["index.html"].read_text()
    assert "<title>Preconditioning afa on scratch</title>" in html
    assert "Steady state achieved at round 7 (window rounds 3–7)." in html
    assert 'class="verdict achieved"' in html
    assert "2 later round(s) skipped after steady state (no I/O)." in html
    # steady-state numbers: average, range 10 %, fit, excursion 4 %
    assert "<td>2,000.0</td><td>200.0</td><td>10.0 % ok</td>" in html
    assert "<td>y = −20.00·x + 2,100.0</td><td>80.00</td><td>4.0 % ok</td><td>steady</td>" in html
    # passes table: fraction, bs, pattern, repeats, chunks, bytes, duration, cliff
    assert (
        "<td>1. precondition</td><td>85 %</td><td>128k</td><td>sequential</td><td>2</td>"
        "<td>2</td><td>8.8 GiB</td><td>16.0</td>"
        "<td>at 6.0 s, after 5.9 GiB: 1,048.6 → 314.6 MB/s</td>" in html
    )
    assert "<td>2. condition</td><td>5 %</td>" in html and "<td>none</td>" in html
    assert "<dt>Polls</dt><dd>4</dd>" in html and "<dt>Waited</dt><dd>12.0 s</dd>" in html
    assert "<dd>AFA campaign</dd>" in html and "<dd>fio-3.41</dd>" in html
    assert "<dd>256.0 MiB (268,435,456 bytes)</dd>" in html
    assert "blkdiscard" in html and "hunter2" not in html and "***redacted***" in html


def test_html_is_offline_with_embedded_images(campaign):
    html = campaign["written"]["index.html"].read_text()
    assert html.count("data:image/png;base64,") == 3
    assert "http://" not in html and "https://" not in html
    assert html.index("figure-write_cliff") < html.index("figure-convergence")


def test_pass_timelines_join_chunks_end_to_end(campaign):
    stages = prep_report.load_stages(campaign["paths"])
    first, second = prep_report.pass_timelines(stages)
    assert (first["name"], first["number"]) == ("precondition", 1)
    assert first["t_s"] == [float(t) for t in range(1, 17)]
    assert first["boundaries"] == [4.0, 8.0, 12.0]
    assert first["bw_bytes_s"][5:7] == [1000.0 * MIB, 300.0 * MIB]  # the drop after 6 s
    assert second["t_s"] == [1.0, 2.0, 3.0, 4.0] and second["boundaries"] == [2.0]


def test_two_builds_are_byte_identical(campaign, tmp_path):
    again = prep_report.build_precondition_report(
        campaign["paths"],
        campaign["prepared"],
        tmp_path / "again",
        flushed=campaign["flushed"],
        meta={"title": "AFA campaign", "tool_version": "fio-3.41"},
    )
    assert set(again) == set(campaign["written"])
    for name, path in campaign["written"].items():
        assert path.read_bytes() == again[name].read_bytes(), name
    svg = campaign["written"]["convergence.svg"].read_text()
    assert "<dc:date>" not in svg
    assert b"Software" not in campaign["written"]["convergence.png"].read_bytes()


def not_achieved_verdict() -> dict:
    # Window 21–25 = [1000, 1500, 1000, 1500, 1000]: average 1200, range 500 (41.7 %),
    # slope 0 (the deviations cancel), intercept 1200.
    values = [1000.0 if r % 2 else 1500.0 for r in range(1, 26)]
    return {
        **ACHIEVED,
        "status": "not achieved",
        "achieved": False,
        "rounds": 25,
        "steady_round": None,
        "window": [21, 25],
        "variables": [
            {
                "name": VARIABLE,
                "values": values,
                "window_values": values[20:],
                "average": 1200.0,
                "range": 500.0,
                "range_ratio": 500.0 / 1200.0,
                "range_ok": False,
                "slope": 0.0,
                "intercept": 1200.0,
                "excursion": 0.0,
                "excursion_ratio": 0.0,
                "slope_ok": True,
                "steady": False,
            }
        ],
    }


def test_not_achieved_is_said_with_the_failed_criterion(tmp_path):
    paths, prepared, _ = write_campaign(
        tmp_path / "m", verdict=not_achieved_verdict(), passes=False
    )
    written = prep_report.build_precondition_report(paths, prepared, tmp_path / "r")
    html = written["index.html"].read_text()
    assert "Steady state NOT achieved in 25 rounds." in html
    assert 'class="verdict failed"' in html
    assert f"{VARIABLE}: range 41.7 % of the average (limit 20 %)." in html
    assert "Last measurement window: rounds 21–25." in html
    assert "No cache-flush stage recorded." in html
    # no pass data: no write-cliff figure, but both steady-state figures
    assert "write_cliff.png" not in written and not (tmp_path / "r" / "write_cliff.png").exists()
    assert {"convergence.png", "window.svg", "steady_state.csv"} <= set(written)


def test_passes_only_recipe_has_no_steady_state_files(tmp_path):
    paths, prepared, flushed = write_campaign(tmp_path / "m", verdict=None, rounds=False)
    out = tmp_path / "r"
    written = prep_report.build_precondition_report(paths, prepared, out, flushed=flushed)
    assert set(written) == {
        "index.html",
        "stages.csv",
        "stages.md",
        "write_cliff.png",
        "write_cliff.svg",
    }
    for name in ("convergence", "window"):
        assert not (out / f"{name}.png").exists() and not (out / f"{name}.svg").exists()
    assert not (out / "steady_state.csv").exists()
    html = written["index.html"].read_text()
    assert "No steady-state rounds in this recipe" in html
    assert "Write cliff in pass 1 (precondition) at 6.0 s after 5.9 GiB written." in html
    assert len(read_csv(written["stages.csv"])) == 1 + 6 + 1


def test_verdict_falls_back_to_the_last_round_marker():
    running = {**ACHIEVED, "status": "running", "achieved": False, "rounds": 4, "window": None}
    stages = [
        {"kind": "round", "round": 4, "steady_state": running},
        {"kind": "round", "round": 3, "steady_state": {**running, "rounds": 3}},
        {"kind": "round", "round": 5, "skipped": True},
    ]
    verdict = prep_report.final_verdict({"steady_state": None}, stages)
    assert verdict["rounds"] == 4
    assert prep_report.verdict_sentence(verdict) == (
        "Steady state not decided yet: 4 of at most 25 rounds run."
    )


def test_formatting():
    assert prep_report.format_bytes(12) == "12 B"
    assert prep_report.format_bytes(1536) == "1.5 KiB"
    assert prep_report.format_bytes(6000 * MIB) == "5.9 GiB"
    assert prep_report.fit_formula(-20.0, 2100.0) == "y = −20.00·x + 2,100.0"
    assert prep_report.fit_formula(0.5, -3.0) == "y = 0.5000·x − 3.00"


def test_running_verdict_before_a_full_window(tmp_path):
    """3 rounds run, no window yet: convergence figure only, no failed criteria listed."""
    empty = dict.fromkeys(("window_values", "average", "range", "range_ratio"), None)
    empty |= dict.fromkeys(("slope", "intercept", "excursion", "excursion_ratio"), None)
    running = {
        **ACHIEVED,
        "status": "running",
        "achieved": False,
        "rounds": 3,
        "steady_round": None,
        "window": None,
        "variables": [
            {
                "name": VARIABLE,
                "values": ROUND_VALUES[:3],
                **empty,
                "range_ok": False,
                "slope_ok": False,
                "steady": False,
            }
        ],
    }
    paths, prepared, _ = write_campaign(tmp_path / "m", verdict=running, passes=False)
    written = prep_report.build_precondition_report(paths, prepared, tmp_path / "r")
    assert {"convergence.png", "steady_state.csv"} <= set(written)
    assert "window.png" not in written
    html = written["index.html"].read_text()
    assert "Steady state not decided yet: 3 of at most 25 rounds run." in html
    assert 'class="verdict neutral"' in html
    assert "of the average (limit" not in html
    (row,) = read_csv(written["steady_state.csv"])
    assert row["average"] == "" and row["window_first"] == ""
