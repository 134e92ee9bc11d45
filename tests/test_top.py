"""`ridgeline top` against real servers: --once in a pipe, a terminal and `| head`; basic auth and
TLS like any client; a node that stops answering; the interactive view through Textual's own
test driver (App.run_test and its Pilot), keys pressed against a live `serve --replay demo`."""

from __future__ import annotations

import asyncio
import os
import pty
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bcrypt
import pytest
from conftest import closed_port, http_get, listening_port, serve_process
from test_webconfig import OPENSSL, Pki, _make_ca, _make_leaf

from exporter.top.client import ClientSetupError, NodeClient, classify_url, display_name, parse_answer
from exporter.top.table import plain_table, row_from_verdict, sort_rows
from exporter.verdict import decode_verdict

pytestmark = pytest.mark.slow

DEMO_GPUS = {str(i) for i in range(8)}


def top(*args: str, stdin: Any = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "exporter", "top", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=stdin,
        env={**os.environ, "NO_COLOR": ""},
    )


def gpu_column(stdout: str) -> list[str]:
    lines = stdout.splitlines()
    column = lines[0].split().index("GPU")
    return [line.split()[column] for line in lines[1:]]


@pytest.fixture(scope="module")
def demo() -> Iterator[str]:
    with serve_process("--replay", "demo", "--loop") as (base, _):
        deadline = time.monotonic() + 20
        while '"gpu": 7' not in http_get(base + "/classify")[1]:
            assert time.monotonic() < deadline, "the demo did not produce its 8 GPUs"
            time.sleep(0.1)
        yield base


# -- the client and the table, on their own ---------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "url", "user"),
    [
        ("gpu-node-1:10295", "http://gpu-node-1:10295/classify", None),
        ("https://n:443/", "https://n:443/classify", None),
        ("http://n:10295/classify", "http://n:10295/classify", None),
        ("http://viewer:p%40ss@[::1]:10295", "http://[::1]:10295/classify", ("viewer", "p@ss")),
        ("http://n/prefix/ridgeline", "http://n/prefix/ridgeline/classify", None),
    ],
)
def test_node_urls(given: str, url: str, user: tuple[str, str] | None) -> None:
    got, credentials = classify_url(given)
    assert got == url
    assert (None if credentials is None else (credentials.username, credentials.password)) == user
    assert "p%40ss" not in display_name(got) and not display_name(got).endswith("/classify")


@pytest.mark.parametrize("bad", ["ftp://n:1", "http://:80", "http://n:99999"])
def test_a_bad_url_is_refused_with_its_reason(bad: str) -> None:
    with pytest.raises(ClientSetupError, match="--url"):
        classify_url(bad)


def test_an_answer_that_is_not_classify_is_an_error_reading() -> None:
    assert parse_answer("n", b"<html>").error == "the answer is not JSON: is this a Ridgeline exporter?"
    assert "no GPU list" in (parse_answer("n", b'{"gpus": 3}').error or "")
    assert parse_answer("n", b'{"gpus": [], "ready": true}').answered


def test_sorting_and_plain_cells() -> None:
    rows = [
        row_from_verdict(
            "n", decode_verdict({"gpu": 0, "regime": "idle", "dram_active": 0.0, "roofline_efficiency": None})
        ),
        row_from_verdict(
            "n",
            decode_verdict(
                {"gpu": 1, "regime": "memory_bound", "dram_active": 0.7, "roofline_efficiency": 0.9}
            ),
        ),
        row_from_verdict(
            "n",
            decode_verdict(
                {"gpu": 2, "regime": "compute_bound", "dram_active": 0.3, "roofline_efficiency": 0.4}
            ),
        ),
    ]
    assert [r.key for r in sort_rows(rows, "regime")] == ["1", "2", "0"]
    assert [r.key for r in sort_rows(rows, "dram")] == ["1", "2", "0"]  # highest first
    assert [r.key for r in sort_rows(rows, "efficiency")] == ["2", "1", "0"]  # lowest first, none last
    assert [r.key for r in sort_rows(rows, "efficiency", reverse=True)] == ["1", "2", "0"]
    plain = plain_table(rows, with_node=False)
    assert all(len(line.split()) >= 10 for line in plain[1:])  # one word per column, lever last
    assert plain[1].split()[3] == "idle" and "\x1b" not in "".join(plain)
    assert "\x1b[34m● memory-bound\x1b[0m" in "\n".join(plain_table(rows, with_node=False, colour=True))


# -- --once ----------------------------------------------------------------------------------------------


def test_once_prints_every_gpu_as_plain_text(demo: str) -> None:
    result = top("--once", "--url", demo)
    assert result.returncode == 0, result.stderr
    assert set(gpu_column(result.stdout)) == DEMO_GPUS and len(gpu_column(result.stdout)) == 8
    assert "\x1b" not in result.stdout and result.stderr == ""
    regimes = {line.split()[3] for line in result.stdout.splitlines()[1:]}
    assert regimes <= {"memory-bound", "compute-bound", "latency-bound", "idle"}


def test_once_in_a_terminal_is_coloured(demo: str) -> None:
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "exporter", "top", "--once", "--url", demo],
        stdout=follower,
        stderr=subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if k != "NO_COLOR"},
    )
    os.close(follower)
    output = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed its side
            break
        if not chunk:
            break
        output += chunk
    os.close(leader)
    assert process.wait(timeout=30) == 0
    text = output.decode()
    assert "\x1b[3" in text and any(glyph in text for glyph in "●■◆○")
    assert len([line for line in text.splitlines() if line.strip()]) == 9  # header + 8 GPUs


def test_once_into_a_reader_that_leaves_ends_quietly(demo: str) -> None:
    """`ridgeline top --once | head -1`: the reader is gone before top writes a byte."""
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # as in a shell
    process = subprocess.Popen(
        [sys.executable, "-m", "exporter", "top", "--once", "--url", demo],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=buffered,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # before the child can have fetched anything: its first write breaks
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=30) == 0
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr and stderr == ""
    shell = subprocess.run(
        f"{sys.executable} -m exporter top --once --url {demo} | head -1",
        shell=True, capture_output=True, text=True, timeout=30, check=False, env=buffered,
    )  # fmt: skip
    assert shell.stdout.split()[0] == "GPU" and shell.stderr == ""


def test_a_node_that_does_not_answer_is_named_and_the_others_still_print(demo: str) -> None:
    with closed_port() as port:
        dead = f"http://127.0.0.1:{port}"
        result = top("--once", "--url", demo, "--url", dead, "--timeout", "2")
    assert result.returncode == 1
    assert f"ridgeline top: {dead}: not answering:" in result.stderr and "refused" in result.stderr
    assert len(gpu_column(result.stdout)) == 8 and result.stdout.split()[0] == "NODE"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--user", "viewer"), "--node.basic-auth.username USER needs a password"),
        (("--password-file", "/nonexistent"), "--node.basic-auth.password-file /nonexistent needs --node"),
        (("--user", "v", "--password-file", "/nonexistent/pw"), "/nonexistent/pw"),
        (("--url", "ftp://x"), "--url 'ftp://x'"),
    ],
)
def test_user_mistakes_are_one_line_and_exit_2(args: tuple[str, ...], needle: str) -> None:
    result = top("--once", *args)
    assert result.returncode == 2 and needle in result.stderr and "Traceback" not in result.stderr


def test_the_interactive_view_needs_a_terminal() -> None:
    result = top("--url", "127.0.0.1:1")
    assert result.returncode == 2 and "--once" in result.stderr


# -- basic auth and TLS, as any client ------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    assert OPENSSL is not None, "openssl is part of every Debian system; the TLS tests need it"
    directory = tmp_path_factory.mktemp("pki")
    ca = _make_ca(directory, "ridgeline-test-ca")
    server = _make_leaf(
        directory, "server", ca, "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
    )
    client = _make_leaf(directory, "laptop", ca, "extendedKeyUsage=clientAuth\n")
    return Pki(
        ca_cert=ca[0],
        server_cert=server[0],
        server_key=server[1],
        client_cert=client[0],
        client_key=client[1],
        stranger_cert=client[0],
        stranger_key=client[1],
        ca_key=ca[1],
    )


def test_top_over_tls_with_a_client_certificate_and_basic_auth(pki: Pki, tmp_path: Path) -> None:
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    config = tmp_path / "web.yml"
    config.write_text(
        "tls_server_config:\n"
        f"  cert_file: {pki.server_cert}\n  key_file: {pki.server_key}\n"
        f"  client_ca_file: {pki.ca_cert}\n  client_auth_type: RequireAndVerifyClientCert\n"
        f"basic_auth_users:\n  viewer: '{hashed}'\n"
    )
    password = tmp_path / "password"
    password.write_text("s3cret\n")
    process = subprocess.Popen(
        [sys.executable, "-m", "exporter", "serve", "--listen", "127.0.0.1:0", "--replay", "demo",
         "--loop", "--web-config", str(config)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    tls = ("--ca-file", str(pki.ca_cert), "--cert", str(pki.client_cert), "--key", str(pki.client_key))
    try:
        port = listening_port(process, "serve")
        url = f"https://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            result = top("--once", "--url", url, *tls, "--user", "viewer", "--password-file", str(password))
            if result.returncode == 0 and len(gpu_column(result.stdout)) == 8:
                break
            assert time.monotonic() < deadline, result.stderr
            time.sleep(0.2)
        wrong = top("--once", "--url", url, *tls, "--user", "viewer:nope")
        assert wrong.returncode == 1 and "HTTP 401" in wrong.stderr and "credentials" in wrong.stderr
        assert "answered HTTP 401" in wrong.stderr and "not answering" not in wrong.stderr  # it did answer
        plain = top("--once", "--url", f"http://127.0.0.1:{port}", "--user", "viewer:s3cret")
        assert plain.returncode == 1 and f"use https://127.0.0.1:{port}" in plain.stderr, plain.stderr
        in_url = top("--once", "--url", f"https://viewer:s3cret@127.0.0.1:{port}", *tls)
        assert in_url.returncode == 0 and len(gpu_column(in_url.stdout)) == 8
        unverified = top("--once", "--url", url, "--user", "viewer:s3cret", "--cert", str(pki.client_cert),
                         "--key", str(pki.client_key))  # fmt: skip
        assert unverified.returncode == 1 and "CERTIFICATE_VERIFY_FAILED" in unverified.stderr
        no_cert = top("--once", "--url", url, "--ca-file", str(pki.ca_cert), "--user", "viewer:s3cret")
        assert no_cert.returncode == 1 and "not answering" in no_cert.stderr
    finally:
        from conftest import stop_process

        stop_process(process)


# -- the interactive view, through Textual's test driver --------------------------------------------


def test_interactive_view_sorts_and_shows_a_silent_node(demo: str) -> None:
    from textual.widgets import DataTable

    from exporter.top.tui import TopApp

    with closed_port() as port:
        dead = f"http://127.0.0.1:{port}"
        app = TopApp([NodeClient(demo), NodeClient(dead, timeout=1.0)], interval=0.5)

        def table_order() -> list[str]:
            table = app.query_one("#gpus", DataTable)
            return [str(table.get_row_at(i)[1]) for i in range(table.row_count)]

        async def drive() -> None:
            async with app.run_test(size=(160, 50)) as pilot:
                deadline = time.monotonic() + 20
                while app.polls < 1 or app.query_one("#gpus", DataTable).row_count < 8:
                    assert time.monotonic() < deadline, "no rows"
                    await pilot.pause(0.1)
                assert sorted(table_order()) == sorted(DEMO_GPUS)
                status = str(app.query_one("#status").render())
                assert f"{dead}  not answering since" in status and "refused" in status
                assert "8 GPUs" in status
                await pilot.press("s")  # node -> gpu
                assert app.sort_key == "gpu"
                await pilot.press("s")  # gpu -> regime
                assert app.sort_key == "regime"
                expected = [r.key for r in sort_rows(app.rows, "regime")]
                assert table_order() == expected
                await pilot.press("r")
                assert app.reverse and table_order() == [r.key for r in sort_rows(app.rows, "regime", True)]
                await pilot.press("down")
                chart = str(app.query_one("#chart").render())
                assert "FLOP/byte" in chart and "bf16" in chart and any(k in chart for k in DEMO_GPUS)
                await pilot.press("p")
                paused_at = app.polls
                await pilot.pause(1.5)
                assert app.polls == paused_at and "paused" in str(app.query_one("#status").render())
                await pilot.press("q")

        asyncio.run(drive())


def test_interactive_view_keeps_the_last_rows_of_a_node_that_stops_answering() -> None:
    from textual.widgets import DataTable

    from exporter.top.tui import TopApp

    with serve_process("--replay", "demo", "--loop") as (base, process):
        app = TopApp([NodeClient(base, timeout=1.0)], interval=0.3)

        async def drive() -> None:
            async with app.run_test(size=(160, 50)) as pilot:
                deadline = time.monotonic() + 20
                while not app.rows or len(app.rows) < 8:
                    assert time.monotonic() < deadline
                    await pilot.pause(0.1)
                process.terminate()
                process.wait(timeout=20)
                while "not answering" not in str(app.query_one("#status").render()):
                    assert time.monotonic() < deadline + 20, "the dead node was not shown"
                    await pilot.pause(0.1)
                assert len(app.rows) == 8 and all(r.stale for r in app.rows)
                table = app.query_one("#gpus", DataTable)
                assert table.row_count == 8
                assert "(stale)" in str(table.get_row_at(0)[3])  # REGIME: no NODE column for one node

        asyncio.run(drive())


def test_intensity_is_set_against_the_ridge_of_the_wall_the_verdict_uses() -> None:
    """With a compute roof in the verdict (the ceiling of the GPU's pipe mix), the ridge is that
    roof over the bandwidth, as the verdict's own `position` has it; else the precision's ridge."""
    mix = row_from_verdict(
        "n",
        decode_verdict(
            {
                "gpu": 0,
                "intensity_flop_per_byte": 600.0,
                "ridge_flop_per_byte": 295.37,
                "compute_roof_flop_per_second": 1e15,
                "bandwidth_bytes_per_second": 3.35e12,
            }
        ),
    )
    assert mix.ridge == pytest.approx(1e15 / 3.35e12) and mix.position == pytest.approx(
        600 / 298.507, rel=1e-4
    )
    plain = row_from_verdict(
        "n", decode_verdict({"gpu": 0, "intensity_flop_per_byte": 600.0, "ridge_flop_per_byte": 295.37})
    )
    assert plain.ridge == 295.37 and plain.intensity_text == "600/295"


# -- the interactive view's rough edges (issue 23) -------------------------------------------------


def _header(app: Any) -> list[str]:
    from textual.widgets import DataTable

    return [str(c.label) for c in app.query_one("#gpus", DataTable).columns.values()]


def _order(app: Any) -> list[str]:
    from textual.widgets import DataTable

    table = app.query_one("#gpus", DataTable)
    return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]


def test_on_one_node_the_first_s_changes_the_order_and_the_sorted_column_is_marked(demo: str) -> None:
    from exporter.top.tui import TopApp

    app = TopApp([NodeClient(demo)], interval=0.5)

    async def drive() -> None:
        async with app.run_test(size=(160, 50)) as pilot:
            while app.polls < 1 or len(_order(app)) < 8:
                await pilot.pause(0.1)
            assert _header(app)[0] == "GPU ▲" and "NODE" not in " ".join(_header(app))
            before = _order(app)
            await pilot.press("s")  # on one node "node" sorts as "gpu" does: skipped
            assert app.sort_key == "regime" and _order(app) != before
            assert "REGIME ▲" in _header(app) and "GPU" in _header(app)
            await pilot.press("s")  # regime -> pod -> ...
            await pilot.press("s")
            assert app.sort_key == "dram" and "DRAM ▼" in _header(app)  # highest first
            await pilot.press("r")
            assert "DRAM ▲" in _header(app)
            await pilot.press("q")

    asyncio.run(drive())


def test_at_80_by_24_every_number_and_the_charts_legend_are_on_screen(demo: str) -> None:
    from textual.widgets import DataTable, Static

    from exporter.top.tui import TopApp

    app = TopApp([NodeClient(demo)], interval=0.5)

    async def drive() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            while app.polls < 1 or len(_order(app)) < 8:
                await pilot.pause(0.1)
            await pilot.pause(0.3)
            table = app.query_one("#gpus", DataTable)
            assert table.virtual_size.width <= table.content_region.width, "the table scrolls sideways"
            header = " ".join(_header(app))
            assert all(title in header for title in ("REGIME", "I/RIDGE", "EFF")), header
            chart = app.query_one("#chart", Static)
            lines = str(chart.render()).splitlines()
            legend = next(i for i, line in enumerate(lines) if line.startswith("A GPU "))
            footer_row = app.screen.size.height - 1
            assert chart.region.y + legend < footer_row, "the chart's legend is below the screen"
            await pilot.press("q")

    asyncio.run(drive())


def test_the_footer_says_resume_while_paused() -> None:
    from exporter.top.tui import TopApp

    with closed_port() as port:
        app = TopApp([NodeClient(f"http://127.0.0.1:{port}", timeout=0.5)], interval=5)
        asyncio.run(_press_p_twice(app))


async def _press_p_twice(app: Any) -> None:
    def p_says() -> str:
        return str(app.screen.active_bindings["p"].binding.description)

    async with app.run_test(size=(100, 30)) as pilot:
        assert p_says() == "Pause"
        await pilot.press("p")
        assert app.paused and p_says() == "Resume"
        await pilot.press("p")
        assert not app.paused and p_says() == "Pause"
        await pilot.press("q")


def test_a_node_that_answers_401_is_not_called_silent() -> None:
    from exporter.top.client import NodeReading
    from exporter.top.tui import TopApp

    app = TopApp([NodeClient("http://a:1"), NodeClient("http://b:1")])
    app.readings = [
        NodeReading(
            "http://a:1", error="HTTP 401 Unauthorized (wrong or missing credentials)", http_status=401
        ),
        NodeReading("http://b:1", error="[Errno 111] Connection refused"),
    ]
    status = str(app.status_text()).splitlines()
    assert "http://a:1  answered HTTP 401 Unauthorized" in status[0] and "not answering" not in status[0]
    assert "http://b:1  not answering since" in status[1] and "refused" in status[1]


def test_the_highlighted_gpus_lever_and_own_ridge_are_under_the_chart(demo: str) -> None:
    from textual.widgets import DataTable

    from exporter.top.tui import TopApp

    app = TopApp([NodeClient(demo)], interval=0.5)

    async def drive() -> None:
        async with app.run_test(size=(160, 50)) as pilot:
            while app.polls < 1 or len(_order(app)) < 8:
                await pilot.pause(0.1)
            row = next(r for r in app.rows if r.key == _order(app)[0])
            chart = str(app.chart_text())
            assert f"GPU {row.key}: {row.lever}" in chart
            if row.ridge_note:
                assert f"GPU {row.key}: {row.ridge_note}" in chart
                assert row.ridge_note.startswith("own ridge ")
            assert any(r.ridge_note for r in app.rows)  # the demo's GPUs mix pipes: own ridges
            # and the table's I/RIDGE cell says "own" for exactly those GPUs (not compact here)
            table = app.query_one("#gpus", DataTable)
            at = [name for _, name in app._columns()].index("intensity")
            for i in range(table.row_count):
                cells = table.get_row_at(i)
                row = next(r for r in app.rows if r.key == str(cells[0]))
                own = bool(row.ridge_note) and row.intensity is not None
                assert str(cells[at]).endswith(" own") == own, (str(cells[at]), row.ridge_note)
            await pilot.press("q")

    asyncio.run(drive())


def test_the_docs_awk_example_finds_the_regime_with_one_node_or_several() -> None:
    """docs/live-view.md's awk line looks REGIME up by its title: with NODE first it still works."""
    import re

    docs = (Path(__file__).resolve().parents[1] / "docs" / "live-view.md").read_text()
    (program,) = re.findall(r"ridgeline top --once \| awk '([^']+)'", docs)
    verdicts = [
        {"gpu": 0, "regime": "memory_bound"},
        {"gpu": 1, "regime": "idle"},
        {"gpu": 2, "regime": "memory_bound"},
    ]
    for nodes in (["http://a:1"], ["http://a:1", "http://b:1"]):
        rows = [row_from_verdict(n, decode_verdict(v)) for n in nodes for v in verdicts]
        text = "\n".join(plain_table(rows, with_node=len(nodes) > 1)) + "\n"
        found = subprocess.run(
            ["awk", program], input=text, capture_output=True, text=True, check=True
        ).stdout
        assert len(found.splitlines()) == 2 * len(nodes), (nodes, found)


# -- a reduced clock (issue 19) -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def throttled() -> Iterator[str]:
    from test_scrape_verdicts import throttled_node

    with throttled_node() as base:
        yield base


def _column(app: Any, title: str) -> dict[str, str]:
    """GPU → its cell under `title` in the interactive table."""
    from textual.widgets import DataTable

    table = app.query_one("#gpus", DataTable)
    index = _header(app).index(title)
    return {str(table.get_row_at(i)[0]): str(table.get_row_at(i)[index]) for i in range(table.row_count)}


def test_once_has_a_clock_column_naming_the_cause(throttled: str) -> None:
    result = top("--once", "--url", throttled)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    column = lines[0].split().index("CLOCK")
    clocks = {line.split()[0]: line.split()[column] for line in lines[1:]}
    # 1185 and 1410 of the 1830 MHz the H100's tensor peak is quoted at; GPU 2 at full clock
    assert clocks == {"0": "65%:power-cap", "1": "77%:thermal", "2": "-"}


def test_at_80_by_24_the_clock_column_fits_and_its_sentence_is_under_the_chart(throttled: str) -> None:
    from textual.widgets import DataTable

    from exporter.top.tui import TopApp

    app = TopApp([NodeClient(throttled)], interval=0.5)

    async def drive() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            while app.polls < 1 or len(_order(app)) < 3:
                await pilot.pause(0.1)
            await pilot.pause(0.3)
            table = app.query_one("#gpus", DataTable)
            assert table.virtual_size.width <= table.content_region.width, "the table scrolls sideways"
            header = " ".join(_header(app))
            assert all(title in header for title in ("REGIME", "I/RIDGE", "EFF", "CLOCK")), header
            # compact cells: the cause in words, its percentage and the gain under the chart
            assert _column(app, "CLOCK") == {"0": "power cap", "1": "thermal", "2": "–"}
            assert _column(app, "REGIME")["0"] == "■ compute"
            row = next(r for r in app.rows if r.key == _order(app)[0])
            assert row.key == "0" and row.clock_note is not None and "54% more FLOP/s" in row.clock_note
            assert "65% of the clock" in row.clock_note
            assert f"GPU 0: {row.clock_note}" in str(app.chart_text())
            await pilot.resize_terminal(160, 50)
            await pilot.pause(0.3)
            assert _column(app, "CLOCK") == {"0": "65% power cap", "1": "77% thermal", "2": "–"}
            assert _column(app, "REGIME")["0"] == "■ compute-bound"
            await pilot.press("q")

    asyncio.run(drive())


def test_without_a_reduced_clock_there_is_no_clock_column(demo: str) -> None:
    from exporter.top.tui import TopApp

    app = TopApp([NodeClient(demo)], interval=0.5)

    async def drive() -> None:
        async with app.run_test(size=(160, 50)) as pilot:
            while app.polls < 1 or len(_order(app)) < 8:
                await pilot.pause(0.1)
            assert all(r.clock_ratio is None for r in app.rows)  # the demo runs at full clock
            assert "CLOCK" not in _header(app)
            await pilot.press("q")

    asyncio.run(drive())
