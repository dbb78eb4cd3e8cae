"""``ctxrag serve-search``: search over HTTP (FastAPI, served by uvicorn), JSON in and out, an OpenAPI schema at
``/openapi.json`` (and pages at ``/docs``). ``POST /search`` and ``GET /indexes`` answer from ``WarmIndexes``; every
error is a JSON object ``{"error": {"kind", "message"}}`` with a 4xx status (5xx for a bug or an unreadable index).
With a token, every path needs ``Authorization: Bearer TOKEN``."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from ctxrag.services.requests import DEFAULT_K, MAX_K, MAX_QUERY_CHARS, SearchRequest, ServiceError
from ctxrag.services.warm import WarmIndexes

MAX_BODY_BYTES = 64 * 1024  # a request larger than this is refused before it is read (413)
log = logging.getLogger("ctxrag.services")


class SearchBody(BaseModel):
    query: str = Field(description=f"A question or keywords, 1 to {MAX_QUERY_CHARS:,} characters.")
    index: str | None = Field(None, description="The index to search; default: the service's --name.")
    k: int = Field(DEFAULT_K, description=f"How many hits, 1 to {MAX_K}.")
    strategy: str | None = Field(
        None, description="hybrid-score, hybrid, hybrid-doc, hybrid-weighted, bm25, vector; default: the index's."
    )
    path: str | None = Field(
        None, description="Only sources matching this gitignore-style pattern: src/, *.py, docs/**/*.md."
    )
    language: str | None = Field(None, description="Only sources in this language: python, typescript, markdown, ...")


class HitBody(BaseModel):
    rank: int
    source: str
    location: str
    lines: list[int] | None
    heading: str
    definitions: list[str]
    language: str | None
    score: float
    found_by: list[str]
    chunk_id: str
    text: str
    context: str


class SearchResult(BaseModel):
    index: str
    version: str
    strategy: str
    hits: list[HitBody]


class ErrorDetail(BaseModel):
    kind: str = Field(description="invalid_request, unknown_index, unauthorized, too_large, unavailable or internal")
    message: str


class ErrorBody(BaseModel):
    error: ErrorDetail


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody} for status in (400, 401, 404, 413, 422, 500, 503)
}


def error_response(status: int, kind: str, message: str) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"error": {"kind": kind, "message": message}}, status_code=status, headers=headers)


def build_app(warm: WarmIndexes, default_index: str, token: str | None) -> FastAPI:
    """The HTTP app: ``POST /search``, ``GET /indexes``, ``GET /health``; ``token`` (if any) required on every path."""
    from ctxrag import __version__

    app = FastAPI(title="ctxrag search", version=__version__, description=__doc__)

    @app.middleware("http")
    async def guard(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        if token is not None and not _authorized(request.headers.get("authorization", ""), token):
            return error_response(401, "unauthorized", "send 'Authorization: Bearer TOKEN' with the service's token")
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
            return error_response(413, "too_large", f"the request body is over {MAX_BODY_BYTES:,} bytes")
        return await call_next(request)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in item['loc'][1:]) or 'body'}: {item['msg']}" for item in error.errors()
        )
        return error_response(
            422, "invalid_request", problems or "the request body is not the JSON object /search takes"
        )

    @app.exception_handler(ServiceError)
    async def refused(request: Request, error: ServiceError) -> JSONResponse:
        return error_response(error.status, error.kind, error.message)

    @app.exception_handler(Exception)
    async def crashed(request: Request, error: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path)
        return error_response(
            500, "internal", "the request failed inside ctxrag (a bug); the service's log has the traceback"
        )

    @app.post("/search", response_model=SearchResult, responses=ERRORS)
    async def search(body: SearchBody) -> dict[str, Any]:
        """The best hits for a query: source, location, language, score and text of each."""
        # Awaited on the event loop: searches run on the one search thread, and no worker thread waits for them
        # (anyio's pool started and ended threads as the load varied; the service's memory grew for ~90 s with it).
        request = SearchRequest(
            body.query, body.index or default_index, body.k, body.strategy, body.path, body.language
        )
        return await asyncio.wrap_future(warm.submit(request))

    @app.get("/indexes", responses=ERRORS)
    def indexes() -> dict[str, Any]:
        """The indexes there are to search (as ``ctxrag list``)."""
        return {"indexes": warm.listing()}

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


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
