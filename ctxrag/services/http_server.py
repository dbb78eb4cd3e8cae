"""``ctxrag serve-search``: search over HTTP (FastAPI, served by uvicorn), JSON in and out, an OpenAPI schema at
``/openapi.json`` (and pages at ``/docs``). ``POST /search`` and ``GET /indexes`` answer from ``WarmIndexes``; every
error is a JSON object ``{"error": {"kind", "message"}}`` with a 4xx status (5xx for a bug or an unreadable index).
With a token, every path needs ``Authorization: Bearer TOKEN``, but the search page's (``/`` and its two files, which
hold no data: ``ctxrag.services.page``, which also adds ``/lines`` and ``/evaluation``)."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import socket
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from ctxrag.services.page import add_page, is_public
from ctxrag.services.requests import STATUS, ServiceError, parsed
from ctxrag.services.warm import WarmIndexes
from ctxrag.tasks.common.hits import ANSWER_SCHEMA
from ctxrag.tasks.common.search_request import SearchRequest, request_schema

MAX_BODY_BYTES = 64 * 1024  # a request larger than this is refused before it is read (413)
log = logging.getLogger("ctxrag.services")


ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {"kind": {"type": "string", "enum": sorted(STATUS)}, "message": {"type": "string"}},
            "required": ["kind", "message"],
        }
    },
    "required": ["error"],
}
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {
        "description": "An error: its kind and a message.",
        "content": {"application/json": {"schema": ERROR_SCHEMA}},
    }
    for status in sorted(set(STATUS.values()))
}
SEARCH_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "The answer: the index, its version, the strategy, the hits.",
          "content": {"application/json": {"schema": ANSWER_SCHEMA}}},
    **ERRORS,
}  # fmt: skip


def error_response(status: int, kind: str, message: str) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"error": {"kind": kind, "message": message}}, status_code=status, headers=headers)


class Guard:
    """The token (where one is required) and the body's size, checked before any route sees a request: a pure ASGI
    middleware (Starlette's ``BaseHTTPMiddleware`` ran each request through a task group and memory streams)."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = self.refusal(scope) if scope["type"] == "http" else None
        await (refused or self.app)(scope, receive, send)

    def refusal(self, scope: Scope) -> JSONResponse | None:
        headers = Headers(scope=scope)
        if (
            self.token is not None
            and not is_public(scope["method"], scope["path"])
            and not _authorized(headers.get("authorization", ""), self.token)
        ):
            return error_response(401, "unauthorized", "send 'Authorization: Bearer TOKEN' with the service's token")
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
            return error_response(413, "too_large", f"the request body is over {MAX_BODY_BYTES:,} bytes")
        return None


def build_app(
    warm: WarmIndexes, default_index: str, token: str | None, contract: type[SearchRequest] = SearchRequest
) -> FastAPI:
    """The HTTP app: ``POST /search``, ``GET /indexes``, ``GET /health``, the search page (``/``, ``/lines``,
    ``/evaluation``); ``token`` (if any) required on every path but the page's own files."""
    from ctxrag import __version__

    app = FastAPI(title="ctxrag search", version=__version__, description=__doc__)
    app.add_middleware(Guard, token=token)

    @app.exception_handler(StarletteHTTPException)
    async def refused_by_routing(request: Request, error: StarletteHTTPException) -> JSONResponse:
        if error.status_code == 404:
            return error_response(
                404,
                "not_found",
                f"no {request.url.path} here; the paths are / (the search page), /search, /indexes, /lines, "
                f"/evaluation, /health and /docs",
            )
        if error.status_code == 405:
            return error_response(405, "method_not_allowed", f"{request.method} is not how {request.url.path} is asked")
        return error_response(error.status_code, "invalid_request", str(error.detail))

    @app.exception_handler(ServiceError)
    async def refused(request: Request, error: ServiceError) -> JSONResponse:
        return error_response(error.status, error.kind, error.message)

    @app.exception_handler(Exception)
    async def crashed(request: Request, error: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path)
        return error_response(
            500, "internal", "the request failed inside ctxrag (a bug); the service's log has the traceback"
        )

    @app.post(
        "/search",
        response_model=None,  # the answer's schema is the contract's (SEARCH_RESPONSES), not one made from a signature
        responses=SEARCH_RESPONSES,
        openapi_extra={
            "requestBody": {"required": True, "content": {"application/json": {"schema": request_schema(contract)}}}
        },
    )
    async def search(request: Request) -> JSONResponse:
        """The best hits for a query: source, location, language, score and text of each. The body is one JSON object
        (whatever its content type says); an unknown field is refused and named."""
        body = await _body(request)
        try:
            given = json.loads(body) if body.strip() else None
        except ValueError as error:
            raise ServiceError("invalid_request", f"the request body is not JSON ({error})") from None
        if given is None:
            raise ServiceError(
                "invalid_request", 'the request body must be a JSON object, e.g. {"query": "how are retries delayed?"}'
            )
        # Awaited on the event loop: searches run on the one search thread, and no worker thread waits for them
        # (anyio's pool started and ended threads as the load varied; the service's memory grew for ~90 s with it).
        answer = await asyncio.wrap_future(warm.submit(parsed(given, {"index": default_index}, contract)))
        return JSONResponse(answer.to_dict())  # as it is: FastAPI's jsonable_encoder walked its ~500 values (0.7 ms)

    @app.get("/indexes", responses=ERRORS)
    def indexes() -> dict[str, Any]:
        """The indexes there are to search (as ``ctxrag list``), and the one a request that names none searches."""
        return {"indexes": warm.listing(), "default": default_index}

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    add_page(app, warm, default_index, ERRORS)
    return app


async def _body(request: Request) -> bytes:
    """The request's body, read up to ``MAX_BODY_BYTES`` (a chunked body has no length to check beforehand)."""
    parts, size = [], 0
    async for part in request.stream():
        size += len(part)
        if size > MAX_BODY_BYTES:
            raise ServiceError("too_large", f"the request body is over {MAX_BODY_BYTES:,} bytes")
        parts.append(part)
    return b"".join(parts)


def _authorized(header: str, token: str) -> bool:
    scheme, _, given = header.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


def serve_http(warm: WarmIndexes, default_index: str, token: str | None, listener: socket.socket) -> None:
    """Warm the default index, then serve on ``listener`` (bound and listening already: ``services.listen``) until
    interrupted (uvicorn: one process, searches in its worker threads)."""
    import uvicorn

    warm.warm(default_index)
    config = uvicorn.Config(build_app(warm, default_index, token), log_level="warning", access_log=False)
    with contextlib.suppress(KeyboardInterrupt):  # as uvicorn.run: Ctrl-C is the way to stop
        uvicorn.Server(config).run(sockets=[listener])
