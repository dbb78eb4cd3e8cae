"""Source filters inside the search: the rows a path and language keep, decided once per document."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from ctxrag.storage.chunk_table import ChunkTable
from ctxrag.tasks.retrieval.filters import KEPT_FILTERS, DocumentRows, SourceFilter
from tests.equipment.fixed_searcher import make_searcher

SOURCES = ["src/a.py", "src/a.py", "src/deep/b.md", "setup.py", "docs/x/guide.md", "doc_1", "src/a.py"]


def rows_of(path: str | None, language: str | None) -> set[int]:
    table = ChunkTable(pa.table({"doc_id": SOURCES}))
    found = DocumentRows(table).rows(SourceFilter(path, language))
    assert found.mask.dtype == bool and len(found.mask) == len(SOURCES)
    assert set(found.documents) == {SOURCES[row] for row in np.flatnonzero(found.mask)}
    return {int(row) for row in np.flatnonzero(found.mask)}


@pytest.mark.parametrize(
    ("path", "language", "kept"),
    [
        ("src/", None, {0, 1, 2, 6}),
        ("*.py", None, {0, 1, 3, 6}),
        ("docs/**/*.md", None, {4}),
        (None, "markdown", {2, 4}),
        ("src/", "python", {0, 1, 6}),
        ("nothing/", None, set()),
    ],
)
def test_a_filter_keeps_the_rows_of_the_sources_it_matches(
    path: str | None, language: str | None, kept: set[int]
) -> None:
    assert rows_of(path, language) == kept


def test_no_filter_is_every_row_and_recent_filters_are_kept_bounded() -> None:
    searcher = make_searcher(["alpha beta", "beta gamma", "gamma delta"], doc_ids=["a.py", "b.md", "c.py"])
    assert searcher.rows_kept(SourceFilter()) is None
    first = searcher.rows_kept(SourceFilter(language="python"))
    assert first is searcher.rows_kept(SourceFilter(language="python"))  # kept, not decided again
    for number in range(KEPT_FILTERS):
        searcher.rows_kept(SourceFilter(path=f"dir{number}/"))
    assert first is not searcher.rows_kept(SourceFilter(language="python"))  # the oldest was dropped


def test_a_filtered_search_ranks_only_the_kept_rows_and_still_finds_k() -> None:
    """The filter is inside both retrievers: a filtered hybrid search returns k of the kept rows, ranked among
    themselves, not the unfiltered top k with the others dropped."""
    texts = [f"shared words {i}" for i in range(40)]
    doc_ids = [f"src/{i}.py" if i % 10 == 0 else f"docs/{i}.md" for i in range(40)]
    vector = np.linspace(1.0, 0.0, 40, dtype=np.float32)  # row 0 best
    searcher = make_searcher(texts, vector, doc_ids=doc_ids)
    allowed = searcher.rows_kept(SourceFilter(language="python"))
    for strategy in ("hybrid-score", "hybrid", "bm25", "vector"):
        from ctxrag.tasks.retrieval.search import StrategyConfig

        found = searcher.search("shared words", StrategyConfig.from_str(strategy), 3, allowed=allowed)
        assert [hit.row for hit in found] == [0, 10, 20], strategy
