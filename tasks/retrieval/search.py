"""Search strategies over a stored index: vector, BM25, and their fusions (RRF; the cookbook's weighted 1/rank).

Every ranking breaks ties by the chunk's row in the index, so results are deterministic even for duplicate chunks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

import numpy as np

from ctxrag.storage.environment import models_dir
from ctxrag.storage.errors import InvalidInput
from ctxrag.storage.artifacts import RowCache
from ctxrag.storage.backends import Ranking
from ctxrag.storage.fusion import FUSION_DEPTH, RRF_K
from ctxrag.storage.index_store import StoredIndex
from ctxrag.storage.ledger import SaveLedger
from ctxrag.tasks.embedding.embed import EmbedderSpec, embed_with_cache
from ctxrag.tasks.embedding.embedders import make_embedder
from ctxrag.tasks.context.structure import defined_names, mentioned_names

if TYPE_CHECKING:
    from ctxrag.tasks.retrieval.rerank import Reranker

DEFINES = "defines"  # the index's column of the names each chunk defines (ctxrag.tasks.context.structure.defined_names)
WEIGHTED_VECTOR_WEIGHT = 0.8
WEIGHTED_BM25_WEIGHT = 0.2


class Strategy(str, Enum):
    VECTOR = "vector"
    BM25 = "bm25"
    HYBRID = "hybrid"
    HYBRID_WEIGHTED = "hybrid-weighted"
    HYBRID_DOC = "hybrid-doc"  # weighted RRF with document evidence (document_fusion)

    @classmethod
    def from_str(cls, value: str) -> "Strategy":
        try:
            return cls(value)
        except ValueError:
            choices = ", ".join(strategy.value for strategy in cls)
            raise InvalidInput(f"unknown strategy {value!r}; choose one of: {choices}") from None


DEFAULT_STRATEGY = "hybrid-doc"  # chosen by cross-validation on the codebase set (docs/decisions.md)


@dataclass(frozen=True)
class Hit:
    """One ranked chunk: its row in the index, fused score, and the rank each retriever gave it (1-based)."""

    row: int
    score: float
    ranks: dict[str, int] = field(default_factory=dict)

    @property
    def found_by(self) -> list[str]:
        return sorted(self.ranks)


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
    """Runs any strategy over one index version, whatever its backend (its ``Ranker`` answers BM25 and vector
    rankings); embeds queries with the index's own embedder; fuses here, or on the server where asked and offered."""

    def __init__(
        self,
        index: StoredIndex,
        candidates: int = FUSION_DEPTH,
        server_rrf: bool = False,
        home: Path | None = None,
        ledger: SaveLedger | None = None,
        run_id: str = "",
    ) -> None:
        """``home``, ``ledger``, ``run_id``: query vectors are stored under ``home`` (a re-run pays nothing and loads no
        local model for queries it has seen) and each paid request gets a ledger row."""
        if server_rrf and not index.ranker.server_fusion:
            raise InvalidInput(f"server-side RRF needs an index on the Elasticsearch backend (this one is {index.config.get('backend')})")
        self.index = index
        self.spec = EmbedderSpec.from_dict(index.config["embedder"])
        self.embedder = make_embedder(self.spec, ledger, run_id, models_dir=models_dir())
        self._query_store = RowCache(home, "embeddings") if home is not None else None
        self._query_vectors: dict[str, np.ndarray] = {}
        self.candidates = candidates
        self.server_rrf = server_rrf
        self._defined_by_row: dict[int, list[str]] = {}

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

    def rank_vector(self, query: str, depth: int) -> Ranking:
        return self.index.ranker.rank_vector(self.query_vector(query), depth)

    def rank_bm25(self, query: str, depth: int) -> Ranking:
        return self.index.ranker.rank_bm25(query, depth)

    def rows_defining(self, names: set[str], rows: list[int]) -> set[int]:
        """The rows among ``rows`` whose chunk defines one of ``names`` (the index's ``defines`` column; an index
        built before that column existed has its chunks read once per searcher instead)."""
        if not names or not rows:
            return set()
        if DEFINES in self.index.chunks.column_names:
            defined = self.index.chunks[DEFINES].take(rows).to_pylist()
        else:
            defined = [self._defined_by_row.setdefault(row, defined_names(self.index.chunks["content"][row].as_py())) for row in rows]
        return {row for row, found in zip(rows, defined) if names.intersection(found)}

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
        if strategy is Strategy.HYBRID and self.server_rrf:
            return _single("rrf-server", self.index.ranker.fuse(query, self.query_vector(query), k, depth))
        rankings = {
            "vector": [row for row, _ in self.rank_vector(query, depth)],
            "bm25": [row for row, _ in self.rank_bm25(query, depth)],
        }
        if strategy is Strategy.HYBRID:
            return reciprocal_rank_fusion(rankings, k)
        if strategy is Strategy.HYBRID_DOC:
            rows = sorted({row for ranking in rankings.values() for row in ranking})
            documents = dict(zip(rows, self.index.chunks["doc_id"].take(rows).to_pylist())) if rows else {}
            defining = self.rows_defining(mentioned_names(query), rows)
            return document_fusion(rankings, documents, DOC_FUSION_WEIGHTS, DOC_FUSION_DOCUMENT_WEIGHTS, k, defining)
        return weighted_fusion(rankings, {"vector": WEIGHTED_VECTOR_WEIGHT, "bm25": WEIGHTED_BM25_WEIGHT}, k)


def _single(name: str, ranking: list[tuple[int, float]]) -> list[Hit]:
    return [Hit(row, score, {name: rank}) for rank, (row, score) in enumerate(ranking, start=1)]


# Tuned by cross-validation on the cookbook's codebase set (benchmarks/quality_cv.py, docs/decisions.md).
DOC_FUSION_RRF_K = 2
DOC_FUSION_WEIGHTS = {"bm25": 1.0, "vector": 0.3}  # per retriever, for the chunk's own rank
DOC_FUSION_DOCUMENT_WEIGHTS = {"vector": 0.25}  # per retriever, for the rank of the chunk's document
DOC_FUSION_DEFINITION_WEIGHT = 0.125  # for a chunk that defines a name the query mentions


def document_fusion(
    rankings: dict[str, list[int]],
    documents: Mapping[int, str],
    weights: dict[str, float],
    document_weights: dict[str, float],
    k: int,
    defining: set[int] | frozenset[int] = frozenset(),
    rrf_k: int = DOC_FUSION_RRF_K,
    definition_weight: float = DOC_FUSION_DEFINITION_WEIGHT,
) -> list[Hit]:
    """Weighted RRF plus document and definition evidence. Each retriever ranks documents by their best chunk (the
    first chunk's document is 1, the next new document 2, ...); a chunk some retriever found scores the sum over
    retrievers of ``weights[name] / (rrf_k + its rank)`` and ``document_weights[name] / (rrf_k + its document's
    rank)``, plus ``definition_weight`` if its row is in ``defining`` (its chunk defines a name the query mentions).
    ``documents`` names the document of every ranked row. Chunks no retriever found are not added. Ties: best
    single rank, then row (``Hit.ranks`` holds the chunk ranks only)."""
    document_ranks: dict[str, dict[str, int]] = {}
    for name in document_weights:
        order: dict[str, int] = {}
        for row in rankings.get(name, []):
            order.setdefault(documents[row], len(order) + 1)
        document_ranks[name] = order
    ranks: dict[int, dict[str, int]] = {}
    for name, rows in rankings.items():
        for rank, row in enumerate(rows, start=1):
            ranks.setdefault(row, {})[name] = rank
    scored = []
    for row, found in ranks.items():
        score = sum(weights.get(name, 0.0) / (rrf_k + rank) for name, rank in found.items())
        for name, weight in document_weights.items():
            document_rank = document_ranks[name].get(documents[row])
            if document_rank is not None:
                score += weight / (rrf_k + document_rank)
        if row in defining:
            score += definition_weight
        scored.append(Hit(row, score, found))
    scored.sort(key=lambda hit: (-hit.score, min(hit.ranks.values()), hit.row))
    return scored[:k]
