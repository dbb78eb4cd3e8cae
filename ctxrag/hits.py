"""Search results as the API and every door give them: ``Hit`` and ``SearchAnswer`` (``ctxrag.tasks.common.hits``),
and ``hits_of``, which reads a ranking's chunks out of an index."""

from __future__ import annotations

from ctxrag.storage.chunk_table import ChunkTable
from ctxrag.tasks.common.hits import Hit, Location, SearchAnswer
from ctxrag.tasks.retrieval.fusion import RankedRow
from ctxrag.tasks.retrieval.locate import Locator

__all__ = ["Hit", "Location", "SearchAnswer", "hits_of"]

COLUMNS = ["chunk_id", "doc_id", "chunk_index", "content", "context"]


def hits_of(chunks: ChunkTable, ranked: list[RankedRow], locator: Locator) -> list[Hit]:
    """``ranked`` rows of an index's ``chunks`` as hits, ranked from 1 (only their row groups are read)."""
    positions = [hit.row for hit in ranked]
    rows = [dict(zip(COLUMNS, values)) for values in zip(*(chunks.values(name, positions) for name in COLUMNS))]
    return [
        Hit(rank=rank, score=hit.score, ranks=dict(hit.ranks), location=locator.location(hit.row), **row)
        for rank, (hit, row) in enumerate(zip(ranked, rows), start=1)
    ]
