"""SourceOptions for tests, shaped as the registry builds them (exporter/sources/__init__.py's
source_options): the shared flags, and one source's settings record under its name, so that a
Sampler or open_source given them reopens the same source.

`replay_options(path="demo", speed=None)` takes ReplaySettings' fields and the shared ones
(`interval_seconds`, `gpus`, `mig_profiles`) by keyword, as `scrape_options` and `dcgm_options`
take ScrapeSettings' and DcgmSettings'.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from exporter.sources import SourceOptions
from exporter.sources.dcgm import DcgmSettings
from exporter.sources.replay import ReplaySettings
from exporter.sources.scrape import ScrapeSettings

SHARED = frozenset(f.name for f in fields(SourceOptions)) - {"settings"}


def options_for(name: str, settings: object, **shared: Any) -> SourceOptions:
    """The shared options `shared` with source `name`'s settings record."""
    return SourceOptions(**shared, settings={name: settings})


def _split(name: str, kind: type[Any], given: dict[str, Any]) -> SourceOptions:
    shared = {key: value for key, value in given.items() if key in SHARED}
    own = {key: value for key, value in given.items() if key not in SHARED}
    return options_for(name, kind(**own), **shared)


def replay_options(**given: Any) -> SourceOptions:
    return _split("replay", ReplaySettings, given)


def scrape_options(**given: Any) -> SourceOptions:
    return _split("scrape", ScrapeSettings, given)


def dcgm_options(**given: Any) -> SourceOptions:
    return _split("dcgm", DcgmSettings, given)
