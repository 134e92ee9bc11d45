"""Numbers as people read them: SI prefixes, ratios as percentages, regimes in words.

Shared by the chart's tick labels, the live page's table (through its JSON) and `ridgeline top`,
so the three never disagree on how a figure is written.

`REGIME_LOOKS` is the one place a regime's word, marker and colour are defined: the live page
(its stylesheet, legend and /live.json), `/roofline.svg`, the report, `top` and the dashboards
read it (tests/test_palette.py compares each of them against it). A new regime is one row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

_PREFIXES: tuple[tuple[float, str], ...] = (
    (1e18, "E"),
    (1e15, "P"),
    (1e12, "T"),
    (1e9, "G"),
    (1e6, "M"),
    (1e3, "k"),
)


@dataclass(frozen=True, slots=True)
class RegimeLook:
    """How one regime is shown: a word, a marker shape and a colour, so it reads without colour."""

    word: str
    shape: str
    """A key of REGIME_GLYPHS: the SVG marker and the terminal's glyph."""
    colour: str
    """#rrggbb, at least 3:1 against both white and the page's dark background (#16171a)."""
    ansi: str
    """The nearest of the 16 terminal colours (an SGR code) for `top --once` on a terminal."""


REGIME_LOOKS: dict[str, RegimeLook] = {
    "memory_bound": RegimeLook(word="memory-bound", shape="circle", colour="#0072b2", ansi="34"),
    "compute_bound": RegimeLook(word="compute-bound", shape="square", colour="#d55e00", ansi="31"),
    "interconnect_bound": RegimeLook(
        word="interconnect-bound", shape="triangle_down", colour="#3a9bd5", ansi="36"
    ),
    "latency_bound": RegimeLook(word="latency-bound", shape="diamond", colour="#cc79a7", ansi="35"),
    "balanced": RegimeLook(word="balanced", shape="triangle", colour="#b07800", ansi="33"),
    "idle": RegimeLook(word="idle", shape="ring", colour="#7f7f7f", ansi="90"),
    "unknown": RegimeLook(word="unknown", shape="cross", colour="#009e73", ansi="32"),
}
"""Every regime's look, in the order tables sort them (the walls first, then neither).

The colours are Okabe & Ito's colour-blind-safe set ("Color Universal Design", 2008: blue,
vermillion, reddish purple, bluish green; balanced is its orange darkened to #b07800 and
interconnect-bound its sky blue darkened to #3a9bd5, for contrast on white) and a neutral grey
for idle, chosen so each also passes 3:1 on the dark theme;
the shape and the word say the same without colour. A regime not listed is shown as `unknown`
is, under its own name."""

REGIME_ORDER: tuple[str, ...] = tuple(REGIME_LOOKS)

REGIME_WORDS: dict[str, str] = {regime: look.word for regime, look in REGIME_LOOKS.items()}
"""The regime as a word; any regime not listed is shown as its own name."""

REGIME_SHAPES: dict[str, str] = {regime: look.shape for regime, look in REGIME_LOOKS.items()}
"""The marker of each regime, so the chart reads without colour; anything else is a cross."""

REGIME_GLYPHS: dict[str, str] = {
    "circle": "●",
    "square": "■",
    "diamond": "◆",
    "ring": "○",
    "triangle": "▲",
    "triangle_down": "▼",
    "cross": "✕",
}
"""The same shapes as text, for the table and the terminal."""


def regime_look(regime: str | None) -> RegimeLook:
    """The row of `regime`; a regime not in the table (or none) looks like `unknown`."""
    return REGIME_LOOKS.get(regime or "", REGIME_LOOKS["unknown"])


def regime_word(regime: str | None) -> str:
    if regime is None:
        return "no reading"
    return REGIME_WORDS.get(regime, regime.replace("_", "-"))


def regime_shape(regime: str | None) -> str:
    return regime_look(regime).shape


def regime_glyph(regime: str | None) -> str:
    return REGIME_GLYPHS[regime_shape(regime)]


def regime_colour(regime: str | None) -> str:
    return regime_look(regime).colour


def si(value: float | None, unit: str = "", digits: int = 3) -> str:
    """1.979e15 -> "1.98 P", with `unit` appended ("1.98 PFLOP/s"); "–" for no value."""
    if value is None or not math.isfinite(value):
        return "–"
    scale, prefix = _prefix(abs(value), slack=0.9995)
    return f"{_significant(value / scale, digits)} {prefix}{unit}".rstrip()


def si_g(value: float | None, unit: str) -> str:
    """4e12, "FLOP" -> "4 TFLOP": Python's `.3g` after the prefix, the rule of the report's tables
    and `ridgeline classify`'s answer (unlike si: 999.7e9 reads "1e+03 GFLOP"); "–" for no value."""
    if value is None or not math.isfinite(value):
        return "–"
    if value == 0:
        return f"0 {unit}"
    scale, prefix = _prefix(abs(value), slack=1.0)
    return f"{value / scale:.3g} {prefix}{unit}"


def _prefix(magnitude: float, slack: float) -> tuple[float, str]:
    """The largest prefix whose scale (times `slack`) `magnitude` reaches; (1.0, "") below k."""
    for scale, prefix in _PREFIXES:
        if magnitude >= scale * slack:
            return scale, prefix
    return 1.0, ""


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


SHORT_LEVER = 48
"""The most characters of a lever's gist in a table cell (the live page's and `top`'s)."""


def short_lever(lever: str) -> str:
    """A lever's gist: its first clause, without the regime the row already names, cut at a word
    to SHORT_LEVER ("move fewer bytes per FLOP"). The live page's script applies the same rule."""
    gist = lever.split(" — ")[0]
    _, colon, rest = gist.partition(": ")
    if colon:
        gist = rest
    if len(gist) > SHORT_LEVER:
        cut = gist.rfind(" ", 0, SHORT_LEVER)
        gist = gist[: cut if cut > 0 else SHORT_LEVER - 1] + "…"
    return gist
