"""Every command's ``--help``: each option with a description, and a flag shown as a flag (no ``<bool>``)."""

from __future__ import annotations

from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from ctxrag import cli


def commands() -> dict[str, Any]:
    """Every command of ``ctxrag``, by its full name (``server status``). (typer 0.29 carries its own click.)"""
    found: dict[str, Any] = {}

    def walk(command: Any, prefix: str) -> None:
        if hasattr(command, "commands"):
            for name, inner in command.commands.items():
                walk(inner, f"{prefix} {name}".strip())
        else:
            found[prefix] = command

    walk(typer.main.get_command(cli.app), "")
    return found


@pytest.mark.parametrize("name", sorted(commands()))
def test_every_option_says_what_it_does_and_flags_show_no_type(name: str) -> None:
    command = commands()[name]
    for param in command.params:
        if param.param_type_name == "option":
            assert param.help, f"ctxrag {name} {param.opts[0]}: no description"
    shown = CliRunner().invoke(cli.app, [*name.split(), "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0 and "<bool>" not in shown.output, shown.output
