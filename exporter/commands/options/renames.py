"""Deprecated flag and variable spellings used in this process: noted as they are read, warned
about once each when logging is up (the CLI calls tell_renamed)."""

from __future__ import annotations

import logging

_deprecated_seen: list[tuple[str, str]] = []
_renamed_seen: list[tuple[str, str]] = []
_renamed_told = False


def note_shared_variable(old: str, new: str) -> None:
    """Note that serve read a deprecated shared RIDGELINE_<FLAG> variable (serve warns)."""
    if (old, new) not in _deprecated_seen:
        _deprecated_seen.append((old, new))


def deprecated_variables() -> list[tuple[str, str]]:
    """(old variable, new variable) for each deprecated name that set a flag in this process."""
    return list(_deprecated_seen)


def note_renamed(old: str, new: str) -> None:
    """Note that a deprecated flag or variable was used: one warning per name, logged by
    tell_renamed() once logging is set up (or at once, after it)."""
    if (old, new) in _renamed_seen:
        return
    _renamed_seen.append((old, new))
    if _renamed_told:
        _warn_renamed(old, new)


def tell_renamed() -> None:
    """Log the deprecated names used so far (the CLI calls it once logging is set up)."""
    global _renamed_told
    _renamed_told = True
    for old, new in _renamed_seen:
        _warn_renamed(old, new)


def renamed_names() -> list[tuple[str, str]]:
    """(old name, what replaces it) for each deprecated flag or variable used in this process."""
    return list(_renamed_seen)


def _warn_renamed(old: str, new: str) -> None:
    logging.getLogger("ridgeline").warning("%s is deprecated: use %s", old, new)
