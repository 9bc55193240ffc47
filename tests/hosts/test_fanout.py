"""How many hosts a step works on at once: sized for fleets beyond 128 hosts, configurable."""

import pytest

from storbench.hosts import services


def test_the_default_fanout_covers_large_fleets(monkeypatch):
    monkeypatch.delenv("STORBENCH_FANOUT", raising=False)
    assert services.fanout() == 512


def test_the_fanout_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("STORBENCH_FANOUT", "1024")
    assert services.fanout() == 1024


@pytest.mark.parametrize("text", ["0", "-3", "many", "1.5"])
def test_a_bad_fanout_names_the_variable(monkeypatch, text):
    monkeypatch.setenv("STORBENCH_FANOUT", text)
    with pytest.raises(
        ValueError, match=f"STORBENCH_FANOUT must be a whole number >= 1, got '{text}'"
    ):
        services.fanout()
