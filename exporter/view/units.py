"""Numbers as people read them: SI prefixes, ratios as percentages, regimes in words.

Shared by the chart's tick labels, the live page's table (through its JSON) and `ridgeline top`,
so the three never disagree on how a figure is written.
"""

from __future__ import annotations

import math

_PREFIXES: tuple[tuple[float, str], ...] = (
    (1e18, "E"),
    (1e15, "P"),
    (1e12, "T"),
    (1e9, "G"),
    (1e6, "M"),
    (1e3, "k"),
)

REGIME_WORDS: dict[str, str] = {
    "memory_bound": "memory-bound",
    "compute_bound": "compute-bound",
    "latency_bound": "latency-bound",
    "idle": "idle",
    "balanced": "balanced",
    "unknown": "unknown",
}
"""The regime as a word; any regime not listed is shown as its own name."""

REGIME_SHAPES: dict[str, str] = {
    "memory_bound": "circle",
    "compute_bound": "square",
    "latency_bound": "diamond",
    "idle": "ring",
    "balanced": "triangle",
}
"""The marker of each regime, so the chart reads without colour; anything else is a cross."""

REGIME_GLYPHS: dict[str, str] = {
    "circle": "●",
    "square": "■",
    "diamond": "◆",
    "ring": "○",
    "triangle": "▲",
    "cross": "✕",
}
"""The same shapes as text, for the table and the terminal."""


def regime_word(regime: str | None) -> str:
    if regime is None:
        return "no reading"
    return REGIME_WORDS.get(regime, regime.replace("_", "-"))


def regime_shape(regime: str | None) -> str:
    return REGIME_SHAPES.get(regime or "", "cross")


def regime_glyph(regime: str | None) -> str:
    return REGIME_GLYPHS[regime_shape(regime)]


def si(value: float | None, unit: str = "", digits: int = 3) -> str:
    """1.979e15 -> "1.98 P", with `unit` appended ("1.98 PFLOP/s"); "–" for no value."""
    if value is None or not math.isfinite(value):
        return "–"
    magnitude = abs(value)
    for scale, prefix in _PREFIXES:
        if magnitude >= scale * 0.9995:
            return f"{_significant(value / scale, digits)} {prefix}{unit}".rstrip()
    return f"{_significant(value, digits)} {unit}".rstrip()


def _significant(value: float, digits: int) -> str:
    """`digits` significant figures without exponent or trailing zeros (3 -> "3", 0.0412 -> "0.0412")."""
    if value == 0:
        return "0"
    text = f"{value:.{digits}g}"
    if "e" in text:  # below 1e-4 or, for a prefix scale, never above 999.5
        text = f"{value:.{max(digits, 1) + 3}f}".rstrip("0").rstrip(".")
    return text


def percent(ratio: float | None) -> str:
    """0.734 -> "73%"; "–" for no value."""
    if ratio is None or not math.isfinite(ratio):
        return "–"
    return f"{ratio * 100:.0f}%"


def intensity_text(intensity: float | None) -> str:
    """Arithmetic intensity in FLOP/byte, 3 significant figures ("42.1", "0.35", "1.2 k")."""
    if intensity is None or not math.isfinite(intensity):
        return "–"
    return si(intensity)
