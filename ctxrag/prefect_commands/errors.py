"""How the Prefect commands report a problem the user can fix: one line on stderr, no traceback, exit code 2."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.markup import escape

from ctxrag.tasks.common.display import console

err = console(stderr=True, soft_wrap=True)


class CommandError(Exception):
    """A problem the user can fix; shown as one line, no traceback."""


def fail(message: str, code: int = 2) -> NoReturn:
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    raise typer.Exit(code=code)
