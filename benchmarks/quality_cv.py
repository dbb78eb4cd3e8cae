"""Which fusion of BM25 and vector rankings should be the default? Every tuned choice cross-validated (issue: quality).

    .venv/bin/python benchmarks/quality_cv.py [--shared-data PATH] [--home CTXRAG_HOME] [--out benchmarks/results]

Indexes the cookbook's codebase set and the docs sample (summaries) with the `ctxrag` CLI on offline defaults (into
``--home``, or a fresh temporary CTXRAG_HOME; an index already there is reused), ranks every query once with BM25
and with the vector index (150 deep each), then scores fusion variants on those cached rankings.

Selection is honest: on the codebase set, queries are grouped by the document of their golden chunks (every query's
golden chunks lie in one document); the corpus's 90 documents, in file order, make 9 folds of 10 consecutive
documents (in this corpus, one codebase per fold). Each variant's parameters are chosen on 8 folds (objective: mean
of Pass@5, @10, @20 over their queries; ties: the first in grid order) and the held-out fold is scored with them; the
"CV" figures pool the held-out queries. ``cv-select`` also chooses the family per fold (nested: family and
parameters). Paired bootstrap (tasks.significance) of each variant's held-out per-query Pass@k against bm25 and
against today's hybrid. The docs sample (20 questions) is only a check: each variant runs with the parameters chosen
on the whole codebase set, and recall@3 / MRR@3 are reported, never tuned on.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from common import RESULTS, SHARED_DATA, machine_meta, private_env, provenance, run_ctxrag, write_report  # benchmarks/common.py
from storage.index_store import IndexStore  # noqa: E402
from storage.tokenize import tokenize  # noqa: E402
from tasks.evalset import EvalSet, load_evalset  # noqa: E402
from tasks.evaluate import chunk_refs  # noqa: E402
from tasks.metrics import pass_at_k, recall_at_k, reciprocal_rank_at_k  # noqa: E402
from tasks.models import indexed_text  # noqa: E402
from tasks.results import disagreements  # noqa: E402
from tasks.search import Searcher, Strategy  # noqa: E402
from tasks.significance import paired_bootstrap  # noqa: E402
from tasks.structure import defined_names, mentioned_names  # noqa: E402

DEPTH = 150  # each retriever's ranking, as the hybrid strategies read it (storage.fusion.FUSION_DEPTH)
KS = (5, 10, 20)
FOLDS = 9
ABSENT = math.inf  # the rank of a row a retriever did not return


@dataclass
class Query:
    text: str
    golden: list[str]
    rb: np.ndarray  # BM25 rank of every row (ABSENT beyond its matches or DEPTH)
    rv: np.ndarray  # vector rank of every row (ABSENT beyond DEPTH)
    sb: np.ndarray  # BM25 score (0 where absent)
    sv: np.ndarray  # cosine (nan where absent)
    db: np.ndarray  # rank of each row's document in BM25's ranking of documents (by their best chunk)
    dv: np.ndarray  # the same for the vector ranking
    extra: dict = field(default_factory=dict)


@dataclass
class Dataset:
    name: str
    searcher: Searcher
    evalset: EvalSet
    refs: list[str]
    doc_of_row: np.ndarray
    queries: list[Query]
    defines: list[frozenset[str]] = field(default_factory=list)  # per row: the names its chunk defines
    chunk_index: np.ndarray = field(default_factory=lambda: np.zeros(0))  # per row: its position in its document
    prf: dict = field(default_factory=dict)  # term statistics for BM25 pseudo-relevance feedback


# --- data ----------------------------------------------------------------------------------------------------------


def cli_index(home: Path, source: Path, name: str) -> None:
    if IndexStore(home).live_version(name) is not None:
        print(f"reusing index {name!r} in {home}", file=sys.stderr)
        return
    env = private_env(home, CTXRAG_PREFECT_SERVER="temporary")  # nothing outlives the command
    print(f"indexing {source.name} as {name!r} ...", file=sys.stderr, flush=True)
    run_ctxrag(["index", str(source), "--name", name, "--json"], env)


def document_ranks(ranks: np.ndarray, doc_of_row: np.ndarray) -> np.ndarray:
    """Per row: the rank of its document when documents are ordered by their best chunk's rank (ABSENT if none)."""
    best = np.full(doc_of_row.max() + 1, ABSENT)
    np.minimum.at(best, doc_of_row, ranks)
    found = int(np.isfinite(best).sum())
    order = np.argsort(best, kind="stable")[:found]
    doc_rank = np.full(best.size, ABSENT)
    doc_rank[order] = np.arange(1, found + 1)
    return doc_rank[doc_of_row]


def load_dataset(name: str, home: Path, evalset_path: Path) -> Dataset:
    searcher = Searcher(IndexStore(home).open(name))
    evalset = load_evalset(evalset_path)
    searcher.prefetch([query.query for query in evalset.queries])
    refs = chunk_refs(searcher, evalset)
    doc_ids = searcher.index.chunks["doc_id"].to_pylist()
    numbering = {doc: number for number, doc in enumerate(dict.fromkeys(doc_ids))}
    doc_of_row = np.array([numbering[doc] for doc in doc_ids])
    rows = len(refs)
    queries = []
    for query in evalset.queries:
        rb, sb, rv, sv = np.full(rows, ABSENT), np.zeros(rows), np.full(rows, ABSENT), np.full(rows, np.nan)
        for rank, (row, score) in enumerate(searcher.rank_bm25(query.query, DEPTH), start=1):
            rb[row], sb[row] = rank, score
        for rank, (row, score) in enumerate(searcher.rank_vector(query.query, DEPTH), start=1):
            rv[row], sv[row] = rank, score
        queries.append(Query(query.query, list(query.golden), rb, rv, sb, sv, document_ranks(rb, doc_of_row), document_ranks(rv, doc_of_row)))
    defines = [frozenset(defined_names(text)) for text in searcher.index.chunks["content"].to_pylist()]
    chunk_index = np.array(searcher.index.chunks["chunk_index"].to_pylist())
    return Dataset(name, searcher, evalset, refs, doc_of_row, queries, defines, chunk_index)


def codebase_folds(corpus_path: Path, dataset: Dataset) -> np.ndarray:
    """Fold of each query: its golden document's position in the corpus file // 10 (9 folds of 10 documents)."""
    documents = [record["original_uuid"] for record in json.loads(corpus_path.read_text())]
    per_fold = math.ceil(len(documents) / FOLDS)
    fold_of_doc = {doc: position // per_fold for position, doc in enumerate(documents)}
    folds = []
    for query in dataset.queries:
        docs = {ref.rsplit("#", 1)[0] for ref in query.golden}
        assert len(docs) == 1, f"query {query.text!r} has golden chunks in {len(docs)} documents"
        folds.append(fold_of_doc[docs.pop()])
    return np.array(folds)


def round_robin_folds(corpus_path: Path, dataset: Dataset) -> np.ndarray:
    """A second assignment, for robustness only: document position mod 9 (every fold mixes codebases)."""
    documents = [record["original_uuid"] for record in json.loads(corpus_path.read_text())]
    fold_of_doc = {doc: position % FOLDS for position, doc in enumerate(documents)}
    return np.array([fold_of_doc[query.golden[0].rsplit("#", 1)[0]] for query in dataset.queries])


# --- fusion variants: each maps (dataset, query, params) to the query's ranked rows ---------------------------------


def ranked(score: np.ndarray, query: Query, rv: np.ndarray | None = None, rb: np.ndarray | None = None, depth: int = max(KS)) -> list[int]:
    """Rows some retriever returned, by score, then best single rank, then row (tasks.search's order)."""
    rb = query.rb if rb is None else rb
    rv = query.rv if rv is None else rv
    rows = np.nonzero(np.isfinite(rb) | np.isfinite(rv))[0]
    order = np.lexsort((rows, np.minimum(rb, rv)[rows], -score[rows]))
    return rows[order][:depth].tolist()


def inverse(ranks: np.ndarray, k: float, weight: float = 1.0) -> np.ndarray:
    """weight / (k + rank), 0 where absent (computed as tasks.search does, so ties break the same way)."""
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
    """doc-rank, plus ``dm`` for a candidate whose chunk defines a name the query mentions (tasks.structure), plus
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


# --- scoring ---------------------------------------------------------------------------------------------------------


def code_scores(data: Dataset, rows: list[list[int]]) -> np.ndarray:
    """Queries x KS Pass@k, with tasks.metrics."""
    return np.array([[pass_at_k([data.refs[row] for row in ranking], query.golden, k) for k in KS] for query, ranking in zip(data.queries, rows)])


def docs_scores(data: Dataset, rows: list[list[int]]) -> np.ndarray:
    """Queries x (recall@3, MRR@3), with tasks.metrics."""
    out = []
    for query, ranking in zip(data.queries, rows):
        retrieved = [data.refs[row] for row in ranking]
        out.append([recall_at_k(retrieved, query.golden, 3), reciprocal_rank_at_k(retrieved, query.golden, 3)])
    return np.array(out)


def run_variant(data: Dataset, function: Callable[..., list[int]], params: dict) -> list[list[int]]:
    return [function(data, query, **params) for query in data.queries]


def cross_validate(scores: np.ndarray, folds: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """scores: configs x queries x KS. Per fold: the config with the best training mean (first on ties) scores it."""
    held = np.zeros(scores.shape[1:])
    picks = []
    for fold in range(folds.max() + 1):
        train = folds != fold
        pick = int(np.argmax(scores[:, train, :].mean(axis=(1, 2))))
        picks.append(pick)
        held[~train] = scores[pick][~train]
    return held, picks


@dataclass
class Result:
    name: str
    about: str
    configs: list[tuple[str, dict]]  # (variant name, params)
    scores: np.ndarray  # configs x queries x KS
    plain: np.ndarray  # queries x KS of the config chosen on the whole set
    final: tuple[str, dict]
    cv: np.ndarray
    picks: list[tuple[str, dict]]
    cv_round_robin: np.ndarray
    docs: np.ndarray | None = None


def evaluate_variants(code: Dataset, folds: np.ndarray, folds_rr: np.ndarray, families: Iterable[str] | None = None) -> dict[str, Result]:
    """Every variant (or only ``families``) cross-validated, and ``cv-select`` over the non-reference, non-probe ones."""
    results: dict[str, Result] = {}
    every: list[tuple[str, dict]] = []
    blocks = []
    wanted = set(VARIANTS if families is None else families)
    for name, (function, params_grid, about) in VARIANTS.items():
        if name not in wanted:
            continue
        started = time.perf_counter()
        scores = np.stack([code_scores(code, run_variant(code, function, params)) for params in params_grid])
        configs = [(name, params) for params in params_grid]
        results[name] = summarize(name, about, configs, scores, folds, folds_rr)
        if name not in REFERENCES + PROBES:
            every += configs
            blocks.append(scores)
        print(f"{name}: {len(params_grid)} configurations, {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    results["cv-select"] = summarize("cv-select", "nested: family and parameters chosen per fold among all the above but the probes", every, np.concatenate(blocks), folds, folds_rr)
    return results


def summarize(name: str, about: str, configs: list[tuple[str, dict]], scores: np.ndarray, folds: np.ndarray, folds_rr: np.ndarray) -> Result:
    final = int(np.argmax(scores.mean(axis=(1, 2))))
    cv, picks = cross_validate(scores, folds)
    cv_rr, _ = cross_validate(scores, folds_rr)
    return Result(name, about, configs, scores, scores[final], configs[final], cv, [configs[p] for p in picks], cv_rr)


def check_docs(docs: Dataset, results: dict[str, Result]) -> None:
    for result in results.values():
        name, params = result.final
        result.docs = docs_scores(docs, run_variant(docs, VARIANTS[name][0], params)).mean(axis=0)


# --- report ----------------------------------------------------------------------------------------------------------


def describe(config: tuple[str, dict]) -> str:
    name, params = config
    return f"{name}(" + ", ".join(f"{key}={value:g}" if isinstance(value, (int, float)) else f"{key}={value}" for key, value in params.items()) + ")"


def interval(a: np.ndarray, b: np.ndarray) -> str:
    result = paired_bootstrap(a, b)
    mark = "*" if result.excludes_zero else ""
    return f"{100 * result.mean_difference:+.2f} [{100 * result.low:+.2f}, {100 * result.high:+.2f}]{mark}"


def disagreement_table(per_query: dict[str, np.ndarray], fused: list[str]) -> list[str]:
    """Markdown: per k, the queries bm25 and vector disagree on (tasks.results.disagreements; found = Pass@k of 1),
    and what each of ``fused`` scores on them. ``per_query``: strategy -> queries x KS Pass@k."""
    import pandas as pd

    frame = pd.DataFrame(
        [{"query_id": str(i), "strategy": name, **{f"pass@{k}": row[j] for j, k in enumerate(KS)}}
         for name, values in per_query.items() for i, row in enumerate(values)]
    )
    lines = ["| k | case | queries | " + " | ".join(fused) + " |", "|---|---|---:|" + "---:|" * len(fused)]
    for k in KS:
        table = disagreements(frame, "bm25", "vector", f"pass@{k}", fused)
        for case, row in table.iterrows():
            cells = " | ".join("-" if math.isnan(row[name]) else f"{100 * row[name]:.1f}" for name in fused)
            lines.append(f"| {k} | {case} | {int(row['queries'])} | {cells} |")
    return lines


def render(results: dict[str, Result], meta: dict) -> str:
    bm25, hybrid = results["bm25"].plain, results["hybrid"].plain
    pct = lambda values: " | ".join(f"{100 * value:.2f}" for value in values)  # noqa: E731
    lines = [
        "# Fusion variants, cross-validated (codebase set) and checked on the docs sample",
        "",
        f"{provenance(meta)}; offline defaults (structural "
        "contexts, local MiniLM embedder, embedded BM25), indexes built with the `ctxrag index` CLI. Produced by "
        "`benchmarks/quality_cv.py`.",
        "",
        "Codebase set: 248 queries, 737 chunks in 90 documents. Tuned by cross-validation: every variant's parameters "
        "(and, for `cv-select`, the variant itself). Folds: the corpus's documents in file order, 10 per fold (9 folds, "
        "one codebase each); a query belongs to the fold of its golden chunks' document. Objective on the 8 training "
        "folds: mean of Pass@5, @10, @20 (first in grid order on ties). \"CV\" = held-out Pass@k pooled over the 248 "
        "queries (each scored with parameters chosen without its fold); \"plain\" = the configuration best on the whole "
        "set, scored on the whole set (optimistic for tuned variants). \"CV rr\" = the same CV with documents dealt "
        "round-robin to folds (mixed codebases), a robustness check. Docs sample (20 questions, summary index): the "
        "whole-set configuration, recall@3 / MRR@3, never tuned on. Reference rows (bm25, vector, hybrid) are not tuned.",
        "",
        f"Local embedder precision: {meta['precision']}. Caveat: the families and their grids were designed after "
        "exploratory looks at whole-set figures, so CV protects the parameter (and, in `cv-select`, the family) "
        "choice, not the choice of which ideas to try.",
        "",
        "| variant | plain P@5 | P@10 | P@20 | CV P@5 | CV P@10 | CV P@20 | CV rr P@10 | docs R@3 | docs MRR@3 | configs | parameters (whole set) | fold picks |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for result in results.values():
        plain, cv = result.plain.mean(axis=0), result.cv.mean(axis=0)
        picks = Counter(describe(pick) for pick in result.picks)
        shown = "same in 9/9" if len(picks) == 1 else "; ".join(f"{count}x {pick}" for pick, count in picks.most_common())
        lines.append(
            f"| {result.name} | {pct(plain)} | {pct(cv)} | {100 * result.cv_round_robin.mean(axis=0)[1]:.2f} | "
            f"{result.docs[0]:.3f} | {result.docs[1]:.3f} | {len(result.configs)} | `{describe(result.final)}` | {shown} |"
        )
    lines += [
        "",
        "Paired bootstrap (tasks.significance.paired_bootstrap: 10,000 resamples of the 248 queries, seed 0, 95%) of "
        "each variant's CV per-query Pass@k minus bm25's and minus hybrid's, in points; `*`: the interval excludes 0.",
        "",
        "| variant | vs bm25 @5 | vs bm25 @10 | vs bm25 @20 | vs hybrid @5 | vs hybrid @10 | vs hybrid @20 |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for result in results.values():
        if result.name in ("bm25",):
            continue
        cells = [interval(result.cv[:, i], bm25[:, i]) for i in range(len(KS))]
        cells += ["-"] * len(KS) if result.name == "hybrid" else [interval(result.cv[:, i], hybrid[:, i]) for i in range(len(KS))]
        lines.append(f"| {result.name} | " + " | ".join(cells) + " |")
    chosen, simpler, previous = results["cv-select"], results["wrrf"], results["doc-rank"]
    lines += [
        "",
        "`cv-select` (CV) minus `wrrf` (CV), the simpler two-parameter fusion: "
        + ", ".join(f"@{k} {interval(chosen.cv[:, i], simpler.cv[:, i])}" for i, k in enumerate(KS)) + ".",
        "",
        "`doc-def` (CV) minus `doc-rank` (CV), what the definition evidence adds: "
        + ", ".join(f"@{k} {interval(results['doc-def'].cv[:, i], previous.cv[:, i])}" for i, k in enumerate(KS)) + ".",
    ]
    passing = [
        result.name for result in results.values()
        if result.name not in REFERENCES
        and all(result.cv.mean(axis=0) >= bm25.mean(axis=0)) and all(result.cv.mean(axis=0) > hybrid.mean(axis=0))
        and result.docs[0] >= results["bm25"].docs[0] and result.docs[1] >= results["bm25"].docs[1]
    ]
    lines += [
        "",
        "Where the components disagree: the queries split by whether bm25 and vector each find all their golden chunks "
        "in the top k (Pass@k = 1), with each fusion's mean Pass@k on them (`cv-select` held out, `hybrid` plain).",
        "",
        *disagreement_table({"bm25": bm25, "vector": results["vector"].plain, "hybrid": hybrid, "cv-select": chosen.cv}, ["hybrid", "cv-select"]),
    ]
    lines += [
        "",
        "Better than hybrid and not below bm25 at every k on CV, and not below bm25 on the docs sample: "
        + (", ".join(f"`{name}`" for name in passing) or "none") + ".",
    ]
    lines += ["", "Variants:", ""] + [f"- `{result.name}`: {result.about}" for result in results.values()]
    if meta.get("strategy_check"):
        lines += ["", meta["strategy_check"]]
    return "\n".join(lines) + "\n"


def strategy_check(code: Dataset, docs: Dataset) -> str:
    """Does tasks.search's hybrid-doc rank as this script's doc-def (doc-rank + definitions) does? Its speed."""
    strategy = next((s for s in Strategy if s.value == "hybrid-doc"), None)
    if strategy is None:
        return ""
    from tasks.search import DOC_FUSION_DEFINITION_WEIGHT, DOC_FUSION_DOCUMENT_WEIGHTS, DOC_FUSION_RRF_K, DOC_FUSION_WEIGHTS

    params = {
        "k": DOC_FUSION_RRF_K,
        "w": DOC_FUSION_WEIGHTS["vector"],
        "ub": DOC_FUSION_DOCUMENT_WEIGHTS.get("bm25", 0.0),
        "uv": DOC_FUSION_DOCUMENT_WEIGHTS.get("vector", 0.0),
        "dm": DOC_FUSION_DEFINITION_WEIGHT,
    }
    assert DOC_FUSION_WEIGHTS["bm25"] == 1.0
    lines = []
    for data, scorer in ((code, code_scores), (docs, docs_scores)):
        rows = [[hit.row for hit in data.searcher.search(query.text, strategy, max(KS))] for query in data.queries]
        same = sum(got == v_doc_signals(data, query, **params) for got, query in zip(rows, data.queries))
        measured = scorer(data, rows).mean(axis=0)
        timings = {}
        for timed in (strategy, Strategy.HYBRID):
            started = time.perf_counter()
            for query in data.queries:
                data.searcher.search(query.text, timed, 10)
            timings[timed] = (time.perf_counter() - started) / len(data.queries) * 1000
        shown = " / ".join(f"{value * 100:.2f}" if data is code else f"{value:.3f}" for value in measured)
        lines.append(
            f"{data.name}: {shown}, top-20 identical to doc-def{tuple(params.values())} for {same}/{len(rows)} queries; "
            f"{timings[strategy]:.2f} ms per query (hybrid {timings[Strategy.HYBRID]:.2f} ms; query vectors cached)"
        )
    return "`Strategy.HYBRID_DOC` (tasks/search.py) through `Searcher.search` on the same indexes: " + "; ".join(lines) + "."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared-data", type=Path, default=SHARED_DATA)
    parser.add_argument("--home", type=Path, default=None, help="CTXRAG_HOME to index into (default: a fresh temporary one)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    data = args.shared_data
    home = args.home or Path(tempfile.mkdtemp(prefix="ctxrag-quality-cv-"))
    os.environ["CTXRAG_HOME"] = str(home)
    corpus = data / "codebase" / "codebase_chunks.json"
    cli_index(home, corpus, "code")
    cli_index(home, data / "anthropic_docs" / "anthropic_summary_indexed_docs.json", "docs")
    code = load_dataset("code", home, data / "codebase" / "evaluation_set.jsonl")
    docs = load_dataset("docs", home, data / "anthropic_docs" / "docs_evaluation_sample.json")
    for dataset in (code, docs):
        dataset.prf = prf_stats(dataset)
    results = evaluate_variants(code, codebase_folds(corpus, code), round_robin_folds(corpus, code))
    check_docs(docs, results)
    from tasks.precision import choose_precision

    meta = {**machine_meta(), "precision": "%s (%s)" % choose_precision(), "strategy_check": strategy_check(code, docs)}
    write_report(args.out / "quality_cv.md", render(results, meta))


if __name__ == "__main__":
    main()
