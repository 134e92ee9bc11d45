"""The optional dependencies a client command needs, checked before it does any work.

The node daemon installs without them (pyproject.toml's `top` and `report` extras; the image has
neither), so a command that needs one says which in one line, exit 2, instead of a traceback
(or, for `report --out`, after a week's queries have run).
"""

from __future__ import annotations

import importlib

from exporter.commands.options.errors import UserError


def require_extra(extra: str, module: str, what: str) -> None:
    """Import `module` now, or raise a UserError naming the extra that installs it."""
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise UserError(
            f"{what} needs the '{extra}' extra ({exc}): pip install '.[{extra}]' from the checkout, "
            f"or its wheel as 'ridgeline[{extra}]'"
        ) from None
