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

from ctxrag.storage.chunk_table import ChunkTable
from ctxrag.tasks.common.bounded import keep
from ctxrag.tasks.common.hits import Location
from ctxrag.tasks.common.models import sha256_hex
from ctxrag.tasks.context.structure import MIN_NAME, enclosing_definitions, find_definitions, first_code_position


def definitions_in(text: str) -> tuple[str, ...]:
    """The names ``text``'s definition headers define, as written, once each (as the index's ``defines`` column,
    without lowercasing)."""
    return tuple(
        dict.fromkeys(found.name for found in find_definitions(text) if len(found.name.strip("_")) >= MIN_NAME)
    )


def line_span(start: int, text: str) -> tuple[int, int]:
    """The lines (1-based, inclusive) that ``text``'s non-blank part spans when ``text`` begins on line ``start``:
    the blank lines a chunk carries before or after its text are not counted."""
    lead = len(text) - len(text.lstrip())
    return start + text.count("\n", 0, lead), start + text.count("\n", 0, len(text.rstrip()))


KEPT_ROWS = 4_096  # locations kept after they are worked out (the oldest dropped): a service's memory stays bounded
KEPT_DOCUMENTS = 1_024  # documents' line ranges kept likewise
SYMBOL_DEPTH = 3  # a symbol names at most this many nested definitions: Outer.Inner.method
MAX_SYMBOL_TEXT = 2_000_000  # a larger document's chunks get no symbol (its definitions are not scanned)


class Locator:
    """Locations of an index's rows; a document's line ranges are worked out on its first hit and kept (at most
    ``KEPT_DOCUMENTS`` documents and ``KEPT_ROWS`` locations, the oldest dropped first)."""

    def __init__(self, chunks: ChunkTable) -> None:
        self.chunks = chunks
        self._lines: dict[str, dict[int, Placed]] = {}
        self._located: dict[int, Location] = {}
        self._rows: dict[int, Placed | None] = {}  # each row's place, so a row met again reads no document id

    def warm(self) -> None:
        """Work out every row's location now, for an index small enough for them all to be kept: a long-lived
        process then holds from its start what its searches would otherwise add over its first thousands."""
        if self.chunks.num_rows <= KEPT_ROWS:
            for row in range(self.chunks.num_rows):
                self.location(row)

    def location(self, row: int) -> Location:
        found = self._located.get(row)
        if found is None:
            heading = self.chunks.value("heading", row) if "heading" in self.chunks.column_names else ""
            content = self.chunks.value("content", row)
            placed = self._placed(row)
            found = Location(
                heading=heading or "",
                definitions=() if heading else definitions_in(content),
                lines=placed.lines if placed else None,
                symbol="" if heading or placed is None else placed.symbol,
            )
            keep(self._located, row, found, KEPT_ROWS)
        return found

    def lines(self, row: int) -> tuple[int, int] | None:
        placed = self._placed(row)
        return placed.lines if placed else None

    def first_line(self, row: int) -> int | None:
        """The line its text starts on (blank lines included), where its lines are known."""
        placed = self._placed(row)
        return placed.start if placed else None

    def _placed(self, row: int) -> Placed | None:
        if row in self._rows:
            return self._rows[row]
        document = self.chunks.value("doc_id", row)
        placed = self._lines.get(document)
        if placed is None:
            placed = (
                self._document_lines(document_rows(self.chunks, document, row))
                if "doc_sha" in self.chunks.column_names
                else {}
            )
            keep(self._lines, document, placed, KEPT_DOCUMENTS)
        keep(self._rows, row, placed.get(row), KEPT_ROWS)
        return self._rows[row]

    def _document_lines(self, rows: list[int]) -> dict[int, Placed]:
        """Each of a document's ``rows``' line range and symbol, or none if their chunks joined are not the document."""
        contents = document_contents(self.chunks, rows)
        if contents is None:
            return {}
        text = "".join(contents)
        definitions = find_definitions(text) if len(text) <= MAX_SYMBOL_TEXT else []
        placed, start, offset = {}, 1, 0
        for row, content in zip(rows, contents):
            at, indent = first_code_position(text, offset)
            line_start = text.rfind("\n", 0, at) + 1  # a definition's offset is its line's start
            chain = enclosing_definitions(definitions, line_start, indent) if at < offset + len(content) else []
            placed[row] = Placed(line_span(start, content), start, ".".join(d.name for d in chain[-SYMBOL_DEPTH:]))
            start += content.count("\n")
            offset += len(content)
        return placed


def document_rows(chunks: ChunkTable, document: str, row: int) -> list[int]:
    """``document``'s rows, in chunk order: those next to ``row`` (it included), as a version's rows hold each
    document's chunks together (``ctxrag.tasks.stages.publish`` writes the corpus's chunks document by document).
    No other row is read: a million-row table's ``doc_id`` column made into Python values took 1.1 s a search."""
    first, last = row, row
    while first > 0 and chunks.value("doc_id", first - 1) == document:
        first -= 1
    while last + 1 < chunks.num_rows and chunks.value("doc_id", last + 1) == document:
        last += 1
    indexes = chunks.values("chunk_index", list(range(first, last + 1)))
    return [row for _, row in sorted(zip(indexes, range(first, last + 1)))]


def document_contents(chunks: ChunkTable, rows: list[int]) -> list[str] | None:
    """The texts of a document's ``rows`` (``document_rows``), or None unless, joined, they are the document itself
    (its hash is the index's ``doc_sha``): then its lines are the file's."""
    if not rows or "doc_sha" not in chunks.column_names:
        return None
    contents: list[str] = chunks.values("content", rows)
    document = chunks.value("doc_id", rows[0])
    return contents if sha256_hex(document, "".join(contents)) == chunks.value("doc_sha", rows[0]) else None


@dataclass(frozen=True)
class Placed:
    """Where a chunk is in its document: its line range, the line its text starts on, and its symbol."""

    lines: tuple[int, int]
    start: int
    symbol: str
