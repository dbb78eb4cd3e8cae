"""``ctxrag config``: every ``CTXRAG_*`` setting's effective value and where it came from; and the check every command
runs first, so a bad value is one line naming its variable (exit code 2) before anything else happens."""

from __future__ import annotations

import json
import os

import typer

from ctxrag.errors import user_errors
from ctxrag.storage.settings import Settings, settings, variables

NOT_SET = "(not set)"


def check_settings() -> None:
    """Run before every command (the app's callback): every ``CTXRAG_*`` variable read and checked once."""
    with user_errors():
        settings()


def effective(chosen: Settings) -> dict[str, dict[str, str | None]]:
    """Each variable's effective value as text (None: not set and no default; a secret's: ``(hidden)``) and
    ``source``: ``environment`` or ``default``."""
    rows: dict[str, dict[str, str | None]] = {}
    for each in variables():
        name = each.metadata["variable"]
        value = chosen.shown(name)
        if name == "CTXRAG_PREFECT_SERVER" and not value:  # the command's default, as its commands would choose it
            from ctxrag.prefect_commands.server_mode import server_mode

            value = server_mode()
        rows[name] = {"value": value or None, "source": chosen.source(name)}
    return rows


def unknown_variables() -> list[str]:
    """``CTXRAG_*`` variables set in the environment that are no setting of ctxrag (a misspelt name, say)."""
    known = {each.metadata["variable"] for each in variables()}
    return sorted(name for name in os.environ if name.startswith("CTXRAG_") and name not in known)


def config(
    as_json: bool = typer.Option(
        False, "--json", help="Print {variable: {value, source}} and the unknown CTXRAG_ variables as JSON."
    ),
) -> None:
    """Show every CTXRAG_* setting's effective value and where it came from (environment or default); secrets hidden."""
    with user_errors():
        rows = effective(settings())
    unknown = unknown_variables()
    if as_json:
        print(json.dumps({"settings": rows, "unknown": unknown}))
        return
    from rich.table import Table

    from ctxrag.tasks.common.display import console

    table = Table(title="ctxrag settings (docs/cli.md#environment-variables)")
    for column in ("variable", "value", "from"):
        table.add_column(column, overflow="fold")
    for name, row in rows.items():
        table.add_row(name, row["value"] or NOT_SET, row["source"])
    console().print(table)
    if unknown:
        console(stderr=True).print(
            f"note: not ctxrag settings (misspelt?): {', '.join(unknown)}", highlight=False, markup=False
        )


DOCS_BEGIN = "<!-- ctxrag settings: made from ctxrag/storage/settings.py (ctxrag.config_command.docs_table) -->"
DOCS_END = "<!-- end of ctxrag settings -->"


def docs_table() -> str:
    """docs/cli.md's table of the ``CTXRAG_*`` variables, from the model (``tests/test_docs.py`` holds it equal)."""
    lines = ["| variable | default | what it sets |", "|---|---|---|"]
    for each in variables():
        meta = each.metadata
        lines.append(f"| `{meta['variable']}` | {meta['default']} | {meta['meaning']} |")
    return "\n".join([DOCS_BEGIN, *lines, DOCS_END])


def register(app: typer.Typer) -> None:
    app.callback()(check_settings)
    app.command("config")(config)
