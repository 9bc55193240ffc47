"""The report: files, numbers that match stats.summarize, offline HTML, escaping, determinism."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from storbench.analysis import stats
from storbench.core import results
from storbench.report import experiment as report
from storbench.report import figures as report_figures
from storbench.report import network as network_page
from storbench.report import toolkit
from tests.report.exported import pipe_table_rows

MIB = 1024**2
MB = 1e6  # the summary table's bandwidth unit with the default report.units (decimal)
RWS = ("randread", "randwrite")
SIZES = (4096, 1 << 20)
DEPTHS = (1, 8)
ITERATIONS = (1, 2, 3)
HOSTS = ("hostA", "hostB")
# Figures in the order of the page: report.FIGURES, then the further ones (report_figures).
ALL_FIGURES = (*report.FIGURES, *report_figures.FIGURES)
# rows with histogram bins also get the latency histogram (storbench.report.extra_figures)
HISTOGRAM_FILES = ["latency_histogram.png", "latency_histogram.svg"]
FIGURE_FILES = [
    *(f"{name}.{ext}" for name in ALL_FIGURES for ext in ("png", "svg")),
    *HISTOGRAM_FILES,
]
# Paper tables every report exports (the preparation-state table only when rows record a state).
TABLE_FILES = [
    f"tables/{stem}.{suffix}"
    for stem in ("bandwidth", "latency", "per_host")
    for suffix in ("csv", "md", "tex", "html")
]
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
    expected = {"index.html", "summary.csv", "summary.md", *FIGURE_FILES, *TABLE_FILES}
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
        text = report.format_mean_sd(cell["bw_bytes_s_mean"] / MB, cell["bw_bytes_s_sd"] / MB, 1)
        assert f"<td>{text}</td>" in html
    assert "<td>3,355.4 ± 67.1</td>" in html  # randread 1m qd8: 3,200 ± 64 MiB/s in MB/s
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
    # no per-interval series in these rows: the page leaves the empty time-series figure out,
    # and their histogram bins add the latency histogram
    assert html.count('src="data:image/png;base64,') == len(ALL_FIGURES)


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
    rows = pipe_table_rows(markdown)
    assert rows[0][:4] == ["Run", "rw", "bs", "iodepth"]
    expected = ["randread-1m-qd8", "randread", "1m", "8", "1", "read", "3", "3,355.4 ± 67.1"]
    assert expected in [row[:8] for row in rows]


def test_builds_are_byte_identical(raw_path, tmp_path):
    first = report.build_report(raw_path, tmp_path / "a", title="t", meta=META)
    second = report.build_report(raw_path, tmp_path / "b", title="t", meta=META)
    for name in [*FIGURE_FILES, *TABLE_FILES, "index.html", "summary.csv", "summary.md"]:
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
    assert "<td>52.4</td>" in single  # n=1: mean without ± sd (50 MiB/s in MB/s)
    # no series (- the time series), histogram bins (+ the latency histogram)
    assert html.count("data:image/png;base64,") == len(ALL_FIGURES)


def test_bandwidth_unit_follows_magnitude():
    frame = pd.DataFrame({"bw_bytes_s_mean": [5e8]})
    assert report.bandwidth_unit(frame["bw_bytes_s_mean"]) == ("MB/s", 1e6)
    frame = pd.DataFrame({"bw_bytes_s_mean": [5e8, 2.5e9]})
    assert report.bandwidth_unit(frame["bw_bytes_s_mean"]) == ("GB/s", 1e9)


def test_binary_bandwidth_unit_follows_magnitude():
    frame = pd.DataFrame({"bw_bytes_s_mean": [500 * MIB, 1000 * MIB]})  # 1.05e9: under 1 GiB
    assert report.bandwidth_unit(frame["bw_bytes_s_mean"], "binary") == ("MiB/s", MIB)
    frame = pd.DataFrame({"bw_bytes_s_mean": [500 * MIB, 2048 * MIB]})
    assert report.bandwidth_unit(frame["bw_bytes_s_mean"], "binary") == ("GiB/s", 1024 * MIB)


def test_default_units_are_decimal_throughout_the_page(built):
    out_dir, _ = built
    html = (out_dir / "index.html").read_text()
    assert "<th>BW MB/s (mean ± sd)</th>" in html and "<th>BW MB/s</th>" in html
    assert "MiB/s" not in html  # GiB/s only beside GB/s in the paper bandwidth table
    assert "decimal units (1 GB/s = 10^9 bytes/s" in html
    # per-run table: randread 1m qd8 iteration 1 of host 'all' is 3,136 MiB/s
    assert "<td>3,288.3</td>" in html.split('id="per-run"')[1]


def test_binary_units_show_mib_per_second(raw_path, tmp_path):
    written = report.build_report(raw_path, tmp_path, title="t", meta={**META, "units": "binary"})
    html = written["index.html"].read_text()
    markdown = written["summary.md"].read_text()
    rows = pipe_table_rows(markdown)
    assert rows[0][7:9] == ["BW MiB/s (mean ± sd)", "BW MiB/s 95 % CI"]
    expected = ["randread-1m-qd8", "randread", "1m", "8", "1", "read", "3", "3,200.0 ± 64.0"]
    assert expected in [row[:8] for row in rows]
    assert "<td>3,200.0 ± 64.0</td>" in html
    assert "binary units (1 GiB/s = 2^30 bytes/s" in html
    assert "MB/s" not in markdown


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
    no_histogram = set(FIGURE_FILES) - set(HISTOGRAM_FILES)  # no rows, no bins
    assert set(written) == {"index.html", "summary.csv", "summary.md", *no_histogram, *TABLE_FILES}
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


def test_a_series_names_its_op_once():
    """A GOSBench run's tests (jobs read-4k-8s and write-4k-8s, rw read and write): its legend
    said 'read-4k-8s: read read'; a mixed run's ops still name themselves."""
    tests = [
        {**result_row(rw, 4096, 1, 1, "all", 100.0), "run_id": "s3", "job": f"{rw}-4k-8s", "op": rw}
        for rw in ("read", "write")
    ]
    labels = report.series_labels(stats.summarize(results.table_from_rows(tests)))
    assert sorted(labels) == ["read-4k-8s: read", "write-4k-8s: write"]
    mixed = [
        {**result_row("randrw", 4096, 1, 1, "all", 100.0), "op": op, "rwmixread": 70}
        for op in ("read", "write")
    ]
    labels = report.series_labels(stats.summarize(results.table_from_rows(mixed)))
    assert sorted(labels) == ["randrw (70 % read) read", "randrw (70 % read) write"]


# ---------------------------------------------------------------------------------------
# Scale-out: client steps, data path, slow hosts, start skew, targets, hosts appendix

GB = 1e9
DATA_PATH = {"client_link": "10Gbit/s", "limits": [{"name": "cluster", "rate": "3GB/s"}]}
SCALE_FILES = {"scaling.png", "scaling.svg", "scaling.csv", "start_skew.csv"} | {
    f"tables/scaling.{suffix}" for suffix in ("csv", "md", "tex", "html")
}


def scale_row(run_id, host, bw, *, iteration, step, hosts, **extra) -> dict:
    return {
        **result_row("read", 1 << 20, 16, iteration, host, bw / MIB),
        "experiment": "scale",
        "run_id": run_id,
        "job": run_id,
        "op": "read",
        "rw": "read",
        "step": step,
        "hosts_in_run": hosts,
        "target": "vast",
        "params_json": '{"bs": "1m", "iodepth": 16, "rw": "read"}',
        **extra,
    }


def stepped_rows() -> list[dict]:
    """2 and 4 hosts; 2.0/2.2 and 2.7/2.9 GB/s over two iterations; hosts start 1 s apart."""
    rows = []
    for count, totals in ((2, (2.0 * GB, 2.2 * GB)), (4, (2.7 * GB, 2.9 * GB))):
        run_id, step = f"read_bs1m_qd16_h{count}", f"h{count}"
        for iteration, total in enumerate(totals, start=1):
            common = {"iteration": iteration, "step": step, "hosts": count}
            for index in range(count):
                start = f"2024-05-01T10:00:0{index}.000+00:00"
                name = f"client{index + 1:02d}"
                rows.append(scale_row(run_id, name, total / count, start_time=start, **common))
            skew = float(count - 1)
            rows.append(scale_row(run_id, "all", total, start_skew_s=skew, **common))
    return rows


def steps_meta(counts=(2, 4)) -> dict:
    hosts = {
        f"h{n}": [{"name": f"client{i + 1:02d}", "group": "clients"} for i in range(n)]
        for n in counts
    }
    return {"mode": "incremental", "size": 2, "hosts": hosts}


def test_the_methodology_names_the_host_counts_of_a_stepping():
    from storbench.report.scale_out import scale_out_methodology

    steps = {**steps_meta((1, 2, 4)), "counts": [1, 2, 4]}
    del steps["size"]
    assert dict(scale_out_methodology({"steps": steps}))["Client stepping"] == (
        "incremental, counts 1, 2, 4: h1 (1 host), h2 (2 hosts), h4 (4 hosts)"
    )


@pytest.fixture(scope="module")
def stepped(tmp_path_factory):
    path = tmp_path_factory.mktemp("stepped") / "summary.parquet"
    results.write_rows(stepped_rows(), path)
    meta = {"experiment": "scale", "steps": steps_meta(), "data_path": DATA_PATH,
            "max_start_skew_s": 1.5}  # fmt: skip
    out_dir = tmp_path_factory.mktemp("stepped-report")
    return path, meta, out_dir, report.build_report(path, out_dir, title="scale", meta=meta)


def scale_part(html: str, part_id: str) -> str:
    return html.split(f'<h3 id="{part_id}">')[1].split("</table>")[0]


def test_stepped_report_shows_scaling_table_with_efficiency(stepped):
    _, _, out_dir, written = stepped
    assert set(written) == {
        "index.html",
        "summary.csv",
        "summary.md",
        *FIGURE_FILES,
        *TABLE_FILES,
        *SCALE_FILES,
    }
    html = written["index.html"].read_text()
    assert '<section id="scale-out">' in html
    scaling_html = scale_part(html, "scaling")
    header = scaling_html.split("<thead>")[1].split("</thead>")[0]
    assert "<th>Theoretical GB/s</th><th>Bottleneck</th><th>Efficiency</th>" in header
    # h2: 2.1 GB/s of 2 x 10 Gbit/s = 2.5 GB/s; h4: 2.8 GB/s of the 3 GB/s cluster.
    assert (
        "<td>h2</td><td>2</td><td>2</td><td>2.10 ± 0.14</td><td>1.050</td><td>2,003 ± 135</td>"
        "<td>2.50</td><td>client links (2 x 10 Gbit/s)</td><td>84.0 %</td>"
    ) in scaling_html
    assert (
        "<td>h4</td><td>4</td><td>2</td><td>2.80 ± 0.14</td><td>0.700</td><td>2,670 ± 135</td>"
        "<td>3.00</td><td>cluster</td><td>93.3 %</td>"
    ) in scaling_html
    # The scaling table as a paper table: the same cells as the page's.
    exported = (out_dir / "tables" / "scaling.md").read_text()
    exported_rows = [" | ".join(row) for row in pipe_table_rows(exported)]
    assert any(
        "| h2 | 2 | 2 | 2.10 ± 0.14 | 1.050 | 2,003 ± 135 | 2.50 |" in row for row in exported_rows
    )
    assert any(row.endswith("client links (2 x 10 Gbit/s) | 84.0 %") for row in exported_rows)
    # + scaling and the latency histogram, - the empty time series
    assert html.count('src="data:image/png;base64,') == len(ALL_FIGURES) + 1
    assert 'id="figure-scaling"' in html and "client links (2 x 10 Gbit/s) at 2 hosts" in html
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", html)


def test_stepped_report_files_match_the_analysis(stepped):
    path, meta, out_dir, written = stepped
    assert written["scaling.png"].read_bytes().startswith(b"\x89PNG")
    assert written["scaling.svg"].read_text().lstrip().startswith("<?xml")
    got = pd.read_csv(out_dir / "scaling.csv")
    assert got["efficiency"].tolist() == pytest.approx([0.84, 2.8 / 3.0], rel=1e-12)
    assert got["theoretical_bytes_s"].tolist() == [2.5e9, 3.0e9]
    skew = pd.read_csv(out_dir / "start_skew.csv")
    assert skew["start_skew_s"].tolist() == [1.0, 1.0, 3.0, 3.0]
    assert skew["flagged"].tolist() == [False, False, True, True]  # bound 1.5 s
    skew_html = scale_part(written["index.html"].read_text(), "start-skew")
    assert skew_html.count('<tr class="flagged">') == 2
    assert "<td>3.000</td><td>client04</td>" in skew_html


def test_stepped_summary_shows_hosts_and_methodology(stepped):
    _, _, _, written = stepped
    html = written["index.html"].read_text().replace("<wbr>", "")  # run ids may wrap after '_'
    summary = html.split('id="summary"')[1].split("</table>")[0]
    assert "<th>Run</th><th>Hosts</th><th>rw</th>" in summary  # no Job: jobs are named after runs
    assert summary.index("read_bs1m_qd16_h2") < summary.index("read_bs1m_qd16_h4")
    assert (
        "<dt>Client stepping</dt><dd>incremental, size 2: h2 (2 hosts), h4 (4 hosts)</dd>" in html
    )
    assert "<dt>Data path</dt><dd>client link 10Gbit/s; cluster 3GB/s</dd>" in html


def test_stepped_reports_are_byte_identical(stepped, tmp_path):
    path, meta, _, first = stepped
    second = report.build_report(path, tmp_path, title="scale", meta=meta)
    for name in ("scaling.png", "scaling.svg", "scaling.csv", "start_skew.csv", "index.html"):
        assert first[name].read_bytes() == second[name].read_bytes(), name


def test_steps_without_data_path_have_no_efficiency(tmp_path):
    written = report.build_report(
        results.table_from_rows(stepped_rows()), tmp_path, title="t", meta={}
    )
    assert "scaling.png" in written  # steps found in the rows alone
    scaling_html = scale_part(written["index.html"].read_text(), "scaling")
    assert "Efficiency" not in scaling_html and "<td>2.10 ± 0.14</td>" in scaling_html


def constant_rows() -> list[dict]:
    rows = []
    for name, bw in (
        ("client01", 1.00),
        ("client02", 0.99),
        ("client03", 0.85),
        ("client04", 1.01),
    ):
        run_id, step = f"read_bs1m_qd16_host-{name}", f"host-{name}"
        for host in (name, "all"):
            rows.append(scale_row(run_id, host, bw * GB, iteration=1, step=step, hosts=1))
    return rows


def test_constant_stepping_flags_slow_hosts(tmp_path):
    hosts = {f"host-client0{i}": [{"name": f"client0{i}", "group": "clients"}] for i in range(1, 5)}
    meta = {
        "steps": {"mode": "constant", "size": 1, "hosts": hosts},
        "data_path": DATA_PATH,
        "slow_host_percent": 10,
    }
    written = report.build_report(
        results.table_from_rows(constant_rows()), tmp_path, title="t", meta=meta
    )
    assert {"slow_hosts.csv", "scaling.png", "scaling.csv"} <= set(written)
    assert "start_skew.csv" not in written  # every run had one host
    slow = pd.read_csv(tmp_path / "slow_hosts.csv")
    assert slow["host"].tolist() == ["client01", "client02", "client03", "client04"]
    assert slow["median_bw_bytes_s"].tolist() == pytest.approx([0.995 * GB] * 4)
    assert slow["flagged"].tolist() == [False, False, True, False]  # 14.6 % below the median
    html = written["index.html"].read_text()
    part = scale_part(html, "slow-hosts")
    flagged = part.split('<tr class="flagged">')[1].split("</tr>")[0]
    assert "<td>client03</td>" in flagged and "<td>−14.6 %</td>" in flagged
    assert "Flagged (⚑): client03." in html
    scaling_csv = pd.read_csv(tmp_path / "scaling.csv")
    assert scaling_csv["theoretical_bytes_s"].tolist() == [1.25e9] * 4  # one 10 Gbit/s link each
    assert scaling_csv["efficiency"].tolist() == pytest.approx([0.8, 0.792, 0.68, 0.808])


def host_facts(name: str, **changes) -> dict:
    facts = {
        "host": name,
        "group": "clients",
        "hostname": name,
        "kernel": "6.1.0-18-amd64",
        "arch": "x86_64",
        "os_release": "Debian GNU/Linux 12 (bookworm)",
        "cpu_model": "Intel(R) Xeon(R) Gold 6338",
        "cores": 64,
        "sockets": 2,
        "mem_bytes": 256 * 2**30,
        "nics": [
            {
                "name": "ens1",
                "speed_mbps": 100000,
                "mtu": 9000,
                "state": "up",
                "driver": "mlx5_core",
            }
        ],
        "target_mount": {"path": "/mnt/vast", "source": "vip:/", "fstype": "nfs", "options": "rw"},
        "tool_versions": {"fio": "fio-3.33"},
    }
    facts.update(changes)
    return facts


def test_hosts_appendix_highlights_hosts_that_differ(tmp_path):
    telemetry = {
        "client01": host_facts("client01"),
        "client02": host_facts("client02", kernel="5.10.0-28-amd64"),
        "client03": host_facts("client03"),
    }
    written = report.build_report(
        results.table_from_rows(stepped_rows()), tmp_path, title="t", meta={}, telemetry=telemetry
    )
    html = written["index.html"].read_text()
    appendix = html.split('<h2 id="hosts">Appendix C. Hosts</h2>')[1].split("</table>")[0]
    assert appendix.count("<tr><td>client0") == 3
    assert appendix.count('class="differs"') == 1
    assert '<td class="differs">5.10.0-28-amd64</td>' in appendix
    assert "<td>ens1 100000 Mb/s mtu 9000</td>" in appendix
    assert "(1 host(s) differ)" in appendix


def test_several_targets_get_a_target_column_and_a_target_table(tmp_path):
    rows = []
    for target, bw in (("a", 1.0 * GB), ("b", 0.8 * GB), ("a+b", 1.5 * GB)):
        run_id = f"read_bs1m_qd16_{target.replace('+', '-')}"
        rows.append(
            {**scale_row(run_id, "all", bw, iteration=1, step=None, hosts=2), "target": target}
        )
    written = report.build_report(results.table_from_rows(rows), tmp_path, title="t", meta={})
    assert "targets.csv" in written and "scaling.png" not in written
    html = written["index.html"].read_text()
    assert "<th>Run</th><th>Target</th>" in html.split('id="summary"')[1]
    part = scale_part(html, "targets")
    assert "<td>a+b</td><td>1</td><td>1.50</td><td>1,431</td><td>1.80</td><td>83.3 %</td>" in part


def test_single_host_experiment_has_no_scale_out_section(tmp_path):
    rows = [result_row("randread", 4096, 1, it, "all", 100.0) for it in (1, 2)]
    written = report.build_report(results.table_from_rows(rows), tmp_path, title="t", meta={})
    assert set(written) == {"index.html", "summary.csv", "summary.md", *FIGURE_FILES, *TABLE_FILES}
    html = written["index.html"].read_text()
    assert 'id="scale-out"' not in html and 'id="hosts"' not in html
    assert '<h2 id="environment">Appendix C. Environment</h2>' in html
    # Summary, tables, figures, per-host; tables: summary, bandwidth, latency, per-host.
    assert "<h2>5. Methodology</h2>" in html and "Table 5. Raw value" in html


# ---------------------------------------------------------------------------------------
# Network check report, from real iperf3 runs over loopback

LOOPBACK = "127.0.0.1"
CLIENT_RATES = {"client01": "400M", "client02": "400M", "client03": "100M"}  # client03 is slow


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def _wait_listening(port: int, server) -> None:
    """Poll the kernel's socket table: a probe connection would count as a test to iperf3."""
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        assert server.poll() is None, "iperf3 server exited"
        if port in _listening_ports():
            return
        time.sleep(0.05)
    raise AssertionError(f"iperf3 server on port {port} not listening")


def _listening_ports() -> set[int]:
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                if fields[3] == "0A":  # LISTEN
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


@pytest.fixture(scope="module")
def iperf3_rows(tmp_path_factory):
    """netcheck-shaped rows from real iperf3: each client alone, then all three at once."""
    import json
    import shutil
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    from storbench.core import aggregate
    from storbench.tools import iperf3

    if shutil.which("iperf3") is None:
        pytest.fail("iperf3 is not installed (make test installs it)", pytrace=False)
    ports = {name: _free_port() for name in CLIENT_RATES}
    servers = [
        subprocess.Popen(
            ["iperf3", "--server", "--bind", LOOPBACK, "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for port in ports.values()
    ]
    folder = tmp_path_factory.mktemp("iperf3")

    def client(phase: str, name: str) -> dict:
        argv = ["iperf3", "--client", LOOPBACK, "--port", str(ports[name]), "--time", "1"]
        argv += ["--bitrate", CLIENT_RATES[name], "--json"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)
        path = folder / f"{phase}-{name}.json"
        path.write_text(done.stdout)
        base = {"experiment": "network", "run_id": phase, "iteration": 1, "attempt": 1,
                "tool": "iperf3", "hosts_in_run": 1 if phase == "single" else len(ports),
                "params_json": json.dumps({"server": "server", "address": LOOPBACK,
                                           "duration_s": 1, "parallel": 1})}  # fmt: skip
        return iperf3.result_row(iperf3.load_result(path), host=name, base=base)

    try:
        for port, server in zip(ports.values(), servers, strict=True):
            _wait_listening(port, server)
        rows = [client("single", name) for name in CLIENT_RATES]
        with ThreadPoolExecutor(len(CLIENT_RATES)) as pool:
            together = list(pool.map(lambda name: client("all", name), CLIENT_RATES))
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=10)
    return rows + together + aggregate.aggregate_hosts(together)


def test_network_report_flags_the_slow_client(iperf3_rows, tmp_path):
    from storbench.run import netcheck

    source = tmp_path / "network.parquet"
    results.write_rows(iperf3_rows, source)
    written = network_page.build_network_report(source, tmp_path / "network", min_fraction=0.8)
    assert set(written) == {"index.html", "network.csv", "network.png", "network.svg"}

    table = pd.read_csv(written["network.csv"])
    clients = table[table["host"] != "all"]
    assert table["phase"].tolist() == ["single"] * 3 + ["all"] * 4
    # The bandwidth is iperf3's own figure for each run, its median and the fraction of it.
    measured = {(r["run_id"], r["host"]): r["bw_bytes_s"] for r in iperf3_rows}
    for _, row in clients.iterrows():
        assert row["bw_bytes_s"] == measured[(row["phase"], row["host"])]
        phase_values = [v for (p, h), v in measured.items() if p == row["phase"] and h != "all"]
        assert row["median_bytes_s"] == pytest.approx(sorted(phase_values)[1], rel=1e-12)
    expected = netcheck.slow_clients(iperf3_rows, 0.8)
    assert {(item["phase"], item["host"]) for item in expected} == {
        ("single", "client03"),
        ("all", "client03"),
    }
    assert clients.loc[clients["flagged"], "host"].tolist() == ["client03", "client03"]
    total = table[(table["phase"] == "all") & (table["host"] == "all")]["bw_bytes_s"].iloc[0]
    assert total == pytest.approx(
        sum(v for (p, h), v in measured.items() if p == "all" and h != "all")
    )

    html = written["index.html"].read_text()
    assert html.count('<tr class="flagged">') == 2
    assert "client03 at" in html and "of the median" in html
    assert html.count('src="data:image/png;base64,') == 1
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", html)
    assert "<link" not in html and "<script" not in html
    assert written["network.png"].read_bytes().startswith(b"\x89PNG")
    again = network_page.build_network_report(source, tmp_path / "again", min_fraction=0.8)
    for name in ("index.html", "network.csv", "network.png", "network.svg"):
        assert again[name].read_bytes() == written[name].read_bytes(), name


def test_host_job_files_sharing_a_text_are_listed_once(raw_path, tmp_path):
    """128 hosts' job files of a run, differing by the host's directory only: one listing
    naming the hosts, in place of 128."""
    hosts = [f"127.0.1.{i}" for i in range(1, 129)]
    jobs = {f"randread-4k-qd1/{h}": f"[global]\ndirectory=/scratch/{h}\n" for h in hosts}
    meta = {**META, "job_files": jobs}
    written = report.build_report(raw_path, tmp_path, title="many hosts", meta=meta)
    appendix = written["index.html"].read_text().split("Appendix A. Job files")[1]
    appendix = appendix.split("Appendix B")[0]
    assert appendix.count("<pre>") == 1
    assert "<pre>[global]\ndirectory=/scratch/&lt;host&gt;\n</pre>" in appendix
    assert "The job file of 128 hosts, &lt;host&gt; standing for each one's name:" in appendix
    assert ", ".join(sorted(hosts)) in appendix


def test_a_network_check_of_128_clients_stays_readable():
    """128 bars a panel were a black block under 128 names written over each other."""
    import matplotlib.pyplot as plt

    from storbench.report import network

    slow = {"client017", "client077"}
    table = pd.DataFrame(
        {
            "phase": phase,
            "host": f"client{i:03d}",
            "bw_bytes_s": 0.4e9 if f"client{i:03d}" in slow else 1.25e9,
            "median_bytes_s": 1.25e9,
            "flagged": f"client{i:03d}" in slow,
        }
        for phase in ("single", "all")
        for i in range(1, 129)
    )
    with toolkit.style():
        fig, caption = network.network_figure(table, 0.8)
        try:
            fig.canvas.draw()
            for ax in fig.axes[:2]:
                shown = [label for label in ax.get_xticklabels() if label.get_text()]
                # parallel 45° names do not touch when their anchors are a line height apart
                # across them: dx * sin 45° >= the font's size
                anchors = [label.get_window_extent().x1 for label in shown]
                line = shown[0].get_size() * fig.dpi / 72
                gaps = [b - a for a, b in zip(anchors, anchors[1:], strict=False)]
                assert min(gaps) * 0.7071 >= line
                assert sorted(text.get_text() for text in ax.texts) == sorted(slow)
                assert "client001" in [label.get_text() for label in ax.get_xticklabels()]
        finally:
            plt.close(fig)
    assert "a dot per client, a flagged one red and named" in caption
