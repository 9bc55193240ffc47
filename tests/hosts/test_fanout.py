"""How many hosts a step works on at once: sized for fleets beyond 128 hosts, configurable."""

import pytest

from storbench.hosts import services


def test_the_default_fanout_covers_large_fleets(monkeypatch):
    monkeypatch.delenv("STORBENCH_FANOUT", raising=False)
    persistent = [
        {"name": f"c{n}", "transport": "ssh", "connection": "persistent"} for n in range(3)
    ]
    assert services.fanout(persistent) == 512
    assert services.fanout([{"name": "localhost", "transport": "local"}]) == 512
    # an SSH group that does not say how it is reached gets persistent connections
    assert services.fanout([{"name": "c8", "transport": "ssh"}]) == 512
    # paramiko's handshakes run in this process: fewer at once
    per_step = {"name": "c9", "transport": "ssh", "connection": "per-step"}
    assert services.fanout([*persistent, per_step]) == 64


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
