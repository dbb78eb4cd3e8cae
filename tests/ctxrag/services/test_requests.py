"""A service request's checks and filters, without a service: what each door refuses and keeps."""

from __future__ import annotations

import pytest

from ctxrag.hits import Hit
from ctxrag.services.requests import MAX_K, MAX_QUERY_CHARS, HitFilter, SearchRequest, ServiceError
from ctxrag.storage.errors import BusyError, CorruptIndexError, InvalidInput, UnknownIndexError


def hit(source: str) -> Hit:
    return Hit(rank=1, chunk_id=f"{source}#0", doc_id=source, chunk_index=0, score=1.0, content="text", context="")


@pytest.mark.parametrize(
    "request_",
    [
        SearchRequest("", "sample"),
        SearchRequest("x" * (MAX_QUERY_CHARS + 1), "sample"),
        SearchRequest("q", "sample", k=0),
        SearchRequest("q", "sample", k=MAX_K + 1),
        SearchRequest("q", "sample", k=True),
        SearchRequest("q", "Bad Name"),
        SearchRequest("q", "sample", strategy="nope"),
        SearchRequest("q", "sample", language="klingon"),
        SearchRequest("q", "sample", path="["),
        SearchRequest("q", "sample", path="!src/"),
        SearchRequest("q", "sample", path=" "),
    ],
)
def test_a_bad_field_is_an_invalid_request(request_: SearchRequest) -> None:
    with pytest.raises(ServiceError) as refused:
        request_.check()
    assert refused.value.kind == "invalid_request" and refused.value.status == 400 and refused.value.message


def test_the_limits_themselves_are_accepted() -> None:
    assert SearchRequest("x" * MAX_QUERY_CHARS, "sample", k=MAX_K, strategy="hybrid(rrf_k=10)").check() is None
    assert SearchRequest("q", "sample", k=1, language="python", path="src/").check() is not None


@pytest.mark.parametrize(
    "path, language, kept",
    [
        ("src/", None, {"src/a.py", "src/deep/b.md"}),
        ("*.py", None, {"src/a.py", "setup.py"}),
        ("docs/**/*.md", None, {"docs/x/guide.md"}),
        (None, "markdown", {"src/deep/b.md", "docs/x/guide.md"}),
        ("src/", "python", {"src/a.py"}),
    ],
)
def test_a_filter_keeps_the_sources_its_pattern_and_language_match(
    path: str | None, language: str | None, kept: set[str]
) -> None:
    sources = ["src/a.py", "src/deep/b.md", "setup.py", "docs/x/guide.md", "doc_1"]
    keep = HitFilter.of(path, language)
    assert keep is not None and {source for source in sources if keep.keeps(hit(source))} == kept


def test_user_errors_map_to_their_kinds() -> None:
    assert ServiceError.of(InvalidInput("bad")).status == 400
    assert ServiceError.of(UnknownIndexError("none")).status == 404
    assert ServiceError.of(CorruptIndexError("broken")).kind == "unavailable"
    assert ServiceError.of(BusyError("busy")).status == 503
