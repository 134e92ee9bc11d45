"""DESIGN.md's layers, kept by parsing every module's imports (including ones inside functions).

roofline math (stdlib only) <- card catalog <- inference; sources import no HTTP server code; the
HTTP API, CLI and exposition sit on top. A lower layer importing a higher one fails here, naming
the file, the line and the import.
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
    """The files a layer rule guards; a path that does not exist fails the test (a rule over a
    moved or renamed module must follow it, not pass vacuously)."""
    paths: list[Path] = []
    for rel in relative:
        target = PACKAGE / rel
        if target.is_dir():
            found = sorted(target.rglob("*.py"))
            assert found, f"exporter/{rel} has no Python files: update the layer rule that names it"
            paths.extend(found)
        else:
            assert target.is_file(), f"exporter/{rel} does not exist: update the layer rule that names it"
            paths.append(target)
    return paths


def test_every_module_parses_and_the_walker_finds_imports() -> None:
    every = modules(".")
    assert len(every) > 10
    found = {name for path in every for _, name in imports(path)}
    assert "exporter.roofline" in found  # the checker sees real imports (no vacuous pass)
    assert "fastapi" in found


def test_roofline_math_imports_only_the_standard_library() -> None:
    bad = [
        f"exporter/roofline.py:{line} imports {name}"
        for line, name in imports(PACKAGE / "roofline.py")
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


def test_sources_import_no_http_server_code() -> None:
    assert violations(modules("sources"), HTTP_SERVER) == []


def test_classify_service_and_bodies_stay_free_of_fastapi() -> None:
    """The CLI shares them; pulling FastAPI in would cost every `ridgeline classify` its start-up."""
    paths = modules("classify_service.py", "web/classify_models.py")
    assert violations(paths, ("fastapi", "starlette", "uvicorn")) == []


def test_the_checker_catches_a_forbidden_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "def f():\n    from fastapi import FastAPI\n    from ..web import app\n    return FastAPI, app\n"
    )
    found = imports(probe, package=["exporter", "sources"])
    assert found == [(2, "fastapi"), (3, "exporter.web")]
    assert all(within(name, HTTP_SERVER) for _, name in found)
    assert not within("exporter.webconfig", HTTP_SERVER)


@pytest.mark.parametrize("missing", ["no_such_module.py", "no_such_room"])
def test_a_rule_over_a_module_that_does_not_exist_fails(missing: str) -> None:
    with pytest.raises(AssertionError, match=f"exporter/{missing} does not exist"):
        modules("roofline.py", missing)
