"""GPU data sources (dcgm, nvml, scrape, replay) behind one protocol, and the registry naming them.

Each source lives in its own module and is imported only when chosen, so a machine without
DCGM or NVML can still replay, scrape and serve `/classify`.
"""

from __future__ import annotations

import importlib

from exporter.sources.base import EndOfStream, Source, SourceError, SourceOptions, SourceUnavailable

SOURCE_CLASSES: dict[str, str] = {
    "dcgm": "exporter.sources.dcgm:DcgmSource",
    "nvml": "exporter.sources.nvml:NvmlSource",
    "scrape": "exporter.sources.scrape:ScrapeSource",
    "replay": "exporter.sources.replay:ReplaySource",
}
"""Source name -> "module:Class"; the class takes SourceOptions. One line per source."""

AUTO_ORDER: tuple[str, ...] = ("dcgm", "nvml")
SOURCE_NAMES: tuple[str, ...] = ("auto", *SOURCE_CLASSES)


def create_source(name: str, options: SourceOptions) -> Source:
    """Instantiate a named source (not yet opened)."""
    if name not in SOURCE_CLASSES:
        known = ", ".join(SOURCE_NAMES)
        raise SourceUnavailable("unknown_source", f"unknown source {name!r}; choose one of: {known}")
    module_name, class_name = SOURCE_CLASSES[name].split(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    source: Source = cls(options)
    return source


def open_source(name: str, options: SourceOptions) -> Source:
    """Create and open a source; `auto` tries dcgm, then nvml, and names what failed.

    Raises SourceUnavailable with one line that lists every attempt and suggests the demo.
    """
    if name != "auto":
        source = create_source(name, options)
        source.open()
        return source
    failures: list[str] = []
    for candidate in AUTO_ORDER:
        try:
            source = create_source(candidate, options)
            source.open()
            return source
        except SourceError as exc:
            failures.append(f"{candidate}: {exc.message}")
    tried = "; ".join(failures)
    raise SourceUnavailable(
        "no_source",
        f"no GPU source available (tried {tried}). To see Ridgeline without a GPU, run "
        "`ridgeline serve --replay demo`; to read an existing dcgm-exporter, use "
        "`--source scrape --scrape-url URL`.",
    )


__all__ = [
    "AUTO_ORDER",
    "SOURCE_CLASSES",
    "SOURCE_NAMES",
    "EndOfStream",
    "Source",
    "SourceError",
    "SourceOptions",
    "SourceUnavailable",
    "create_source",
    "open_source",
]
