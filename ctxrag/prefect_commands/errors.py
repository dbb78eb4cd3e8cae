"""The Prefect commands' errors: ``CommandError`` is a ``UserError`` (one line, no traceback, exit code 2, printed by
``ctxrag.errors.fail`` as every command's are); ``err`` is their stderr console."""

from __future__ import annotations

from ctxrag.errors import fail
from ctxrag.storage.errors import UserError
from ctxrag.tasks.common.display import console

__all__ = ["CommandError", "err", "fail"]

err = console(stderr=True, soft_wrap=True)


class CommandError(UserError):
    """A problem the user can fix with a Prefect command's input or setup."""
