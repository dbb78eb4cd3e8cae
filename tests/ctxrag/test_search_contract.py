"""A new search option is two edits: a field of the search contract (``SearchRequest``; its keyword line for type
checkers beside it) and the code that reads it. Every door is made from the contract, so a field added to it (here
``probe``, in a contract of the test's own) reaches each door's schema, is checked by each door with the same
sentence, and arrives in the request the search receives, with no edit to any door."""

from __future__ import annotations

import json
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
import typer
from fastapi.testclient import TestClient
from mcp.server.mcpserver.exceptions import ToolError
from typer.testing import CliRunner

from ctxrag.cli_options import with_request
from ctxrag.errors import user_errors
from ctxrag.services.http_server import build_app
from ctxrag.services.mcp_server import SearchServer
from ctxrag.services.resident import search_answer
from ctxrag.tasks.common.hits import SearchAnswer
from ctxrag.tasks.common.search_request import SearchRequest, option, request_schema


@dataclass(frozen=True, kw_only=True)
class Probe(SearchRequest):
    """The contract with one more option: the first of the two edits."""

    probe: int = field(default=3, metadata=option("A new option, 1 to 9.", minimum=1, maximum=9))


REFUSED = "probe must be from 1 to 9, got 0"


class Recorder:
    """What a door hands to the search (a service's ``WarmIndexes``): the requests it was given."""

    def __init__(self) -> None:
        self.requests: list[SearchRequest] = []

    def search(self, request: SearchRequest) -> SearchAnswer:
        self.requests.append(request)
        return SearchAnswer(request.index, "v1", "hybrid-score", [])

    def submit(self, request: SearchRequest) -> Future[SearchAnswer]:
        done: Future[SearchAnswer] = Future()
        done.set_result(self.search(request))
        return done

    def run(self, name: str, work: Any) -> Any:
        return work(self)

    def answer(self, request: SearchRequest) -> SearchAnswer:  # as an open Index answers
        return self.search(request)


def test_the_command_line_has_the_option_with_its_help_and_its_check() -> None:
    app = typer.Typer()
    given: list[SearchRequest] = []

    @app.command()
    @with_request(Probe, checked=lambda: user_errors())
    def search(request: SearchRequest = Probe(query="-")) -> None:
        given.append(request)

    shown = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert "--probe" in shown.output and "A new option, 1 to 9." in shown.output
    assert CliRunner().invoke(app, ["retry", "--probe", "5", "-k", "2"]).exit_code == 0
    assert isinstance(given[0], Probe) and given[0].probe == 5 and given[0].k == 2
    refused = CliRunner().invoke(app, ["retry", "--probe", "0"])
    assert refused.exit_code == 2 and REFUSED in refused.output


def test_mcp_lists_the_option_in_its_schema_and_checks_it() -> None:
    warm = Recorder()
    server = SearchServer(warm, "sample", contract=Probe)  # type: ignore[arg-type]

    async def call() -> None:
        (tool,) = [tool for tool in await server.list_tools() if tool.name == "search"]
        assert tool.input_schema["properties"]["probe"] == request_schema(Probe)["properties"]["probe"]
        assert tool.input_schema["properties"]["probe"]["maximum"] == 9
        answered = await server.call_tool("search", {"query": "retry", "probe": 4})
        assert answered.structured_content["index"] == "sample"  # type: ignore[union-attr]
        with pytest.raises(ToolError, match=REFUSED):
            await server.call_tool("search", {"query": "retry", "probe": 0})

    anyio.run(call)
    assert [request.probe for request in warm.requests] == [4]  # type: ignore[attr-defined]


def test_http_publishes_the_option_and_checks_it() -> None:
    warm = Recorder()
    client = TestClient(build_app(warm, "sample", None, contract=Probe))  # type: ignore[arg-type]
    body = client.get("/openapi.json").json()["paths"]["/search"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"]["properties"]["probe"]["minimum"] == 1
    assert client.post("/search", json={"query": "retry", "probe": 7}).status_code == 200
    refused = client.post("/search", json={"query": "retry", "probe": 0})
    assert refused.status_code == 400 and refused.json()["error"]["message"] == REFUSED
    assert [request.probe for request in warm.requests] == [7]  # type: ignore[attr-defined]


def test_the_resident_search_s_wire_carries_the_option_and_checks_it() -> None:
    warm = Recorder()
    line = json.dumps(Probe(query="retry", index="sample", probe=8).to_dict()).encode()
    assert search_answer(warm, line, contract=Probe)["index"] == "sample"  # type: ignore[arg-type]
    refused = search_answer(warm, json.dumps({"query": "retry", "probe": 0}).encode(), contract=Probe)  # type: ignore[arg-type]
    assert refused == {"error": {"kind": "invalid_request", "message": REFUSED}}
    assert [request.probe for request in warm.requests] == [8]  # type: ignore[attr-defined]


def test_mcp_searches_each_file_once_unless_asked_and_its_schema_says_so_http_every_chunk() -> None:
    warm = Recorder()
    server = SearchServer(warm, "sample")  # type: ignore[arg-type]

    async def call() -> None:
        (tool,) = [tool for tool in await server.list_tools() if tool.name == "search"]
        assert tool.input_schema["properties"]["per_file"]["default"] is True  # this door's default, published
        assert request_schema()["properties"]["per_file"]["default"] is False  # the contract's stays
        await server.call_tool("search", {"query": "retry"})
        await server.call_tool("search", {"query": "retry", "per_file": False})
        with pytest.raises(ToolError, match="per_file must be true or false"):
            await server.call_tool("search", {"query": "retry", "per_file": "yes"})

    anyio.run(call)
    assert [request.per_file for request in warm.requests] == [True, False]
    web = Recorder()  # HTTP keeps the contract's default: a program building a context reads the chunks' text
    client = TestClient(build_app(web, "sample", None))  # type: ignore[arg-type]
    body = client.get("/openapi.json").json()["paths"]["/search"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"]["properties"]["per_file"]["default"] is False
    assert client.post("/search", json={"query": "retry"}).status_code == 200
    assert client.post("/search", json={"query": "retry", "per_file": True}).status_code == 200
    assert [request.per_file for request in web.requests] == [False, True]
