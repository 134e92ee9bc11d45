"""Password-guessing floods against a real `ridgeline serve` process (issue 20).

The guessers run in their own process (asyncio, one connection per request, as a flood that
really contends must: docs/daemon.md, "Hostile clients"), against a bcrypt cost-10 hash so the
one bcrypt thread is the bottleneck. The authorised scraper is this test, one connection per
scrape. What must hold is a count: how many authorised scrapes were refused.
"""

from __future__ import annotations

import base64
import http.client
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import bcrypt
import pytest
from conftest import serve_process
from flood_clients import guessers_running

pytestmark = pytest.mark.slow

USER, PASSWORD = "prometheus", "scrape-secret"
GUESSERS = 200
OTHER_HOSTS = [f"127.0.0.{n}" for n in range(2, 10)]
"""Loopback addresses standing in for the attackers' hosts (Linux routes all of 127/8 here)."""


@contextmanager
def guessing(port: int, sources: list[str], concurrency: int = GUESSERS, user: str = USER) -> Iterator[Any]:
    """`concurrency` guessers from `sources`, guessing `user`'s password, until the block ends;
    yields their [401, 429, other] counts."""
    with guessers_running(port, concurrency, tuple(sources), user) as counts:
        yield counts


def scrape(port: int, password: str = PASSWORD, user: str = USER) -> int:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/metrics", headers={"Authorization": f"Basic {token}"})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


@pytest.fixture
def web_config(tmp_path: Path) -> Path:
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=10)).decode()
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n  {USER}: '{hashed}'\n")
    return path


def _port(base: str) -> int:
    return int(base.rsplit(":", 1)[1])


def test_a_scraper_not_verified_yet_is_served_under_200_guessers_from_other_hosts(web_config: Path) -> None:
    with serve_process("--replay", "demo", "--loop", "--web-config", str(web_config)) as (base, _):
        port = _port(base)
        with guessing(port, OTHER_HOSTS) as counts:
            assert counts[1] >= GUESSERS, "the flood never filled the bcrypt queue"
            statuses = [scrape(port) for _ in range(15)]
            refused_guesses = counts[1]
    assert statuses == [200] * 15  # was 15 of 15 answered 429
    assert refused_guesses > 0  # the guessers did contend: their excess was refused


def test_a_scraper_sharing_the_guessers_address_is_refused_at_most_once(web_config: Path) -> None:
    """Nothing tells its first request from a guess; its retry of the same password goes first."""
    with serve_process("--replay", "demo", "--loop", "--web-config", str(web_config)) as (base, _):
        port = _port(base)
        with guessing(port, ["127.0.0.1"]):
            statuses = [scrape(port) for _ in range(15)]
    assert statuses.count(429) <= 1 and statuses.count(200) >= 14, statuses
    assert set(statuses) <= {200, 429}


def test_guessers_spraying_one_user_from_the_scrapers_address_refuse_no_other_users_scrape(
    tmp_path: Path,
) -> None:
    """The scraper is never verified and shares the guessers' address, but they guess another
    user's password: its first check takes the place of one of theirs, none of its scrapes is
    refused (its own user name's record at that address is clean)."""
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=10)).decode()
    config = tmp_path / "web.yml"
    config.write_text(f"basic_auth_users:\n  {USER}: '{hashed}'\n  admin: '{hashed}'\n")
    with serve_process("--replay", "demo", "--loop", "--web-config", str(config)) as (base, _):
        port = _port(base)
        with guessing(port, ["127.0.0.1"], user="admin") as counts:
            assert counts[1] >= GUESSERS, "the flood never filled the bcrypt queue"
            statuses = [scrape(port) for _ in range(15)]
    assert statuses == [200] * 15  # the first was 429: the address's slots were the guessers'


def test_a_reload_under_a_flood_keeps_the_verified_scraper_served(web_config: Path) -> None:
    with serve_process("--replay", "demo", "--loop", "--web-config", str(web_config)) as (base, _):
        port = _port(base)
        assert scrape(port) == 200  # verified once, before the flood
        with guessing(port, ["127.0.0.1"]):
            other = bcrypt.hashpw(b"grafana-pass", bcrypt.gensalt(rounds=4)).decode()
            text = web_config.read_text()
            web_config.write_text(text + f"  grafana: '{other}'\n")
            statuses, reloaded = [], False
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not reloaded:  # the watcher polls once a second
                statuses.append(scrape(port))
                reloaded = scrape(port, "grafana-pass", user="grafana") == 200
            statuses += [scrape(port) for _ in range(20)]
    assert reloaded, "the new user never got in: the reload did not happen"
    assert statuses == [200] * len(statuses)  # was 23 of 92 answered 429
