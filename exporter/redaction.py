"""Credentials never leave the process: `user:password@` in any URL a message carries is masked.

The scrape source is given URLs that may hold basic-auth credentials (`--scrape-url
http://user:pass@host:9400/metrics`) and shows its URL only through `redact_url`. Whatever a
source says in an error, the sampler passes it through `redact_credentials` before it is stored
for `/readyz`, `/classify` and `/live.json` or logged, and the CLI does the same for a start-up
error, so a password is masked even where a message was written without thinking of it.

What counts as the userinfo is wider than what the HTTP client reads. urllib.parse.urlsplit (the
client's parser, exporter/sources/http_fetch.py) ends the authority at the first `/`, `?` or `#`
and takes the userinfo up to the authority's last `@`; spaces do not end it. A password written
unencoded with `/`, `?` or `#` in it (`http://user:55209/x@host/`) is therefore read as host
`user`, port `55209`, and its `@` lands in the path: the writer's password is still in the text.
So everything from `scheme://` to the last `@` of the URL is masked, whichever way it reads;
`misread_credentials` names that shape so the source can refuse it before connecting anywhere.
In free text the URL ends at the end of the line or where another URL starts after a space,
quote or bracket. Standard library only: the sources, the sampler and the state use it.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

MASK = "xxxxx"
"""What a password becomes, as Go's url.URL.Redacted() writes it (Prometheus's own logs do too)."""

_SCHEME = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://")
_NEXT_URL = re.compile(r"""(?<=[\s'"(<\[=,])[A-Za-z][A-Za-z0-9+.\-]*://""")
_LINE_END = re.compile(r"[\r\n]")


def _masked(rest: str) -> str:
    """`rest` (what follows `scheme://`) with everything up to its last `@` masked; the user
    name stays when it is plain (no `/`, `?`, `#` or space in it), as Go's Redacted() keeps it."""
    userinfo, at, tail = rest.rpartition("@")
    if not at:
        return rest
    user, colon, _ = userinfo.partition(":")
    plain = colon and user and not re.search(r"[/?#\s]", user)
    return f"{user}:{MASK}@{tail}" if plain else f"{MASK}@{tail}"


def redact_url(url: str) -> str:
    """One URL as it may be shown: http://prom:s3cret@h/ -> http://prom:xxxxx@h/ (a lone token,
    http://TOKEN@h/, becomes http://xxxxx@h/), whatever characters the password holds."""
    scheme = _SCHEME.search(url)
    if scheme is None or "@" not in url:
        return url
    return url[: scheme.end()] + _masked(url[scheme.end() :])


def redact_credentials(text: str) -> str:
    """`text` with the userinfo of every URL in it masked (see the module's docstring)."""
    if "@" not in text:
        return text
    return "".join(_redact_line(line) for line in _lines(text))


def misread_credentials(url: str) -> bool:
    """True when the URL has an `@` the HTTP client does not read as the end of a userinfo: a
    password with an unencoded `/`, `?` or `#`, which would connect to a host made of the
    password's first half. (An `@` in a query string reads the same way, and is as rare in a
    metrics URL.)"""
    try:
        netloc = urlsplit(url.strip()).netloc
    except ValueError:
        netloc = ""
    scheme = _SCHEME.search(url)
    rest = url[scheme.end() :] if scheme is not None else url
    return rest.count("@") > netloc.count("@")


def _lines(text: str) -> list[str]:
    pieces, start = [], 0
    for end in _LINE_END.finditer(text):
        pieces.append(text[start : end.end()])
        start = end.end()
    pieces.append(text[start:])
    return pieces


def _redact_line(line: str) -> str:
    first = _SCHEME.search(line)
    if first is None:
        return line
    out, position = [line[: first.start()]], first.start()
    while position < len(line):
        scheme = _SCHEME.match(line, position)
        assert scheme is not None
        following = _NEXT_URL.search(line, scheme.end())
        end = following.start() if following is not None else len(line)
        out.append(scheme.group() + _masked(line[scheme.end() : end]))
        position = end
    return "".join(out)
