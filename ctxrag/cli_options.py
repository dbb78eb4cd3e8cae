"""A command's options made from an options dataclass (``ctxrag.tasks.options``): each flat option is a ``--flag``
with the field's description as its help, and the command receives the built object. A new index option is a field
there, and ``ctxrag index --help`` shows it. ``ctxrag search``'s flags are made likewise from the search contract
(``with_request``)."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import typer

from ctxrag.tasks.common.search_request import SearchRequest
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


def with_request(
    kind: type[SearchRequest], checked: Callable[[], AbstractContextManager[object]], parameter: str = "request"
) -> Callable[[Command], Command]:
    """Replace the command's ``parameter`` by the search contract's fields: ``query`` an argument, every other field
    an option (its flag and help from the field's metadata; ``k`` also ``-k``). The request is built and checked by
    the contract (``from_dict``) inside ``checked()``: a bad value is one line, exit code 2."""
    hints = typing.get_type_hints(kind)
    fields = dataclasses.fields(kind)

    def flag(item: dataclasses.Field[Any]) -> typer.models.ParameterInfo:
        described = item.metadata.get("description", "")
        if item.default is dataclasses.MISSING:
            return typer.Argument(..., help=described, metavar=item.name.upper(), show_default=False)
        names = [
            f"--{(item.metadata.get('flag') or item.name).replace('_', '-')}",
            *([f"-{item.name}"] if len(item.name) == 1 else []),
        ]
        return typer.Option(item.default, *names, help=described)

    def decorate(command: Command) -> Command:
        own = [
            item.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for item in inspect.signature(command, eval_str=True).parameters.values()
            if item.name != parameter
        ]
        added = [
            inspect.Parameter(
                item.name, inspect.Parameter.KEYWORD_ONLY, annotation=hints[item.name], default=flag(item)
            )
            for item in fields
        ]

        @functools.wraps(command)
        def run(**values: Any) -> Any:
            given = {item.name: values.pop(item.name) for item in fields}
            with checked():
                built = kind.from_dict(given)
            return command(**values, **{parameter: built})

        parameters = [*added, *own]
        run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        run.__annotations__ = {item.name: item.annotation for item in parameters}
        return run  # type: ignore[return-value]

    return decorate
