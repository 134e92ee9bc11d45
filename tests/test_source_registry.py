"""A new source is one module and one registry line (docs/design.md, "Layout and layers"): a
throwaway source module, written into a temporary package, declares its own flag; registered
with one line of SOURCE_CLASSES, its flag shows in `serve --help` and `record --help` with its
RIDGELINE_* variable, and its value reaches the source, through `record` end to end, without a
line of any other module changed. The built-in sources declare theirs the same way."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter import sources
from exporter.cli import build_parser, command_parsers, main
from exporter.commands.options.errors import UserError
from exporter.commands.options.sources import source_choice
from exporter.sources import create_source, option_specs

PROBE = '''
"""A source that only exists in this test: it reports one GPU whose DRAM activity is --probe.level."""

from typing import Any

from exporter.option_specs import OptionError, OptionSpec
from exporter.sample import Entity, Sample
from exporter.sources.base import SourceOptions


def level(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise ValueError(text)
    return value


OPTIONS = (
    OptionSpec(flag="--probe.level", dest="probe_level", type=level, default=0.25, metavar="R",
               help="the DRAM activity the probe reports"),
)


def options_from(values: Any, chosen: bool) -> dict[str, Any]:
    if not chosen and values.probe_level != 0.25:
        raise OptionError("--probe.level is only used with --source probe")
    return {"probe_level": values.probe_level}


class ProbeSource:
    name = "probe"
    paced = False
    records_skipped = 0

    def __init__(self, options: SourceOptions) -> None:
        self.level = options.settings["probe_level"]

    def open(self) -> None:
        pass

    def read(self) -> list[Sample]:
        entity = Entity(gpu=0, uuid="GPU-probe", model="NVIDIA H100 80GB HBM3")
        return [Sample(timestamp=1_700_000_000.0, entity=entity, values={1005: self.level})]

    def close(self) -> None:
        pass
'''


@pytest.fixture
def probe_registered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The throwaway module in a temporary package, and its one registry line."""
    package = tmp_path / "throwaway_sources"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "probe.py").write_text(textwrap.dedent(PROBE))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sources.SOURCE_CLASSES, "probe", "throwaway_sources.probe:ProbeSource")
    yield
    sys.modules.pop("throwaway_sources.probe", None)
    sys.modules.pop("throwaway_sources", None)


def test_a_new_sources_flag_shows_in_serve_and_record_help(probe_registered: None) -> None:
    parsers = command_parsers(build_parser())
    for command in ("serve", "record"):
        text = " ".join(parsers[command].format_help().split())
        assert "--probe.level R the DRAM activity the probe reports" in text
        assert f"env RIDGELINE_{command.upper()}_PROBE_LEVEL" in text
        assert "{auto,dcgm,nvml,scrape,replay,probe}" in text


def test_a_new_sources_flag_reaches_it(probe_registered: None, monkeypatch: pytest.MonkeyPatch) -> None:
    parser = build_parser()
    name, options = source_choice(parser.parse_args(["serve", "--source", "probe", "--probe.level", "0.75"]))
    assert name == "probe" and options.settings == {"probe_level": 0.75}
    assert create_source(name, options).read()[0].values == {1005: 0.75}  # type: ignore[attr-defined]
    monkeypatch.setenv("RIDGELINE_SERVE_PROBE_LEVEL", "0.5")
    from_env = build_parser().parse_args(["serve", "--source", "probe"])
    assert source_choice(from_env)[1].settings == {"probe_level": 0.5}
    with pytest.raises(UserError, match=r"--probe\.level is only used with --source probe"):
        source_choice(parser.parse_args(["serve", "--replay", "demo", "--probe.level", "0.5"]))


def test_record_runs_the_new_source_end_to_end(probe_registered: None, tmp_path: Path) -> None:
    out = tmp_path / "probe.jsonl"
    status = main(["record", "--source", "probe", "--probe.level", "0.625", "--out", str(out),
                   "--duration", "0.3", "--interval", "0.1"])  # fmt: skip
    first = json.loads(out.read_text().splitlines()[0])
    assert status == 0 and first["uuid"] == "GPU-probe" and first["fields"]["1005"] == 0.625


def test_every_built_in_source_flag_comes_from_a_source_module() -> None:
    """The source flags are the registry's: the shared ones and each module's OPTIONS, once each."""
    flags = [spec.flag for spec in option_specs()]
    assert len(flags) == len(set(flags))
    assert {
        "--interval",
        "--gpus",
        "--mig-profile",
        "--dcgm-address",
        "--scrape-url",
        "--replay",
        "--loop",
    } <= set(flags)
    assert {"--scrape.tls.ca-file", "--scrape.basic-auth.username"} <= set(flags)
    serve = command_parsers(build_parser())["serve"]
    declared = {option for action in serve._actions for option in action.option_strings}
    assert set(flags) <= declared


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--source", "scrape"), "--source scrape needs --scrape-url URL"),
        (("--source", "replay"), "--source replay needs --replay PATH"),
        (
            ("--source", "nvml", "--replay", "demo"),
            "--replay is only used with --source replay, not --source nvml",
        ),
    ],
)
def test_each_source_refuses_what_does_not_fit_by_flag(args: tuple[str, ...], needle: str) -> None:
    with pytest.raises(UserError) as caught:
        source_choice(build_parser().parse_args(["record", *args]))
    assert str(caught.value).startswith(needle)


def test_the_built_in_sources_settings_reach_their_fields() -> None:
    args = ["serve", "--source", "dcgm", "--dcgm-bindings", "/opt/dcgm", "--gpus", "0,2", "--interval", "2"]
    _, options = source_choice(build_parser().parse_args(args))
    assert (str(options.dcgm_bindings), options.gpus, options.interval_seconds) == ("/opt/dcgm", (0, 2), 2.0)
    assert options.settings == {}
    _, replay = source_choice(
        build_parser().parse_args(["serve", "--replay", "demo", "--speed", "max", "--loop"])
    )
    assert (replay.replay, replay.speed, replay.loop) == ("demo", None, True)
