"""The search contract's one validation: strict fields, plain sentences, the JSON Schema every door publishes."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import jsonschema
import pytest

from ctxrag.storage.errors import InvalidInput
from ctxrag.tasks.common.search_request import (
    MAX_K,
    MAX_QUERY_CHARS,
    SearchKeywords,
    SearchRequest,
    request_schema,
)


def test_a_request_is_read_with_its_defaults_and_written_back() -> None:
    request = SearchRequest.from_dict({"query": "retry backoff", "k": 3}, defaults={"index": "sample"})
    assert (request.query, request.index, request.k, request.strategy, request.path) == (
        "retry backoff",
        "sample",
        3,
        None,
        None,
    )
    assert SearchRequest.from_dict(request.to_dict()) == request
    assert SearchRequest.from_dict({"query": "x", "index": "docs"}, defaults={"index": "sample"}).index == "docs"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"query": "x", "top_k": 2}, r"unknown field 'top_k' \(did you mean k\?\); the fields are: query, index, k, "),
        ({"query": "x", "limit": 2}, r"unknown field 'limit' \(did you mean k\?\)"),
        ({"query": "x", "similarity_top_k": 2}, r"did you mean k\?"),
        ({"qurey": "x"}, r"unknown field 'qurey' \(did you mean query\?\)"),
        ({"query": "x", "name": "sample"}, r"unknown field 'name' \(did you mean index\?\)"),
        ({"query": "x", "colour": "red"}, r"unknown field 'colour'; the fields are: query, index"),
        ({"k": 3}, r"query is missing: give a question or some words"),
        ({"query": "  "}, r"query is empty"),
        ({"query": 3}, r"query must be text, got 3"),
        ({"query": "x", "k": "five"}, r"k must be a whole number from 1 to 100, got 'five'"),
        ({"query": "x", "k": True}, r"k must be a whole number from 1 to 100, got true"),
        ({"query": "x", "k": 2.5}, r"k must be a whole number from 1 to 100, got 2.5"),
        ({"query": "x", "k": 0}, r"k must be from 1 to 100, got 0"),
        ({"query": "x", "k": MAX_K + 1}, r"k must be from 1 to 100, got 101"),
        ({"query": "x" * (MAX_QUERY_CHARS + 1)}, r"query is 2,001 characters; the most is 2,000"),
        ({"query": "x", "server_rrf": "yes"}, r"server_rrf must be true or false, got 'yes'"),
        ({"query": "x", "path": ["src/"]}, r"path must be text or null, got a list"),
        ({"query": "x", "language": "klingon"}, r"unknown language 'klingon'; known: .*python"),
        ({"query": "x", "path": "!src/"}, r"path '!src/': give one gitignore-style pattern"),
        ({"query": "x", "index": "Bad Name"}, r"invalid index name 'Bad Name'"),
        ({"query": "x", "strategy": "fastest"}, r"unknown strategy 'fastest'; choose one of: vector, bm25"),
        ({"query": "x", "strategy": "hybrid(rrf_k=x)"}, r"rrf_k='x' is not a number"),
    ],
)
def test_a_bad_request_is_one_sentence_naming_the_field(given: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInput, match=message) as raised:
        SearchRequest.from_dict(given)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("given", [["query"], "retry", None, 3])
def test_a_request_that_is_not_an_object_says_what_it_is(given: Any) -> None:
    with pytest.raises(InvalidInput, match=r"a search request is an object of fields \(query, index, k, .*\), not "):
        SearchRequest.from_dict(given)


def test_a_request_made_directly_is_checked_too() -> None:
    with pytest.raises(InvalidInput, match="k must be from 1 to 100, got 0"):
        SearchRequest(query="x", k=0)


def test_the_api_keywords_are_the_contract_s_other_fields() -> None:
    hints = typing.get_type_hints(SearchRequest)
    expected = {item.name: hints[item.name] for item in dataclasses.fields(SearchRequest)}
    for own in ("query", "index", "k", "strategy"):  # parameters of their own in ctxrag.search and Index.search
        expected.pop(own)
    assert typing.get_type_hints(SearchKeywords) == expected


def test_the_schema_has_every_field_its_bounds_and_nothing_else() -> None:
    schema = request_schema()
    assert list(schema["properties"]) == [item.name for item in dataclasses.fields(SearchRequest)]
    assert schema["required"] == ["query"] and schema["additionalProperties"] is False
    assert schema["properties"]["k"] == {
        "type": "integer", "description": f"How many hits, 1 to {MAX_K}.", "default": 10, "minimum": 1, "maximum": MAX_K,
    }  # fmt: skip
    assert schema["properties"]["query"]["minLength"] == 1
    assert schema["properties"]["query"]["maxLength"] == MAX_QUERY_CHARS
    assert schema["properties"]["path"]["type"] == ["string", "null"]
    assert all(described["description"] for described in schema["properties"].values())


@pytest.mark.parametrize(
    "given",
    [
        {"query": "retry"},
        {"query": "retry", "k": 100, "path": "src/", "language": "python", "server_rrf": False},
        {"query": "retry", "k": 0},
        {"query": "retry", "k": "3"},
        {"query": "retry", "top_k": 3},
        {"query": ""},
        {"k": 3},
        {"query": "retry", "rerank": None},
    ],
)
def test_the_schema_and_the_validation_agree_on_shapes(given: dict[str, Any]) -> None:
    """What JSON Schema refuses the contract refuses (beyond it, the contract also checks names it knows: a
    language, a pattern, a strategy, an index name)."""
    try:
        jsonschema.validate(given, request_schema())
        schema_takes = True
    except jsonschema.ValidationError:
        schema_takes = False
    try:
        SearchRequest.from_dict(given)
        contract_takes = True
    except InvalidInput:
        contract_takes = False
    assert schema_takes == contract_takes
