"""How the evaluation suite ranks a question's candidates: the product's strategies through the product's own code,
and the suite's tuned families over their grids.

A question is held as its candidates (the rows either retriever returned, 150 deep each) with their BM25 and vector
ranks and scores (``Query``) and each candidate's document and defined names (``Dataset``), local to the question
(suite_sets.view). A strategy maps (dataset, query, params) to the candidates it ranks first, best first.

``product``: a shipped strategy (``bm25`` ... ``hybrid-score``, ``ctxrag tune``'s candidates) written as a
``StrategyConfig`` label, parsed by ``StrategyConfig.from_str`` and ranked by ``ctxrag.tasks.retrieval.search.fuse_rankings``,
the function ``Searcher.fuse`` runs for a search and ``ctxrag tune``: the suite scores the shipped code, not a copy.

``FAMILIES``: the tuned families the leave-one-corpus-out selection may choose among (their grids, in order), written
here as numpy over the candidates. Where a family meets a shipped strategy it computes the same floats in the same
order (weighted RRF = ``document_fusion`` without evidence, ``combsum`` z = ``score_fusion``), and orders as the
product does: score, then best single rank, then row.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable

import numpy as np

from ctxrag.tasks.context.structure import mentioned_names
from ctxrag.tasks.retrieval.search import StrategyConfig, fuse_rankings

DEPTH = 150  # each retriever's ranking, as the hybrid strategies read it (ctxrag.storage.fusion.FUSION_DEPTH)
TOP = 20  # each strategy's ranking, as scored
ABSENT = math.inf  # the rank of a row a retriever did not return


@dataclass
class Query:
    text: str
    rb: np.ndarray  # BM25 rank of every candidate (ABSENT beyond its matches)
    rv: np.ndarray  # vector rank (ABSENT beyond DEPTH)
    sb: np.ndarray  # BM25 score (0 where absent)
    sv: np.ndarray  # cosine (nan where absent)
    db: np.ndarray  # rank of each candidate's document in BM25's ranking of documents (by their best chunk)
    dv: np.ndarray  # the same for the vector ranking


@dataclass
class Dataset:
    doc_of_row: np.ndarray  # per candidate: its document's number
    defines: list[frozenset[str]]  # per candidate: the names its chunk defines


def document_ranks(ranks: np.ndarray, doc_of_row: np.ndarray) -> np.ndarray:
    """Per row: the rank of its document when documents are ordered by their best chunk's rank (ABSENT if none)."""
    best = np.full(doc_of_row.max() + 1, ABSENT)
    np.minimum.at(best, doc_of_row, ranks)
    found = int(np.isfinite(best).sum())
    order = np.argsort(best, kind="stable")[:found]
    doc_rank = np.full(best.size, ABSENT)
    doc_rank[order] = np.arange(1, found + 1)
    return doc_rank[doc_of_row]


# --- shipped strategies: the product's code ---------------------------------------------------------------------------


@lru_cache(maxsize=None)
def config_of(strategy: str) -> StrategyConfig:
    return StrategyConfig.from_str(strategy)


def scored(ranks: np.ndarray, scores: np.ndarray) -> list[tuple[int, float]]:
    """A retriever's ranking of the candidates as the product's backends answer it: (row, score), best first."""
    rows = np.flatnonzero(np.isfinite(ranks))
    rows = rows[np.argsort(ranks[rows], kind="stable")]
    return [(int(row), float(scores[row])) for row in rows]


def product(data: Dataset, query: Query, strategy: str) -> list[int]:
    """``strategy`` (a ``StrategyConfig`` label) ranked by ``ctxrag.tasks.retrieval.search.fuse_rankings``."""
    names = mentioned_names(query.text)

    def evidence(rows: list[int]) -> tuple[dict[int, int], set[int]]:
        return {row: int(data.doc_of_row[row]) for row in rows}, {row for row in rows if data.defines[row] & names}

    rankings = {"vector": scored(query.rv, query.sv), "bm25": scored(query.rb, query.sb)}  # Searcher.rankings' order
    return [hit.row for hit in fuse_rankings(config_of(strategy), rankings, TOP, evidence)]


# --- the tuned families -----------------------------------------------------------------------------------------------


def ranked(score: np.ndarray, query: Query, rv: np.ndarray | None = None) -> list[int]:
    """Rows some retriever returned, by score, then best single rank, then row (the product's order)."""
    rv = query.rv if rv is None else rv
    rows = np.nonzero(np.isfinite(query.rb) | np.isfinite(rv))[0]
    order = np.lexsort((rows, np.minimum(query.rb, rv)[rows], -score[rows]))
    return rows[order][:TOP].tolist()


def inverse(ranks: np.ndarray, k: float, weight: float = 1.0) -> np.ndarray:
    """weight / (k + rank), 0 where absent."""
    return np.where(np.isfinite(ranks), weight / (k + ranks), 0.0)


def rrf_score(query: Query, kb: float, kv: float, w: float, rv: np.ndarray | None = None) -> np.ndarray:
    return inverse(query.rb, kb) + inverse(query.rv if rv is None else rv, kv, w)


def v_rrf(data: Dataset, query: Query, kb: float, kv: float, w: float, dv: int = DEPTH) -> list[int]:
    """Weighted RRF: 1 / (kb + BM25 rank) + w / (kv + vector rank), the vector ranking cut at ``dv``."""
    rv = np.where(query.rv <= dv, query.rv, ABSENT)
    return ranked(rrf_score(query, kb, kv, w, rv), query, rv=rv)


def v_doc_signals(data: Dataset, query: Query, k: float, w: float, ub: float, uv: float, dm: float = 0.0) -> list[int]:
    """Weighted RRF plus document evidence, ub / (k + BM25 rank of the chunk's document) + uv / (k + its vector rank),
    plus ``dm`` for a candidate whose chunk defines a name the query mentions (``hybrid-doc``'s form)."""
    score = rrf_score(query, k, k, w) + inverse(query.db, k, ub) + inverse(query.dv, k, uv)
    if dm:
        names = mentioned_names(query.text)
        for row in np.nonzero(np.isfinite(query.rb) | np.isfinite(query.rv))[0]:
            if data.defines[row] & names:
                score[row] += dm
    return ranked(score, query)


def v_doc_max(data: Dataset, query: Query, k: float, w: float, beta: float) -> list[int]:
    """Weighted RRF plus beta x the best fused score among the chunk's document's chunks in the fused top 20."""
    score = rrf_score(query, k, k, w)
    top = ranked(score, query)
    best = np.zeros(data.doc_of_row.max() + 1)
    np.maximum.at(best, data.doc_of_row[top], score[top])
    return ranked(score + beta * best[data.doc_of_row], query)


def gate(query: Query, feature: str) -> float:
    """``gap10``: top cosine minus the mean of the top 10; ``overlap10``: rows both retrievers put in their top 10."""
    if feature == "gap10":
        top = np.sort(query.sv[np.isfinite(query.sv)])[::-1][:10]
        return float(top[0] - top.mean()) if top.size else 0.0
    return float(np.sum((query.rb <= 10) & (query.rv <= 10)))


def v_gated(data: Dataset, query: Query, k: float, feature: str, tau: float, w_low: float, w_high: float) -> list[int]:
    """Weighted RRF whose vector weight is w_high when the vector ranking looks confident, else w_low."""
    return ranked(rrf_score(query, k, k, w_high if gate(query, feature) >= tau else w_low), query)


def v_combsum(data: Dataset, query: Query, norm: str, alpha: float) -> list[int]:
    """Score fusion: (1 - alpha) x normalized BM25 + alpha x normalized cosine (``z``: ``hybrid-score``'s)."""
    in_b, in_v = np.isfinite(query.rb), np.isfinite(query.rv)
    b, v = query.sb.copy(), np.nan_to_num(query.sv, nan=0.0)
    if norm == "minmax":
        b = b / b.max() if b.max() > 0 else b
        low, high = np.nanmin(query.sv), np.nanmax(query.sv)
        v = np.where(in_v, (v - low) / (high - low if high > low else 1.0), 0.0)
    else:  # "z": standardized within each retriever's list; absent rows get the list's lowest value
        for values, present in ((b, in_b), (v, in_v)):
            if present.sum() > 1:
                values[present] = (values[present] - values[present].mean()) / (values[present].std() or 1.0)
                values[~present] = values[present].min()
    return ranked((1 - alpha) * b + alpha * v, query)


WS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.5]
RRF_KS = [0, 1, 2, 3, 5, 10, 20, 30, 60, 100]


def grid(**axes: Iterable) -> list[dict]:
    names = list(axes)
    return [dict(zip(names, values)) for values in itertools.product(*axes.values())]


def describe(family: str, params: dict) -> str:
    return f"{family}(" + ", ".join(f"{key}={value:g}" if isinstance(value, (int, float)) else f"{key}={value}" for key, value in params.items()) + ")"


# name -> (function, parameter grid), in the selection's order (ties go to the earlier configuration).
FAMILIES: dict[str, tuple[Callable[..., list[int]], list[dict]]] = {
    "rrf-k": (v_rrf, [{"kb": k, "kv": k, "w": 1.0} for k in RRF_KS]),
    "wrrf": (v_rrf, [{"kb": k, "kv": k, "w": w} for k in RRF_KS for w in WS]),
    "wrrf-2k": (v_rrf, grid(kb=[0, 1, 2, 3, 5, 10, 20, 60], kv=[0, 1, 2, 3, 5, 10, 20, 60], w=WS)),
    "wrrf-depth": (v_rrf, [{"kb": k, "kv": k, "w": w, "dv": d} for k in RRF_KS for w in WS for d in [5, 10, 20, 50, 150]]),
    "gated": (v_gated,
              grid(k=[1, 2, 5, 10, 60], feature=["gap10"], tau=[0.04, 0.06, 0.08, 0.1, 0.12, 0.16], w_low=[0.0, 0.1, 0.2, 0.4], w_high=[0.4, 0.6, 1.0])
              + grid(k=[1, 2, 5, 10, 60], feature=["overlap10"], tau=[2, 3, 4, 5, 6], w_low=[0.0, 0.1, 0.2, 0.4], w_high=[0.4, 0.6, 1.0])),
    "combsum": (v_combsum, grid(norm=["minmax", "z"], alpha=[0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6])),
    "doc-max": (v_doc_max, grid(k=[1, 2, 5, 60], w=[0.2, 0.4, 0.6, 1.0], beta=[0.1, 0.25, 0.5, 1.0])),
    "doc-rank": (v_doc_signals, grid(k=[0, 1, 2, 3, 5, 10, 60], w=[0.0, 0.1, 0.2, 0.3, 0.4, 0.6, 1.0], ub=[0.0, 0.1, 0.25, 0.5], uv=[0.0, 0.1, 0.25, 0.5])),
    "doc-def": (v_doc_signals, grid(k=[1, 2, 3], w=[0.1, 0.2, 0.3, 0.4], ub=[0.0], uv=[0.1, 0.25, 0.5], dm=[0.0, 0.05, 0.075, 0.1, 0.125, 0.15, 0.2, 0.3])),
}
