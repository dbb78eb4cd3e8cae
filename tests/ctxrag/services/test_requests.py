"""A service's errors: each door's refusal of a bad request is the contract's sentence, under its kind and status."""

from __future__ import annotations

import pytest

from ctxrag.services.requests import ServiceError, parsed
from ctxrag.storage.errors import BusyError, CorruptIndexError, InvalidInput, UnknownIndexError


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"query": "q", "top_k": 2}, "unknown field 'top_k' (did you mean k?)"),
        ({"query": "q", "k": "2"}, "k must be a whole number from 1 to 100, got '2'"),
        ({"query": "q", "language": "klingon"}, "unknown language 'klingon'"),
        ("q", "a search request is an object of fields"),
    ],
)
def test_a_bad_request_is_an_invalid_request_with_the_contract_s_sentence(given: object, message: str) -> None:
    with pytest.raises(ServiceError) as refused:
        parsed(given, {"index": "sample"})
    assert refused.value.kind == "invalid_request" and refused.value.status == 400
    assert refused.value.message.startswith(message)
    assert refused.value.to_dict() == {"error": {"kind": "invalid_request", "message": refused.value.message}}


def test_a_good_request_takes_the_door_s_default_index() -> None:
    assert parsed({"query": "retry", "k": 3}, {"index": "sample"}).index == "sample"
    assert parsed({"query": "retry", "index": "docs"}, {"index": "sample"}).index == "docs"


def test_user_errors_map_to_their_kinds() -> None:
    assert ServiceError.of(InvalidInput("bad")).status == 400
    assert ServiceError.of(UnknownIndexError("none")).status == 404
    assert ServiceError.of(CorruptIndexError("broken")).kind == "unavailable"
    assert ServiceError.of(BusyError("busy")).status == 503
