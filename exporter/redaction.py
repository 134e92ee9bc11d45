"""Credentials never leave the process: `user:password@` in any URL a message carries is masked.

`redact_url` for a URL a source shows, `redact_credentials` for any text the sampler stores or
logs and the CLI prints; everything from `scheme://` to the URL's last `@` is masked, wider than
what the HTTP client reads as userinfo, and `misread_credentials` names the shape urllib would
misread (docs/daemon.md, "Logs"). Standard library only.
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
