"""The live page and /docs in a real headless Chromium, against `ridgeline serve --replay demo`.

What a new user would see at http://node:10295/: a row per GPU, a roofline whose dots sit where
GET /classify says (measured in the browser, against the chart's own decade ticks), a page that
moves with the replay, and nothing fetched from anywhere but the exporter, with no console error
— with basic auth on as well. /docs renders its UI offline.
"""

from __future__ import annotations

import base64
import itertools
import json
import math
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import bcrypt
import pytest
from browser import chromium, console_errors, foreign_requests, requested_urls
from conftest import serve_process, stop_process
from test_scrape_verdicts import throttled_node

pytestmark = [pytest.mark.slow, pytest.mark.browser]

PIXEL_TOLERANCE = 1.5
"""CSS pixels between where a dot is drawn and where /classify's numbers put it on the ticks."""

MEASURE = """
const centre = (el) => {
  const r = el.getBoundingClientRect();
  return [r.left + r.width / 2, r.top + r.height / 2];
};
const svg = document.querySelector('#charts svg');
if (!svg) return null;
return {
  x: [...svg.querySelectorAll('line.rl-tick-x')].map(l => [Number(l.dataset.value), centre(l)[0]]),
  y: [...svg.querySelectorAll('line.rl-tick-y')].map(l => [Number(l.dataset.value), centre(l)[1]]),
  dots: [...svg.querySelectorAll('g.rl-dot')].map(
    g => [g.dataset.gpu, g.dataset.regime, ...centre(g.querySelector('.rl-mark'))]
  ),
  rows: [...document.querySelectorAll('#gpus tbody tr')].map(r => r.innerText),
  offChart: document.querySelector('.off-chart').textContent,
  overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
};
"""


def get_json(url: str, auth: tuple[str, str] | None = None) -> Any:
    request = urllib.request.Request(url)
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def get_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return str(response.read().decode("utf-8"))


def wait_for(what: str, check: Callable[[], Any], seconds: float = 20.0) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def measured(driver: Any, rows: int) -> dict[str, Any]:
    return wait_for(
        f"{rows} table rows and a chart",
        lambda: (m := driver.execute_script(MEASURE)) and len(m["rows"]) == rows and m["dots"] and m,
    )


def on_log_axis(ticks: list[list[float]], value: float) -> float:
    """Where `value` falls between the first and last decade tick, on a log scale."""
    (v0, p0), (v1, p1) = ticks[0], ticks[-1]
    return p0 + (math.log10(value) - math.log10(v0)) / (math.log10(v1) - math.log10(v0)) * (p1 - p0)


def assert_decades_evenly_spaced(ticks: list[list[float]]) -> None:
    values = [v for v, _ in ticks]
    assert all(b / a == pytest.approx(10.0) for a, b in itertools.pairwise(values)), values
    gaps = [b - a for (_, a), (_, b) in itertools.pairwise(ticks)]
    assert max(gaps) - min(gaps) < 0.5, gaps


@pytest.fixture(scope="module")
def finished_demo() -> Iterator[str]:
    """The demo replayed to its end at full speed: the last state stays put for the checks."""
    with serve_process("--replay", "demo", "--speed", "max") as (base, _):
        wait_for("the end of the replay", lambda: "end_of_replay" in get_json(base + "/classify")["reason"])
        yield base


def test_dots_sit_where_classify_puts_them_and_nothing_else_is_fetched(finished_demo: str) -> None:
    base = finished_demo
    with chromium() as driver:
        driver.get(base + "/")
        m = measured(driver, rows=8)
        classify = get_json(base + "/classify")["gpus"]
        assert len(classify) == 8
        assert_decades_evenly_spaced(m["x"])
        assert_decades_evenly_spaced(m["y"])
        dots = {gpu: (regime, x, y) for gpu, regime, x, y in m["dots"]}
        placed = [g for g in classify if g["intensity_flop_per_byte"] and g["achieved_flop_per_second"]]
        assert len(placed) >= 6, "the demo should put most GPUs on the chart"
        for gpu in placed:
            regime, x, y = dots[str(gpu["gpu"])]
            assert regime == gpu["regime"]
            assert x == pytest.approx(
                on_log_axis(m["x"], gpu["intensity_flop_per_byte"]), abs=PIXEL_TOLERANCE
            )
            assert y == pytest.approx(
                on_log_axis(m["y"], gpu["achieved_flop_per_second"]), abs=PIXEL_TOLERANCE
            )
        for gpu in classify:
            if gpu not in placed:
                assert f"GPU {gpu['gpu']} (" in m["offChart"]  # named, not silently dropped
        # every row reads without colour: the regime in words
        words = {"memory_bound": "memory-bound", "compute_bound": "compute-bound",
                 "latency_bound": "latency-bound", "idle": "idle"}  # fmt: skip
        for gpu, row in zip(sorted(classify, key=lambda g: g["gpu"]), m["rows"], strict=True):
            assert row.split()[0] == str(gpu["gpu"]) and words[gpu["regime"]] in row
        assert m["overflow"] <= 0, "the page scrolls sideways on a 1366 px wide screen"
        assert foreign_requests(requested_urls(driver), base) == []
        assert console_errors(driver) == []


def test_the_table_sorts_from_the_keyboard(finished_demo: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    with chromium() as driver:
        driver.get(finished_demo + "/")
        measured(driver, rows=8)
        button = driver.find_element(By.CSS_SELECTOR, 'th[data-sort="dram"] button')
        button.send_keys(Keys.ENTER)
        header = driver.find_element(By.CSS_SELECTOR, 'th[data-sort="dram"]')
        assert header.get_attribute("aria-sort") == "ascending"
        cells = [r.split("\t")[4] for r in driver.execute_script(MEASURE)["rows"]]
        values = [float(c.rstrip("%")) for c in cells]
        assert values == sorted(values)
        button.send_keys(Keys.ENTER)
        assert header.get_attribute("aria-sort") == "descending"
        values = [float(r.split("\t")[4].rstrip("%")) for r in driver.execute_script(MEASURE)["rows"]]
        assert values == sorted(values, reverse=True)
        assert console_errors(driver) == []


def test_the_page_follows_the_replay_and_can_be_paused() -> None:
    from selenium.webdriver.common.by import By

    with serve_process("--replay", "demo", "--loop") as (base, process), chromium() as driver:
        driver.get(base + "/")
        first = measured(driver, rows=8)
        moved = wait_for(
            "the page to change as the replay advances",
            lambda: (m := driver.execute_script(MEASURE)) and m["rows"] != first["rows"] and m,
            seconds=15,
        )
        assert moved["dots"] != first["dots"] or moved["rows"] != first["rows"]
        assert driver.execute_script("return document.querySelectorAll('polyline.rl-trail').length") > 0
        pause = driver.find_element(By.ID, "pause")
        pause.click()
        assert pause.get_attribute("aria-pressed") == "true"
        time.sleep(0.5)  # a poll already in flight may still land
        held = driver.execute_script(MEASURE)["rows"]
        time.sleep(2.5)
        assert driver.execute_script(MEASURE)["rows"] == held
        pause.click()
        wait_for("updates to resume", lambda: driver.execute_script(MEASURE)["rows"] != held, seconds=10)
        assert foreign_requests(requested_urls(driver), base) == []
        assert console_errors(driver) == []
        stop_process(process)  # the exporter goes away: the page says so and keeps the last state
        status = wait_for(
            "the page to say the exporter is not answering",
            lambda: "not answering" in (t := driver.find_element(By.ID, "status").text) and t,
        )
        assert "showing the last state" in status
        assert len(driver.execute_script(MEASURE)["rows"]) == 8


def test_the_page_works_behind_basic_auth(tmp_path: Path) -> None:
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    config = tmp_path / "web.yml"
    config.write_text(f"basic_auth_users:\n  viewer: '{hashed}'\n")
    with (
        serve_process("--replay", "demo", "--loop", "--web-config", str(config)) as (base, _),
        chromium() as driver,
    ):
        wait_for("a first sample", lambda: get_json(base + "/classify", ("viewer", "s3cret"))["gpus"])
        # credentials in the address, as a person would type them; the page's own requests
        # (script, stylesheet, /live.json) must then carry them too
        driver.get(base.replace("http://", "http://viewer:s3cret@") + "/")
        m = measured(driver, rows=8)
        assert len(m["dots"]) >= 6
        assert foreign_requests(requested_urls(driver), base) == []
        assert console_errors(driver) == []


def test_api_docs_render_offline(finished_demo: str) -> None:
    from selenium.webdriver.common.by import By

    base = finished_demo
    with chromium() as driver:
        driver.get(base + "/docs")
        operations = "return document.querySelectorAll('.swagger-ui .opblock').length"
        wait_for("/docs to render its operations", lambda: driver.execute_script(operations) > 3)
        text = driver.execute_script("return document.body.innerText")
        assert "Ridgeline" in text and "/classify" in text and "/roofline.svg" in text
        # the UI works, not just draws: open GET /cards, try it out, and read the answer
        driver.find_element(By.CSS_SELECTOR, "#operations-cards-get_cards_cards_get .opblock-summary").click()
        wait_for("Try it out", lambda: driver.find_elements(By.CSS_SELECTOR, ".try-out__btn"))[0].click()
        wait_for("Execute", lambda: driver.find_elements(By.CSS_SELECTOR, ".execute"))[0].click()
        wait_for("the answer", lambda: "h100-sxm" in driver.execute_script("return document.body.innerText"))
        assert foreign_requests(requested_urls(driver), base) == []
        assert console_errors(driver) == []


LOOKS = """
const rgb = (el) => getComputedStyle(el).color;
const box = (el) => { const r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
const svg = document.querySelector('#charts svg');
return {
  marks: [...document.querySelectorAll('#gpus tbody td.regime .mark')].map(
    m => [m.closest('tr').dataset.regime, rgb(m)]
  ),
  legend: [...document.querySelectorAll('.legend .mark')].map(m => [m.className, rgb(m)]),
  labels: [...svg.querySelectorAll('text.rl-dot-label')].map(t => [t.textContent, box(t)]),
  roofs: [...svg.querySelectorAll('line.rl-roof:not(.rl-roof-bandwidth)')].map(l => box(l)),
  pods: [...document.querySelectorAll('#gpus tbody td.pod')].map(
    td => { const r = document.createRange(); r.selectNodeContents(td); return r.getClientRects().length; }
  ),
  tableHeight: document.querySelector('#gpus').getBoundingClientRect().height,
  cells: [...document.querySelectorAll('#gpus tbody tr')].map(
    r => [r.dataset.gpu, [...r.children].map(c => c.textContent)]
  ),
  headers: document.querySelectorAll('#gpus thead th').length,
  whichRidge: document.querySelector('#which-ridge').textContent,
  levers: [...document.querySelectorAll('#gpus tbody td.lever details')].map(
    d => [d.closest('tr').dataset.gpu, d.querySelector('summary').textContent, d.textContent, d.open]
  ),
  own: [...document.querySelectorAll('#gpus tbody abbr.own-ridge')].map(
    a => [a.closest('tr').dataset.gpu, a.textContent, a.title]
  ),
};
"""


def _rgb(colour: str) -> str:
    return "rgb({}, {}, {})".format(*(int(colour[i : i + 2], 16) for i in (1, 3, 5)))


def test_colours_ridges_levers_pods_and_labels_read_right(finished_demo: str) -> None:
    """Issue 23 on the page: the package's colours painted, the GPU's own ridge said in a word with
    why in its tooltip, the lever collapsed to its gist, pod names on one line, dot labels off the
    flat roofs; /roofline.svg with its card, node, time and legend."""
    from selenium.webdriver.common.by import By

    from exporter.view.units import REGIME_LOOKS, short_lever

    base = finished_demo
    classify = {str(g["gpu"]): g for g in get_json(base + "/classify")["gpus"]}
    with chromium() as driver:
        driver.get(base + "/")
        measured(driver, rows=8)
        looks = driver.execute_script(LOOKS)
        for regime, painted in looks["marks"]:
            assert painted == _rgb(REGIME_LOOKS[regime].colour), regime
        assert len(looks["legend"]) >= 4
        for class_name, painted in looks["legend"]:
            regime = class_name.split("regime-")[1]
            assert painted == _rgb(REGIME_LOOKS[regime].colour), regime
        for text, (left, top, right, bottom) in looks["labels"]:
            for x1, y1, x2, y2 in looks["roofs"]:
                crosses = top <= (y1 + y2) / 2 <= bottom and left < x2 and x1 < right
                assert not crosses, f"a roof runs through the label {text!r}"
        assert looks["pods"] and all(lines == 1 for lines in looks["pods"]), "a pod name wraps"
        assert looks["tableHeight"] < 520, f"the 8-GPU table is {looks['tableHeight']:.0f} px tall"
        assert len(looks["levers"]) == 8 and "own" in looks["whichRidge"]
        for gpu, cells in looks["cells"]:  # every row has a cell under every header, in its place
            assert len(cells) == looks["headers"] == 10, cells
            efficiency = classify[gpu]["roofline_efficiency"]
            assert cells[8] == ("–" if efficiency is None else f"{round(efficiency * 100)}%"), cells
        for gpu, summary, whole, is_open in looks["levers"]:
            lever = classify[gpu]["lever"]
            assert summary == short_lever(lever) and lever in whole and not is_open
        noted = {gpu: g["ridge_note"] for gpu, g in classify.items() if g["ridge_note"]}
        assert noted, "the demo's GPUs mix pipes: some ridge is their own"
        assert {gpu: (word, title) for gpu, word, title in looks["own"]} == {
            gpu: ("own", note) for gpu, note in noted.items() if classify[gpu]["intensity_flop_per_byte"]
        }
        summary = driver.find_element(By.CSS_SELECTOR, '#gpus tbody tr[data-gpu="4"] td.lever summary')
        summary.click()
        time.sleep(2.5)  # a poll or two redraw the table: the open lever stays open
        opened = [g for g, _, _, is_open in driver.execute_script(LOOKS)["levers"] if is_open]
        assert opened == ["4"]
        assert console_errors(driver) == []

        driver.get(base + "/roofline.svg")
        svg = driver.execute_script(
            "const s = document.documentElement; return {text: s.textContent,"
            " frames: [...s.querySelectorAll('svg.rl-chart rect.rl-frame')].map(f => {"
            " const r = f.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; }),"
            " legend: [...s.querySelectorAll('.rl-legend text')].map(t => t.textContent)};"
        )
        host = base.removeprefix("http://")
        assert f"node {host}" in svg["text"] and "samples as of 20" in svg["text"] and "UTC" in svg["text"]
        assert "NVIDIA H100" in svg["text"]
        # one chart at its own size under the caption and its title: its plot frame where layout() puts it
        assert [[round(v) for v in frame] for frame in svg["frames"]] == [[62, 44 + 14, 660 - 62 - 150, 342]]
        assert svg["legend"][:4] == [  # the walls first (exporter/view/units.py's order)
            "memory-bound",
            "compute-bound",
            "interconnect-bound",
            "latency-bound",
        ]
        bare = get_text(base + "/roofline.svg?caption=false&legend=false")
        assert "samples as of" not in bare and "rl-legend" not in bare


REDUCED_CLOCKS = """
return [...document.querySelectorAll('#gpus tbody tr')].map(r => {
  const a = r.querySelector('td.regime abbr.reduced-clock');
  return [r.dataset.gpu, a ? a.textContent : null, a ? a.title : null];
});
"""


@pytest.fixture(scope="module")
def throttled() -> Iterator[str]:
    with throttled_node() as base:
        yield base


def test_a_gpu_at_a_reduced_clock_is_marked_with_its_cause_and_the_gain(throttled: str) -> None:
    """Issue 19: the regime cell names what holds the clock down; its tooltip says the clock and
    what the full clock gives back (GET /classify's reduced_clock)."""
    base = throttled
    classify = {str(g["gpu"]): g for g in get_json(base + "/classify")["gpus"]}
    assert classify["2"]["reduced_clock"] is None  # at full clock: no marker
    with chromium() as driver:
        driver.get(base + "/")
        marks = wait_for(
            "three rows", lambda: (m := driver.execute_script(REDUCED_CLOCKS)) and len(m) == 3 and m
        )
        by_gpu = {gpu: (text, title) for gpu, text, title in marks}
        assert by_gpu["0"] == ("↓ power cap", classify["0"]["reduced_clock"]["note"])
        assert "65% of the clock its peak is quoted at (power cap)" in by_gpu["0"][1]
        assert "gives back up to 54% more FLOP/s" in by_gpu["0"][1]
        assert by_gpu["1"][0] == "↓ thermal" and "up to 30% more FLOP/s" in (by_gpu["1"][1] or "")
        assert by_gpu["2"] == (None, None)
        assert console_errors(driver) == []
