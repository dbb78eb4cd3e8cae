"""Rank fusions of the BM25 and vector rankings: RRF, the cookbook's weighted 1/rank, ``hybrid-doc``'s document and
definition evidence, and ``hybrid-score``'s fusion of standardized scores (CombSUM).

Every fusion ranks the rows some retriever returned, breaking ties by the best single rank and then the row, so
results are deterministic even for duplicate chunks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from ctxrag.storage.fusion import RRF_K
from ctxrag.tasks.common.strategies import SCORE_FUSION_VECTOR_WEIGHT

WEIGHTED_VECTOR_WEIGHT = 0.8  # the cookbook's
WEIGHTED_BM25_WEIGHT = 0.2

# hybrid-doc: tuned by cross-validation on the cookbook's codebase set (benchmarks/results/quality_cv.md, docs/decisions.md).
DOC_FUSION_RRF_K = 2
DOC_FUSION_WEIGHTS = {"bm25": 1.0, "vector": 0.3}  # per retriever, for the chunk's own rank
DOC_FUSION_DOCUMENT_WEIGHTS = {"vector": 0.25}  # per retriever, for the rank of the chunk's document
DOC_FUSION_DEFINITION_WEIGHT = 0.125  # for a chunk that defines a name the query mentions


ScoredRanking = list[tuple[int, float]]  # (row, the retriever's score), best first


@dataclass(frozen=True)
class RankedRow:
    """One ranked chunk: its row in the index, fused score, and the rank each retriever gave it (1-based)."""

    row: int
    score: float
    ranks: dict[str, int] = field(default_factory=dict)

    @property
    def found_by(self) -> list[str]:
        return sorted(self.ranks)


def reciprocal_rank_fusion(rankings: dict[str, list[int]], k: int, rrf_k: int = RRF_K) -> list[RankedRow]:
    """RRF: score = sum over retrievers of 1 / (rrf_k + rank). Ties: best single rank, then row."""
    return _fuse(rankings, k, lambda name, rank: 1.0 / (rrf_k + rank))


def weighted_fusion(rankings: dict[str, list[int]], weights: dict[str, float], k: int) -> list[RankedRow]:
    """The cookbook's fusion: score = sum of weight / rank over the retrievers that found the chunk."""
    return _fuse(rankings, k, lambda name, rank: weights[name] / rank)


def _fuse(rankings: dict[str, list[int]], k: int, contribution: Callable[[str, int], float]) -> list[RankedRow]:
    ranks = _ranks(rankings)
    scored = [
        RankedRow(row, sum(contribution(name, rank) for name, rank in found.items()), found)
        for row, found in ranks.items()
    ]
    return _best(scored, k)


def _ranks(rankings: Mapping[str, list[int]]) -> dict[int, dict[str, int]]:
    """Per row some retriever returned: the rank each retriever gave it."""
    ranks: dict[int, dict[str, int]] = {}
    for name, rows in rankings.items():
        for rank, row in enumerate(rows, start=1):
            ranks.setdefault(row, {})[name] = rank
    return ranks


def _best(scored: list[RankedRow], k: int) -> list[RankedRow]:
    scored.sort(key=lambda hit: (-hit.score, min(hit.ranks.values()), hit.row))
    return scored[:k]


def score_fusion(
    bm25: ScoredRanking, vector: ScoredRanking, k: int, vector_weight: float = SCORE_FUSION_VECTOR_WEIGHT
) -> list[RankedRow]:
    """CombSUM of standardized scores: ``(1 - vector_weight) x z(BM25 score) + vector_weight x z(cosine)``.

    Each retriever's scores are standardized over its own ranking (z = (score - mean) / standard deviation), so
    BM25's unbounded scores and cosines become comparable and a score that stands out of its list counts more than a
    rank would say; a row one retriever did not return gets that retriever's lowest z. A ranking of a single row
    keeps its raw score (0 where absent): there is no spread to standardize by. Ties: best single rank, then row.
    """
    ranks = _ranks({"vector": [row for row, _ in vector], "bm25": [row for row, _ in bm25]})
    if not ranks:
        return []
    rows = sorted(ranks)
    fused = (1.0 - vector_weight) * _standardized(bm25, rows) + vector_weight * _standardized(vector, rows)
    best_rank = np.array([min(ranks[row].values()) for row in rows])
    top = np.lexsort((np.array(rows), best_rank, -fused))[
        :k
    ]  # by score, then best single rank, then row: _best's order
    return [RankedRow(rows[position], float(fused[position]), ranks[rows[position]]) for position in top]


def _standardized(ranking: ScoredRanking, rows: list[int]) -> np.ndarray:
    """The ranking's scores at ``rows`` (ascending), standardized over the ranking; absent rows get its lowest."""
    values = np.zeros(len(rows), dtype=np.float64)
    present = np.zeros(len(rows), dtype=bool)
    if ranking:
        places = np.searchsorted(np.asarray(rows), [row for row, _ in ranking])
        values[places] = [score for _, score in ranking]
        present[places] = True
    if present.sum() > 1:
        scores = values[present]  # in row order, as the suite's combsum family that chose this fusion did
        values[present] = (scores - scores.mean()) / (scores.std() or 1.0)
        values[~present] = values[present].min()
    return values


def document_fusion(
    rankings: dict[str, list[int]],
    documents: Mapping[int, str],
    weights: dict[str, float],
    document_weights: dict[str, float],
    k: int,
    defining: set[int] | frozenset[int] = frozenset(),
    rrf_k: int = DOC_FUSION_RRF_K,
    definition_weight: float = DOC_FUSION_DEFINITION_WEIGHT,
) -> list[RankedRow]:
    """Weighted RRF plus document and definition evidence. Each retriever ranks documents by their best chunk (the
    first chunk's document is 1, the next new document 2, ...); a chunk some retriever found scores the sum over
    retrievers of ``weights[name] / (rrf_k + its rank)`` and ``document_weights[name] / (rrf_k + its document's
    rank)``, plus ``definition_weight`` if its row is in ``defining`` (its chunk defines a name the query mentions).
    ``documents`` names the document of every ranked row. Chunks no retriever found are not added. Ties: best
    single rank, then row (``RankedRow.ranks`` holds the chunk ranks only)."""
    document_ranks: dict[str, dict[str, int]] = {}
    for name in document_weights:
        order: dict[str, int] = {}
        for row in rankings.get(name, []):
            order.setdefault(documents[row], len(order) + 1)
        document_ranks[name] = order
    scored = []
    for row, found in _ranks(rankings).items():
        score = sum(weights.get(name, 0.0) / (rrf_k + rank) for name, rank in found.items())
        for name, weight in document_weights.items():
            document_rank = document_ranks[name].get(documents[row])
            if document_rank is not None:
                score += weight / (rrf_k + document_rank)
        if row in defining:
            score += definition_weight
        scored.append(RankedRow(row, score, found))
    return _best(scored, k)
