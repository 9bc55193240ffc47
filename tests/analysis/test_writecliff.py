"""Write cliff detection: synthetic series worked out by hand, and real fio 3.33 intervals
(tests/fixtures/fio/README.md: status-interval.json.txt is a 5 s randread job with
--status-interval=1; logs/ holds bw logs of two randrw jobs with log_avg_msec=500)."""

from __future__ import annotations

import pytest

from storbench.analysis.writecliff import (
    Interval,
    aggregate,
    concatenate,
    detect,
    plateau_bw,
    summary,
)
from storbench.tools.fio_json import load_documents
from storbench.tools.fio_timeseries import rows_from_logs, rows_from_status_interval
from tests.paths import FIXTURES as SHARED_FIXTURES

FIXTURES = SHARED_FIXTURES / "fio"
MB = 1_000_000


def steps(*bandwidths: float) -> list[Interval]:
    """One-second intervals ending at 1, 2, 3, ... s with the given bandwidths."""
    return [
        Interval(float(number), 1.0, int(bw), float(bw))
        for number, bw in enumerate(bandwidths, start=1)
    ]


def row(host: str, t_s: float, bytes_: int, interval_s: float | None = 1.0, **extra) -> dict:
    return {
        "host": host,
        "job": "w",
        "op": "write",
        "t_s": t_s,
        "interval_s": interval_s,
        "bytes": bytes_,
        "bw_bytes_s": None if bytes_ is None or not interval_s else bytes_ / interval_s,
        **extra,
    }


def test_cliff_after_a_plateau_of_ten_intervals():
    series = steps(*[1000 * MB] * 10, *[300 * MB] * 10)
    cliff = detect(series)
    assert cliff is not None
    assert cliff.to_dict() == {
        "t_s": 10.0,  # the 11th interval ends at 11 s and lasts 1 s
        "bytes_written": 10 * 1000 * MB,
        "plateau_bw_bytes_s": 1000.0 * MB,
        "after_bw_bytes_s": 300.0 * MB,
        "fraction": 0.5,
        "interval_index": 10,
    }


def test_after_bandwidth_is_the_median_from_the_cliff_on():
    series = steps(*[1000 * MB] * 10, 300 * MB, 200 * MB, 400 * MB, 100 * MB, 350 * MB)
    cliff = detect(series)
    assert cliff.after_bw_bytes_s == 300.0 * MB  # median of 300, 200, 400, 100, 350


def test_a_single_dip_is_not_a_cliff():
    series = steps(*[1000 * MB] * 5, 300 * MB, *[1000 * MB] * 5)
    assert detect(series) is None
    # with sustain 1 the dip itself counts: starts at 5 s after 5 x 1000 MB
    cliff = detect(series, sustain=1)
    assert (cliff.t_s, cliff.bytes_written, cliff.interval_index) == (5.0, 5000 * MB, 5)


def test_a_dip_shorter_than_sustain_then_a_real_cliff():
    series = steps(*[1000 * MB] * 5, 300 * MB, 300 * MB, 1000 * MB, *[300 * MB] * 4)
    cliff = detect(series)  # the two-interval dip at index 5-6 is too short
    assert (cliff.interval_index, cliff.t_s, cliff.bytes_written) == (8, 8.0, 6600 * MB)
    assert detect(series, sustain=2).interval_index == 5


def test_exactly_at_the_fraction_is_not_low():
    series = steps(*[1000 * MB] * 5, *[500 * MB] * 5)
    assert detect(series) is None  # 500 is not below 0.5 * 1000
    assert detect(series, fraction=0.6).interval_index == 5


def test_plateau_defaults_to_the_first_tenth_but_at_least_three_intervals():
    # 30 s: the first 3 s are 3 intervals, median of 900, 1000, 1100
    assert plateau_bw(steps(900, 1000, 1100, *[5000] * 27)) == 1000
    # 10 s: 10 % is 1 interval, raised to 3: median of 100, 500, 600
    assert plateau_bw(steps(100, 500, 600, *[700] * 7)) == 500
    # explicit window: the intervals ending within the first 2 s
    assert plateau_bw(steps(100, 500, 600, *[700] * 7), plateau_s=2) == 300
    series = steps(100, 500, 600, *[200] * 7)
    assert detect(series, plateau_s=1) is None  # plateau 100: nothing below 50
    assert detect(series).interval_index == 3  # plateau 500: 200 < 250 from index 3


def test_no_cliff_in_a_short_series():
    assert detect([]) is None
    assert detect(steps(1000, 100), sustain=3) is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fraction": 0}, "fraction"),
        ({"fraction": 1}, "fraction"),
        ({"fraction": 1.5}, "fraction"),
        ({"sustain": 0}, "sustain"),
        ({"plateau_s": 0}, "plateau_s"),
    ],
)
def test_bad_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        detect(steps(1, 2, 3), **kwargs)


def test_concatenate_shifts_each_chunk_by_the_end_of_the_previous():
    first = steps(10, 20, 30)  # ends at 3 s
    second = steps(40, 50)  # ends at 2 s
    third = steps(60)
    series = concatenate([first, [], second, third])
    assert [part.t_s for part in series] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert [part.bytes for part in series] == [10, 20, 30, 40, 50, 60]
    assert summary(series) == {"duration_s": 6.0, "bytes": 210, "mean_bw_bytes_s": 35.0}
    assert concatenate([]) == []


def test_aggregate_sums_two_hosts_per_bin():
    rows = [
        row("a", 1.0, 100),
        row("a", 2.0, 200),
        row("a", 3.0, 300),
        row("b", 1.02, 1000, interval_s=1.02),
        row("b", 1.98, 2000, interval_s=0.96),
        row("b", 3.01, 3000, interval_s=1.03),
        row("b", 2.0, 999_999, op="read"),  # another op
        row("all", 2.0, 2200),  # the all-host row would double count
    ]
    series = aggregate(rows, op="write")
    assert [part.t_s for part in series] == [1.0, 2.0, 3.0]
    assert [part.bytes for part in series] == [1100, 2200, 3300]
    # a bin lasts as long as its longest host interval
    assert [part.interval_s for part in series] == [1.02, 1.0, 1.03]
    assert series[1].bw_bytes_s == 2200.0
    assert series[2].bw_bytes_s == pytest.approx(3300 / 1.03)
    assert aggregate(rows, op="trim") == []


def test_aggregate_without_intervals_bins_by_the_spacing_of_the_ends():
    rows = [row(host, t_s, 100, interval_s=None) for host in "ab" for t_s in (2.0, 4.0, 6.0)]
    series = aggregate(rows)
    # distinct ends 2, 4, 6: width 2 s, and each row lasts one width
    assert [part.t_s for part in series] == [2.0, 4.0, 6.0]
    assert [(part.bytes, part.interval_s, part.bw_bytes_s) for part in series] == [
        (200, 2.0, 100.0)
    ] * 3


def test_aggregate_sums_jobs_and_derives_bytes_from_bw_logs():
    logs = FIXTURES / "logs"
    rows = rows_from_logs([logs / "logs_bw.1.log", logs / "logs_bw.2.log"], host="node1", base={})
    series = aggregate(rows, op="write")
    # 9 samples per job at 500, 1001, 1500, ..., 4501 ms; bin width 0.5 s (median interval)
    assert [part.t_s for part in series] == [0.5 * k for k in range(1, 10)]
    # first write samples: 23920 KiB/s (job 1) + 24360 KiB/s (job 2) over 0.5 s
    assert series[0].bytes == (23920 + 24360) * 1024 // 2
    assert series[0].bw_bytes_s == (23920 + 24360) * 1024
    # second samples at 1001 ms: 25448 + 25184 KiB/s over 0.501 s
    assert series[1].interval_s == 0.501
    assert series[1].bytes == round((25448 + 25184) * 1024 * 0.501)


def test_no_cliff_in_the_real_status_interval_run():
    text = (FIXTURES / "status-interval.json.txt").read_text()
    rows = rows_from_status_interval(text, host="node1", base={})
    series = aggregate(rows, op="read")
    # runtimes 893, 1893, 2893, 3893, 4893, 5001 ms; median interval 1 s, and the last
    # 0.108 s interval rounds into the 5 s bin
    assert [part.t_s for part in series] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert [part.interval_s for part in series] == [0.893, 1.0, 1.0, 1.0, 1.108]
    assert series[4].bytes == 140005376 + 14319616
    final = load_documents(text)[-1]["jobs"][0]["read"]["io_bytes"]
    totals = summary(series)
    assert totals["bytes"] == final == 644415488
    assert totals["duration_s"] == pytest.approx(5.001)
    assert totals["mean_bw_bytes_s"] == pytest.approx(644415488 / 5.001)
    # 10 % of 5 s holds no interval: the plateau is the median of the first three
    assert plateau_bw(series) == 126459904.0
    assert detect(series) is None
    assert aggregate(rows, op="write") == []


def until_cliff_campaign(tmp_path):
    from storbench.config import campaign as config

    return config.load_campaign({
        "hosts": {"localhost": {"transport": "local"}},
        "targets": {"lun": {"type": "directory", "path": str(tmp_path / "t"), "capacity": "8MiB"}},
        "preconditioning": {"afa": {"target": "lun", "hosts": "localhost", "passes": [
            {"name": "fill", "fraction": "85%", "bs": "128k", "repeat": 3, "until": "cliff"}]}},
        "experiments": {"e": {"tool": "fio", "hosts": "localhost", "target": "lun",
                              "precondition": "afa", "job": {"rw": "read", "runtime": "1m"}}},
    })  # fmt: skip


def write_pass_marker(stages_dir, stage_id: str, bandwidths: list[float]) -> None:
    import json

    series = [{"t_s": i + 1.0, "interval_s": 1.0, "bytes": bw, "bw_bytes_s": bw}
              for i, bw in enumerate(bandwidths)]  # fmt: skip
    stages_dir.mkdir(parents=True, exist_ok=True)
    (stages_dir / f"{stage_id}.json").write_text(
        json.dumps({"stage": stage_id, "kind": "pass", "series": series, "skipped": False})
    )


def test_a_pass_repeated_until_its_cliff_skips_the_repeats_after_it(tmp_path):
    """The IDC plan repeats its 85 % pass only when no write cliff showed."""
    from storbench.analysis import preparation
    from storbench.plan import preparation as plan_prepare

    recipe = until_cliff_campaign(tmp_path).recipes["afa"]
    stages = {stage.stage_id: stage for stage in recipe.stages()}
    assert list(stages) == ["p1-fill-r1", "p1-fill-r2", "p1-fill-r3"]
    second = plan_prepare.stage_spec(recipe, stages["p1-fill-r2"])
    assert second.pass_settings()["until"] == "cliff"
    stages_dir = tmp_path / "stages"
    write_pass_marker(stages_dir, "p1-fill-r1", [100e6] * 10)  # flat: no cliff yet
    assert preparation._cliff_seen(second, stages_dir) is None
    write_pass_marker(stages_dir, "p1-fill-r1", [100e6] * 10 + [20e6] * 5)  # the cliff
    assert preparation._cliff_seen(second, stages_dir) == "repeat 1"
    marker = preparation.run_stage(second, str(stages_dir / "p1-fill-r2.json"))
    assert marker["skipped"] and marker["cliff_seen_in"] == "repeat 1"
    assert marker["pass"]["bytes"] == 0 and not (tmp_path / "t").exists()  # no I/O at all
    third = plan_prepare.stage_spec(recipe, stages["p1-fill-r3"])
    assert preparation._cliff_seen(third, stages_dir) == "repeat 1"
