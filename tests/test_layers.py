"""The layers of docs/design.md §1, checked from its tables by parsing every module's imports
(including ones inside functions).

The floors table is the rule: each module of exporter/ has one row (a new module without one
fails, saying to add it), imports only the Ridgeline modules its row names or its own floor's,
and only the third-party libraries its row names. The rules table lists the few finer rules the
floors cannot express, each with the test below that holds it; a test without a row, or a row
without its test, fails too. A violation names the file, the line and the import.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "exporter"
DESIGN = PACKAGE.parent / "docs" / "design.md"

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


# -- the floors table of docs/design.md §1 -----------------------------------------------------

DISTRIBUTIONS = {
    "pydantic": ("pydantic",),
    "pyyaml": ("yaml",),
    "grpc": ("grpc",),
    "protobuf": ("google",),
    "prometheus_client": ("prometheus_client",),
    "fastapi": ("fastapi",),
    "starlette": ("starlette",),
    "uvicorn": ("uvicorn",),
    "h11": ("h11",),
    "bcrypt": ("bcrypt",),
    "fastapi-offline": ("fastapi_offline",),
    "textual": ("textual",),
    "rich": ("rich",),
    "matplotlib": ("matplotlib",),
    "pynvml": ("pynvml",),
}
"""Distribution names as the table writes them -> the import names they provide."""


class Floor:
    """One row of the floors table: the modules it holds and what they may import."""

    def __init__(self, index: int, name: str, modules: list[str], ridgeline: list[str], third: str) -> None:
        self.index = index
        self.name = name
        self.modules = modules
        self.ridgeline = ridgeline
        self.third_party = {
            imported
            for word in re.findall(r"[A-Za-z_][A-Za-z0-9_-]*", third)
            for imported in DISTRIBUTIONS.get(word.lower(), ())
        }


def table_rows(header: str) -> list[list[str]]:
    """The cells of the markdown table in docs/design.md §1 whose header row starts `header`."""
    text = DESIGN.read_text(encoding="utf-8")
    section = text[text.index("\n## 1.") : text.index("\n## 2.")]
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def floors() -> list[Floor]:
    found = []
    for index, (name, mods, ridgeline, third) in enumerate(table_rows("| floor | modules |")):
        entries = [m.strip("`") for m in re.findall(r"`[^`]+`", re.sub(r"\([^)]*\)", "", mods))]
        words = [w.strip().strip("`") for w in re.sub(r"\([^)]*\)", "", ridgeline).split(",")]
        found.append(Floor(index, name, entries, [w for w in words if w and w != "none"], third))
    return found


def module_key(path: Path) -> str:
    """exporter/report/model.py -> "report/model"; a package's __init__.py -> "report/__init__"."""
    return path.relative_to(PACKAGE).with_suffix("").as_posix()


def matches(entry: str, key: str) -> bool:
    """`sources/` holds everything below sources/; `report/model` only that module."""
    return key.startswith(entry) if entry.endswith("/") else key == entry


def floor_of(key: str, table: list[Floor]) -> Floor | None:
    """The floor whose most specific entry matches the module."""
    best: tuple[int, Floor] | None = None
    for floor in table:
        for entry in floor.modules:
            if matches(entry, key) and (best is None or len(entry) > best[0]):
                best = (len(entry), floor)
    return best[1] if best else None


def imported_key(name: str) -> str | None:
    """The module file an `exporter...` import name reaches ("exporter.__version__" is the package)."""
    parts = name.split(".")[1:]
    while parts:
        base = PACKAGE.joinpath(*parts)
        if base.with_suffix(".py").is_file():
            return "/".join(parts)
        if (base / "__init__.py").is_file():
            return "/".join([*parts, "__init__"])
        parts.pop()
    return "__init__"


def allowed_keys(floor: Floor, table: list[Floor], every: list[str]) -> set[str]:
    """The modules a floor may import: its own floor's, those its row names, and the package."""
    allowed = {"__init__"}
    for word in floor.ridgeline:
        if word == "any of the above":
            allowed.update(k for k in every if (f := floor_of(k, table)) and f.index < floor.index)
            continue
        entry = word if word.endswith("/") or "/" in word else word + "/"
        allowed.update(k for k in every if k == word or matches(entry, k))
    allowed.update(k for k in every if floor_of(k, table) is floor)
    return allowed


def floor_violations(paths: list[Path], table: list[Floor]) -> list[str]:
    every = [module_key(p) for p in modules(".")]
    bad = []
    for path in paths:
        key = module_key(path)
        floor = floor_of(key, table)
        if floor is None:
            bad.append(f"exporter/{key}.py has no row in docs/design.md §1's floors table: add it there")
            continue
        allowed = allowed_keys(floor, table, every)
        for line, name in imports(path):
            top = name.split(".")[0]
            where = f"exporter/{key}.py:{line} imports {name}: not in the {floor.name!r} floor's"
            if top == "exporter":
                target = imported_key(name)
                if target not in allowed:
                    bad.append(f"{where} Ridgeline imports (docs/design.md §1)")
            elif top not in sys.stdlib_module_names and top != "__future__" and top not in floor.third_party:
                bad.append(f"{where} third-party column (docs/design.md §1)")
    return bad


def test_imports_follow_the_floors_table() -> None:
    table = floors()
    assert len(table) > 10
    assert floor_violations(modules("."), table) == []


def test_every_module_a_floor_names_exists() -> None:
    """A row over a module that moved guards nothing: the row moves with it."""
    every = [module_key(p) for p in modules(".")]
    gone = [
        f"docs/design.md §1, floor {floor.name!r}: no module {entry}"
        for floor in floors()
        for entry in floor.modules
        if not any(matches(entry, key) for key in every)
    ]
    assert gone == []


def test_every_floor_imports_only_floors_above_it() -> None:
    """The table itself runs one way: a row names only modules of the rows above it."""
    table = floors()
    every = [module_key(p) for p in modules(".")]
    bad = []
    for floor in table:
        for key in allowed_keys(floor, table, every):
            target = floor_of(key, table)
            if key != "__init__" and (target is None or target.index > floor.index):
                bad.append(f"{floor.name!r} names {key}, which is on a floor below it or on none")
    assert bad == []


def test_the_floors_check_catches_a_new_module_an_upward_import_and_a_library(tmp_path: Path) -> None:
    table = floors()
    probe = PACKAGE / "roofline.py"
    assert floor_violations([probe], table) == []
    up = next(f for f in table if f.name == "math")
    up.ridgeline, up.third_party = [], set()
    catalog = next(f for f in table if f.name == "catalog")
    catalog.ridgeline, catalog.third_party = [], {"yaml"}
    found = floor_violations([PACKAGE / "catalog.py"], table)
    assert any("imports exporter.roofline" in v for v in found)
    assert any("imports pydantic" in v and "third-party" in v for v in found)
    assert not any("imports yaml" in v for v in found)
    stray = PACKAGE / "no_such_module_for_the_test.py"
    assert floor_of(module_key(stray), table) is None
    fake = [Floor(0, "math", ["roofline"], [], "")]
    assert floor_violations([PACKAGE / "fields.py"], fake) == [
        "exporter/fields.py has no row in docs/design.md §1's floors table: add it there"
    ]


def test_every_rule_in_the_rules_table_has_its_test_and_every_test_its_row() -> None:
    named = {m for row in table_rows("| rule | test |") for m in re.findall(r"`(test_\w+)`", row[1])}
    here = {name for name in globals() if name.startswith("test_")}
    assert sorted(here - named) == [], "add a row to docs/design.md §1's rules table"
    assert sorted(named - here) == [], "a rule in docs/design.md §1 names a test that is gone"


def test_every_module_parses_and_the_walker_finds_imports() -> None:
    every = modules(".")
    assert len(every) > 10
    found = {name for path in every for _, name in imports(path)}
    assert "exporter.roofline" in found  # the checker sees real imports (no vacuous pass)
    assert "fastapi" in found


def test_no_command_imports_another_or_the_cli() -> None:
    """Commands share exporter/commands/options/ and extras.py; `cli.py` is imported only by
    `__main__`."""
    shared = ("exporter.commands.options", "exporter.commands.extras")
    bad = []
    for path in modules("commands"):
        own = module_name(path)
        for line, name in imports(path):
            if name.startswith("exporter.commands.") and not within(name, (own, *shared)):
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
    pure = modules(
        "report/document.py",
        "report/model.py",
        "report/render.py",
        "report/promql.py",
        "report/series.py",
        "report/coverage.py",
    )
    assert violations(pure, (*network, *HTTP_AND_GPU, "exporter.sources", "exporter.sampler")) == []
    plain = modules("report/document.py", "report/model.py", "report/promql.py", "report/coverage.py")
    assert violations(plain, ("matplotlib",)) == []
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
