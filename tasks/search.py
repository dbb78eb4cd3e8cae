"""Search strategies over a stored index: vector, BM25, and their fusions (RRF; the cookbook's weighted 1/rank).

Every ranking breaks ties by the chunk's row in the index, so results are deterministic even for duplicate chunks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from storage.errors import InvalidInput
from storage.artifacts import RowCache
from storage.index_store import StoredIndex
from tasks.embed import EmbedderSpec, embed_with_cache, make_embedder

if TYPE_CHECKING:
    from tasks.embed import SaveLedger
    from tasks.rerank import Reranker

RRF_K = 60
WEIGHTED_CANDIDATES = 150
WEIGHTED_VECTOR_WEIGHT = 0.8
WEIGHTED_BM25_WEIGHT = 0.2


class Strategy(str, Enum):
    VECTOR = "vector"
    BM25 = "bm25"
    HYBRID = "hybrid"
    HYBRID_WEIGHTED = "hybrid-weighted"

    @classmethod
    def from_str(cls, value: str) -> "Strategy":
        try:
            return cls(value)
        except ValueError:
            choices = ", ".join(strategy.value for strategy in cls)
            raise InvalidInput(f"unknown strategy {value!r}; choose one of: {choices}") from None


@dataclass(frozen=True)
class Hit:
    """One ranked chunk: its row in the index, fused score, and the rank each retriever gave it (1-based)."""

    row: int
    score: float
    ranks: dict[str, int] = field(default_factory=dict)

    @property
    def found_by(self) -> list[str]:
        return sorted(self.ranks)


def top_rows(scores: np.ndarray, k: int, matches_only: bool = False) -> list[int]:
    """Rows of the ``k`` highest scores, ties broken by row order; ``matches_only`` drops rows scoring 0."""
    if k <= 0 or scores.size == 0:
        return []
    order = np.argsort(-scores, kind="stable")[:k]
    if matches_only:
        order = order[scores[order] > 0]
    return [int(row) for row in order]


def reciprocal_rank_fusion(rankings: dict[str, list[int]], k: int, rrf_k: int = RRF_K) -> list[Hit]:
    """RRF: score = sum over retrievers of 1 / (rrf_k + rank). Ties: best single rank, then row."""
    return _fuse(rankings, k, lambda name, rank: 1.0 / (rrf_k + rank))


def weighted_fusion(rankings: dict[str, list[int]], weights: dict[str, float], k: int) -> list[Hit]:
    """The cookbook's fusion: score = sum of weight / rank over the retrievers that found the chunk."""
    return _fuse(rankings, k, lambda name, rank: weights[name] / rank)


def _fuse(rankings: dict[str, list[int]], k: int, contribution) -> list[Hit]:  # type: ignore[no-untyped-def]
    ranks: dict[int, dict[str, int]] = {}
    for name, rows in rankings.items():
        for rank, row in enumerate(rows, start=1):
            ranks.setdefault(row, {})[name] = rank
    scored = [
        Hit(row, sum(contribution(name, rank) for name, rank in found.items()), found) for row, found in ranks.items()
    ]
    scored.sort(key=lambda hit: (-hit.score, min(hit.ranks.values()), hit.row))
    return scored[:k]


class Searcher:
    """Runs any strategy over one index (embedded, or Elasticsearch behind its alias); embeds queries with the
    index's own embedder. Both backends return the same ranked (row, score) lists, fused the same way here."""

    es = None  # an EsIndex when the index lives in Elasticsearch
    server_rrf = False

    def __init__(
        self,
        index: StoredIndex,
        candidates: int = WEIGHTED_CANDIDATES,
        server_rrf: bool = False,
        staged: bool = False,
        home: Path | None = None,
        ledger: SaveLedger | None = None,
        run_id: str = "",
    ) -> None:
        """``staged``: the index is a version not yet live (search its own Elasticsearch index, not the alias).
        ``home``, ``ledger``, ``run_id``: a paid embedder's query vectors are stored under ``home`` (a re-run pays
        nothing) and each request gets a ledger row."""
        self.index = index
        self.spec = EmbedderSpec.from_dict(index.config["embedder"])
        self.embedder = make_embedder(self.spec, ledger, run_id)
        self._query_store = RowCache(home, "embeddings") if home is not None and self.spec.provider != "local" else None
        self._query_vectors: dict[str, np.ndarray] = {}
        self.candidates = candidates
        self.server_rrf = server_rrf
        self.es = None
        if index.config.get("backend") == "elasticsearch":
            from storage.elasticsearch import EsIndex, connect

            target = index.manifest["elasticsearch"]["index"] if staged else None
            self.es = EsIndex(connect(), index.manifest["name"], target=target)
        elif server_rrf:
            raise InvalidInput("server-side RRF needs an index on the Elasticsearch backend")

    def prefetch(self, queries: list[str]) -> None:
        """Embed many queries at once (one stored part, few paid requests) before they are searched."""
        unique = [query for query in dict.fromkeys(queries) if query not in self._query_vectors]
        if unique:
            self._query_vectors.update(zip(unique, self._embed_queries(unique)))

    def query_vector(self, query: str) -> np.ndarray:
        """The query's vector; each query is embedded once per searcher (and once ever with a paid embedder)."""
        if query not in self._query_vectors:
            self._query_vectors[query] = self._embed_queries([query])[0]
        return self._query_vectors[query]

    def _embed_queries(self, queries: list[str]) -> np.ndarray:
        if self._query_store is None:
            return self.embedder.embed(queries, input_type="query")
        return embed_with_cache(queries, self.spec, self._query_store, "query", embedder=self.embedder)[0]

    def vector_scores(self, query: str) -> np.ndarray:
        return self.index.vectors.scores(self.query_vector(query))

    def rank_vector(self, query: str, depth: int) -> list[tuple[int, float]]:
        if self.es is not None:
            return self.es.knn(self.query_vector(query).tolist(), depth)
        scores = self.vector_scores(query)
        return [(row, float(scores[row])) for row in top_rows(scores, depth)]

    def rank_bm25(self, query: str, depth: int) -> list[tuple[int, float]]:
        if self.es is not None:
            return self.es.bm25(query, depth)
        scores = self.index.bm25.scores(query)
        return [(row, float(scores[row])) for row in top_rows(scores, depth, matches_only=True)]

    def candidate_text(self, row: int) -> str:
        """What a reranker reads: the chunk with its context."""
        content = self.index.chunks["content"][row].as_py()
        context = self.index.chunks["context"][row].as_py()
        return f"{content}\n\nContext: {context}" if context else content

    def search(self, query: str, strategy: Strategy, k: int, reranker: "Reranker | None" = None) -> list[Hit]:
        """The top ``k`` for ``query``; with a reranker, its order over the strategy's over-retrieved candidates."""
        if reranker is not None:
            candidates = self.search(query, strategy, reranker.depth(k))
            order = reranker.rerank(query, [self.candidate_text(hit.row) for hit in candidates], k)
            return [
                Hit(candidates[index].row, 1.0 / rank, {**candidates[index].ranks, "rerank": rank})
                for rank, index in enumerate(order, start=1)
            ]
        if strategy is Strategy.BM25:
            return _single("bm25", self.rank_bm25(query, k))
        if strategy is Strategy.VECTOR:
            return _single("vector", self.rank_vector(query, k))
        depth = max(k, self.candidates)
        if strategy is Strategy.HYBRID and self.server_rrf and self.es is not None:
            return _single("rrf-server", self.es.rrf_server_side(query, self.query_vector(query).tolist(), k, depth))
        rankings = {
            "vector": [row for row, _ in self.rank_vector(query, depth)],
            "bm25": [row for row, _ in self.rank_bm25(query, depth)],
        }
        if strategy is Strategy.HYBRID:
            return reciprocal_rank_fusion(rankings, k)
        return weighted_fusion(rankings, {"vector": WEIGHTED_VECTOR_WEIGHT, "bm25": WEIGHTED_BM25_WEIGHT}, k)


def _single(name: str, ranking: list[tuple[int, float]]) -> list[Hit]:
    return [Hit(row, score, {name: rank}) for rank, (row, score) in enumerate(ranking, start=1)]
