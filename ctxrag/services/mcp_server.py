"""``ctxrag mcp``: a Model Context Protocol server over stdio (the ``mcp`` SDK's ``MCPServer``) with two tools,
``search`` and ``list_indexes``, over ``WarmIndexes``. A bad request is a tool error result (``is_error``) whose text
says what was wrong; the server goes on answering."""

from __future__ import annotations

import threading
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from ctxrag.services.requests import DEFAULT_K, MAX_K, MAX_QUERY_CHARS, SearchRequest, ServiceError
from ctxrag.services.warm import WarmIndexes

INSTRUCTIONS = (
    "ctxrag searches local indexes of code and documents (built with `ctxrag index`). Call list_indexes to see them, "
    "then search with a question or keywords; each hit gives its source file, location (lines, heading, definitions), "
    "language, score and text."
)


def build_server(warm: WarmIndexes, default_index: str) -> MCPServer:
    """The MCP server: ``search`` (query, index, k, strategy, path, language) and ``list_indexes``."""
    from ctxrag import __version__

    server: MCPServer = MCPServer(name="ctxrag", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")
    read_only = ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )

    @server.tool(name="search", annotations=read_only)
    def search(
        query: Annotated[
            str,
            Field(description=f"What to look for: a question or keywords (at most {MAX_QUERY_CHARS:,} characters)."),
        ],
        index: Annotated[str, Field(description="The index to search (list_indexes names them).")] = default_index,
        k: Annotated[int, Field(description=f"How many hits, 1 to {MAX_K}.")] = DEFAULT_K,
        strategy: Annotated[
            str | None,
            Field(
                description="hybrid-score, hybrid, hybrid-doc, hybrid-weighted, bm25 or vector; default: the index's."
            ),
        ] = None,
        path: Annotated[
            str | None,
            Field(description="Only sources matching this gitignore-style pattern, e.g. src/, *.py, docs/**/*.md."),
        ] = None,
        language: Annotated[
            str | None, Field(description="Only sources in this language, e.g. python, typescript, markdown.")
        ] = None,
    ) -> dict[str, Any]:
        """Search an index of code and documents; the best hits first, each with source, location, language, score and text."""
        try:
            return warm.search(
                SearchRequest(query=query, index=index, k=k, strategy=strategy, path=path, language=language)
            )
        except ServiceError as error:
            raise ToolError(f"{error.kind}: {error.message}") from None

    @server.tool(name="list_indexes", annotations=read_only)
    def list_indexes() -> dict[str, Any]:
        """The indexes there are to search: name, documents, chunks, contextualizer, strategy, version, created, source."""
        try:
            return {"indexes": warm.listing()}
        except ServiceError as error:
            raise ToolError(f"{error.kind}: {error.message}") from None

    return server


def serve_stdio(warm: WarmIndexes, default_index: str) -> None:
    """Serve MCP on stdin/stdout until the client closes them; the default index is warmed meanwhile (a first
    search waits for it instead of loading the model again)."""
    server = build_server(warm, default_index)
    threading.Thread(target=warm.warm, args=(default_index,), name="ctxrag-warm", daemon=True).start()
    server.run("stdio")
