"""Each command's own environment variables, every default in --help, and the exporter
conventions' flag names (issues 23 and 18): RIDGELINE_<COMMAND>_<FLAG>, so RIDGELINE_TOP_INTERVAL
(polling) never changes serve's sampling; the names every command once shared still work for
serve only, deprecated; --web.listen-address, --web.config.file, --log.level and --log.format
are the documented flags, and the old spellings still work (docs/design.md, "CLI")."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import serve_process

from exporter.cli import build_parser, command_parsers
from exporter.commands.options.renames import deprecated_variables
from exporter.commands.options.variables import env_name


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import os

    for name in [n for n in os.environ if n.startswith("RIDGELINE_")]:
        monkeypatch.delenv(name)
    return monkeypatch


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def test_variable_names_carry_the_command() -> None:
    assert env_name("--interval", "serve") == "RIDGELINE_SERVE_INTERVAL"
    assert env_name("--web.listen-address", "serve") == "RIDGELINE_SERVE_WEB_LISTEN_ADDRESS"
    assert env_name("--interval", "top") == "RIDGELINE_TOP_INTERVAL"
    assert env_name("--log.level") == "RIDGELINE_LOG_LEVEL"  # top-level flags keep their name


def test_one_commands_variable_never_changes_another_command(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("RIDGELINE_TOP_INTERVAL", "7")
    clean_env.setenv("RIDGELINE_SERVE_INTERVAL", "0.5")
    clean_env.setenv("RIDGELINE_REPORT_JSON", "r.json")
    assert parse("top").interval == 7.0
    assert parse("serve").interval == 0.5
    assert parse("report").json == "r.json"
    assert parse("classify").json is False and parse("cards").json is False
    assert parse("report", "--replay", "demo").interval == 1.0  # report's own default


def test_the_old_shared_names_work_for_serve_only_and_are_noted(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("RIDGELINE_INTERVAL", "3")
    clean_env.setenv("RIDGELINE_JSON", "1")  # once wrote report's JSON to a file named `1`
    clean_env.setenv("RIDGELINE_LISTEN", "127.0.0.1:9999")
    assert parse("serve").interval == 3.0
    assert parse("serve").listen == "127.0.0.1:9999"
    assert parse("top").interval == 2.0
    assert parse("report").json is None and parse("classify").json is False
    assert ("RIDGELINE_INTERVAL", "RIDGELINE_SERVE_INTERVAL") in deprecated_variables()
    assert ("RIDGELINE_LISTEN", "RIDGELINE_SERVE_WEB_LISTEN_ADDRESS") in deprecated_variables()
    clean_env.setenv("RIDGELINE_SERVE_INTERVAL", "4")
    assert parse("serve").interval == 4.0  # the new name wins


def test_serve_logs_one_warning_naming_the_deprecated_variables() -> None:
    with serve_process("--replay", "demo", "--loop", env={"RIDGELINE_SPEED": "2", "RIDGELINE_LOOP": "1"}) as (
        _,
        process,
    ):
        pass
    log = process.stdout.read() if process.stdout else ""
    warnings = [line for line in log.splitlines() if "deprecated environment variables" in line]
    assert len(warnings) == 1, log
    assert "RIDGELINE_SPEED (now RIDGELINE_SERVE_SPEED)" in warnings[0]
    assert "RIDGELINE_LOOP (now RIDGELINE_SERVE_LOOP)" in warnings[0]


def test_every_default_is_shown_in_help() -> None:
    missing = []
    for name, command in command_parsers(build_parser()).items():
        for action in command._actions:
            default = action.default
            if action.help in (None, argparse.SUPPRESS) or default in (
                None,
                False,
                [],
                (),
                argparse.SUPPRESS,
            ):
                continue
            if "default" not in action.help:
                missing.append(f"{name} {action.option_strings[0]} (default {default!r})")
    assert not missing, missing


def test_help_shows_the_defaults_serve_and_top_left_out() -> None:
    serve = command_parsers(build_parser())["serve"].format_help()
    for shown in ("default :10295", "default 10", "default 5", "default 0.6", "default 0.8", "default 0.93",
                  "default 1024", "default 3"):  # fmt: skip
        assert shown in " ".join(serve.split()), shown
    top = " ".join(command_parsers(build_parser())["top"].format_help().split())
    assert "seconds between polls [default 2; env RIDGELINE_TOP_INTERVAL]" in top
    assert "seconds per request [default 3; env RIDGELINE_TOP_TIMEOUT]" in top


@pytest.mark.parametrize(
    ("argv", "attribute", "value"),
    [
        (["serve", "--web.listen-address", ":9100"], "listen", ":9100"),
        (["serve", "--listen", ":9100"], "listen", ":9100"),
        (["serve", "--web.config.file", "w.yml"], "web_config", "w.yml"),
        (["serve", "--web-config", "w.yml"], "web_config", "w.yml"),
        (["--log.level", "warn", "cards"], "log_level", "warn"),
        (["--log-level", "warning", "cards"], "log_level", "warn"),
        (["cards", "--log.level", "debug"], "log_level", "debug"),
        (["--log.format", "logfmt", "cards"], "log_format", "logfmt"),
        (["--log-format", "text", "cards"], "log_format", "logfmt"),
        (["serve", "--log-format", "json"], "log_format", "json"),
        (["cards"], "log_format", "logfmt"),
    ],
)
def test_the_exporter_flag_names_and_their_old_spellings(
    clean_env: pytest.MonkeyPatch, argv: list[str], attribute: str, value: str
) -> None:
    assert getattr(parse(*argv), attribute) == value


def test_help_names_the_new_flags_and_marks_the_old_ones_deprecated() -> None:
    serve = " ".join(command_parsers(build_parser())["serve"].format_help().split())
    assert "--web.listen-address HOST:PORT, --listen HOST:PORT" in serve
    assert "env RIDGELINE_SERVE_WEB_LISTEN_ADDRESS; deprecated: --listen]" in serve
    assert "env RIDGELINE_SERVE_WEB_CONFIG_FILE; deprecated: --web-config]" in serve
    assert "--log.level {debug,info,warn,error}" in serve and "deprecated: --log-level" in serve
    assert "--log.format {logfmt,json}" in serve and "deprecated: --log-format" in serve


def test_a_bad_log_level_is_refused_in_one_line(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "exporter", "--log.level", "loud", "cards"],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith("ridgeline: error: --log.level: invalid choice: 'loud'")
    clean_env.setenv("RIDGELINE_LOG_FORMAT", "yaml")
    with pytest.raises(SystemExit):
        parse("cards")


def test_a_bad_value_in_a_variable_names_the_variable() -> None:
    env = {"PATH": "/usr/bin:/bin", "RIDGELINE_TOP_INTERVAL": "soon"}
    done = subprocess.run([sys.executable, "-m", "exporter", "top", "--once"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "RIDGELINE_TOP_INTERVAL='soon': expected a positive number of seconds" in done.stderr
