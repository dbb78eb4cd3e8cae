"""What people read: figures rounded to what a reader uses, and rich consoles that keep a line on one line when the
output goes to a file or a CI log. Machine outputs (``--json``, stored results) keep full precision: they do not
come through here."""

from __future__ import annotations

import os
import sys
from typing import Any, Iterable

from rich.console import Console

PIPED_WIDTH = 10_000  # columns of a console writing to a file or a pipe: a table row or a path is never wrapped


def figure(value: object, name: str = "") -> str:
    """``value`` as people read it; ``name`` (a metric, column or report key) says what it measures. Seconds (a
    name with "seconds"): one decimal, whole from 100 s. Dollars (a name with "usd" or "cost"): four decimals (a
    call costs fractions of a cent). Any other float (metrics, shares): three decimals. Anything else: ``str``."""
    if not isinstance(value, float):
        return str(value)
    lowered = name.lower()
    if "seconds" in lowered:
        return f"{value:.0f}" if abs(value) >= 100 else f"{value:.1f}"
    if "usd" in lowered or "cost" in lowered:
        return f"{value:.4f}"
    return f"{value:.3f}"


def readable_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, str]]:
    """Table rows (a Prefect table artifact's, the CLI's) with every value through ``figure``, named by its column,
    or by the row's ``item`` for (item, value) rows."""
    return [
        {column: figure(value, str(row.get("item", column)) if column == "value" else column) for column, value in row.items()}
        for row in rows
    ]


def console(stderr: bool = False, soft_wrap: bool = False) -> Console:
    """A rich console on stdout (or stderr). On a terminal it wraps at the terminal's width, as rich does; written to
    a file or a pipe (a CI log, ``grep``) printed text is never hard-wrapped, even when ``COLUMNS`` is set (rich
    would break lines at 80 columns), and tables get ``COLUMNS`` or a wide default. ``soft_wrap``: never hard-wrap
    printed text, on a terminal too."""
    piped = not _is_terminal(sys.stderr if stderr else sys.stdout)
    width = PIPED_WIDTH if piped and not os.environ.get("COLUMNS") else None
    return Console(stderr=stderr, width=width, soft_wrap=soft_wrap or piped)


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False
