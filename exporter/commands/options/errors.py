"""The user-error type every command raises for bad input (the CLI prints it, exit 2)."""

from __future__ import annotations


class UserError(Exception):
    """An error caused by input; the message is the whole story (no traceback)."""
