"""A command's options made from an options dataclass (``ctxrag.tasks.options``): each flat option is a ``--flag``
with the field's description as its help, and the command receives the built object. A new index option is a field
there, and ``ctxrag index --help`` shows it."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import typer

from ctxrag.tasks.options import flat_options, from_flat

Command = TypeVar("Command", bound=Callable[..., Any])


def with_options(
    kind: type, checked: Callable[[], AbstractContextManager[object]], parameter: str = "options"
) -> Callable[[Command], Command]:
    """Replace the command's ``parameter`` by ``kind``'s flat options; the object is built inside ``checked()`` (the
    command's handling of user errors: a bad value is one line, exit code 2)."""
    flat = flat_options(kind)

    def decorate(command: Command) -> Command:
        own = [item for item in inspect.signature(command, eval_str=True).parameters.values() if item.name != parameter]
        added = [
            inspect.Parameter(
                option.name,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=option.annotation,
                default=typer.Option(
                    option.default, f"--{option.name.replace('_', '-')}", help=option.description, min=option.minimum
                ),
            )
            for option in flat
        ]

        @functools.wraps(command)
        def run(**values: Any) -> Any:
            chosen = {option.name: values.pop(option.name) for option in flat}
            chosen = {
                name: value if value != [] else None for name, value in chosen.items()
            }  # an unused repeatable option
            with checked():
                built: object = from_flat(kind, chosen, "ctxrag")
            return command(**values, **{parameter: built})

        parameters = [*own, *added]
        run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        run.__annotations__ = {item.name: item.annotation for item in parameters}
        return run  # type: ignore[return-value]

    return decorate
