"""Credentials in URLs are masked wherever a message carries them (exporter/redaction.py)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from urllib.parse import urlsplit

import pytest
from conftest import closed_port, http_get, serve_process
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from exporter.redaction import MASK, misread_credentials, redact_credentials, redact_url
from exporter.sources import SourceOptions
from exporter.sources.base import SourceUnavailable
from exporter.sources.scrape import ScrapeSettings, ScrapeSource


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("cannot reach http://prom:s3cret@h:9400/metrics", "cannot reach http://prom:xxxxx@h:9400/metrics"),
        ("https://TOKEN@h/metrics answered 401", "https://xxxxx@h/metrics answered 401"),
        ("http://u:p%40ss@h/ and http://v:w@k/x", "http://u:xxxxx@h/ and http://v:xxxxx@k/x"),
        ("http://u:pa@ss@h/metrics", "http://u:xxxxx@h/metrics"),  # an unencoded @ in the password
        # an @ after the authority: urllib reads a path, but it may be a password with a /, ? or #
        ("http://h:9400/metrics?x=a@b", "http://h:xxxxx@b"),
        ("http://user:55209/x@host/metrics", "http://user:xxxxx@host/metrics"),
        ("got 'http://u:pa#ss@h/m'", "got 'http://u:xxxxx@h/m'"),
        ("cannot reach http://u:pass word@h/m: refused", "cannot reach http://u:xxxxx@h/m: refused"),
        ("a http://tok/en@h/ b", "a http://xxxxx@h/ b"),
        ("http://u:p@h/\nhttp://h2/ ok", "http://u:xxxxx@h/\nhttp://h2/ ok"),  # a URL ends at the line
        ("mail ops@example.com", "mail ops@example.com"),
        ("no url here", "no url here"),
    ],
)
def test_userinfo_is_masked(text: str, expected: str) -> None:
    assert redact_credentials(text) == expected


# -- any password, whatever it holds ---------------------------------------------------------------

USERS = st.text(st.sampled_from("abcXYZ019-_."), min_size=1, max_size=8)
PASSWORDS = st.text(
    st.one_of(
        st.sampled_from(" /?#@:%+=&;,'\"()<>[]\\"),
        st.characters(codec="utf-8", exclude_categories=["Cs", "Cc", "Zl", "Zp"]),
    ),
    min_size=1,
    max_size=24,
)
TEMPLATES = [
    "{url}",
    "cannot reach {url}: connection refused",
    "got '{url}'",
    "--scrape-url {url} (x) and http://h2/ y",
]
_URL_START_AFTER_A_BREAK = re.compile(r"""[\s'"(<\[=,][A-Za-z][A-Za-z0-9+.\-]*://""")


@settings(max_examples=400, deadline=None)
@given(user=USERS, password=PASSWORDS, template=st.sampled_from(TEMPLATES))
def test_no_password_shape_survives_redaction(user: str, password: str, template: str) -> None:
    url = f"http://{user}:{password}@gpu-node:9400/metrics"
    shown = f"http://{user}:{MASK}@gpu-node:9400/metrics"
    assert redact_url(url) == shown
    # Free text cannot tell a password holding " x://" from a second URL (docs/daemon.md).
    assume(not _URL_START_AFTER_A_BREAK.search(password) and "\n" not in password and "\r" not in password)
    assert redact_credentials(template.format(url=url)) == template.format(url=shown)


@settings(max_examples=300, deadline=None)
@given(user=USERS, password=PASSWORDS)
def test_the_scrape_source_shows_and_refuses_every_shape_without_the_password(
    user: str, password: str
) -> None:
    url = f"http://{user}:{password}@gpu-node:9400/metrics"
    source = ScrapeSource(SourceOptions(), ScrapeSettings(url=url))
    assert source.display_name == f"http://{user}:{MASK}@gpu-node:9400/metrics"
    try:
        parts = urlsplit(url)
        reads_as_given = parts.password == password and parts.hostname == "gpu-node" and parts.port == 9400
    except ValueError:
        reads_as_given = False
    try:
        source.open()
    except SourceUnavailable as exc:
        assert password not in exc.message.replace(user, "", 1) or len(password) < 3
        assert MASK in exc.message
        assert not reads_as_given or exc.reason != "bad_url", exc.message
    else:
        assert reads_as_given and not misread_credentials(url)


# -- the real process: /readyz, /classify, /live.json, the log, the start-up error ------------------


def test_a_password_with_a_space_is_masked_on_every_page_and_in_the_log() -> None:
    secret = "Zq pass word"
    with closed_port() as port:  # nothing listens: connection refused
        url = f"http://prom:{secret}@127.0.0.1:{port}/metrics"
        bodies, readyz, log = _pages_and_log(url)
    assert "prom:xxxxx@127.0.0.1" in readyz, readyz
    for text in [*bodies, log]:
        assert "pass word" not in text and "Zq" not in text


def _pages_and_log(url: str) -> tuple[list[str], str, str]:
    with serve_process("--source", "scrape", "--scrape-url", url, "--interval", "0.2") as (base, process):
        deadline = time.monotonic() + 20
        readyz = ""
        while "cannot" not in readyz and time.monotonic() < deadline:
            readyz = http_get(base + "/readyz")[1]
        bodies = [readyz, *(http_get(base + path)[1] for path in ("/classify", "/live.json", "/metrics"))]
        process.terminate()
        log = process.communicate(timeout=20)[0]
    return bodies, readyz, log


@pytest.mark.parametrize("secret", ["Zq55209/xK", "Zqpa#ssK", "Zqpa?ssK", "Zqpa/ssK", "Zq9/8?7#6K"])
def test_a_password_urllib_misreads_is_a_start_up_error_without_it(secret: str) -> None:
    url = f"http://prom:{secret}@127.0.0.1:9400/metrics"
    command = [sys.executable, "-m", "exporter", "serve", "--source", "scrape", "--scrape-url", url]
    result = subprocess.run([*command, "--listen", "127.0.0.1:0"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "prom:xxxxx@127.0.0.1:9400" in lines[0], result.stderr
    fragments = [piece for piece in re.split(r"[/?#]", secret) if len(piece) >= 2]
    assert not [piece for piece in fragments if piece in result.stderr], result.stderr
