"""``ctxrag serve-search``'s search page: ``GET /`` serves one page (``page/``: HTML, a style sheet and a script,
shipped as package data; no build step, nothing fetched from elsewhere), which reads ``/indexes`` and ``/search`` and
the two paths added here: ``GET /lines`` (a source's lines as the index holds them, around a hit) and ``GET
/evaluation`` (the index's latest evaluation run: its metrics, and its chart at ``/evaluation/chart``).

The page and its two files carry no data, so they are served without the token; every data path needs it. The page
asks the user for it once and keeps it in the tab's ``sessionStorage`` (docs/decisions.md, "A search page"). Query
parameters are checked as the search contract checks a request: an unknown one is named, a bad value is one sentence,
every error the service's error object."""

from __future__ import annotations

import asyncio
import difflib
from collections.abc import Mapping
from functools import cache
from html import escape
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, Response

from ctxrag.services.requests import ServiceError
from ctxrag.services.warm import WarmIndexes
from ctxrag.storage.errors import UserError

FILES = Path(__file__).with_name("page")
ASSETS = {
    "/page.js": ("page.js", "text/javascript; charset=utf-8"),
    "/page.css": ("page.css", "text/css; charset=utf-8"),
}
PUBLIC = frozenset({"/", *ASSETS})  # GET of these needs no token: they hold no data
# The page runs only its own script and style, talks only to this service, and cannot be framed.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
CHART_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
    "X-Content-Type-Options": "nosniff",
}
MAX_SOURCE_CHARS = 1_000
INDEX = "The index (default: the one the service was started with, --name)."
LINES_PARAMETERS = {
    "index": INDEX,
    "source": "The file, as a hit names it (its source).",
    "first": "The first line, 1-based (default 1).",
    "last": "The last line (default: the file's last; at most 1,000 lines are returned).",
}
EVALUATION_PARAMETERS = {"index": INDEX}
CHART_PARAMETERS = {"index": INDEX, "run": "The run, as /evaluation names it (its run)."}


def is_public(method: str, path: str) -> bool:
    """True for the page and its files, which every local user may fetch (they hold no data)."""
    return method == "GET" and path in PUBLIC


@cache
def page_html() -> str:
    """The page, with the strategies the search contract knows as the strategy menu's choices."""
    from ctxrag.tasks.common.strategies import Strategy

    options = "\n".join(
        f'        <option value="{escape(strategy.value)}">{escape(strategy.value)}</option>' for strategy in Strategy
    )
    return (FILES / "index.html").read_text().replace("        <!-- strategies -->", options)


def add_page(app: FastAPI, warm: WarmIndexes, default_index: str, errors: Mapping[int | str, Any]) -> None:
    """Add ``/``, its files, ``/lines``, ``/evaluation`` and ``/evaluation/chart`` to the service's ``app``."""

    @app.get("/", include_in_schema=False)
    def page() -> HTMLResponse:
        return HTMLResponse(page_html(), headers=PAGE_HEADERS)

    for path, (name, media_type) in ASSETS.items():
        app.add_api_route(path, _asset(name, media_type), methods=["GET"], include_in_schema=False)

    @app.get("/lines", responses=dict(errors), openapi_extra=_parameters_schema(LINES_PARAMETERS, required={"source"}))
    async def lines(request: Request) -> dict[str, Any]:
        """Lines of a source as the index holds it (the file as indexed, joined from its chunks; never read from the
        disk): ``{index, version, source, first, last, total, lines: [{line, text}]}``."""
        given = _given(request, LINES_PARAMETERS)
        name = _index(given, default_index)
        source = given.get("source", "")
        if not source.strip() or len(source) > MAX_SOURCE_CHARS:
            raise ServiceError("invalid_request", f"source: give a hit's source, 1 to {MAX_SOURCE_CHARS:,} characters")
        first, last = _whole(given, "first") or 1, _whole(given, "last")
        try:
            version, found = await asyncio.wrap_future(
                warm.submit_work(name, lambda index: (index.version, index.lines(source, first, last)))
            )
        except UserError as error:
            raise _service_error(error) from None
        return {"index": name, "version": version, **found.to_dict()}

    @app.get("/evaluation", responses=dict(errors), openapi_extra=_parameters_schema(EVALUATION_PARAMETERS))
    def evaluation(request: Request) -> dict[str, Any]:
        """The index's latest evaluation run (``ctxrag evaluate``): its evaluation set, version, strategies and
        metrics, and whether it has a chart; ``run`` is null when the index has none."""
        from ctxrag.tasks.evaluation.runs import latest_run

        name = _index(_given(request, EVALUATION_PARAMETERS), default_index)
        _known(warm, name)
        found = latest_run(warm.home, name)
        return {"index": name, "run": found.to_dict() if found else None}

    @app.get("/evaluation/chart", responses=dict(errors), openapi_extra=_parameters_schema(CHART_PARAMETERS, {"run"}))
    def chart(request: Request) -> Response:
        """An evaluation run's chart (SVG): the metrics of every strategy it scored."""
        from ctxrag.tasks.evaluation.runs import run_chart

        given = _given(request, CHART_PARAMETERS)
        name = _index(given, default_index)
        _known(warm, name)
        found = run_chart(warm.home, name, given.get("run", ""))
        if found is None:
            raise ServiceError(
                "not_found", f"index {name!r} has no evaluation run {given.get('run', '')!r} with a chart"
            )
        return Response(found.read_bytes(), media_type="image/svg+xml", headers=CHART_HEADERS)


def _asset(name: str, media_type: str) -> Any:
    body = (FILES / name).read_bytes()

    def asset() -> Response:
        return Response(body, media_type=media_type, headers=PAGE_HEADERS)

    return asset


def _given(request: Request, known: Mapping[str, str]) -> dict[str, str]:
    """The request's query parameters, each known and given once."""
    given = request.query_params
    for name in given:
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
            meant = f" (did you mean {close[0]}?)" if close else ""
            raise ServiceError(
                "invalid_request", f"unknown parameter {name[:40]!r}{meant}; the parameters are: {', '.join(known)}"
            )
        if len(given.getlist(name)) > 1:
            raise ServiceError("invalid_request", f"{name} is given {len(given.getlist(name))} times: give it once")
    return dict(given)


def _index(given: Mapping[str, str], default: str) -> str:
    from ctxrag.storage.names import validate_name

    name = given.get("index") or default
    try:
        return validate_name(name)
    except UserError as error:
        raise ServiceError("invalid_request", str(error)) from None


def _whole(given: Mapping[str, str], name: str) -> int | None:
    value = given.get(name)
    if value is None:
        return None
    if not value.isascii() or not value.isdigit() or int(value) < 1:
        raise ServiceError("invalid_request", f"{name} must be a whole number from 1, got {value[:40]!r}")
    return int(value)


def _known(warm: WarmIndexes, name: str) -> None:
    """Nothing for an index the home has; else the unknown index's error (naming the indexes there are)."""
    from ctxrag.storage.index_store import IndexStore

    store = IndexStore(warm.home)
    try:
        if store.live_version(name) is None:
            store.open(name)  # raises UnknownIndexError, naming the indexes there are
    except UserError as error:
        raise _service_error(error) from None


def _service_error(error: UserError) -> ServiceError:
    from ctxrag.tasks.retrieval.source_lines import UnknownSource

    if isinstance(error, UnknownSource):
        return ServiceError("not_found", str(error))
    return ServiceError.of(error)


def _parameters_schema(
    described: Mapping[str, str], required: set[str] | frozenset[str] = frozenset()
) -> dict[str, Any]:
    """OpenAPI's description of a path's query parameters (they are read and checked by ``_given``)."""
    return {
        "parameters": [
            {
                "name": name,
                "in": "query",
                "required": name in required,
                "description": text,
                "schema": {"type": "integer", "minimum": 1} if name in {"first", "last"} else {"type": "string"},
            }
            for name, text in described.items()
        ]
    }
