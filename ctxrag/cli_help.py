"""How ``--help`` shows a flag. typer 0.29's help shows every option's type, a flag's as ``<bool>``, as if it took a
value (``--json <bool>``); here a flag (``--json``, ``--per-file``, ``--help``) shows none, as ``git`` and ``pip``
show theirs. Imported by the ``ctxrag`` command only, never by the Python API."""

from __future__ import annotations

from typing import Any

from typer.core import TyperOption

_typed = TyperOption.display_type_rich


def _shown_type(self: TyperOption, ctx: Any) -> str | None:
    return None if self.is_flag and self.metavar is None else _typed(self, ctx)


TyperOption.display_type_rich = _shown_type  # type: ignore[method-assign]
