"""What the user is shown for an error: one line for what they can act on, a traceback for a bug in ctxrag."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

from ctxrag.storage.errors import UserError
from ctxrag.storage.secrets import redact

# Errors the user can act on: shown as one line. Anything else is a bug in ctxrag and keeps its traceback. A new
# user-facing error subclasses UserError.
_ELASTICSEARCH_ERRORS = (("elastic_transport", "ApiError"), ("elastic_transport", "TransportError"))


def _loaded(module: str, name: str) -> type[BaseException] | None:
    found = getattr(sys.modules.get(module), name, None)
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


def user_message(error: BaseException) -> str | None:
    """The one line to show for an error the user can act on (a ``UserError``, an ``OSError`` naming its file, an
    Elasticsearch error); None for a bug in ctxrag (it keeps its traceback)."""
    elasticsearch = tuple(kind for kind in (_loaded(*name) for name in _ELASTICSEARCH_ERRORS) if kind)
    if elasticsearch and isinstance(error, elasticsearch):
        from ctxrag.storage.elasticsearch import describe_error

        return describe_error(error)  # type: ignore[arg-type]
    if isinstance(error, OSError) and not isinstance(error, UserError):
        if error.filename is None:
            return redact(str(error) or type(error).__name__)
        where = str(error.filename) + (f" -> {error.filename2}" if error.filename2 is not None else "")
        return redact(f"{where}: {error.strerror or error}")
    if isinstance(error, UserError):
        return redact(str(error) or type(error).__name__)
    return None


def fail(message: str, code: int = 2) -> NoReturn:
    """How every command reports what the user can fix: one line on stderr, no traceback, exit code ``code``."""
    import typer
    from rich.markup import escape

    from ctxrag.tasks.common.display import console

    console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    raise typer.Exit(code=code)


@contextmanager
def user_errors() -> Iterator[None]:
    """A user error raised in the block (``user_message``) becomes one line on stderr and exit code 2; anything else
    propagates with its traceback."""
    try:
        yield
    except Exception as error:
        message = user_message(error)
        if message is None:
            raise
        fail(message)
