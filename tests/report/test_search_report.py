"""The search page: the answer box in the campaign's bandwidth units, the probes figure."""

from __future__ import annotations

from storbench.plan import slo_search
from storbench.report import search as search_page


def found(bw_bytes_s: float) -> dict:
    answer = {
        "status": slo_search.FOUND,
        "reason": "bracket within tolerance",
        "bracket": None,
        "closed": {"peak_qd": None},
        "bw_bytes_s": bw_bytes_s,
        "rate_iops": 610_351.5625,
        **{key: 1 for key in ("probes", "closed_probes", "open_probes", "confirm_probes")},
    }
    return {"answer": answer, "objective": {"latency": "p99"}, "limit": "2ms"}


def test_headline_is_decimal_by_default_and_binary_on_request():
    assert search_page.answer_box(found(2.5e9), None)["headline"].startswith(
        "2.50 GB/s (610,352 IOPS) sustained with p99 ≤ 2ms"
    )
    assert search_page.answer_box(found(4e8), None)["headline"].startswith("400.00 MB/s")
    binary = search_page.answer_box(found(2.5e9), None, "binary")["headline"]
    assert binary.startswith("2.33 GiB/s (610,352 IOPS)")  # 2.5e9 / 2^30


def test_probe_numbers_near_the_answer_are_not_written_over_each_other():
    import matplotlib.pyplot as plt

    latencies = {"p50": 600e3, "p99": 1.8e6, "p99.9": 3e6}
    rates = [9000, 13500, 11250, 12375, 11800, 12100, 11950, 12020, 11990, 11990]
    probes = [
        {
            "phase": "open",
            "offered_iops": rate,
            "achieved_iops": rate * 0.995,
            "meets": rate < 12000,
            "latency_ns": latencies,
        }
        for rate in rates
    ]
    result = {
        "probes": probes,
        "objective": {"limit_ns": 2e6, "latency": "p99"},
        "limit": "2ms",
        "answer": {"rate_iops": 11990},
    }
    fig, caption = search_page.search_figure(result)
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        numbers = fig.axes[0].texts
        shown = [text for text in numbers if text.get_visible()]
        boxes = [text.get_window_extent(renderer) for text in shown]
        assert not any(
            box.overlaps(other) for index, box in enumerate(boxes) for other in boxes[index + 1 :]
        )
        # the bisection's first probes stand apart; its last ones (8-10) lie on probe 7's
        assert [text.get_text() for text in numbers] == [str(n) for n in range(1, 11)]
        assert [text.get_text() for text in shown][:4] == ["1", "2", "3", "4"]
        assert len(shown) < len(numbers)
        assert "where numbers would overlap, the first" in caption
    finally:
        plt.close(fig)


def test_the_methodology_says_how_the_searchs_own_tool_offers_its_rate():
    """A vdbench search read 'fio rate_iops ... fio measures latency from submission'."""
    import pandas as pd

    result = {
        "objective": {"latency": "p99", "min_achieved": 0.95, "tolerance": 0.05},
        "limit": "2ms",
        "settings": {"arrivals": "poisson", "max_iodepth": 64, "max_probes": 8, "iterations": 2},
    }
    rows = pd.DataFrame({"tool": ["vdbench"], "tool_version": ["vdbench50407"]})
    vdbench = dict(search_page.methodology(result, {}, rows))
    assert vdbench["Tool"] == "vdbench vdbench50407"
    assert vdbench["Phase 2, open loop"].endswith(
        "The rate: vdbench iorate= of each host's run definition, the offered rate split evenly"
        " over hosts, distribution=exponential (poisson arrivals)"
    )
    assert vdbench["Latency"].startswith("percentiles from vdbench's response-time histogram")
    fio = dict(search_page.methodology(result, {"tool": "fio"}, rows.iloc[:0]))
    assert (
        "fio rate_iops split evenly over hosts and jobs, rate_process=poisson"
        in (fio["Phase 2, open loop"])
    )
    assert "fio" not in vdbench["Phase 2, open loop"] + vdbench["Latency"]
