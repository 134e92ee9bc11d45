"""Credentials never leave the process: `user:password@` in any URL a message carries is masked.

The scrape source is given URLs that may hold basic-auth credentials (`--scrape-url
http://user:pass@host:9400/metrics`) and shows its URL only through here. Whatever a source says
in an error, the sampler passes it through `redact_credentials` before it is stored for
`/readyz` and `/classify` or logged, and the CLI does the same for a start-up error, so a
password is masked even where a message was written without thinking of it. Standard library
only: the sources, the sampler and the state use it.
"""

from __future__ import annotations

import re

_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/?#\s]*)@")
MASK = "xxxxx"
"""What a password becomes, as Go's url.URL.Redacted() writes it (Prometheus's own logs do too)."""


def _mask(match: re.Match[str]) -> str:
    user, colon, _ = match.group("userinfo").partition(":")
    shown = f"{user}:{MASK}" if colon else MASK
    return f"{match.group('scheme')}{shown}@"


def redact_credentials(text: str) -> str:
    """`text` with the userinfo of every URL in it masked: http://prom:s3cret@h/ -> http://prom:xxxxx@h/
    (a lone token, http://TOKEN@h/, becomes http://xxxxx@h/)."""
    if "@" not in text:
        return text
    return _USERINFO.sub(_mask, text)
