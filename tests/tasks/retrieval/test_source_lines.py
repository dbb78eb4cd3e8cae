"""A source's lines as the index holds them: its chunks joined in order, checked against the document's hash."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from ctxrag.storage.chunk_table import ChunkTable
from ctxrag.storage.errors import InvalidInput
from ctxrag.tasks.load.directory import load_directory
from ctxrag.tasks.retrieval.source_lines import SourceLines, UnknownSource, find_row, source_lines
from tests.helpers import SAMPLE_CORPUS
from tests.helpers import index_rows as rows

SOURCES = ("tinyq/retry.py", "docs/guide.md", "README.md")


@pytest.fixture(scope="module")
def sample_chunks() -> ChunkTable:
    """The sample corpus's chunks as index rows, each document's rows in reverse order (a backend may store them so)."""
    corpus = load_directory(SAMPLE_CORPUS)
    texts = {document.doc_id: document.content for document in corpus.documents}
    ordered = sorted(corpus.chunks, key=lambda chunk: (chunk.doc_id, -chunk.chunk_index))
    return ChunkTable(rows([(c.doc_id, c.chunk_index, c.heading, c.content) for c in ordered], texts))


@pytest.mark.parametrize("source", SOURCES)
def test_a_source_s_lines_are_its_file_s(sample_chunks: ChunkTable, source: str) -> None:
    on_disk = Path(SAMPLE_CORPUS, source).read_text().splitlines()
    whole = source_lines(sample_chunks, source)
    assert (whole.first, whole.last, whole.total) == (1, len(on_disk), len(on_disk))
    assert list(whole.lines) == on_disk
    some = source_lines(sample_chunks, source, 3, 7)
    assert (some.first, some.last, list(some.lines)) == (3, 7, on_disk[2:7])
    assert some.to_dict()["lines"][0] == {"line": 3, "text": on_disk[2]}


def test_a_range_is_clipped_to_the_file_and_to_the_most_one_answer_holds(
    sample_chunks: ChunkTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    total = len(Path(SAMPLE_CORPUS, "tinyq/retry.py").read_text().splitlines())
    assert source_lines(sample_chunks, "tinyq/retry.py", total - 1, total + 50).last == total
    assert (
        source_lines(sample_chunks, "tinyq/retry.py", total, total).lines[0]
        == source_lines(sample_chunks, "tinyq/retry.py").lines[-1]
    )
    monkeypatch.setattr("ctxrag.tasks.retrieval.source_lines.MAX_LINES", 3)
    assert source_lines(sample_chunks, "tinyq/retry.py", 5).to_dict()["last"] == 7


@pytest.mark.parametrize(
    ("first", "last", "says"),
    [(0, 3, "give 1 <= first <= last"), (5, 4, "give 1 <= first <= last"), (10_000, None, "is past its end")],
)
def test_a_range_that_is_not_one_is_refused(sample_chunks: ChunkTable, first: int, last: int | None, says: str) -> None:
    with pytest.raises(InvalidInput, match=says):
        source_lines(sample_chunks, "tinyq/retry.py", first, last)


def test_an_unknown_source_or_one_held_as_no_file_s_lines_is_named() -> None:
    table = rows(
        [("doc-1", 0, "Intro", "first part"), ("doc-1", 1, "More", "second part"), ("a.py", 0, "", "x = 1\n")],
        {"doc-1": "first part\n\nsecond part", "a.py": "x = 1\n"},
    )
    chunks = ChunkTable(table)
    with pytest.raises(UnknownSource, match="the index has no source 'b.py'"):
        source_lines(chunks, "b.py")
    with pytest.raises(UnknownSource, match="does not hold 'doc-1' as the lines of one file"):
        source_lines(chunks, "doc-1")
    assert source_lines(chunks, "a.py") == SourceLines("a.py", 1, 1, 1, ("x = 1",))
    assert find_row(chunks, "a.py") == 2 and find_row(ChunkTable(table.slice(0, 0)), "a.py") is None


def test_an_index_without_document_hashes_holds_no_lines() -> None:
    table = pa.table({"chunk_id": ["x#0"], "doc_id": ["x.py"], "chunk_index": [0], "content": ["x = 1\n"]})
    with pytest.raises(UnknownSource, match="does not hold 'x.py'"):
        source_lines(ChunkTable(table), "x.py")
