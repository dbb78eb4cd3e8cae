"""``ctxrag mcp``: a Model Context Protocol server over stdio (the ``mcp`` SDK's ``MCPServer``) with two tools,
``search`` and ``list_indexes``, over ``WarmIndexes``.

``search``'s input schema is the search contract's (``request_schema``: every field with its bounds, no other field)
and its output schema the answer's (``ANSWER_SCHEMA``); its arguments are checked by the contract itself, so an
unknown field names the one meant and a wrong type is one plain sentence. A bad request is a tool error result
(``is_error``) whose text says what was wrong; the server goes on answering.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from mcp.types import Tool as MCPTool

from ctxrag.services.requests import ServiceError, parsed
from ctxrag.services.warm import WarmIndexes
from ctxrag.tasks.common.hits import ANSWER_SCHEMA
from ctxrag.tasks.common.search_request import SearchRequest, request_schema

INSTRUCTIONS = (
    "ctxrag searches local indexes of code and documents (built with `ctxrag index`). Call list_indexes to see them, "
    "then search with a question or keywords; each hit gives its source file, location (lines, heading, definitions), "
    "language, score and text."
)
SEARCH_DESCRIPTION = (
    "Search an index of code and documents; the best hits first, each with its source, location, language, score "
    "and content. Each file comes once, at its best chunk, with the line ranges of its other matching chunks in "
    "`also` (per_file; false: every chunk, a file's several chunks each a hit). Filter by path (a gitignore-style "
    "pattern) or language."
)
# This door's own defaults beside its index (docs/decisions.md, "One file once"): an agent reads whole files, and
# each file once gave more distinct files and found the right one higher on the evaluation suite.
DEFAULTS: dict[str, Any] = {"per_file": True}
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


class SearchServer(MCPServer):
    """An MCP server whose ``search`` tool is the search contract's: listed with its schemas, and called with the
    caller's arguments as they came (the contract checks them; the SDK's own model of a signature would drop an
    unknown field)."""

    def __init__(self, warm: WarmIndexes, default_index: str, contract: type[SearchRequest] = SearchRequest) -> None:
        from ctxrag import __version__

        super().__init__(name="ctxrag", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")
        self.warm = warm
        self.default_index = default_index
        self.contract = contract
        self.defaults = {"index": default_index, **DEFAULTS}

    async def list_tools(self) -> list[MCPTool]:
        search = MCPTool(
            name="search",
            description=SEARCH_DESCRIPTION,
            input_schema=_with_defaults(request_schema(self.contract), self.defaults),
            output_schema=ANSWER_SCHEMA,
            annotations=READ_ONLY,
        )
        return [search, *await super().list_tools()]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        if name != "search":
            return await super().call_tool(name, arguments, context)
        try:
            request = parsed(arguments, self.defaults, self.contract)
            answer = (await asyncio.wrap_future(self.warm.submit(request))).to_dict()  # as the HTTP door: no anyio pool
        except ServiceError as error:
            raise ToolError(f"{error.kind}: {error.message}") from None
        return CallToolResult(content=[TextContent(type="text", text=json.dumps(answer))], structured_content=answer)


def _with_defaults(schema: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """The request schema with this server's own defaults (its index, ``DEFAULTS``)."""
    properties = {
        name: {**shown, "default": defaults[name]} if name in defaults else shown
        for name, shown in schema["properties"].items()
    }
    return {**schema, "properties": properties}


def build_server(warm: WarmIndexes, default_index: str) -> MCPServer:
    """The MCP server: ``search`` (the search contract's fields) and ``list_indexes``."""
    server = SearchServer(warm, default_index)

    @server.tool(name="list_indexes", annotations=READ_ONLY)
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
