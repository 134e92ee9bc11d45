"""Finding NVIDIA's DCGM Python bindings, which ship with DCGM and are not on PyPI.

DCGM 4 installs them in /usr/share/datacenter-gpu-manager-4/bindings/python3, DCGM 3 in
/usr/local/dcgm/bindings/python3; `--dcgm-bindings DIR` names another directory. The
directory is put on sys.path and the modules imported by their own names (pydcgm imports
dcgm_structs, dcgm_agent, ... the same way), so the bindings' import logic is theirs.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from exporter.sources.base import SourceUnavailable

DEFAULT_BINDINGS_PATHS: tuple[Path, ...] = (
    Path("/usr/share/datacenter-gpu-manager-4/bindings/python3"),
    Path("/usr/local/dcgm/bindings/python3"),
)
"""Where DCGM 4 and DCGM 3 packages install the Python bindings."""

MODULES = ("dcgm_structs", "dcgm_fields", "dcgm_agent", "pydcgm")


@dataclass(frozen=True)
class Bindings:
    """The imported binding modules and the directory they came from."""

    path: Path
    pydcgm: ModuleType
    dcgm_structs: ModuleType
    dcgm_fields: ModuleType
    dcgm_agent: ModuleType


def load_bindings(explicit: Path | None, defaults: tuple[Path, ...] = DEFAULT_BINDINGS_PATHS) -> Bindings:
    """Import the bindings from `explicit`, or the first default directory that has them.

    Raises SourceUnavailable naming every directory tried and the `--dcgm-bindings` flag.
    """
    candidates = (explicit,) if explicit is not None else defaults
    for directory in candidates:
        if (directory / "pydcgm.py").is_file() and (directory / "dcgm_agent.py").is_file():
            return _import_from(directory)
    tried = ", ".join(str(d) for d in candidates)
    raise SourceUnavailable(
        "dcgm_not_found",
        f"DCGM Python bindings (pydcgm.py) not found in {tried}. Install DCGM "
        "(datacenter-gpu-manager-4) or point --dcgm-bindings at its bindings/python3 directory.",
    )


def _import_from(directory: Path) -> Bindings:
    text = str(directory)
    if text not in sys.path:
        sys.path.insert(0, text)
    try:
        modules = {name: importlib.import_module(name) for name in MODULES}
    except Exception as exc:  # a broken or foreign bindings directory: say which
        raise SourceUnavailable(
            "dcgm_not_found", f"cannot import the DCGM Python bindings from {directory}: {exc}"
        ) from exc
    return Bindings(path=directory, **modules)
