"""Where a chunk is in its source, read off what the index already records: its heading path (Markdown, docs
corpora), the names its code defines, and its line range.

Line ranges need no stored column: a folder corpus's chunks are exact slices of their file
(``ctxrag.tasks.load.chunking``), so a chunk's first line is one past the line breaks of the chunks before it. That
holds only if the document's chunks, joined in order, are the document: the join's hash is checked against the
document's own (``doc_sha``), so a JSON corpus whose chunks are not slices of a text, or a file whose oversized run of
blank lines was dropped, gets no lines rather than wrong ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ctxrag.tasks.common.models import sha256_hex
from ctxrag.tasks.context.structure import MIN_NAME, find_definitions

SHOWN_DEFINITIONS = 2  # names a location's text shows; the rest are counted


@dataclass(frozen=True)
class Location:
    """Where a hit's text is in its source: ``heading`` (the heading path, ``"Install > From source"``; empty for
    code), ``definitions`` (the names its code defines, in order) and ``lines`` (first and last line, 1-based and
    inclusive, of its text in the source file; None where not known)."""

    heading: str = ""
    definitions: tuple[str, ...] = ()
    lines: tuple[int, int] | None = None

    def __str__(self) -> str:
        """``lines 12-30, backoff, delay_for +1`` or ``Install > From source``: what to show a person."""
        parts = [f"lines {self.lines[0]}-{self.lines[1]}" if self.lines else "", self.heading]
        if self.definitions:
            more = len(self.definitions) - SHOWN_DEFINITIONS
            parts.append(", ".join(self.definitions[:SHOWN_DEFINITIONS]) + (f" +{more}" if more > 0 else ""))
        return ", ".join(part for part in parts if part)

    def to_dict(self) -> dict[str, object]:
        """As ``ctxrag search --json`` prints it."""
        return {"heading": self.heading, "definitions": list(self.definitions), "lines": list(self.lines) if self.lines else None}


def definitions_in(text: str) -> tuple[str, ...]:
    """The names ``text``'s definition headers define, as written, once each (as the index's ``defines`` column,
    without lowercasing)."""
    return tuple(dict.fromkeys(found.name for found in find_definitions(text) if len(found.name.strip("_")) >= MIN_NAME))


def line_span(start: int, text: str) -> tuple[int, int]:
    """The lines (1-based, inclusive) that ``text``'s non-blank part spans when ``text`` begins on line ``start``:
    the blank lines a chunk carries before or after its text are not counted."""
    lead = len(text) - len(text.lstrip())
    return start + text.count("\n", 0, lead), start + text.count("\n", 0, len(text.rstrip()))


def values_at(column: pa.ChunkedArray, rows: list[int]) -> list[Any]:
    """``column``'s values at ``rows``, read one by one: ``take`` would make an index array, and pyarrow imports
    pandas (0.2 s of a search command) to make one from Python ints."""
    return [column[row].as_py() for row in rows]


class Locator:
    """Locations of an index's rows; a document's line ranges are worked out once, on its first hit."""

    def __init__(self, chunks: pa.Table) -> None:
        self.chunks = chunks
        self._documents: dict[str, list[int]] | None = None
        self._lines: dict[str, dict[int, tuple[int, int]]] = {}
        self._located: dict[int, Location] = {}

    def location(self, row: int) -> Location:
        if row not in self._located:
            heading = self.chunks["heading"][row].as_py() if "heading" in self.chunks.column_names else ""
            content = self.chunks["content"][row].as_py()
            self._located[row] = Location(heading=heading or "", definitions=() if heading else definitions_in(content), lines=self.lines(row))
        return self._located[row]

    def lines(self, row: int) -> tuple[int, int] | None:
        document = self.chunks["doc_id"][row].as_py()
        if document not in self._lines:
            self._lines[document] = self._document_lines(document)
        return self._lines[document].get(row)

    def _document_lines(self, document: str) -> dict[int, tuple[int, int]]:
        """Each of ``document``'s rows' line range, or none if its chunks joined are not the document."""
        if "doc_sha" not in self.chunks.column_names:
            return {}
        rows = self._rows_by_document().get(document, [])
        contents = values_at(self.chunks["content"], rows)
        if sha256_hex(document, "".join(contents)) != self.chunks["doc_sha"][rows[0]].as_py():
            return {}
        spans, start = {}, 1
        for row, content in zip(rows, contents):
            spans[row] = line_span(start, content)
            start += content.count("\n")
        return spans

    def _rows_by_document(self) -> dict[str, list[int]]:
        if self._documents is None:
            order: dict[str, list[tuple[int, int]]] = {}
            for row, (document, index) in enumerate(zip(self.chunks["doc_id"].to_pylist(), self.chunks["chunk_index"].to_pylist())):
                order.setdefault(document, []).append((index, row))
            self._documents = {document: [row for _, row in sorted(pairs)] for document, pairs in order.items()}
        return self._documents
