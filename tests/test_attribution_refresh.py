"""RefreshThread: the schedule both attribution maps (kubelet pods, HPC jobs) run on."""

from __future__ import annotations

import threading

from exporter.attribution.refresh import RefreshThread


def _live(name: str) -> bool:
    return any(t.name == name for t in threading.enumerate())


def test_start_refreshes_once_before_returning_and_a_second_start_does_nothing() -> None:
    calls: list[int] = []
    refresher = RefreshThread("ridgeline-test-refresh", 3600.0, lambda: calls.append(1))
    refresher.start()
    try:
        assert calls == [1]  # the first samples see the map: no wait for the thread's first tick
        assert _live("ridgeline-test-refresh")
        refresher.start()
        assert calls == [1]
    finally:
        refresher.stop(join_seconds=5.0)
    assert not _live("ridgeline-test-refresh")


def test_the_thread_refreshes_every_interval_until_stopped_and_can_start_again() -> None:
    ticks = threading.Semaphore(0)
    calls: list[int] = []

    def refresh() -> None:
        calls.append(1)
        ticks.release()

    refresher = RefreshThread("ridgeline-test-tick", 0.01, refresh)
    refresher.start()
    try:
        for _ in range(3):  # the one at start, then two from the thread
            assert ticks.acquire(timeout=30)
    finally:
        refresher.stop(join_seconds=5.0)
    assert not _live("ridgeline-test-tick")
    stopped_at = len(calls)
    refresher.start()  # after stop: a fresh thread, refreshed once again at start
    refresher.stop(join_seconds=5.0)
    assert len(calls) >= stopped_at + 1
