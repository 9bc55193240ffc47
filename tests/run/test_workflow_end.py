"""The workflow's end cancels timers nobody waits for any more (Snakemake's job rate limiter
leaves one that would keep a finished process alive for its timespan)."""

from __future__ import annotations

import threading

from storbench.run.processes import cancel_pending_timers


def test_a_pending_timer_is_cancelled_and_its_thread_ends():
    fired = []
    timer = threading.Timer(3600, fired.append, args=["fired"])
    timer.start()
    assert cancel_pending_timers() >= 1
    timer.join(timeout=10)
    assert not timer.is_alive()
    assert fired == []


def test_a_fired_timer_and_other_threads_are_left_alone(monkeypatch):
    done = threading.Event()
    fired = threading.Timer(0, done.set)
    fired.start()
    fired.join(timeout=10)
    release = threading.Event()
    worker = threading.Thread(target=release.wait)
    worker.start()
    # only these two: timers other tests of this process may have left are not counted
    monkeypatch.setattr(threading, "enumerate", lambda: [fired, worker])
    try:
        assert cancel_pending_timers() == 0
        assert done.is_set() and worker.is_alive()
    finally:
        release.set()
        worker.join(timeout=10)
