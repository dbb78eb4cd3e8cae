"""Retrieval metrics, as the cookbook computes them.

``pass_at_k``: share of a query's golden chunks found in the top k (Contextual Retrieval guide).
``precision``/``recall``/``mrr`` per query, and F1 from the *mean* precision and *mean* recall (RAG guide).
``hit_at_k`` (any golden chunk in the top k) and ``ndcg_at_k`` (binary relevance, log2 discount) for both formats.

Golden chunks are counted once each, whether or not they are in the index (a missing one is a miss).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence


def pass_at_k(retrieved: Sequence[Hashable], golden: Sequence[Hashable], k: int) -> float:
    """Fraction of ``golden`` found in the first ``k`` of ``retrieved`` (0 when there is no golden item)."""
    wanted = set(golden)
    if not wanted:
        return 0.0
    return len(wanted & set(retrieved[:k])) / len(wanted)


def precision_at_k(retrieved: Sequence[Hashable], golden: Sequence[Hashable], k: int) -> float:
    """True positives over the number of chunks retrieved (at most ``k``)."""
    top = list(dict.fromkeys(retrieved[:k]))
    return len(set(top) & set(golden)) / len(top) if top else 0.0


def recall_at_k(retrieved: Sequence[Hashable], golden: Sequence[Hashable], k: int) -> float:
    return pass_at_k(retrieved, golden, k)


def reciprocal_rank_at_k(retrieved: Sequence[Hashable], golden: Sequence[Hashable], k: int) -> float:
    """1 / rank of the first golden chunk within the top ``k``; 0 if none is there."""
    wanted = set(golden)
    for rank, item in enumerate(retrieved[:k], start=1):
        if item in wanted:
            return 1.0 / rank
    return 0.0


def hit_at_k(retrieved: Sequence[Hashable], golden: Sequence[Hashable], k: int) -> float:
    """1 if any of ``golden`` is among the first ``k`` of ``retrieved``, else 0."""
    wanted = set(golden)
    return 1.0 if any(item in wanted for item in retrieved[: max(k, 0)]) else 0.0


def ndcg_at_k(retrieved: Sequence[Hashable], golden: Sequence[Hashable], k: int) -> float:
    """Normalized discounted cumulative gain with binary relevance.

    DCG = sum of 1 / log2(rank + 1) over the ranks (1-based, within the top ``k``) holding a golden chunk, each golden
    chunk counted at its first rank only; the ideal DCG puts ``min(k, number of distinct golden)`` chunks at ranks 1, 2, ...
    """
    wanted = set(golden)
    if not wanted or k <= 0:
        return 0.0
    seen: set[Hashable] = set()
    dcg = 0.0
    for rank, item in enumerate(retrieved[:k], start=1):
        if item in wanted and item not in seen:
            seen.add(item)
            dcg += 1.0 / math.log2(rank + 1)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(k, len(wanted)) + 1))
    return dcg / ideal


def f1_from_means(mean_precision: float, mean_recall: float) -> float:
    total = mean_precision + mean_recall
    return 2 * mean_precision * mean_recall / total if total else 0.0


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0
