"""Credentials in URLs are masked wherever a message carries them (exporter/redaction.py)."""

from __future__ import annotations

import pytest

from exporter.redaction import redact_credentials


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("cannot reach http://prom:s3cret@h:9400/metrics", "cannot reach http://prom:xxxxx@h:9400/metrics"),
        ("https://TOKEN@h/metrics answered 401", "https://xxxxx@h/metrics answered 401"),
        ("http://u:p%40ss@h/ and http://v:w@k/x", "http://u:xxxxx@h/ and http://v:xxxxx@k/x"),
        ("http://u:pa@ss@h/metrics", "http://u:xxxxx@h/metrics"),  # an unencoded @ in the password
        ("http://h:9400/metrics?x=a@b", "http://h:9400/metrics?x=a@b"),  # @ after the authority
        ("mail ops@example.com", "mail ops@example.com"),
        ("no url here", "no url here"),
    ],
)
def test_userinfo_is_masked(text: str, expected: str) -> None:
    assert redact_credentials(text) == expected
