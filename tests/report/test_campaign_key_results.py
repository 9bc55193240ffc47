"""The campaign's key results and peaks figure from a summary, without a workflow run."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from storbench.analysis import scaling, stats
from storbench.cli import main
from storbench.core import results
from storbench.report import campaign
from storbench.report import paper_tables as report_tables
from tests.paths import FIXTURES
from tests.report.test_report import result_row

T_975_DF1 = 12.706204736174698  # Student t 0.975 quantile, 1 degree of freedom


def shown(table) -> dict:
    """The first row of a table as {column: cell}."""
    return dict(zip(table.columns, table.rows[0], strict=True))


def key_rows(bandwidths_mib) -> list[dict]:
    rows = [
        result_row("randread", 4096, 1, iteration, "all", bw)
        for iteration, bw in enumerate(bandwidths_mib, start=1)
    ]
    summary = stats.summarize(results.table_from_rows(rows))
    return campaign.key_results(summary, [], {"exp": {"tool": "fio"}})


def test_two_iterations_give_a_positive_log_scale_interval_flagged_small():
    (row,) = key_rows([100.0, 200.0])
    table = campaign.key_results_table([row])
    got = shown(table)
    assert got["n"] == f"2{report_tables.SMALL_N_MARK}"
    assert report_tables.SMALL_N_NOTE in table.notes
    # IOPS 25600 and 51200: √(25600 · 51200) · 2^(∓12.7062 / 2) = [443, 2959575]
    factor = 2 ** (T_975_DF1 / 2)
    assert got["IOPS CI low"] == f"{math.sqrt(25600 * 51200) / factor:.0f}" == "443"
    assert got["IOPS CI high"] == f"{math.sqrt(25600 * 51200) * factor:.0f}" == "2959575"
    assert float(got["IOPS CI low"]) > 0
    assert report_tables.INTERVAL_NAME in table.caption


def test_three_iterations_are_not_flagged():
    (row,) = key_rows([100.0, 110.0, 120.0])
    assert shown(campaign.key_results_table([row]))["n"] == "3"


def test_peaks_figure_takes_a_mean_above_its_geometric_interval():
    # 19 iterations at 1 MiB/s and one at 10^6: the arithmetic mean lies above the interval
    (row,) = key_rows([1.0] * 19 + [1e6])
    assert row["bw_mean"] > row["bw_ci_high"]
    png, svg, caption = campaign.peaks_figure([row])
    assert png.startswith(b"\x89PNG") and svg and report_tables.INTERVAL_NAME in caption


def test_the_peak_iops_axis_has_short_labels():
    """'200000', '175000', ...: the campaign page's peak IOPS panel counted in full."""
    import matplotlib.pyplot as plt

    row = {"experiment": "demo", "iops_mean": 146_000.0, "bw_mean": 4.2e9}
    fig = campaign._peaks([row], "decimal")
    fig.canvas.draw()
    iops_axis = fig.axes[1]
    labels = [label.get_text() for label in iops_axis.get_yticklabels() if label.get_text()]
    plt.close(fig)
    assert iops_axis.get_ylabel() == "peak IOPS"
    assert "100k" in labels and all(len(label) <= 4 for label in labels)


def test_a_campaign_report_without_a_meta_names_each_experiments_tool_from_its_rows():
    """`storbench campaign-report --meta '{"title": ...}'` over summaries: Tool was '–'."""
    rows = [
        {**result_row("randread", 4096, 1, 1, "all", 100.0), "experiment": experiment, "tool": tool}
        for experiment, tool in (("disk", "fio"), ("s3", "warp"))
    ]
    summary = stats.summarize(results.table_from_rows(rows))
    assert {r["experiment"]: r["tool"] for r in campaign.key_results(summary, [], {})} == {
        "disk": "fio",
        "s3": "warp",
    }
    # the config's word stands where there is one
    (row, _) = campaign.key_results(summary, [], {"disk": {"tool": "fio-3.33 by hand"}})
    assert row["tool"] == "fio-3.33 by hand"


def test_the_iops_peak_of_a_mixed_run_is_its_read_and_write_together(tmp_path):
    """fio's standalone-group.jsonplus: the randrw 70/30 job did 25,539 read + 10,878 write
    IOPS at the same time; its peak is their sum (op read+write), above the best single op,
    and the peaks figure names the op."""
    fixture = FIXTURES / "fio/standalone-group.jsonplus.json"
    output = tmp_path / "fio.parquet"
    assert main(["import", "--tool", "fio", "--experiment", "mix", "-o", str(output),
                 str(fixture)]) == 0  # fmt: skip
    (mix,) = [job for job in json.loads(fixture.read_text())["jobs"]
              if job["jobname"] == "randrw-70-30-4k"]  # fmt: skip
    written = campaign.build_campaign_report([output], [], tmp_path / "report", {"title": "t"})
    key = pd.read_csv(written["tables/key_results.csv"])
    assert key.loc[0, "IOPS peak at"] == "standalone-group.jsonplus read+write"
    expected = mix["read"]["iops"] + mix["write"]["iops"]
    assert float(key.loc[0, "Peak IOPS"]) == pytest.approx(expected, abs=0.5)  # 36,416.5
    assert round(expected) == 36417 and round(mix["read"]["iops"]) == 25539
    # Bandwidth: the 1m sequential read (725.6 MB/s) beats the mix's 149.2 MB/s.
    assert key.loc[0, "Bandwidth peak at"] == "standalone-group.jsonplus read"
    assert key.loc[0, "Errors"] == 0 and key.loc[0, "CoV > 5 %"] == 0  # combined cells not counted
    summary, combined = _summaries(output)
    rows = campaign.key_results(summary, [], {}, combined)
    assert (rows[0]["iops_op"], rows[0]["bw_op"]) == ("read+write", "read")


def _summaries(path):
    raw = results.read_parquet([path]).to_pandas()
    return stats.summarize(raw), stats.summarize(scaling.together_rows(raw))
