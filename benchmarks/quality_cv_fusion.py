"""quality_cv.py's fusion variants: each maps (dataset, query, params) to the query's ranked rows, on the rankings
quality_cv_data.py cached; VARIANTS names each with its parameter grid."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from typing import Callable, Iterable

import numpy as np

from quality_cv_data import ABSENT, DEPTH, KS, Dataset, Query
from ctxrag.storage.tokenize import tokenize
from ctxrag.tasks.common.models import indexed_text
from ctxrag.tasks.context.structure import mentioned_names


def ranked(score: np.ndarray, query: Query, rv: np.ndarray | None = None, rb: np.ndarray | None = None, depth: int = max(KS)) -> list[int]:
    """Rows some retriever returned, by score, then best single rank, then row (ctxrag.tasks.retrieval.search's order)."""
    rb = query.rb if rb is None else rb
    rv = query.rv if rv is None else rv
    rows = np.nonzero(np.isfinite(rb) | np.isfinite(rv))[0]
    order = np.lexsort((rows, np.minimum(rb, rv)[rows], -score[rows]))
    return rows[order][:depth].tolist()


def inverse(ranks: np.ndarray, k: float, weight: float = 1.0) -> np.ndarray:
    """weight / (k + rank), 0 where absent (computed as ctxrag.tasks.retrieval.search does, so ties break the same way)."""
    return np.where(np.isfinite(ranks), weight / (k + ranks), 0.0)


def rrf_score(query: Query, kb: float, kv: float, w: float, rv: np.ndarray | None = None) -> np.ndarray:
    return inverse(query.rb, kb) + inverse(query.rv if rv is None else rv, kv, w)


def v_single(data: Dataset, query: Query, retriever: str) -> list[int]:
    ranks = query.rb if retriever == "bm25" else query.rv
    found = np.nonzero(np.isfinite(ranks))[0]
    return found[np.argsort(ranks[found], kind="stable")][: max(KS)].tolist()


def v_rrf(data: Dataset, query: Query, kb: float, kv: float, w: float, dv: int = DEPTH) -> list[int]:
    rv = np.where(query.rv <= dv, query.rv, ABSENT)
    return ranked(rrf_score(query, kb, kv, w, rv), query, rv=rv)


def v_doc_rank(data: Dataset, query: Query, k: float, w: float, ub: float, uv: float) -> list[int]:
    """Weighted RRF plus document evidence: ub / (k + BM25 rank of the chunk's document) + uv / (k + its vector rank)."""
    score = rrf_score(query, k, k, w) + inverse(query.db, k, ub) + inverse(query.dv, k, uv)
    return ranked(score, query)


def v_doc_signals(data: Dataset, query: Query, k: float, w: float, ub: float, uv: float, dm: float, p: float = 0.0) -> list[int]:
    """doc-rank, plus ``dm`` for a candidate whose chunk defines a name the query mentions (ctxrag.tasks.context.structure), plus
    ``p / (1 + the chunk's position in its document)`` (a lead prior: a probe of the question set's skew)."""
    score = rrf_score(query, k, k, w) + inverse(query.db, k, ub) + inverse(query.dv, k, uv)
    if dm:
        names = mentioned_names(query.text)
        for row in np.nonzero(np.isfinite(query.rb) | np.isfinite(query.rv))[0]:
            if data.defines[row] & names:
                score[row] += dm
    if p:
        score = score + p / (1.0 + data.chunk_index)
    return ranked(score, query)


def v_doc_max(data: Dataset, query: Query, k: float, w: float, beta: float) -> list[int]:
    """Weighted RRF plus beta x the best fused score among the chunk's document's chunks in the fused top 20."""
    score = rrf_score(query, k, k, w)
    top = ranked(score, query)
    best = np.zeros(data.doc_of_row.max() + 1)
    np.maximum.at(best, data.doc_of_row[top], score[top])
    return ranked(score + beta * best[data.doc_of_row], query)


def v_gated(data: Dataset, query: Query, k: float, feature: str, tau: float, w_low: float, w_high: float) -> list[int]:
    """Weighted RRF whose vector weight is w_high when the vector ranking looks confident, else w_low."""
    if feature == "gap10":  # top cosine minus the mean of the top 10
        top = np.sort(query.sv[np.isfinite(query.sv)])[::-1][:10]
        value = float(top[0] - top.mean()) if top.size else 0.0
    else:  # "overlap10": rows both retrievers put in their top 10
        value = float(np.sum((query.rb <= 10) & (query.rv <= 10)))
    return ranked(rrf_score(query, k, k, w_high if value >= tau else w_low), query)


def v_combsum(data: Dataset, query: Query, norm: str, alpha: float) -> list[int]:
    """Score fusion: (1 - alpha) x normalized BM25 + alpha x normalized cosine."""
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


def v_bm25_prf(data: Dataset, query: Query, m: int, terms: int, gamma: float) -> list[int]:
    """BM25 with pseudo-relevance feedback (RM3-like): terms from BM25's top m chunks added with weight gamma."""
    stats = data.prf
    if "prf" not in query.extra:
        query.extra["prf"] = {}
    key = (m, terms)
    if key not in query.extra["prf"]:
        base = query.sb.astype(float)
        top = [row for row in np.argsort(query.rb, kind="stable")[:m] if np.isfinite(query.rb[row])]
        asked, weights = set(tokenize(query.text)), Counter()
        for row in top:
            length = sum(stats["tf"][row].values()) or 1
            for term, count in stats["tf"][row].items():
                if term not in asked:
                    weights[term] += count / length * stats["idf"][term] * base[row] / base[top[0]]
        chosen = weights.most_common(terms)
        expansion = np.zeros_like(base)
        for term, weight in chosen:
            expansion += weight / chosen[0][1] * stats["scores"](term)
        query.extra["prf"][key] = expansion
    score = query.sb + gamma * query.extra["prf"][key]
    rows = [int(row) for row in np.argsort(-score, kind="stable")[: max(KS)] if score[row] > 0]
    return rows


def v_rocchio(data: Dataset, query: Query, lam: float, m: int, k: float, w: float) -> list[int]:
    """Vector query moved towards BM25's top m chunks (q + lam x their mean vector), then weighted RRF."""
    key = ("rocchio", lam, m)
    if key not in query.extra:
        matrix = data.searcher.index.ranker.vectors.matrix
        vector = data.searcher.query_vector(query.text).astype(float)
        top = [row for row in np.argsort(query.rb, kind="stable")[:m] if np.isfinite(query.rb[row])]
        if top:
            vector = vector + lam * matrix[top].astype(float).mean(axis=0)
        order = np.argsort(-(matrix.astype(float) @ vector), kind="stable")[:DEPTH]
        rv = np.full(query.rv.size, ABSENT)
        rv[order] = np.arange(1, order.size + 1)
        query.extra[key] = rv
    rv = query.extra[key]
    return ranked(rrf_score(query, k, k, w, rv), query, rv=rv)


def prf_stats(data: Dataset) -> dict:
    chunks = data.searcher.index.chunks
    texts = [indexed_text(context or "", content) for context, content in zip(chunks["context"].to_pylist(), chunks["content"].to_pylist())]
    tf = [Counter(tokenize(text)) for text in texts]
    df = Counter(term for counts in tf for term in counts)
    n = len(texts)
    retriever = data.searcher.index.ranker.bm25._retriever  # the embedded backend's bm25s model: single-term scores

    def scores(term: str) -> np.ndarray:
        token = retriever.vocab_dict.get(term)
        return np.asarray(retriever.get_scores([token]), float) if token is not None else np.zeros(n)

    return {"tf": tf, "idf": {term: math.log(1 + (n - count + 0.5) / (count + 0.5)) for term, count in df.items()}, "scores": scores}


WS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.5]
RRF_KS = [0, 1, 2, 3, 5, 10, 20, 30, 60, 100]

Grid = list[dict]


def grid(**axes: Iterable) -> Grid:
    names = list(axes)
    return [dict(zip(names, values)) for values in itertools.product(*axes.values())]


# name -> (function, parameter grid, what it tries). Untuned references have a one-point grid.
VARIANTS: dict[str, tuple[Callable[..., list[int]], Grid, str]] = {
    "bm25": (v_single, grid(retriever=["bm25"]), "BM25 alone (reference)"),
    "vector": (v_single, grid(retriever=["vector"]), "vector alone (reference)"),
    "hybrid": (v_rrf, grid(kb=[60], kv=[60], w=[1.0]), "today's default: RRF k=60 (reference)"),
    "rrf-k": (v_rrf, [{"kb": k, "kv": k, "w": 1.0} for k in RRF_KS], "RRF, tuned k"),
    "wrrf": (v_rrf, [{"kb": k, "kv": k, "w": w} for k in RRF_KS for w in WS], "weighted RRF: tuned k, vector weight"),
    "wrrf-2k": (v_rrf, grid(kb=[0, 1, 2, 3, 5, 10, 20, 60], kv=[0, 1, 2, 3, 5, 10, 20, 60], w=WS), "weighted RRF, one k per retriever"),
    "wrrf-depth": (v_rrf, [{"kb": k, "kv": k, "w": w, "dv": d} for k in RRF_KS for w in WS for d in [5, 10, 20, 50, 150]], "weighted RRF, tuned vector depth"),
    "gated": (
        v_gated,
        grid(k=[1, 2, 5, 10, 60], feature=["gap10"], tau=[0.04, 0.06, 0.08, 0.1, 0.12, 0.16], w_low=[0.0, 0.1, 0.2, 0.4], w_high=[0.4, 0.6, 1.0])
        + grid(k=[1, 2, 5, 10, 60], feature=["overlap10"], tau=[2, 3, 4, 5, 6], w_low=[0.0, 0.1, 0.2, 0.4], w_high=[0.4, 0.6, 1.0]),
        "vector weight by its confidence (top-10 cosine gap) or the retrievers' top-10 overlap",
    ),
    "combsum": (v_combsum, grid(norm=["minmax", "z"], alpha=[0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6]), "score fusion of normalized scores"),
    "doc-max": (v_doc_max, grid(k=[1, 2, 5, 60], w=[0.2, 0.4, 0.6, 1.0], beta=[0.1, 0.25, 0.5, 1.0]), "weighted RRF + the document's best fused score"),
    "doc-rank": (
        v_doc_rank,
        grid(k=[0, 1, 2, 3, 5, 10, 60], w=[0.0, 0.1, 0.2, 0.3, 0.4, 0.6, 1.0], ub=[0.0, 0.1, 0.25, 0.5], uv=[0.0, 0.1, 0.25, 0.5]),
        "weighted RRF + RRF terms for the rank of the chunk's document in each retriever",
    ),
    "doc-def": (
        v_doc_signals,
        grid(k=[1, 2, 3], w=[0.1, 0.2, 0.3, 0.4], ub=[0.0], uv=[0.1, 0.25, 0.5], dm=[0.0, 0.05, 0.075, 0.1, 0.125, 0.15, 0.2, 0.3]),
        "doc-rank + a bonus for a chunk that defines a name the query mentions",
    ),
    "doc-position": (
        v_doc_signals,
        grid(k=[1, 2], w=[0.1, 0.2], ub=[0.0], uv=[0.1, 0.25, 0.5], dm=[0.0], p=[0.0, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2]),
        "probe, not a candidate: doc-rank + a lead prior p / (1 + chunk position); fits the question set's skew "
        "(quality_repos.md)",
    ),
    "bm25-prf": (v_bm25_prf, grid(m=[1, 3, 5], terms=[5, 10, 20], gamma=[0.1, 0.3, 0.5]), "BM25 pseudo-relevance feedback (no vector)"),
    "rocchio": (v_rocchio, grid(lam=[0.25, 0.5, 1.0], m=[1, 3, 5], k=[2, 5, 60], w=[0.4, 1.0]), "vector query + BM25 top-m chunk vectors, then weighted RRF"),
}
REFERENCES = ("bm25", "vector", "hybrid")
PROBES = ("doc-position",)  # scored and reported, left out of cv-select
