"""``ctxrag server start | status | stop``: the local Prefect server every ctxrag command uses, and the resident
searches ``ctxrag search`` leaves (``ctxrag.services.residents``). No Prefect import; the server code is imported by
these commands only, not by every command that registers them."""

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
    """The local Prefect server (address, pid, the auth string's file, the line to export for Prefect's own commands)
    and every resident search of yours (pid, home, indexes, memory, idle time); exit 1 when no Prefect server runs."""
    from ctxrag.prefect_commands.local_server import configured_api_url, find_server, prefect_home

    out.print(describe_residents(), highlight=False)  # first: the server's export line stays the last line
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


def describe_residents() -> str:
    """The resident searches of this user, one line each, and recent failed warm-ups."""
    from ctxrag.services.residents import failed_warmups, residents

    found = residents()
    lines = [f"resident searches: {len(found) or 'none'} (`ctxrag search` leaves one per home and settings; "
             "`ctxrag server stop` stops them)"]  # fmt: skip
    for resident in found:
        said = resident.status or {}
        indexes = ", ".join(f"{entry['name']} (version {entry['version']})" for entry in said.get("indexes", []))
        memory = f"{(said.get('rss_bytes') or resident.rss_bytes) / 1e6:.0f} MB"
        idle = (
            f"idle {said['idle_seconds'] / 60:.1f} of {said['idle_limit_seconds'] / 60:g} min"
            if "idle_seconds" in said
            else resident.state
        )
        lines.append(f"  pid {resident.pid}  home {resident.home}  indexes {indexes or '-'}  memory {memory}  {idle}")
    for note in failed_warmups():
        lines.append(
            f"  failed to warm up index {note.get('index')!r}: {note.get('reason')} (none is started for 5 min)"
        )
    return "\n".join(lines)


@server_app.command()
def stop() -> None:
    """Stop the local Prefect server (as `prefect server stop`; its runs stay in the database under PREFECT_HOME) and
    every resident search of yours (each finishes the search it is answering)."""
    from ctxrag.prefect_commands.local_server import prefect_home, stop_server
    from ctxrag.services.residents import stop_all

    if (server := stop_server(prefect_home())) is None:
        out.print("no local Prefect server was running", highlight=False)
    else:
        out.print(
            f"stopped the server at {server.ui_url} (pid {server.pid}, PREFECT_HOME {prefect_home()})", highlight=False
        )
    stopped = stop_all()
    if not stopped:
        out.print("no resident search was running", highlight=False)
    for resident, how in stopped:
        out.print(f"stopped the resident search of {resident.home} (pid {resident.pid}, {how})", highlight=False)
