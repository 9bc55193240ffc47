"""The report: files, numbers that match stats.summarize, offline HTML, escaping, determinism."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from storbench import report, results, stats

MIB = 1024**2
RWS = ("randread", "randwrite")
SIZES = (4096, 1 << 20)
DEPTHS = (1, 8)
ITERATIONS = (1, 2, 3)
HOSTS = ("hostA", "hostB")
FIGURE_FILES = [f"{name}.{ext}" for name in report.FIGURES for ext in ("png", "svg")]
META = {
    "experiment": "exp",
    "tool": "fio",
    "tool_version": "fio-3.33",
    "hosts": list(HOSTS),
    "target": {"name": "scratch", "path": "/mnt/scratch"},
    "iterations": 3,
    "job": {"runtime": "5s", "ramp_time": "1s", "direct": 1},
    "sweep": {"rw": list(RWS), "bs": ["4k", "1m"], "iodepth": list(DEPTHS)},
    "job_files": {"randread-4k-qd1": "[global]\nfilename=/mnt/<dev>\n"},
    "config_yaml": "note: <script>alert('x')</script>\nurl: https://example.org/\n",
    "storbench_version": "0.1.0",
}


def bandwidth_mib(rw: str, bs: int, depth: int, iteration: int) -> float:
    """Distinct, known bandwidth per cell; iteration 2 is the mean of 1 and 3."""
    base = (100 if rw == "randread" else 60) * (4 if bs > 4096 else 1) * depth
    return base * (1 + 0.02 * (iteration - 2))


def result_row(rw, bs, depth, iteration, host, bw_mib) -> dict:
    slow = 10 if rw == "randwrite" else 1  # writes get a longer tail
    return {
        "experiment": "exp",
        "run_id": f"{rw}-{report.size_label(bs)}-qd{depth}",
        "iteration": iteration,
        "attempt": 0,
        "tool": "fio",
        "host": host,
        "job": "job",
        "op": "read" if rw == "randread" else "write",
        "rw": rw,
        "bs": bs,
        "iodepth": depth,
        "numjobs": 1,
        "bw_bytes_s": bw_mib * MIB,
        "iops": bw_mib * MIB / bs,
        "ios": 1000 * iteration,
        "lat_mean_ns": 50_000.0 * depth + iteration,
        "p99_ns": 900_000.0 * slow,
        "hist_ns": [20_000 * depth, 400_000 * depth * slow, 900_000 * depth * slow],
        "hist_count": [900, 95, 5],
        "lat_basis": "clat",
        "errors": 0,
    }


def campaign_rows() -> list[dict]:
    rows = []
    for rw in RWS:
        for bs in SIZES:
            for depth in DEPTHS:
                for iteration in ITERATIONS:
                    total = bandwidth_mib(rw, bs, depth, iteration)
                    for host in HOSTS:
                        rows.append(result_row(rw, bs, depth, iteration, host, total / 2))
                    rows.append(result_row(rw, bs, depth, iteration, "all", total))
    return rows


@pytest.fixture(scope="module")
def raw_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("results") / "summary.parquet"
    results.write_rows(campaign_rows(), path)
    return path


@pytest.fixture(scope="module")
def built(raw_path, tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("report")
    written = report.build_report(raw_path, out_dir, title="Campaign <exp>", meta=META)
    return out_dir, written


def test_all_files_are_written(built):
    out_dir, written = built
    expected = {"index.html", "summary.csv", "summary.md", *FIGURE_FILES}
    assert set(written) == expected
    for name, path in written.items():
        assert path == out_dir / name
        assert path.stat().st_size > 0
    assert not [p for p in out_dir.iterdir() if p.name.endswith(".tmp")]  # atomic writes


def test_summary_csv_equals_stats_summarize(built, raw_path):
    out_dir, _ = built
    expected = stats.summarize(results.read_parquet(raw_path))
    got = pd.read_csv(out_dir / "summary.csv")
    assert len(got) == len(RWS) * len(SIZES) * len(DEPTHS)
    assert list(got.columns) == list(expected.columns)
    for column in ("bw_bytes_s_mean", "bw_bytes_s_sd", "iops_mean", "lat_mean_ns", "p99_ns"):
        assert got[column].tolist() == expected[column].astype(float).tolist()
    assert got["n"].tolist() == [3] * len(got)
    # Known value: randread 1m qd8 is 100*4*8 MiB/s +/- 2 %.
    cell = got[got["run_id"] == "randread-1m-qd8"].iloc[0]
    assert cell["bw_bytes_s_mean"] == pytest.approx(3200 * MIB, rel=1e-12)
    assert cell["bw_bytes_s_sd"] == pytest.approx(64 * MIB, rel=1e-12)


def test_html_shows_table_numbers_and_sections(built):
    out_dir, _ = built
    html = (out_dir / "index.html").read_text()
    summary = pd.read_csv(out_dir / "summary.csv")
    for _, cell in summary.iterrows():
        text = report.format_mean_sd(cell["bw_bytes_s_mean"] / MIB, cell["bw_bytes_s_sd"] / MIB, 1)
        assert f"<td>{text}</td>" in html
    assert "<td>3,200.0 ± 64.0</td>" in html  # randread 1m qd8
    assert "<td>2.0 %</td>" in html  # CoV of every cell, below the flag limit
    assert report.COV_MARK not in html.split('id="summary"')[1].split("</table>")[0]
    for section in ("summary", "figures", "methodology", "per-run", "appendix"):
        assert f'<section id="{section}">' in html
    assert "fio-3.33" in html and "merged" in html and "clat" in html
    assert "Campaign &lt;exp&gt;" in html
    # Per-run table: every iteration of every host and the aggregate.
    per_run = html.split('id="per-run"')[1]
    assert per_run.count("<tr><td>randread-4k-qd1</td>") == len(ITERATIONS) * (len(HOSTS) + 1)


def test_html_is_offline_with_embedded_images(built):
    out_dir, _ = built
    html = (out_dir / "index.html").read_text()
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", html)
    assert "<link" not in html and "<script" not in html
    assert html.count('src="data:image/png;base64,') == len(report.FIGURES)


def test_meta_text_is_escaped(built):
    out_dir, _ = built
    html = (out_dir / "index.html").read_text()
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in html
    assert "filename=/mnt/&lt;dev&gt;" in html


def test_markdown_table_matches_html_rows(built):
    out_dir, _ = built
    markdown = (out_dir / "summary.md").read_text()
    lines = [line for line in markdown.splitlines() if line.startswith("|")]
    assert len(lines) == 2 + len(RWS) * len(SIZES) * len(DEPTHS)
    assert lines[0].startswith("| Run | rw | bs | iodepth |")
    assert "| randread-1m-qd8 | randread | 1m | 8 | 1 | read | 3 | 3,200.0 ± 64.0 |" in markdown


def test_builds_are_byte_identical(raw_path, tmp_path):
    first = report.build_report(raw_path, tmp_path / "a", title="t", meta=META)
    second = report.build_report(raw_path, tmp_path / "b", title="t", meta=META)
    for name in [*FIGURE_FILES, "index.html", "summary.csv", "summary.md"]:
        assert first[name].read_bytes() == second[name].read_bytes(), name
    svg = first["bandwidth.svg"].read_text()
    assert "<dc:date>" not in svg
    assert b"Software" not in first["bandwidth.png"].read_bytes()


def test_edge_cases(tmp_path):
    """One bs, one iodepth, a randrw run with two ops, a cell without histograms, n=1."""
    rows = []
    for iteration in (1, 2):
        for op, share in (("read", 0.7), ("write", 0.3)):
            mixed = result_row("randread", 4096, 4, iteration, "all", 100 * share)
            mixed.update(run_id="randrw-4k-qd4", rw="randrw", rwmixread=70, op=op)
            rows.append(mixed)
        plain = result_row("randread", 4096, 4, iteration, "all", 90)
        plain.update(hist_ns=None, hist_count=None)
        rows.append(plain)
    rows.append(result_row("randwrite", 4096, 4, 1, "all", 50))
    results_path = tmp_path / "results.parquet"
    results.write_rows(rows, results_path)

    written = report.build_report(results_path, tmp_path / "out", title="edge", meta={})
    html = written["index.html"].read_text()
    assert "randrw (70 % read)" in html
    per_run = html.split('id="per-run"')[1].split("</section>")[0]
    assert per_run.count("<td>randrw-4k-qd4</td>") == 4  # 2 iterations x 2 ops
    no_bins = html.split("<td>randread-4k-qd4</td>")[1].split("</tr>")[0]
    assert no_bins.endswith(f"<td>{report.NO_VALUE}</td>")  # p99 without histograms
    single = html.split("<td>randwrite-4k-qd4</td>")[1].split("</tr>")[0]
    assert "<td>50.0</td>" in single  # n=1: mean without ± sd
    assert html.count("data:image/png;base64,") == len(report.FIGURES)


def test_bandwidth_unit_follows_magnitude():
    frame = pd.DataFrame({"bw_bytes_s_mean": [500 * MIB]})
    assert report.bandwidth_unit(frame) == ("MiB/s", MIB)
    frame = pd.DataFrame({"bw_bytes_s_mean": [500 * MIB, 2048 * MIB]})
    assert report.bandwidth_unit(frame) == ("GiB/s", 1024 * MIB)


def test_number_formatting():
    assert report.format_number(1234.56, 1) == "1,234.6"
    assert report.format_number(float("nan"), 1) == report.NO_VALUE
    assert report.format_mean_sd(110.0, 10.0, 1) == "110.0 ± 10.0"
    assert report.format_cov(0.0909) == f"9.1 % {report.COV_MARK}"
    assert report.format_cov(0.02) == "2.0 %"


def test_figure_png_is_a_png():
    summary = stats.summarize(
        results.table_from_rows([result_row("randread", 4096, 1, 1, "all", 10)])
    )
    png, svg, caption = report.make_figure("iops_vs_iodepth", summary)
    assert png.startswith(b"\x89PNG")
    assert svg.lstrip().startswith(b"<?xml")
    assert "log2" in caption


def test_empty_results_still_give_a_report(tmp_path):
    written = report.build_report(results.SCHEMA.empty_table(), tmp_path, title="empty", meta={})
    assert set(written) == {"index.html", "summary.csv", "summary.md", *FIGURE_FILES}
    assert "<h1>empty</h1>" in written["index.html"].read_text()


def test_series_join_runs_across_depths_when_jobs_are_named_after_runs():
    rows = [
        {**result_row("randread", 4096, depth, 1, "all", 100.0), "job": f"randread-4k-qd{depth}"}
        for depth in DEPTHS
    ]
    summary = stats.summarize(results.table_from_rows(rows))
    assert set(report.series_labels(summary)) == {"randread"}
    two_jobs = [
        {**result_row("randread", 4096, 1, 1, "all", 100.0), "job": job} for job in ("a", "b")
    ]
    labels = report.series_labels(stats.summarize(results.table_from_rows(two_jobs)))
    assert sorted(labels) == ["a: randread", "b: randread"]
