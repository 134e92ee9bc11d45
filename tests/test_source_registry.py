"""A new source is one module and one registry line (docs/sources.md, "Adding a source"): a
throwaway source module, written into a temporary package, declares its own flag and settings
record; registered with one line of SOURCE_CLASSES, its flag shows in `serve --help` and
`record --help` with its RIDGELINE_* variable, and its settings reach the source through `serve`
and `record` end to end, without a line of any other module changed. The built-in sources
declare theirs the same way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import http_get, listening_port, stop_process

from exporter import sources
from exporter.cli import build_parser, command_parsers, main
from exporter.commands.options.errors import UserError
from exporter.commands.options.sources import source_choice
from exporter.sources import SourceOptions, create_source, option_specs
from exporter.sources.dcgm import DcgmSettings
from exporter.sources.replay import ReplaySettings

PROBE = '''
"""A source that only exists in this test: it reports one GPU whose DRAM activity is --probe.level."""

import time
from dataclasses import dataclass
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


@dataclass(frozen=True)
class ProbeSettings:
    level: float = 0.25


def options_from(values: Any, chosen: bool) -> ProbeSettings:
    if not chosen and values.probe_level != 0.25:
        raise OptionError("--probe.level is only used with --source probe")
    return ProbeSettings(level=values.probe_level)


class ProbeSource:
    name = "probe"
    paced = False
    records_skipped = 0

    def __init__(self, options: SourceOptions, settings: ProbeSettings) -> None:
        self.level = settings.level

    def open(self) -> None:
        pass

    def read(self) -> list[Sample]:
        entity = Entity(gpu=0, uuid="GPU-probe", model="NVIDIA H100 80GB HBM3")
        return [Sample(timestamp=time.time(), entity=entity, values={1005: self.level})]

    def close(self) -> None:
        pass
'''


REGISTRY_LINE = ("probe", "throwaway_sources.probe:ProbeSource")
"""The one line a new source adds to SOURCE_CLASSES (here set by the test, not written)."""


def _write_probe(where: Path) -> None:
    package = where / "throwaway_sources"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "probe.py").write_text(textwrap.dedent(PROBE))


@pytest.fixture
def probe_registered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The throwaway module in a temporary package, and its one registry line."""
    _write_probe(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sources.SOURCE_CLASSES, *REGISTRY_LINE)
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
    assert name == "probe" and list(options.settings) == ["probe"]
    assert options.settings["probe"].level == 0.75  # type: ignore[attr-defined]
    assert create_source(name, options).read()[0].values == {1005: 0.75}
    monkeypatch.setenv("RIDGELINE_SERVE_PROBE_LEVEL", "0.5")
    from_env = build_parser().parse_args(["serve", "--source", "probe"])
    assert source_choice(from_env)[1].settings["probe"].level == 0.5  # type: ignore[attr-defined]
    with pytest.raises(UserError, match=r"--probe\.level is only used with --source probe"):
        source_choice(parser.parse_args(["serve", "--replay", "demo", "--probe.level", "0.5"]))


def test_record_runs_the_new_source_end_to_end(probe_registered: None, tmp_path: Path) -> None:
    out = tmp_path / "probe.jsonl"
    status = main(["record", "--source", "probe", "--probe.level", "0.625", "--out", str(out),
                   "--duration", "0.3", "--interval", "0.1"])  # fmt: skip
    first = json.loads(out.read_text().splitlines()[0])
    assert status == 0 and first["uuid"] == "GPU-probe" and first["fields"]["1005"] == 0.625


LAUNCH = """
import sys
from exporter import sources
sources.SOURCE_CLASSES[sys.argv[1]] = sys.argv[2]
from exporter.cli import main
sys.exit(main(sys.argv[3:]))
"""
"""`ridgeline` with one registry line added first, as the source's module would add it."""


@pytest.mark.slow
def test_serve_runs_the_new_source_end_to_end(tmp_path: Path) -> None:
    _write_probe(tmp_path)
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    serve = subprocess.Popen(
        [sys.executable, "-c", LAUNCH, *REGISTRY_LINE, "serve", "--web.listen-address", "127.0.0.1:0",
         "--source", "probe", "--probe.level", "0.625", "--interval", "0.1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONPATH": path},
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{listening_port(serve, 'serve', timeout=30)}"
        deadline = time.monotonic() + 20
        while True:
            try:
                status, body = http_get(base + "/classify")
            except OSError:
                status, body = 0, ""
            if status == 200 and json.loads(body)["gpus"]:
                break
            assert time.monotonic() < deadline, f"no GPU from the probe: {status} {body}"
            time.sleep(0.05)
        answer = json.loads(body)
        assert answer["source"] == "probe" and answer["source_up"] is True
        gpu = answer["gpus"][0]
        assert gpu["uuid"] == "GPU-probe" and gpu["dram_active"] == pytest.approx(0.625)  # its setting
        metrics = http_get(base + "/metrics")[1]
        assert 'ridgeline_source_up{source="probe"} 1.0' in metrics
        assert "GPU-probe" in metrics
    finally:
        stop_process(serve)


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


def test_the_built_in_sources_settings_reach_their_records() -> None:
    args = ["serve", "--source", "dcgm", "--dcgm-bindings", "/opt/dcgm", "--gpus", "0,2", "--interval", "2"]
    _, options = source_choice(build_parser().parse_args(args))
    assert (options.gpus, options.interval_seconds) == ((0, 2), 2.0)
    assert options.settings == {"dcgm": DcgmSettings(bindings=Path("/opt/dcgm"))}
    _, replay = source_choice(
        build_parser().parse_args(["serve", "--replay", "demo", "--speed", "max", "--loop"])
    )
    assert replay.settings == {"replay": ReplaySettings(path="demo", speed=None, loop=True)}


def test_auto_carries_the_records_of_each_source_it_tries() -> None:
    _, options = source_choice(build_parser().parse_args(["serve", "--dcgm-address", "10.0.0.7:5555"]))
    assert set(options.settings) == {"dcgm"}  # nvml declares no flags: it takes SourceOptions alone
    assert options.settings["dcgm"] == DcgmSettings(address="10.0.0.7:5555")


def test_no_shared_type_carries_a_sources_setting() -> None:
    """SourceOptions holds the shared flags and the records; each source's fields are its own."""
    from dataclasses import fields

    assert [f.name for f in fields(SourceOptions)] == ["interval_seconds", "gpus", "mig_profiles", "settings"]


def test_report_replay_builds_the_replay_record_through_the_registry() -> None:
    """`report --replay` declares only the file flags: the rest read as their defaults."""
    from exporter.commands.options.sources import replay_choice

    args = build_parser().parse_args(
        ["report", "--replay", "demo", "--replay-format", "jsonl", "--model", "H100", "--json", "-"]
    )
    options = replay_choice(args)
    assert options.settings == {"replay": ReplaySettings(path="demo", format="jsonl", model="H100")}
