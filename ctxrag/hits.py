"""Search results as the API and every door give them: ``Hit`` and ``SearchAnswer`` (``ctxrag.tasks.common.hits``),
and ``hits_of``, which reads a ranking's chunks out of an index, with where each is and its lines that match."""

from __future__ import annotations

from ctxrag.storage.chunk_table import ChunkTable
from ctxrag.tasks.common.hits import Hit, Location, MatchedLine, SearchAnswer
from ctxrag.tasks.retrieval.fusion import RankedRow
from ctxrag.tasks.retrieval.locate import Locator
from ctxrag.tasks.retrieval.matches import Nearest, matched_lines

__all__ = ["Hit", "Location", "MatchedLine", "SearchAnswer", "hits_of"]

COLUMNS = ["chunk_id", "doc_id", "chunk_index", "content", "context"]


def hits_of(
    chunks: ChunkTable, ranked: list[RankedRow], locator: Locator, query: str, nearest: Nearest | None = None
) -> list[Hit]:
    """``ranked`` rows of an index's ``chunks`` as hits, ranked from 1 (only their row groups are read), each with the
    lines that match ``query`` (``nearest``: how near in meaning to it a line is, for a hit no line of which has a
    query term)."""
    positions = [hit.row for hit in ranked]
    rows = [dict(zip(COLUMNS, values)) for values in zip(*(chunks.values(name, positions) for name in COLUMNS))]
    starts = [locator.first_line(row) for row in positions]
    matches = matched_lines([row["content"] for row in rows], starts, query, nearest)
    return [
        Hit(rank=rank, score=hit.score, ranks=dict(hit.ranks), location=locator.location(hit.row), matches=lines, **row)
        for rank, (hit, row, lines) in enumerate(zip(ranked, rows, matches), start=1)
    ]
