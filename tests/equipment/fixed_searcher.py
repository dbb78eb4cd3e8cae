"""Searchers with known rankings: a ``Searcher`` over a hand-built index whose vector scores are fixed (no embedding
model), and ``FakeSearcher``, which answers fixed rankings per strategy and query (the evaluation tests)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pyarrow as pa

from ctxrag.storage.backends import RowSet
from ctxrag.storage.backends.embedded import EmbeddedRanker, top_rows
from ctxrag.storage.bm25 import Bm25Index
from ctxrag.storage.index_store import StoredIndex
from ctxrag.storage.vectors import VectorIndex
from ctxrag.tasks.retrieval.fusion import RankedRow
from ctxrag.tasks.retrieval.search import Searcher, Strategy, StrategyConfig

TEXTS = ["lemon kiwi", "mango melon", "lemon lemon mango", "grape"]
VECTOR = np.array([0.1, 0.9, 0.3, 0.9], dtype=np.float32)  # vector ranking: 1, 3 (tie -> row order), 2, 0


def stored_index(
    texts: list[str], ranker: type[EmbeddedRanker] = EmbeddedRanker, doc_ids: list[str] | None = None
) -> StoredIndex:
    """``doc_ids``: each row's document (default: every row its own, ``d0``, ``d1``, ...)."""
    doc_ids = doc_ids if doc_ids is not None else [f"d{i}" for i in range(len(texts))]
    chunks = pa.table({"chunk_id": [f"c{i}" for i in range(len(texts))], "doc_id": doc_ids, "content": texts})
    matrix = np.eye(len(texts), max(len(texts), 1), dtype=np.float32) if texts else np.zeros((0, 4), np.float32)
    manifest = {"config": {"embedder": {"provider": "local", "model": "m", "max_seq_length": 8}}}
    return StoredIndex(manifest, chunks, ranker(Bm25Index.build(texts), VectorIndex(matrix)))


class FixedVectorRanker(EmbeddedRanker):
    """The embedded ranker with fixed vector scores (no embedder, no model)."""

    fixed: np.ndarray = VECTOR

    def rank_vector(self, vector: np.ndarray, depth: int, allowed: RowSet | None = None) -> list[tuple[int, float]]:
        scores = self.fixed if allowed is None else np.where(allowed.mask, self.fixed, -np.inf)
        depth = depth if allowed is None else min(depth, allowed.size)
        return [(row, float(scores[row])) for row in top_rows(scores, depth)]


class FixedSearcher(Searcher):
    """A Searcher that records which queries it was asked to embed."""

    vector_queries: list[str]

    def query_vector(self, query: str) -> np.ndarray:
        self.vector_queries.append(query)
        return np.zeros(1, dtype=np.float32)

    def prefetch(self, queries: list[str]) -> None:
        """Nothing to embed ahead: the vector scores are fixed."""


def make_searcher(
    texts: list[str] = TEXTS, vector: np.ndarray = VECTOR, candidates: int = 150, doc_ids: list[str] | None = None
) -> FixedSearcher:
    searcher = FixedSearcher.__new__(FixedSearcher)
    searcher.index = stored_index(texts, FixedVectorRanker, doc_ids)
    searcher.index.ranker.fixed = vector
    searcher.embedder = None
    searcher.candidates = candidates
    searcher.server_rrf = False
    searcher._defined_by_row = {}
    searcher.vector_queries = []
    return searcher


class FakeSearcher:
    """Returns fixed rankings per (strategy, query) and records the depth it was asked for."""

    def __init__(self, chunks: pa.Table, rankings: dict[tuple[Strategy, str], list[int]]) -> None:
        self.index = SimpleNamespace(chunks=chunks)
        self.rankings = rankings
        self.calls: list[tuple[str, Strategy, int]] = []

    def search(self, query: str, config: StrategyConfig, k: int, reranker: object = None) -> list[RankedRow]:
        strategy = config.strategy
        self.calls.append((query, strategy, k))
        rows = self.rankings.get((strategy, query), [])[:k]
        return [RankedRow(row, 1.0 / rank, {strategy.value: rank}) for rank, row in enumerate(rows, start=1)]
