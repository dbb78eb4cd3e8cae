"""Search results as the API and ``ctxrag search`` give them: ``Hit``, one ranked chunk that says where it is."""

from __future__ import annotations

from dataclasses import dataclass, field

from ctxrag.storage.chunk_table import ChunkTable
from ctxrag.tasks.common.languages import language_of
from ctxrag.tasks.retrieval.fusion import RankedRow
from ctxrag.tasks.retrieval.locate import Location, Locator

__all__ = ["Hit", "Location", "hits_of"]


@dataclass(frozen=True)
class Hit:
    """One search result: the chunk, its document, where it is in its source (``source``, ``location``), its score
    under the strategy, and the rank (1-based) each retriever gave it (``vector``, ``bm25``; ``rerank`` when
    reranked; ``rrf-server`` when the cluster fused)."""

    rank: int
    chunk_id: str
    doc_id: str
    chunk_index: int
    score: float
    content: str
    context: str
    ranks: dict[str, int] = field(default_factory=dict)
    location: Location = field(default_factory=Location)

    @property
    def source(self) -> str:
        """Where the chunk came from: the file's path relative to the corpus folder, or the document's id in a JSON
        corpus (its ``doc_id``)."""
        return self.doc_id

    @property
    def language(self) -> str | None:
        """The source file's language, from its name ("python", "typescript", "markdown", ..., "text" for other
        files); None when the source names no file (a JSON corpus's ``doc_id``)."""
        return language_of(self.doc_id)

    @property
    def found_by(self) -> list[str]:
        """The retrievers that found the chunk."""
        return sorted(self.ranks)

    def to_dict(self) -> dict[str, object]:
        """The hit as ``ctxrag search --json`` prints it (the score rounded to 6 places)."""
        return {
            "rank": self.rank,
            "chunk_id": self.chunk_id,
            "doc_id": self.doc_id,
            "chunk_index": self.chunk_index,
            "score": round(self.score, 6),
            "found_by": self.found_by,
            "context": self.context,
            "content": self.content,
            "source": self.source,
            "language": self.language,
            "location": self.location.to_dict(),
            "ranks": dict(self.ranks),
        }

    def __repr__(self) -> str:
        return (
            f"Hit(rank={self.rank}, source={self.source!r}, location={str(self.location)!r}, "
            f"score={self.score:.4f}, found_by={self.found_by})"
        )


COLUMNS = ["chunk_id", "doc_id", "chunk_index", "content", "context"]


def hits_of(chunks: ChunkTable, ranked: list[RankedRow], locator: Locator) -> list[Hit]:
    """``ranked`` rows of an index's ``chunks`` as hits, ranked from 1 (only their row groups are read)."""
    positions = [hit.row for hit in ranked]
    rows = [dict(zip(COLUMNS, values)) for values in zip(*(chunks.values(name, positions) for name in COLUMNS))]
    return [
        Hit(rank=rank, score=hit.score, ranks=dict(hit.ranks), location=locator.location(hit.row), **row)
        for rank, (hit, row) in enumerate(zip(ranked, rows), start=1)
    ]
