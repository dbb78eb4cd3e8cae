"""``ctxrag mcp`` as a client sees it: a real subprocess driven by the ``mcp`` SDK's own client over stdio."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from ctxrag.tasks.common.hits import ANSWER_SCHEMA
from ctxrag.tasks.common.search_request import request_schema
from tests.ctxrag.services.conftest import CTXRAG, publish, service_env

pytestmark = pytest.mark.slow
Session = Callable[[ClientSession], Awaitable[None]]


def with_server(home: Path, body: Session, name: str = "sample") -> None:
    """Start ``ctxrag mcp --name NAME`` on ``home``, run ``body`` with an initialized session, stop the server."""

    async def run() -> None:
        params = StdioServerParameters(
            command=CTXRAG[0], args=[*CTXRAG[1:], "mcp", "--name", name], env=service_env(home)
        )
        with anyio.fail_after(120):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                await body(session)

    anyio.run(run)


async def search(session: ClientSession, **arguments: Any) -> tuple[bool, Any]:
    """(is_error, the structured result or the error text) of one ``search`` call."""
    result = await session.call_tool("search", arguments)
    if result.is_error:
        return True, result.content[0].text  # type: ignore[union-attr]
    return False, result.structured_content


def test_the_tools_search_with_filters_and_list_indexes(sample_home: Path) -> None:
    async def body(session: ClientSession) -> None:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(tools) == {"search", "list_indexes"}
        schema = tools["search"].input_schema
        assert schema == {**request_schema(), "properties": {**schema["properties"]}}  # the contract's, with...
        assert schema["properties"]["index"]["default"] == "sample"  # ...this server's default index
        assert schema["properties"]["k"]["minimum"] == 1 and schema["properties"]["k"]["maximum"] == 100
        assert tools["search"].output_schema == ANSWER_SCHEMA
        failed, found = await search(session, query="retry backoff delay", k=3)
        assert not failed and found["index"] == "sample" and len(found["hits"]) == 3
        first = found["hits"][0]
        assert {"source", "location", "language", "score", "content"} <= set(first) and first["content"].strip()
        jsonschema.validate(found, ANSWER_SCHEMA)
        assert [hit["rank"] for hit in found["hits"]] == [1, 2, 3]
        failed, python = await search(session, query="retry backoff delay", k=5, language="python")
        assert not failed and python["hits"] and {hit["language"] for hit in python["hits"]} == {"python"}
        failed, docs = await search(session, query="retry backoff delay", k=5, path="docs/")
        assert not failed and docs["hits"] and all(hit["source"].startswith("docs/") for hit in docs["hits"])
        listed = await session.call_tool("list_indexes", {})
        assert not listed.is_error
        assert [entry["name"] for entry in listed.structured_content["indexes"]] == ["sample"]  # type: ignore[index]
        assert json.loads(listed.content[0].text)["indexes"][0]["chunks"] > 0  # type: ignore[union-attr]

    with_server(sample_home, body)


BAD_INPUT = [  # (arguments, what the error says): the contract's sentences, the same at every door (HTTP reads these too)
    ({"query": "retry", "index": "no-such-index"}, "no index named 'no-such-index'"),
    ({"query": "retry", "index": "Not A Name"}, "invalid index name"),
    ({"query": ""}, "query is empty"),
    ({"query": "   "}, "query is empty"),
    ({"query": "retry " * 500}, "the most is 2,000"),
    ({"query": "retry", "k": 0}, "k must be from 1 to 100, got 0"),
    ({"query": "retry", "k": 101}, "k must be from 1 to 100, got 101"),
    ({"query": "retry", "k": "many"}, "k must be a whole number from 1 to 100, got 'many'"),
    ({"query": "retry", "k": 2.5}, "k must be a whole number from 1 to 100, got 2.5"),
    ({"query": "retry", "top_k": 2}, "unknown field 'top_k' (did you mean k?)"),
    ({"query": "retry", "similarity_top_k": 2}, "(did you mean k?)"),
    ({"query": "retry", "strategy": "telepathy"}, "unknown strategy 'telepathy'"),
    ({"query": "retry", "strategy": "hybrid(rrf_k=x)"}, "is not a number"),
    ({"query": "retry", "language": "klingon"}, "unknown language 'klingon'"),
    ({"query": "retry", "path": "["}, "not a valid gitignore-style pattern"),
    ({"query": "retry", "path": ""}, "give one gitignore-style pattern"),
    ({"query": "retry", "path": 5}, "path must be text or null, got 5"),
    ({"k": 3}, "query is missing"),
]


def test_each_bad_input_is_a_tool_error_and_the_server_answers_after_it(sample_home: Path) -> None:
    """One server takes every bad request in turn, each followed by a good one it must still answer."""
    answers: list[tuple[dict[str, Any], bool, str, int]] = []

    async def body(session: ClientSession) -> None:
        for arguments, _ in BAD_INPUT:
            failed, text = await search(session, **arguments)
            good_failed, found = await search(session, query="retry backoff delay", k=2)
            answers.append((arguments, failed, str(text), -1 if good_failed else len(found["hits"])))

    with_server(sample_home, body)
    assert len(answers) == len(BAD_INPUT)
    for (arguments, failed, text, hits_after), (_, says) in zip(answers, BAD_INPUT):
        assert failed and says in text, (arguments, text)
        assert hits_after == 2, f"no answer after {arguments}"


def test_a_promoted_version_is_searched_without_a_restart(changing_home: tuple[Path, Path]) -> None:
    home, corpus = changing_home
    word = "zanzibarquux"

    async def body(session: ClientSession) -> None:
        failed, before = await search(session, query=word, k=1, strategy="bm25")
        assert not failed and all(word not in hit["content"] for hit in before["hits"])
        (corpus / "docs" / "guide.md").write_text(
            (corpus / "docs" / "guide.md").read_text() + f"\n\n## Islands\n\nThe {word} queue.\n"
        )
        version = await anyio.to_thread.run_sync(publish, corpus, home)
        failed, after = await search(session, query=word, k=1, strategy="bm25")
        assert not failed and after["version"] == version != before["version"]
        assert word in after["hits"][0]["content"] and after["hits"][0]["source"] == "docs/guide.md"

    with_server(home, body)
