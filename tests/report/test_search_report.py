"""The search page's answer box: the sustained rate in the campaign's bandwidth units."""

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
