"""Figures of a large sweep draw a stated selection of its runs, never 50 tiny panels."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from storbench.analysis import stats
from storbench.core import results
from storbench.report import experiment as report
from storbench.report import figures as report_figures
from storbench.report import selection
from tests.report.test_report import MIB, result_row

DEPTHS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
NUMJOBS = (1, 2, 4, 8, 16)


def grid() -> pd.DataFrame:
    return pd.DataFrame(
        [{"iodepth": d, "numjobs": n, "run_id": f"qd{d}_nj{n}"} for d in DEPTHS for n in NUMJOBS]
    )


def test_a_grid_within_the_limit_is_kept_whole():
    chosen = selection.select(grid()[grid()["numjobs"] == 1], ["iodepth", "numjobs"], 12)
    assert len(chosen.rows) == 10 and chosen.note == ""


def test_the_largest_key_gives_way_first_and_both_ends_stay():
    chosen = selection.select(grid(), ["iodepth", "numjobs"], 12, "panels")
    assert sorted(chosen.rows["iodepth"].unique()) == [1, 16, 512]
    assert sorted(chosen.rows["numjobs"].unique()) == [1, 2, 8, 16]
    assert len(chosen.rows) == 12
    assert chosen.note.startswith(
        "A selection: 12 of 50 panels (iodepth 1, 16, 512; numjobs 1, 2, 8, 16), evenly spaced"
    )


def test_runs_without_swept_keys_are_taken_evenly_in_plan_order():
    frame = pd.DataFrame({"run_id": [f"r{i}" for i in range(100)], "host": "h1"})
    chosen = selection.select_runs(frame, 5)
    assert list(chosen.rows["run_id"]) == ["r0", "r25", "r50", "r74", "r99"]
    assert "5 of 100 runs" in chosen.note


def sweep_rows() -> pd.DataFrame:
    """read and write × 10 queue depths × 5 numjobs, 2 iterations, two hosts and 'all'."""
    rows = []
    for rw in ("randread", "randwrite"):
        for depth in DEPTHS:
            for numjobs in NUMJOBS:
                for iteration in (1, 2):
                    for host in ("h1", "h2", "all"):
                        row = result_row(rw, 4096, depth, iteration, host, 10.0 * numjobs)
                        row["numjobs"] = numjobs
                        row["run_id"] = f"{rw}_qd{depth}_nj{numjobs}"
                        rows.append(row)
    return results.table_from_rows(rows).to_pandas()


def test_the_figures_of_a_100_run_sweep_stay_within_their_limits():
    raw = sweep_rows()
    summary = stats.summarize(raw)
    figure, caption = report.bandwidth_figure(summary)
    assert sum(ax.get_visible() and ax.axison for ax in figure.axes) == selection.MAX_PANELS
    assert "A selection: 12 of 50 panels" in caption

    figure, caption = report.latency_cdf_figure(summary, raw)
    (axes,) = figure.axes
    # rw 2 × iodepth 2 × numjobs 3: the largest key gives way until at most 16 remain
    assert len(axes.get_lines()) == 12 and "12 of 100 runs" in caption

    figure, caption = report.latency_figure(summary)
    labels = [label.get_text() for label in figure.axes[0].get_xticklabels()]
    assert 0 < len(labels) <= report.MAX_PERCENTILE_RUNS and "A selection" in caption
    assert labels[0] == "randread_qd1_nj1" and labels[-1] == "randwrite_qd512_nj16"

    # a line per block size over queue depth only: numjobs values get their own panels
    figure, caption = report_figures.latency_vs_iops_figure(summary)
    titles = [ax.get_title() for ax in figure.axes if ax.axison]
    assert titles[:2] == ["randread, numjobs=1", "randread, numjobs=2"]
    assert len(titles) == 10 and "A selection" not in caption  # 2 patterns × 5 numjobs fit
    assert [len(ax.texts) for ax in figure.axes if ax.axison] == [len(DEPTHS)] * 10


def test_crowded_latency_lines_label_only_their_first_and_last_depth():
    rows = sweep_rows()
    rows = pd.concat([rows.assign(bs=bs) for bs in (4096, 8192, 16384, 65536)], ignore_index=True)
    rows["run_id"] = rows["run_id"] + "_bs" + rows["bs"].astype(str)
    figure, caption = report_figures.latency_vs_iops_figure(stats.summarize(rows))
    panel = next(ax for ax in figure.axes if ax.axison)
    assert sorted(text.get_text() for text in panel.texts) == ["1", "1", "1", "1"] + ["512"] * 4
    assert "at the first and last point of each line" in caption


def test_a_run_id_may_wrap_after_its_underscores_and_stays_escaped():
    from storbench.report.toolkit import breakable

    assert str(breakable("randread_bs4k_qd1")) == "randread_<wbr>bs4k_<wbr>qd1"
    assert str(breakable("<b>a_b</b>")) == "&lt;b&gt;a_<wbr>b&lt;/<wbr>b&gt;"


def test_the_per_host_figure_of_128_hosts_shows_their_spread_and_names_the_slowest():
    hosts = [f"client{i}" for i in range(1, 129)]
    rows = [
        result_row("randread", 4096, depth, iteration, host, 100 + index + iteration)
        for depth in (1, 16)
        for iteration in (1, 2)
        for index, host in enumerate(hosts)
    ]
    raw = pd.DataFrame(rows)
    raw["bw_bytes_s"] = raw["bw_bytes_s"].astype(float)
    raw.loc[(raw["host"] == "client77") & (raw["iodepth"] == 16), "bw_bytes_s"] /= 100
    figure, caption = report_figures.per_host_figure(raw)
    (ax,) = figure.axes
    assert not figure.legends  # no legend entry per host
    dots = [collection.get_offsets() for collection in ax.collections]
    assert [len(points) for points in dots] == [128, 128]
    # a dot per host at its mean over iterations (MiB/s here: decimal units, 1e6 bytes/s)
    assert sorted(dots[0][:, 1]) == pytest.approx([(100 + i + 1.5) * MIB / 1e6 for i in range(128)])
    assert [text.get_text() for text in ax.texts] == ["client1", "client77"]
    assert "each of the 128 client hosts" in caption and "slowest host" in caption


def test_an_iteration_on_128_hosts_lists_its_slowest_and_fastest_host_and_keeps_every_value(
    tmp_path,
):
    # qd1 on 4 hosts, qd16 on 128: a client-stepping sweep; host clientK runs at 100 + K MiB/s
    def hosts(count):
        return [f"client{k}" for k in range(1, count + 1)]

    rows = []
    for depth, count in ((1, 4), (16, 128)):
        for iteration in (1, 2):
            bandwidth = {host: 100.0 + k + iteration for k, host in enumerate(hosts(count), 1)}
            if depth == 16:
                bandwidth["client77"] = 1.0  # the slow one
            bandwidth["all"] = sum(bandwidth.values())
            rows += [
                result_row("randread", 4096, depth, iteration, host, value)
                for host, value in bandwidth.items()
            ]
    written = report.build_report(results.table_from_rows(rows), tmp_path, title="t", meta={})
    html = written["index.html"].read_text()
    per_run = html.split('<section id="per-run">')[1].split("</section>")[0]
    listed = [
        re.findall(r"<td>(.*?)</td>", row)[:3]
        for row in re.findall(r"<tr><td>.*?</tr>", per_run.replace("<wbr>", ""))
    ]
    small = [[run, it, host] for run, it, host in listed if run == "randread-4k-qd1"]
    assert small == [["randread-4k-qd1", str(i), h] for i in (1, 2) for h in [*hosts(4), "all"]]
    large = [[run, it, host] for run, it, host in listed if run == "randread-4k-qd16"]
    assert large == [
        ["randread-4k-qd16", str(i), host]
        for i in (1, 2)
        for host in ("client77 (slowest of 128)", "client128 (fastest of 128)", "all")
    ]
    # the fastest host's bandwidth in MB/s: (100 + 128 + iteration) MiB/s
    fastest = per_run.split("client128 (fastest of 128)</td><td>read</td><td>")[1]
    assert fastest.startswith(f"{(100 + 128 + 1) * MIB / 1e6:,.1f}</td>")
    assert 'href="per_run.csv"' in per_run and "more than 12 hosts" in per_run
    # every host's value of every iteration, at full precision
    frame = pd.read_csv(written[report.PER_RUN_CSV])
    assert len(frame) == 2 * (4 + 1) + 2 * (128 + 1)
    qd16 = frame[(frame["run_id"] == "randread-4k-qd16") & (frame["iteration"] == 2)]
    by_host = dict(zip(qd16["host"], qd16["bw_bytes_s"], strict=True))
    assert by_host["client77"] == 1.0 * MIB
    assert by_host["client5"] == (100 + 5 + 2) * MIB
    assert by_host["all"] == pytest.approx(sum(by_host[h] for h in hosts(128)))
    # the per-host breakdown: the same hosts of qd16 by their mean over both iterations
    per_host = html.split('<section id="per-host">')[1].split("</section>")[0]
    table = per_host.split('<table class="paper"')[1].split("</table>")[0]
    cells = [
        re.findall(r"<td[^>]*>(.*?)</td>", row)
        for row in re.findall(r"<tr>(<td.*?)</tr>", table.replace("<wbr>", ""))
    ]
    header = re.findall(r"<th>(.*?)</th>", table)
    run, scope, host = (header.index(name) for name in ("Run", "Scope", "Host"))
    shown = [(row[run], row[scope], row[host]) for row in cells]
    assert shown == [
        *[("randread-4k-qd1", "node", h) for h in hosts(4)],
        ("randread-4k-qd1", "system", "all"),
        ("randread-4k-qd16", "node", "client77"),
        ("randread-4k-qd16", "node", "client128"),
        ("randread-4k-qd16", "system", "all"),
    ]
    assert "more than 12 hosts" in per_host
    exported = pd.read_csv(tmp_path / "tables" / "per_host.csv")
    assert len(exported) == 4 + 1 + 128 + 1
    node = exported[(exported["Run"] == "randread-4k-qd16") & (exported["Host"] == "client5")]
    # decimal GB/s: (100 + 5 + 1.5) MiB/s over the two iterations
    assert node["GB/s"].item() == pytest.approx((100 + 5 + 1.5) * MIB / 1e9, abs=0.005)
