"""Where a chunk is in its source: heading, defined names and line range, from what the index records."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from ctxrag.storage.chunk_table import ChunkTable
from ctxrag.tasks.load.directory import load_directory
from ctxrag.tasks.retrieval.locate import Location, Locator, definitions_in, line_span
from tests.helpers import SAMPLE_CORPUS
from tests.helpers import index_rows as rows


def test_a_span_leaves_out_the_blank_lines_a_chunk_carries() -> None:
    assert line_span(1, "def f():\n    pass\n") == (1, 2)
    assert line_span(10, "\n\ndef g():\n    return 1\n\n\n") == (12, 13)
    assert line_span(5, "one line") == (5, 5)


def test_lines_count_the_chunks_before_in_document_order_whatever_the_row_order() -> None:
    text = "import os\n\n\ndef first():\n    pass\n\n\ndef second():\n    return 2\n"
    parts = ["import os\n\n\n", "def first():\n    pass\n\n\n", "def second():\n    return 2\n"]
    assert "".join(parts) == text
    table = rows([("a.py", 2, "", parts[2]), ("a.py", 0, "", parts[0]), ("a.py", 1, "", parts[1])], {"a.py": text})
    locator = Locator(ChunkTable(table))
    assert [locator.lines(row) for row in range(3)] == [(8, 9), (1, 1), (4, 5)]
    assert locator.location(0) == Location(definitions=("second",), lines=(8, 9), symbol="second")
    assert [locator.first_line(row) for row in range(3)] == [8, 1, 4]  # where each text starts, blank lines included


def test_no_lines_when_the_chunks_joined_are_not_the_document() -> None:
    table = rows(
        [("doc-1", 0, "Intro", "first part"), ("doc-1", 1, "Intro > More", "second part")],
        {"doc-1": "first part\n\nsecond part"},
    )
    located = Locator(ChunkTable(table)).location(1)
    assert located == Location(heading="Intro > More", lines=None)  # a heading: its definitions are not looked for
    assert str(located) == "Intro > More" and located.to_dict() == {
        "heading": "Intro > More",
        "definitions": [],
        "lines": None,
        "symbol": "",
    }


def test_an_index_without_the_columns_gives_what_it_can() -> None:
    table = pa.table(
        {"chunk_id": ["x#0"], "doc_id": ["x"], "chunk_index": [0], "content": ["class Widget:\n    pass\n"]}
    )
    assert Locator(ChunkTable(table)).location(0) == Location(definitions=("Widget",))


def test_names_keep_their_case_and_the_text_names_the_first_two() -> None:
    assert definitions_in("class RetryPolicy:\n    def delay_for(self):\n        pass\n    def _x(self): pass\n") == (
        "RetryPolicy",
        "delay_for",
    )
    assert str(Location(definitions=("a_b", "c_d", "e_f", "g_h"), lines=(3, 9))) == "lines 3-9, a_b, c_d +2"
    assert str(Location()) == ""


def test_a_symbol_names_the_definitions_around_a_chunk() -> None:
    text = (
        'import os\n\n\nclass Store:\n    """A store."""\n\n    def put(self, item):\n        return item\n\n'
        "    def get(self):\n        return 1\n\n\nclass Other:\n    pass\n"
    )
    cuts = [0, text.index("    def put"), text.index("    def get"), text.index("class Other"), len(text)]
    parts = [text[start:end] for start, end in zip(cuts, cuts[1:])]
    table = rows([("s.py", number, "", part) for number, part in enumerate(parts)], {"s.py": text})
    locator = Locator(ChunkTable(table))
    assert [locator.location(row).symbol for row in range(4)] == ["", "Store.put", "Store.get", "Other"]
    assert locator.location(0).name == "Store"  # module-level code: no symbol, the first name it defines
    assert locator.location(1).lines == (7, 8)


@pytest.mark.parametrize("relative", ["tinyq/retry.py", "docs/guide.md", "README.md"])
def test_every_sample_chunk_s_lines_hold_its_text(relative: str) -> None:
    corpus = load_directory(SAMPLE_CORPUS)
    chunks = [chunk for chunk in corpus.chunks if chunk.doc_id == relative]
    document = next(document for document in corpus.documents if document.doc_id == relative)
    table = rows(
        [(chunk.doc_id, chunk.chunk_index, chunk.heading, chunk.content) for chunk in chunks],
        {relative: document.content},
    )
    lines = Path(SAMPLE_CORPUS, relative).read_text().splitlines()
    locator = Locator(ChunkTable(table))
    for row, chunk in enumerate(chunks):
        span = locator.lines(row)
        assert span is not None
        assert "\n".join(lines[span[0] - 1 : span[1]]) == chunk.content.strip()


def test_kept_locations_stay_under_their_bounds_and_a_small_index_is_located_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    documents = {f"m{at}.py": f"def f{at}():\n    return {at}\n" for at in range(12)}
    table = rows([(doc, 0, "", text) for doc, text in documents.items()], documents)
    expected = [Locator(ChunkTable(table)).location(row) for row in range(12)]
    monkeypatch.setattr("ctxrag.tasks.retrieval.locate.KEPT_ROWS", 5)
    monkeypatch.setattr("ctxrag.tasks.retrieval.locate.KEPT_DOCUMENTS", 4)
    bounded = Locator(ChunkTable(table))
    assert [bounded.location(row) for row in (*range(12), 0, 11)] == [*expected, expected[0], expected[11]]
    assert len(bounded._located) == 5 and len(bounded._lines) == 4
    bounded.warm()  # 12 rows, more than are kept: nothing located ahead
    assert len(bounded._located) == 5

    monkeypatch.setattr("ctxrag.tasks.retrieval.locate.KEPT_ROWS", 12)
    monkeypatch.setattr("ctxrag.tasks.retrieval.locate.KEPT_DOCUMENTS", 12)
    small = Locator(ChunkTable(table))
    small.warm()
    monkeypatch.setattr(ChunkTable, "values", lambda *args: pytest.fail("a location was worked out after warm()"))
    assert [small.location(row) for row in range(12)] == expected
