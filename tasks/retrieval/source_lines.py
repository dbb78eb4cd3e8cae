"""A source's lines as the index holds them, for a reader who wants more than a hit's chunk: a folder corpus's chunks
are exact slices of their file (``locate``), so a document's rows joined in order are the file as it was indexed,
read from the index, never from the filesystem (which may have changed since, or be another machine's)."""

from __future__ import annotations

from dataclasses import dataclass

from ctxrag.storage.chunk_table import ChunkTable
from ctxrag.storage.errors import InvalidInput, UserError
from ctxrag.tasks.retrieval.locate import document_contents, document_rows

MAX_LINES = 1_000  # lines one answer holds at most (a reader asks for a hit's lines and some around them)


class UnknownSource(UserError, LookupError):
    """The index has no such source, or does not hold it as the lines of one file."""


@dataclass(frozen=True)
class SourceLines:
    """Lines ``first`` to ``last`` (1-based, inclusive) of ``source``, a file of ``total`` lines, as indexed."""

    source: str
    first: int
    last: int
    total: int
    lines: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "first": self.first,
            "last": self.last,
            "total": self.total,
            "lines": [{"line": number, "text": text} for number, text in enumerate(self.lines, start=self.first)],
        }


def find_row(chunks: ChunkTable, source: str) -> int | None:
    """A row of ``source``'s chunks, or None when the index has none (one pass over the memory-mapped ``doc_id``
    column, no Python value made of it)."""
    import pyarrow.compute as pc

    found = pc.index(chunks["doc_id"], source).as_py()
    return None if found is None or found < 0 else int(found)


def source_lines(chunks: ChunkTable, source: str, first: int = 1, last: int | None = None) -> SourceLines:
    """Lines ``first`` to ``last`` (None: the end; both clipped to the file, at most ``MAX_LINES``) of ``source``
    as the index holds it. ``UnknownSource`` when the index has no such file or does not hold its whole text (a JSON
    corpus's chunks need not be slices of one text); ``InvalidInput`` for a range that is not one."""
    if first < 1 or (last is not None and last < first):
        raise InvalidInput(f"lines {first}-{last if last is not None else ''}: give 1 <= first <= last")
    row = find_row(chunks, source)
    if row is None:
        raise UnknownSource(f"the index has no source {source!r}")
    contents = document_contents(chunks, document_rows(chunks, source, row))
    if contents is None:
        raise UnknownSource(
            f"the index does not hold {source!r} as the lines of one file (its chunks are not slices of it)"
        )
    text = "".join(contents)
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()  # the break after the last line opens no line of its own
    total = len(lines)
    if first > total:
        raise InvalidInput(f"{source} has {total} lines; line {first} is past its end")
    end = min(total, first + MAX_LINES - 1, last if last is not None else total)
    return SourceLines(source, first, end, total, tuple(lines[first - 1 : end]))
