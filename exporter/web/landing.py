"""`GET /`: a small HTML page that says what this endpoint is and links everything it serves."""

from __future__ import annotations

import html

from exporter import __version__

LINKS: tuple[tuple[str, str], ...] = (
    ("/metrics", "Prometheus metrics (OpenMetrics on request)"),
    ("/classify", "live verdict of every GPU on this node (GET); POST a kernel, operation or counters"),
    ("/cards", "the card catalog: peaks, bandwidths, ridges"),
    ("/docs", "interactive API documentation (OpenAPI)"),
    ("/healthz", "process alive"),
    ("/readyz", "ready once a fresh sample exists and the source is up"),
)


def landing_html(card_count: int) -> str:
    """Built once at start-up; the page is static for the life of the process."""
    items = "\n".join(
        f'      <li><a href="{html.escape(path)}">{html.escape(path)}</a> — {html.escape(text)}</li>'
        for path, text in LINKS
    )
    return f"""<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <title>Ridgeline</title>
  </head>
  <body>
    <h1>Ridgeline {html.escape(__version__)}</h1>
    <p>Places each GPU on its card's roofline: memory-bound, compute-bound, latency-bound or idle,
    with the numbers behind the verdict. {card_count} cards in the catalog.</p>
    <ul>
{items}
    </ul>
  </body>
</html>
"""
