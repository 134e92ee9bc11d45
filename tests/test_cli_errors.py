"""Every mistake on the command line is one line on stderr naming the flag, exit 2 (issue 23):
no screen of usage, the command's own flags suggested for a typo, and a reader that leaves early
(`ridgeline cards --json | head -1`) ends the command quietly instead of in a traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def ridgeline(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIDGELINE_")}
    return subprocess.run(
        [sys.executable, "-m", "exporter", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "usage:" not in result.stderr and "Traceback" not in result.stderr
    return lines[0]


def test_an_unknown_flag_names_the_command_and_its_nearest_flag() -> None:
    line = one_line(ridgeline("serve", "--intervall", "3"))
    assert line.startswith("ridgeline serve: error: unrecognized argument")
    assert "--intervall (did you mean --interval?)" in line and "ridgeline serve --help" in line
    line = one_line(ridgeline("top", "--sortt", "regime"))
    assert line.startswith("ridgeline top: error:") and "did you mean --sort?" in line


@pytest.mark.parametrize(
    ("args", "start"),
    [
        (("report", "--since", "7x"), "ridgeline report: error: --since: expected a duration"),
        (("top", "--interval", "-1"), "ridgeline top: error: --interval: expected a positive number"),
        (
            ("serve", "--speed", "fast"),
            "ridgeline serve: error: --speed: expected a positive number or 'max'",
        ),
        (("classify", "--flops", "lots"), "ridgeline classify: error: --flops: expected a number"),
        (("report", "--out"), "ridgeline report: error: --out: expected one argument"),
        (("cards", "--json", "extra"), "ridgeline cards: error: unrecognized argument: extra"),
        (("serv",), "ridgeline: error: COMMAND: invalid choice: 'serv'"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_flag(args: tuple[str, ...], start: str) -> None:
    line = one_line(ridgeline(*args))
    assert line.startswith(start), line


def test_a_missing_kernel_field_names_the_flag_not_the_body_field() -> None:
    line = one_line(ridgeline("classify", "--card", "h100-sxm", "--flops", "4e12"))
    assert line.startswith("ridgeline classify: error: --bytes is missing"), line
    assert "Field required" not in line


def buffered_env() -> dict[str, str]:
    """The caller's environment with stdout block-buffered, as in a user's shell: with
    PYTHONUNBUFFERED set (as it is in some CI and sessions) nothing is left in the buffer for the
    interpreter's flush at exit to meet the closed pipe, and that flush is what reader_left()
    points at /dev/null."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


@pytest.mark.parametrize(
    "args",
    [
        ("cards", "--json"),
        ("cards",),
        ("classify", "--card", "h100-sxm", "--flops", "4e12", "--bytes", "40e9", "--json"),
        ("classify", "--card", "h100-sxm", "--flops", "4e12", "--bytes", "40e9", "--compare", "all"),
    ],
)
def test_a_reader_that_leaves_early_ends_the_command_quietly(args: tuple[str, ...]) -> None:
    """The pipe's read end is closed before the command writes (it takes longer to start than
    this takes), so every write meets a closed pipe, as after `| head -1`."""
    process = subprocess.Popen(
        [sys.executable, "-m", "exporter", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=buffered_env(),
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=60) == 0, stderr
    assert stderr == ""


def test_a_shell_pipe_whose_reader_is_gone_ends_quietly() -> None:
    """`ridgeline classify ... --json | true`: a real shell pipe whose reader exits before the
    command has written a byte. The answer is small, so it waits in stdout's buffer until the
    flush meets the closed pipe; without reader_left() the interpreter's own flush at exit
    meets it again: "Exception ignored ... BrokenPipeError" and exit 120."""
    command = [sys.executable, "-m", "exporter", "classify", "--card", "h100-sxm"]
    command += ["--flops", "4e12", "--bytes", "40e9", "--json"]
    shell = subprocess.run(
        ["bash", "-c", '"$@" | true; exit "${PIPESTATUS[0]}"', "bash", *command],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=buffered_env(),
    )
    assert shell.returncode == 0, shell.stderr  # the command's own status, not true's
    assert "Exception ignored" not in shell.stderr and "BrokenPipeError" not in shell.stderr
    assert shell.stderr == ""
