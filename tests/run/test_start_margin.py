"""The set-up time a held start leaves the tool, learned from the last runs on the same hosts."""

import json

from storbench.run import start_margin


def test_without_a_history_nothing_is_learned(tmp_path):
    history = start_margin.history_path(tmp_path / "e/raw/run/it1", "fio", ["a", "b"])
    assert history == tmp_path / "e/.start-setup" / history.name  # the experiment's
    assert history.name.startswith("fio-")
    assert start_margin.learned_s(history) is None
    history.parent.mkdir(parents=True)
    for unreadable in ("", "[1, 2]", '{"setup_s": "3"}', '{"setup_s": [-1, true, "x"]}'):
        history.write_text(unreadable)
        assert start_margin.learned_s(history) is None


def test_the_lower_median_of_the_last_runs_counts_with_a_small_margin_within_the_cap(tmp_path):
    history = tmp_path / "e/.start-setup/fio-key.json"
    start_margin.remember(history, 240.0)  # a first file layout
    assert start_margin.learned_s(history) == start_margin.CAP_S
    start_margin.remember(history, 8.0)  # of two, the lesser: the layout holds one run only
    assert start_margin.learned_s(history) == with_margin(8.0)
    start_margin.remember(history, 0.2)  # 240, 8, 0.2: neither extreme
    assert start_margin.learned_s(history) == with_margin(8.0)
    start_margin.remember(history, 0.3)
    assert start_margin.learned_s(history) == with_margin(0.3)
    start_margin.remember(history, 12.0)
    assert json.loads(history.read_text()) == {"setup_s": [0.2, 0.3, 12.0]}  # the last 3
    assert start_margin.learned_s(history) == with_margin(0.3)


def with_margin(setup_s: float) -> float:
    return setup_s * 1.03 + 0.02


def test_other_hosts_keep_their_own_history(tmp_path):
    iteration = tmp_path / "e/raw/run/it1"
    few = start_margin.history_path(iteration, "fio", ["a", "b"])
    many = start_margin.history_path(iteration, "fio", ["a", "b", "c"])
    other_tool = start_margin.history_path(iteration, "elbencho", ["a", "b"])
    assert len({few, many, other_tool}) == 3
