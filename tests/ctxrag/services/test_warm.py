"""``WarmIndexes``, what both doors serve, in this process: what a search leaves behind in the process."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ctxrag.services.warm import WarmIndexes
from ctxrag.tasks.common.search_request import SearchRequest


def _fresh(text: str) -> str:
    """An equal string that is a new object, not interned: what a request parsed from JSON carries."""
    return "".join(["#", text])[1:]


def test_searches_add_no_string_to_pythons_interned_table(sample_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each string added to the interned table and dropped again regrows the table in time (~1.9 MB in a service's
    process, a new place of the heap each time): a warm service's memory grew in steps under load."""
    monkeypatch.setenv("CTXRAG_HOME", str(sample_home))
    warm = WarmIndexes(sample_home)
    assert warm.warm("sample") is None  # no problem to report
    queries = ["retry backoff delay", "where is the configuration read?", "how are tasks scheduled"]
    for query in queries:  # the first searches may intern what stays alive (the open index's paths)
        warm.search(SearchRequest(query=query, index="sample", k=5))
    intern: Callable[[str], str] = sys.intern
    added: list[str] = []

    def watching(text: str) -> str:
        copy = _fresh(text)
        if len(text) > 1 and intern(copy) is copy:  # no equal string was interned: this call adds one
            added.append(text)
        return intern(text)

    monkeypatch.setattr(sys, "intern", watching)
    for query in queries * 3:
        answer = warm.search(
            SearchRequest(query=_fresh(query), index=_fresh("sample"), k=5)
        ).to_dict()  # as doors send it
        assert answer["hits"] and all(hit["language"] for hit in answer["hits"])
        warm.search(
            SearchRequest(
                query=_fresh(query), index=_fresh("sample"), k=2, path=_fresh("*.py"), language=_fresh("python")
            )
        )
    warm._thread.shutdown()
    assert added == []
