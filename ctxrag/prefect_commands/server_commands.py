"""``ctxrag server status`` and ``ctxrag server stop``: the local Prefect server that ``index`` and ``evaluate`` reuse."""

from __future__ import annotations

from pathlib import Path

import typer
from ctxrag.prefect_commands.local_server import LocalServer, find_server, server_homes, stop_server
from ctxrag.prefect_commands.server_process import LOG_FILE
from ctxrag.tasks.common.display import console

server_app = typer.Typer(no_args_is_help=True, help="The local Prefect server ctxrag starts and reuses (see docs/operations.md).")
out = console()
err = console(stderr=True)


def announce_started(server: LocalServer, home: Path) -> None:
    """Tell the user, once, in one line, that a command started the local server, where its UI is and how to stop it."""
    err.print(
        f"started a local Prefect server: UI at {server.ui_url} (pid {server.pid}, PREFECT_HOME {home}); later "
        "commands reuse it; stop it with `ctxrag server stop` or `prefect server stop`.", highlight=False, soft_wrap=True,
    )


def describe(server: LocalServer, home: Path) -> str:
    who = "started by ctxrag" if server.started_by == "ctxrag" else "started with `prefect server start`"
    lines = [f"running: {server.ui_url} (API {server.api_url}, pid {server.pid}, Prefect {server.prefect_version}, {who})",
             f"  PREFECT_HOME: {home} (log: {home / LOG_FILE})"]
    lines += [f"  ctxrag home: {seen}" for seen in server.homes]
    return "\n".join(lines)


@server_app.command()
def status() -> None:
    """List the local Prefect servers ctxrag uses: address, pid, Prefect version, ctxrag homes seen (exit 1: none)."""
    running = [(home, server) for home in server_homes() if (server := find_server(home)) is not None]
    if not running:
        out.print("no local Prefect server running (the next `ctxrag index` or `evaluate` starts one)", highlight=False)
        raise typer.Exit(code=1)
    for home, server in running:
        out.print(describe(server, home), highlight=False, soft_wrap=True)


@server_app.command()
def stop() -> None:
    """Stop the local Prefect server (its runs stay in the database under PREFECT_HOME)."""
    stopped = [(home, server) for home in server_homes() if (server := stop_server(home)) is not None]
    for home, server in stopped:
        out.print(f"stopped the server at {server.ui_url} (pid {server.pid}, PREFECT_HOME {home})", highlight=False)
    if not stopped:
        out.print("no local Prefect server was running", highlight=False)
