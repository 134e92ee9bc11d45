"""The reduced-clock marker of the live page and `top` (exporter.clock_events.reduced_clock).

A busy GPU whose pipe nearest its wall runs below 97 % of its peak's clock is marked with the
cause; only a compute-bound one is promised the FLOP/s a full clock gives back.
"""

from __future__ import annotations

import pytest

from exporter.clock_events import ReducedClock, cause_words, reduced_clock, reduced_clock_note


def test_a_compute_bound_gpu_below_its_clock_is_promised_one_over_k_minus_one() -> None:
    marker = reduced_clock("compute_bound", "tensor", 1185 / 1830, 0.5, ("power cap",))
    assert marker == ReducedClock(
        clock_ratio=1185 / 1830, causes=("power cap",), give_back=pytest.approx(0.5443, abs=1e-4)
    )
    assert reduced_clock_note(marker) == (
        "SM clock at 65% of the clock its peak is quoted at (power cap): compute-bound, so the full "
        "clock gives back up to 54% more FLOP/s"
    )


def test_the_pipe_nearest_its_wall_decides_which_clock_ratio_counts() -> None:
    # an FP64 job: the CUDA-core ratio (against their own quoted clock), not the tensor one
    assert reduced_clock("compute_bound", "fp64", 0.5, 0.99, ()) is None
    marker = reduced_clock("compute_bound", "fp64", 0.99, 0.8, ())
    assert marker is not None and marker.clock_ratio == 0.8


def test_no_marker_at_the_quoted_clock_when_idle_unknown_or_without_a_clock() -> None:
    assert reduced_clock("compute_bound", "tensor", 0.97, None, ()) is None  # 3 % is jitter
    assert reduced_clock("compute_bound", "tensor", 0.969, None, ()) is not None
    assert reduced_clock("idle", "tensor", 0.3, 0.3, ()) is None  # an idle GPU lowers its own clock
    assert reduced_clock("unknown", "tensor", 0.3, 0.3, ()) is None
    assert reduced_clock("compute_bound", None, 0.3, 0.3, ()) is None
    assert reduced_clock("compute_bound", "tensor", None, 0.3, ()) is None  # no basis: unknown, no mark


def test_another_regime_is_marked_but_promised_little() -> None:
    marker = reduced_clock("memory_bound", "tensor", 0.7, 0.7, ("thermal", "sync boost"))
    assert marker is not None and marker.give_back is None
    note = reduced_clock_note(marker)
    assert "(thermal, sync boost)" in note and "would give back little" in note and "%" in note


def test_a_cause_nobody_reported_is_said_so() -> None:
    assert cause_words(()) == "cause not reported"
    assert cause_words(("power cap",)) == "power cap"
