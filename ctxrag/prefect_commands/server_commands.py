"""``ctxrag server status`` and ``ctxrag server stop``: the local Prefect server that ``index`` and ``evaluate`` reuse."""

from __future__ import annotations

import typer
from rich.console import Console

from ctxrag.prefect_commands.local_server import LocalServer, prefect_home, running_server, stop_server

server_app = typer.Typer(no_args_is_help=True, help="The local Prefect server ctxrag starts and reuses (see docs/operations.md).")
out = Console()
err = Console(stderr=True)


def announce_started(server: LocalServer) -> None:
    """Tell the user, once, that a command started the local server and where its UI is."""
    err.print(
        f"started a local Prefect server at {server.ui_url} (UI and API, pid {server.pid}); later commands reuse it. "
        "`ctxrag server stop` stops it.", highlight=False, soft_wrap=True,
    )


@server_app.command()
def status() -> None:
    """Say whether ctxrag's local Prefect server runs, and where (exit code 1 when it does not)."""
    server = running_server(prefect_home())
    if server is None:
        out.print("no local Prefect server running (the next `ctxrag index` or `evaluate` starts one)", highlight=False)
        raise typer.Exit(code=1)
    out.print(f"running: {server.ui_url} (pid {server.pid}, Prefect {server.prefect_version})", highlight=False)


@server_app.command()
def stop() -> None:
    """Stop ctxrag's local Prefect server (its runs stay in the database under PREFECT_HOME)."""
    server = stop_server(prefect_home())
    out.print(f"stopped the server at {server.ui_url} (pid {server.pid})" if server else "no local Prefect server was running", highlight=False)
