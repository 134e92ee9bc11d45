"""What a command imports before it needs it: a parse error, `--help`, `cards` and `classify`
load no web stack, and `serve` ends on a user's mistake before it imports FastAPI.

Every test that starts `ridgeline` pays for its imports, and the web stack is about half of a
serve's start-up (docs/testing.md, "The quick run, this session"). The probe imports the CLI
once and forks for each command line, so a case costs a fork, not an interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

PROBE = textwrap.dedent(
    """
    import json, os, sys
    from exporter.cli import main

    answers = []
    for argv in json.loads(sys.argv[1]):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the command, alone in a copy of this process; its output is not ours
            os.close(read)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            try:
                status = main(argv)
            except SystemExit as exc:
                status = exc.code
            os.write(write, json.dumps({"status": status, "modules": sorted(sys.modules)}).encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as answer:
            answers.append(json.loads(answer.read()))
        os.waitpid(pid, 0)
    print(json.dumps(answers))
    """
)

WEB_STACK = ("fastapi", "starlette", "uvicorn")
NOT_FOR_PARSING = (*WEB_STACK, "pydantic", "yaml", "prometheus_client", "grpc", "textual", "jinja2")
"""What parsing flags and printing help never need: the catalog (pydantic, yaml), the exposition,
the kubelet client, `top`'s screen, the report's templates."""

CASES: list[tuple[list[str], int, tuple[str, ...]]] = [
    (["serve", "--bad-flag"], 2, NOT_FOR_PARSING),
    (["serve", "--help"], 0, NOT_FOR_PARSING),
    (["report", "--since", "7x"], 2, NOT_FOR_PARSING),
    (["cards"], 0, WEB_STACK),
    (["classify", "--card", "h100-sxm", "--flops", "4e12", "--bytes", "40e9"], 0, WEB_STACK),
    (["serve", "--listen", "nonsense", "--replay", "demo"], 2, NOT_FOR_PARSING),
    # serve's other mistakes end before it builds the app: the socket's uvicorn only, no FastAPI
    (["serve", "--listen", "127.0.0.1:0", "--replay", "/nonexistent/trace.jsonl"], 2, ("fastapi",)),
    (["serve", "--listen", "127.0.0.1:0", "--replay", "demo", "--model", "H100 typo"], 2, ("fastapi",)),
]


def loaded(modules: list[str], packages: tuple[str, ...]) -> list[str]:
    return sorted({name.split(".")[0] for name in modules} & set(packages))


def test_commands_import_no_more_than_they_need_before_they_need_it() -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps([argv for argv, _, _ in CASES])],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    answers = json.loads(result.stdout)
    found = {
        " ".join(argv): (answer["status"], loaded(answer["modules"], forbidden))
        for (argv, _, forbidden), answer in zip(CASES, answers, strict=True)
    }
    assert found == {" ".join(argv): (status, []) for argv, status, _ in CASES}
