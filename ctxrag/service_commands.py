"""``ctxrag mcp`` and ``ctxrag serve-search``: the search services' commands. Their libraries (``mcp``, FastAPI,
uvicorn) are imported only when a service starts, so ``ctxrag --help`` and ``ctxrag search`` stay fast."""

from __future__ import annotations

from pathlib import Path

import typer

from ctxrag.errors import user_errors
from ctxrag.storage.environment import ctxrag_home
from ctxrag.tasks.options import DEFAULT_NAME

DEFAULT_PORT = 8750


def mcp(
    name: str = typer.Option(
        DEFAULT_NAME, "--name", help="The index the search tool uses when the caller names none (warmed at start)."
    ),
    print_config: bool = typer.Option(
        False,
        "--print-config",
        help="Print the .mcp.json block for this install and home (stdout) and the `claude mcp add` line (stderr), "
        "then exit.",
    ),
) -> None:
    """Serve search as a Model Context Protocol server on stdin/stdout (for Claude Code, Claude Desktop, other agents)."""
    with user_errors():
        from ctxrag.storage.names import validate_name

        validate_name(name)
        if print_config:
            _print_config(name)
            return
    from ctxrag.services.mcp_server import serve_stdio
    from ctxrag.services.warm import WarmIndexes

    serve_stdio(WarmIndexes(ctxrag_home()), name)


def _print_config(name: str) -> None:
    """``ctxrag mcp --print-config``: the block on stdout (a whole ``.mcp.json``), the line on stderr."""
    import json

    from ctxrag.services.client_config import claude_mcp_add, mcp_json

    home = ctxrag_home()
    typer.echo(json.dumps(mcp_json(name, home), indent=2))
    typer.echo("# Claude Code, in your project's folder (or put the block above in its .mcp.json):", err=True)
    typer.echo(claude_mcp_add(name, home), err=True)


def serve_search(
    name: str = typer.Option(
        DEFAULT_NAME, "--name", help="The index /search uses when the request names none (warmed at start)."
    ),
    host: str = typer.Option("127.0.0.1", help="Address to listen on (0.0.0.0: every address of this machine)."),
    port: int = typer.Option(DEFAULT_PORT, min=1, max=65535, help="Port to listen on."),
    token_file: Path | None = typer.Option(
        None,
        "--token-file",
        help="Require the bearer token in this file (made there, mode 600, if it does not exist); or set "
        "CTXRAG_SEARCH_TOKEN. Default: the home's search-token file, made on first use.",
    ),
    no_token: bool = typer.Option(
        False, "--no-token", help="Require no token: every local user can search (loopback addresses only)."
    ),
) -> None:
    """Serve search over HTTP: POST /search, GET /indexes, the OpenAPI schema at /openapi.json; JSON hits. Every
    request needs 'Authorization: Bearer TOKEN' (the token in $CTXRAG_HOME/search-token) unless --no-token."""
    from ctxrag.services.listen import display_address, listening_socket
    from ctxrag.services.token import service_token

    with user_errors():
        from ctxrag.storage.names import validate_name

        validate_name(name)
        token = service_token(host, token_file, ctxrag_home(), no_token)
        listener = listening_socket(host, port)
    from ctxrag.services.http_server import serve_http
    from ctxrag.services.warm import WarmIndexes
    from ctxrag.tasks.common.display import console

    console(stderr=True, soft_wrap=True).print(
        f"serving search and its page on http://{display_address(host, port)} ({token.says}); Ctrl-C stops",
        highlight=False,
        markup=False,
    )
    serve_http(WarmIndexes(ctxrag_home()), name, token.value, listener)


def register(app: typer.Typer) -> None:
    """Add mcp and serve-search to the ``ctxrag`` command."""
    app.command("mcp")(mcp)
    app.command("serve-search")(serve_search)
