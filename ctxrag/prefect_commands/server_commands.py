"""``ctxrag server start | status | stop``: the local Prefect server every ctxrag command uses (no Prefect import; the
server code is imported by these commands only, not by every command that registers them)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ctxrag.prefect_commands.errors import fail
from ctxrag.storage.errors import UserError
from ctxrag.tasks.common.display import console

if TYPE_CHECKING:
    from ctxrag.prefect_commands.local_server import LocalServer

server_app = typer.Typer(
    no_args_is_help=True, help="The local Prefect server every ctxrag command uses (see docs/operations.md)."
)
out = console(soft_wrap=True)  # addresses and commands to copy: never broken


def describe(server: LocalServer, home: Path) -> str:
    """The address, where the auth string is (the UI's login asks for it), and the one line that points Prefect's own
    commands at the server: it reads the auth string from its file, so nothing printed here holds the secret."""
    from ctxrag.prefect_commands.local_server import prefect_version
    from ctxrag.prefect_commands.server_auth import auth_file, export_line

    return (
        f"running: {server.ui_url} (pid {server.pid}, Prefect {prefect_version()}, PREFECT_HOME {home})\n"
        f"auth string (the UI's login; readable by you only): {auth_file(home)}\n"
        f"for Prefect's own commands (prefect deployment ls, prefect worker start, ...):\n"
        f"{export_line(server.api_url, home)}"
    )


@server_app.command()
def start() -> None:
    """Start the local Prefect server if it is not running (other commands start it too); print its address."""
    from ctxrag.prefect_commands.local_server import announce_started, ensure_server, prefect_home

    try:
        server, started = ensure_server()
    except UserError as error:
        fail(str(error))
    if started:
        announce_started(server, prefect_home())
    out.print(describe(server, prefect_home()), highlight=False)


@server_app.command()
def status() -> None:
    """The local Prefect server: address, pid, the auth string's file, and the line to export for Prefect's own commands (exit 1: none)."""
    from ctxrag.prefect_commands.local_server import configured_api_url, find_server, prefect_home

    if configured := configured_api_url():
        out.print(
            f"configured: PREFECT_API_URL={configured} (ctxrag uses it; no local server is started)", highlight=False
        )
        return
    if (server := find_server(prefect_home())) is None:
        out.print(
            "no local Prefect server running (the next `ctxrag index`, `evaluate`, `serve`, `deploy` or `trigger`, "
            "or `ctxrag server start`, starts one)",
            highlight=False,
        )
        raise typer.Exit(code=1)
    out.print(describe(server, prefect_home()), highlight=False)


@server_app.command()
def stop() -> None:
    """Stop the local Prefect server (as `prefect server stop`; its runs stay in the database under PREFECT_HOME)."""
    from ctxrag.prefect_commands.local_server import prefect_home, stop_server

    if (server := stop_server(prefect_home())) is None:
        out.print("no local Prefect server was running", highlight=False)
    else:
        out.print(
            f"stopped the server at {server.ui_url} (pid {server.pid}, PREFECT_HOME {prefect_home()})", highlight=False
        )
