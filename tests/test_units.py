"""The two SI rules of exporter/view/units.py: `si` (charts, the live page, `top`) and `si_g` (the
report's tables, `ridgeline classify`'s answer). They differ where a value rounds up to the next
prefix, and each view's output is pinned elsewhere, so neither may drift into the other."""

from __future__ import annotations

import math

import pytest

from exporter.view.units import si, si_g


@pytest.mark.parametrize(
    ("value", "unit", "expected"),
    [
        (1.979e15, "FLOP/s", "1.98 PFLOP/s"),
        (999.7e9, "FLOP/s", "1 TFLOP/s"),  # rounds up into the next prefix
        (0.0412, "", "0.0412"),
        (1234.0, "", "1.23 k"),
        (-3e6, "B/s", "-3 MB/s"),
        (None, "B", "–"),
        (math.nan, "B", "–"),
    ],
)
def test_si_picks_the_prefix_the_rounded_figure_needs(value: float | None, unit: str, expected: str) -> None:
    assert si(value, unit) == expected


def test_si_takes_more_digits() -> None:
    assert si(1234.0, digits=4) == "1.234 k"


@pytest.mark.parametrize(
    ("value", "unit", "expected"),
    [
        (4e12, "FLOP", "4 TFLOP"),
        (999.7e9, "FLOP", "1e+03 GFLOP"),  # Python's .3g after the prefix the value itself reaches
        (12.5, "B", "12.5 B"),
        (-3e6, "B/s", "-3 MB/s"),
        (0.0, "B", "0 B"),
        (-0.0, "B", "0 B"),
        (None, "B", "–"),
        (math.inf, "B", "–"),
    ],
)
def test_si_g_is_three_g_digits_after_the_prefix(value: float | None, unit: str, expected: str) -> None:
    assert si_g(value, unit) == expected
