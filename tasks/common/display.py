"""What people read: figures rounded to what a reader uses, and rich consoles that keep a line on one line when the
output goes to a file or a CI log. Machine outputs (``--json``, stored results) keep full precision: they do not
come through here."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleDimensions

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
        {
            column: figure(value, str(row.get("item", column)) if column == "value" else column)
            for column, value in row.items()
        }
        for row in rows
    ]


class ReadableConsole(Console):
    """A rich console that looks at its stream at each print: on a terminal, or with ``COLUMNS`` set, it wraps at
    that width, as rich does; written to a file or a pipe (a CI log, ``grep``) with no ``COLUMNS``, it never wraps
    (rich's default there is 80 columns). ``soft_wrap``: never hard-wrap printed text, on a terminal too."""

    def __init__(self, stderr: bool = False, soft_wrap: bool = False) -> None:
        super().__init__(stderr=stderr, soft_wrap=soft_wrap)
        self._never_wrap = soft_wrap

    def _piped(self) -> bool:
        return not _is_terminal(self.file) and not os.environ.get("COLUMNS")

    def _dimensions(self) -> ConsoleDimensions:
        return ConsoleDimensions(PIPED_WIDTH, 25) if self._piped() else Console.size.fget(self)  # type: ignore[attr-defined]

    size = property(_dimensions, Console.size.fset)  # type: ignore[assignment,attr-defined]

    def print(self, *objects: Any, soft_wrap: bool | None = None, **options: Any) -> None:  # type: ignore[override]
        super().print(
            *objects, soft_wrap=self._never_wrap or self._piped() if soft_wrap is None else soft_wrap, **options
        )


def console(stderr: bool = False, soft_wrap: bool = False) -> Console:
    """A ``ReadableConsole`` on stdout (or stderr)."""
    return ReadableConsole(stderr=stderr, soft_wrap=soft_wrap)


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False
