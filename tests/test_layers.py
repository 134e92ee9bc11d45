"""The layers of docs/design.md, kept by parsing every module's imports (including ones inside
functions).

roofline math (stdlib only) <- card catalog <- inference; sources import no HTTP server code; the
classify service and its bodies import no web code; the HTTP API, CLI and exposition sit on top;
commands share exporter/commands/options.py and never import each other or the CLI. A lower layer
importing a higher one fails here, naming the file, the line and the import; a guarded module that
does not exist fails too (a rename must move its rule with it).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "exporter"

HTTP_AND_GPU = ("fastapi", "starlette", "prometheus_client", "pynvml", "uvicorn", "grpc")
HTTP_SERVER = ("fastapi", "starlette", "uvicorn", "exporter.web")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, package: list[str] | None = None) -> list[tuple[int, str]]:
    """(line, absolute module name) for every import statement in the file, relative ones resolved
    against `package` (by default the package the file sits in)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    if package is None:
        package = module_name(path).split(".")
        if path.name != "__init__.py":
            package = package[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            found.append((node.lineno, name))
            # `from exporter import web` imports exporter.web
            found.extend((node.lineno, f"{name}.{alias.name}") for alias in node.names if name == "exporter")
    return found


def within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def violations(paths: list[Path], forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {name}"
        for path in paths
        for line, name in imports(path)
        if within(name, forbidden)
    ]


def modules(*relative: str) -> list[Path]:
    """The module files under each relative path (a file, or every .py below a directory).

    A path that does not exist fails the test: a rule over a module that is gone guards nothing.
    """
    paths: list[Path] = []
    for rel in relative:
        target = PACKAGE / rel
        assert target.exists(), f"exporter/{rel} is guarded by a layer rule but does not exist"
        paths.extend(sorted(target.rglob("*.py")) if target.is_dir() else [target])
    return paths


def test_every_module_parses_and_the_walker_finds_imports() -> None:
    every = modules(".")
    assert len(every) > 10
    found = {name for path in every for _, name in imports(path)}
    assert "exporter.roofline" in found  # the checker sees real imports (no vacuous pass)
    assert "fastapi" in found


@pytest.mark.parametrize("module", ["roofline.py", "redaction.py", "logs.py", "client_tls.py"])
def test_math_and_utilities_import_only_the_standard_library(module: str) -> None:
    """The math is importable anywhere; the sampler and the CLI use redaction and logs, top and
    report the client TLS context."""
    bad = [
        f"exporter/{module}:{line} imports {name}"
        for line, name in imports(PACKAGE / module)
        if name.split(".")[0] not in sys.stdlib_module_names and name != "__future__"
    ]
    assert bad == []


@pytest.mark.parametrize("layer", ["roofline.py", "catalog.py", "inference.py"])
def test_math_catalog_and_inference_import_no_http_or_gpu_library(layer: str) -> None:
    assert violations(modules(layer), HTTP_AND_GPU) == []


@pytest.mark.parametrize(
    ("layer", "higher"),
    [
        ("roofline.py", ("exporter",)),
        (
            "catalog.py",
            ("exporter.inference", "exporter.sources", "exporter.web", "exporter.cli", "exporter.commands"),
        ),
        (
            "inference.py",
            ("exporter.sources", "exporter.web", "exporter.cli", "exporter.commands", "exporter.exposition"),
        ),
    ],
)
def test_lower_layers_do_not_import_higher_ones(layer: str, higher: tuple[str, ...]) -> None:
    assert violations(modules(layer), higher) == []


def test_collectors_table_imports_only_the_standard_library_and_roofline() -> None:
    """`serve --help` and flag parsing read it; prometheus_client must not come with it."""
    bad = [
        f"exporter/collectors.py:{line} imports {name}"
        for line, name in imports(PACKAGE / "collectors.py")
        if name.split(".")[0] not in sys.stdlib_module_names
        and name not in ("__future__", "exporter.roofline")
    ]
    assert bad == []


def test_sources_import_no_http_server_code() -> None:
    assert violations(modules("sources"), HTTP_SERVER) == []


def test_classify_service_and_bodies_import_no_web_code() -> None:
    """The CLI shares them; pulling FastAPI in would cost every `ridgeline classify` its start-up."""
    paths = modules("classify")
    assert {p.name for p in paths} >= {"models.py", "service.py"}
    assert violations(paths, (*HTTP_SERVER, "exporter.commands", "exporter.cli")) == []


def test_web_config_lives_in_the_http_layer() -> None:
    """It imports starlette and anyio: outside web/ it would put HTTP code below the commands."""
    assert violations(modules("web/webconfig.py"), ("exporter.commands", "exporter.cli")) == []
    outside_web = [p for p in modules(".") if "web" not in p.relative_to(PACKAGE).parts]
    assert [v for v in violations(outside_web, ("starlette", "anyio")) if "commands/" not in v] == []


def test_state_sampler_and_exposition_import_no_web_or_commands() -> None:
    paths = modules("state.py", "sampler.py", "exposition.py", "recorder.py")
    assert violations(paths, (*HTTP_SERVER, "exporter.commands", "exporter.cli")) == []


def test_no_command_imports_another_or_the_cli() -> None:
    """Commands share exporter/commands/options.py and extras.py; `cli.py` is imported only by
    `__main__`."""
    shared = ("exporter.commands.options", "exporter.commands.extras")
    bad = []
    for path in modules("commands"):
        own = module_name(path)
        for line, name in imports(path):
            if name.startswith("exporter.commands.") and name not in (own, *shared):
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {name}")
    others = [p for p in modules(".") if p.name not in ("__main__.py", "cli.py")]
    assert bad + violations(others, ("exporter.cli",)) == []


def test_the_checker_catches_a_forbidden_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "def f():\n    from fastapi import FastAPI\n    from ..web import app\n    return FastAPI, app\n"
    )
    found = imports(probe, package=["exporter", "sources"])
    assert found == [(2, "fastapi"), (3, "exporter.web")]
    assert all(within(name, HTTP_SERVER) for _, name in found)
    assert not within("exporter.website", HTTP_SERVER)


def test_the_reports_model_and_rendering_do_no_io_of_their_own() -> None:
    """exporter/report/: the model is pure (usage in, document out) and the page is rendered
    from the document alone; only the inputs reach a query API or a trace, and commands/report.py
    wires them."""
    network = ("urllib", "http", "socket", "ssl", "orjson")
    network += ("exporter.report.prometheus", "exporter.report.replay")
    pure = modules("report/model.py", "report/render.py", "report/promql.py", "report/series.py")
    assert violations(pure, (*network, *HTTP_AND_GPU, "exporter.sources", "exporter.sampler")) == []
    assert violations(modules("report/model.py", "report/promql.py"), ("matplotlib",)) == []
    inputs = modules("report/prometheus.py", "report/replay.py")
    above = (*HTTP_SERVER, "exporter.report.render", "exporter.commands", "exporter.cli")
    assert violations(inputs, above) == []
    assert violations(modules("report/prometheus.py"), ("exporter.sources", "exporter.sampler")) == []


@pytest.mark.parametrize("module", ["roofline_chart.py", "chart_svg.py", "chart_text.py"])
def test_chart_geometry_and_drawing_are_pure_code(module: str) -> None:
    """The roofline chart is arithmetic on numbers: the web page, /roofline.svg and `top` share it."""
    allowed = ("__future__", "exporter.view.units", "exporter.view.roofline_chart")
    bad = [
        f"exporter/view/{module}:{line} imports {name}"
        for line, name in imports(PACKAGE / "view" / module)
        if name.split(".")[0] not in sys.stdlib_module_names and name not in allowed
    ]
    assert bad == []


def test_the_view_imports_no_web_or_terminal_code() -> None:
    """exporter/view draws; the web layer and `top` only serve or print what it draws."""
    forbidden = (*HTTP_SERVER, "textual", "rich", "exporter.top", "exporter.commands", "exporter.cli")
    assert violations(modules("view"), forbidden) == []


def test_top_is_a_client_of_the_http_api_only() -> None:
    """`ridgeline top` reads GET /classify over HTTP, never the daemon's state or its sources."""
    internal = (
        *HTTP_SERVER,
        "exporter.state",
        "exporter.sampler",
        "exporter.sources",
        "exporter.inference",
        "exporter.exposition",
        "exporter.attribution",
        "exporter.catalog",
    )
    assert violations(modules("top", "commands/top.py"), internal) == []
