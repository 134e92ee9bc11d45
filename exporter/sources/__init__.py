"""GPU data sources (dcgm, nvml, scrape, replay) behind one protocol, and the registry naming them.

Each source lives in its own module, with the flags it reads (exporter/sources/options.py). The
modules are plain Python: the GPU libraries are loaded only when a source opens, so a machine
without DCGM or NVML can still replay, scrape and serve `/classify`.
"""

from __future__ import annotations

import argparse
import importlib
from types import ModuleType
from typing import Any

from exporter.option_specs import OptionSpec
from exporter.sources.base import EndOfStream, Source, SourceError, SourceOptions, SourceUnavailable
from exporter.sources.options import COMMON_OPTIONS, common_options_from

SOURCE_CLASSES: dict[str, str] = {
    "dcgm": "exporter.sources.dcgm:DcgmSource",
    "nvml": "exporter.sources.nvml:NvmlSource",
    "scrape": "exporter.sources.scrape:ScrapeSource",
    "replay": "exporter.sources.replay:ReplaySource",
}
"""Source name -> "module:Class". One line per source: its module declares its flags (OPTIONS),
reads them into its own settings record (options_from), and its class takes SourceOptions and
that record (exporter/sources/options.py says the protocol)."""

AUTO_ORDER: tuple[str, ...] = ("dcgm", "nvml")
SOURCE_NAMES: tuple[str, ...] = ("auto", *SOURCE_CLASSES)
"""The names built in; source_names() includes any registered since."""


def source_names() -> tuple[str, ...]:
    """`--source` choices: auto, then every registered source."""
    return ("auto", *SOURCE_CLASSES)


def _modules() -> list[tuple[str, ModuleType]]:
    return [(name, importlib.import_module(path.split(":")[0])) for name, path in SOURCE_CLASSES.items()]


def option_specs() -> list[OptionSpec]:
    """Every source flag: the shared ones, then each registered source's own, in registry order
    (a flag two sources declare is added once)."""
    specs: list[OptionSpec] = list(COMMON_OPTIONS)
    for _, module in _modules():
        for spec in getattr(module, "OPTIONS", ()):
            if all(spec.flag != seen.flag for seen in specs):
                specs.append(spec)
    return specs


def source_options(name: str, values: Any) -> SourceOptions:
    """The SourceOptions that option_specs() parsed into `values` for source `name` (`auto`:
    each source it tries): the shared flags, and each chosen source's settings record from its
    module's options_from. Every module reads its flags, chosen or not, so that a flag of
    another source is refused by name (OptionError). A flag the command does not declare
    (`report --replay` takes a few) reads as its default."""
    chosen = set(AUTO_ORDER) if name == "auto" else {name}
    values = _with_defaults(values)
    settings: dict[str, object] = {}
    for source, module in _modules():
        read = getattr(module, "options_from", None)
        if read is None:
            continue
        record = read(values, source in chosen)
        if source in chosen:
            settings[source] = record
    return SourceOptions(**common_options_from(values), settings=settings)


def _with_defaults(values: Any) -> argparse.Namespace:
    """`values` with every source flag it lacks at its declared default."""
    filled = argparse.Namespace(**{spec.dest: spec.default for spec in option_specs()})
    vars(filled).update(vars(values))
    return filled


def create_source(name: str, options: SourceOptions) -> Source:
    """Instantiate a named source (not yet opened), with its settings record from `options`
    when it has one there (a source without flags of its own takes `options` alone)."""
    if name not in SOURCE_CLASSES:
        known = ", ".join(source_names())
        raise SourceUnavailable("unknown_source", f"unknown source {name!r}; choose one of: {known}")
    module_name, class_name = SOURCE_CLASSES[name].split(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    settings = options.settings.get(name)
    source: Source = cls(options) if settings is None else cls(options, settings)
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
    "option_specs",
    "source_names",
    "source_options",
]
