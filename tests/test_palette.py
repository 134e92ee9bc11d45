"""One palette and one marker set: every place that shows a regime reads exporter/view/units.py.

Each consumer — the SVG chart (`/roofline.svg` and the page's charts), the page's stylesheet,
legend and /live.json, `top` (Textual and `--once`), the report and the dashboards — is compared
here against `REGIME_LOOKS`, so a colour changed in one place only fails. The browser half (the
colour the page really paints) is in tests/test_live_page.py.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
from fastapi.testclient import TestClient

from exporter.catalog import load_catalog
from exporter.inference import InferenceConfig
from exporter.roofline import REGIMES, KernelRegime
from exporter.sampler import Sampler
from exporter.sources import SourceOptions
from exporter.view.chart_svg import render_svg
from exporter.view.roofline_chart import ChartPoint, ChartSpec, ComputeRoof, layout
from exporter.view.units import REGIME_GLYPHS, REGIME_LOOKS, regime_look
from exporter.web.app import create_app
from exporter.web.live_routes import build_live_router
from exporter.web.view_routes import LEGEND_REGIMES, view_router

ROOT = Path(__file__).resolve().parents[1]
STATIC = ROOT / "exporter" / "web" / "static"
SVG = "{http://www.w3.org/2000/svg}"
DARK_PAPER = "#16171a"
"""The live page's dark-theme background (exporter/web/static/live.css)."""


def _luminance(colour: str) -> float:
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two #rrggbb colours."""
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


# -- the table itself ------------------------------------------------------------------------------


def test_every_regime_the_package_can_answer_has_one_row() -> None:
    assert set(REGIMES) | set(get_args(KernelRegime)) <= set(REGIME_LOOKS)
    shapes = [look.shape for look in REGIME_LOOKS.values()]
    colours = [look.colour for look in REGIME_LOOKS.values()]
    assert all(shape in REGIME_GLYPHS for shape in shapes)
    assert len(set(shapes)) == len(shapes) and len(set(colours)) == len(colours)
    assert regime_look("no_such_regime") == REGIME_LOOKS["unknown"]


@pytest.mark.parametrize("regime", list(REGIME_LOOKS))
def test_every_colour_reads_on_white_and_on_the_dark_theme(regime: str) -> None:
    """WCAG's 3:1 for graphics, on the report's and the SVG's white and the page's dark paper."""
    colour = REGIME_LOOKS[regime].colour
    assert re.fullmatch(r"#[0-9a-f]{6}", colour)
    assert contrast(colour, "#ffffff") >= 3.0 and contrast(colour, DARK_PAPER) >= 3.0
    assert f"--paper: {DARK_PAPER};" in (STATIC / "live.css").read_text()


# -- the SVG chart -------------------------------------------------------------------------------

_SHAPE_ELEMENTS = {
    "circle": ("circle", True),
    "ring": ("circle", False),
    "square": ("rect", True),
    "diamond": ("polygon", True),
    "triangle": ("polygon", True),
    "triangle_down": ("polygon", True),
    "cross": ("path", False),
}
"""(SVG element, filled) of each marker shape."""


def test_the_chart_draws_each_regime_in_its_colour_and_shape() -> None:
    points = tuple(
        ChartPoint(key=str(i), regime=regime, intensity=10.0 ** (i % 3), flop_per_second=1e13 * (i + 1))
        for i, regime in enumerate(REGIME_LOOKS)
    )
    spec = ChartSpec(key="c", title="c", bandwidth_bytes_per_second=3.35e12,
                     roofs=(ComputeRoof("bf16", 989.5e12, in_use=True),), points=points)  # fmt: skip
    root = ET.fromstring(render_svg(layout(spec), standalone=True))
    dots = {g.get("data-regime"): g for g in root.iter(f"{SVG}g") if g.get("class") == "rl-dot"}
    assert set(dots) == set(REGIME_LOOKS)
    for regime, look in REGIME_LOOKS.items():
        (mark,) = list(dots[regime])[1:]  # after its <title>
        element, filled = _SHAPE_ELEMENTS[look.shape]
        assert mark.tag == f"{SVG}{element}", regime
        assert mark.get("stroke") == look.colour
        assert mark.get("fill") == (look.colour if filled else "none"), regime


# -- the page ------------------------------------------------------------------------------------


@pytest.fixture
def client() -> Iterator[TestClient]:
    catalog = load_catalog()
    sampler = Sampler("scrape", SourceOptions(), catalog, InferenceConfig())
    live = build_live_router(lambda: sampler.snapshot)
    live.include_router(view_router(lambda: sampler.snapshot, catalog))
    with TestClient(create_app(catalog, live_router=live)) as test_client:
        yield test_client


def _css_colours(css: str) -> dict[str, str]:
    return dict(re.findall(r"\.regime-([a-z_]+) \{ color: (#[0-9a-f]{6}); \}", css))


def test_the_pages_stylesheet_and_legend_are_generated_from_the_table(client: TestClient) -> None:
    css = client.get("/static/regimes.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    colours = _css_colours(css.text)
    assert colours == {
        **{r: look.colour for r, look in REGIME_LOOKS.items()},
        "other": regime_look(None).colour,
    }
    page = client.get("/").text
    assert '<link rel="stylesheet" href="/static/regimes.css' in page
    legend = re.findall(
        r'<span class="mark regime-([a-z_]+)" aria-hidden="true">(.)</span> ([a-z-]+)</li>', page
    )
    assert legend == [(r, REGIME_GLYPHS[REGIME_LOOKS[r].shape], REGIME_LOOKS[r].word) for r in LEGEND_REGIMES]
    assert set(LEGEND_REGIMES) == set(REGIMES)


def test_no_static_file_keeps_a_copy_of_the_palette() -> None:
    """The static files are served as written: a colour or glyph table in them would be a second
    palette no test compares."""
    for name in ("live.css", "live.js", "live.html"):
        text = (STATIC / name).read_text().lower()
        for regime, look in REGIME_LOOKS.items():
            assert look.colour not in text, f"{name} repeats {regime}'s colour"
            assert f".regime-{regime}" not in text, f"{name} styles {regime} itself"
        assert not re.search(r"memory_bound\s*:", text), f"{name} has its own regime table"


def test_live_json_carries_the_table_for_the_script(client: TestClient) -> None:
    body = client.get("/live.json").json()
    assert body["regimes"] == [
        {
            "regime": r,
            "word": look.word,
            "shape": look.shape,
            "glyph": REGIME_GLYPHS[look.shape],
            "colour": look.colour,
        }
        for r, look in REGIME_LOOKS.items()
    ]


# -- top -----------------------------------------------------------------------------------------


def test_top_colours_each_regime_from_the_table() -> None:
    from exporter.top.table import ansi_colour
    from exporter.top.tui import regime_style

    for regime, look in REGIME_LOOKS.items():
        assert regime_style(regime) == f"bold {look.colour}"
        assert ansi_colour(regime) == f"\x1b[{look.ansi}m"
    assert regime_style("something_new") == f"bold {REGIME_LOOKS['unknown'].colour}"
    assert len({look.ansi for look in REGIME_LOOKS.values()}) == len(REGIME_LOOKS)


# -- the report ----------------------------------------------------------------------------------


def _group(name: str, seconds: dict[str, float]) -> dict[str, Any]:
    return {"labels": {"namespace": name}, "gpu_seconds": {r: seconds.get(r, 0.0) for r in REGIMES}}


def test_the_reports_charts_use_the_tables_colours_and_markers() -> None:
    from exporter.report.render import _swatch, regime_bars_svg

    svg = regime_bars_svg([_group("a", {r: 3600.0 for r in REGIMES})], ["namespace"])
    fills = set(re.findall(r"fill: ?(#[0-9a-f]{6})", svg))
    assert {regime_look(r).colour for r in REGIMES} <= fills
    for regime in REGIMES:
        assert f"background:{regime_look(regime).colour}" in _swatch(regime)


# -- the dashboards ------------------------------------------------------------------------------


def _walk(node: Any) -> Iterator[Any]:
    yield node
    if isinstance(node, dict):
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def test_the_dashboards_colour_each_regime_from_the_table() -> None:
    seen_mapping: set[str] = set()
    seen_override: set[str] = set()
    for path in sorted((ROOT / "grafana" / "dashboards").glob("*.json")):
        for node in _walk(json.loads(path.read_text())):
            if not isinstance(node, dict):
                continue
            if node.get("text") in REGIME_LOOKS and "color" in node:  # a value mapping's result
                assert node["color"] == REGIME_LOOKS[node["text"]].colour, (path.name, node)
                seen_mapping.add(node["text"])
            matcher = node.get("matcher")
            if isinstance(matcher, dict) and matcher.get("options") in REGIME_LOOKS:  # an override
                colours = [
                    p["value"]["fixedColor"] for p in node.get("properties", []) if p.get("id") == "color"
                ]
                assert colours == [REGIME_LOOKS[matcher["options"]].colour], (path.name, node)
                seen_override.add(matcher["options"])
    assert seen_mapping == set(REGIMES) and seen_override == set(REGIMES)
