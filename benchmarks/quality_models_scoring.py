"""quality_models.py's scoring: an embedder's vectors (cached on disk, with its speed) turned into the vector side of
quality_cv's cached rankings, then each fusion family scored and cross-validated as quality_cv does."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

from quality_cv_data import ABSENT, DEPTH, Dataset, Query, document_ranks
from quality_cv_fusion import VARIANTS, grid, inverse, ranked, v_doc_rank, v_rrf, v_single
from quality_cv_select import Result, code_scores, docs_scores, run_variant, summarize
from ctxrag.tasks.common.models import indexed_text

HYBRID_DOC = {"k": 1, "w": 0.1, "ub": 0.0, "uv": 0.25}  # ctxrag.tasks.retrieval.search's hybrid-doc parameters
LATENCY_QUERIES = 40


def corpus_texts(data: Dataset) -> tuple[list[str], list[str], list[str]]:
    chunks = data.searcher.index.chunks
    contexts = [context or "" for context in chunks["context"].to_pylist()]
    contents = chunks["content"].to_pylist()
    return [indexed_text(c, t) for c, t in zip(contexts, contents)], contexts, contents


def timed_vectors(encoder, data: Dataset, label: str, cache: Path, texts: list[str] | None = None, suffix: str = "") -> tuple[np.ndarray, np.ndarray, dict]:
    """(chunk vectors, query vectors, speed) for one dataset, cached on disk by label and the texts' hash."""
    texts = texts if texts is not None else corpus_texts(data)[0]
    queries = [query.text for query in data.queries]
    digest = hashlib.sha256(json.dumps([texts, queries]).encode()).hexdigest()[:16]
    stem = cache / f"{label}{suffix}-{data.name}-{digest}"
    if stem.with_suffix(".npz").exists():
        stored = np.load(stem.with_suffix(".npz"))
        return stored["chunks"], stored["queries"], json.loads(stem.with_suffix(".json").read_text())
    encoder.encode(texts[:2], "document")  # load and warm up
    started = time.perf_counter()
    chunks = encoder.encode(texts, "document")
    seconds = time.perf_counter() - started
    query_vectors = encoder.encode(queries, "query")
    latencies = []
    for query in queries[:LATENCY_QUERIES]:
        started = time.perf_counter()
        encoder.encode([query], "query")
        latencies.append((time.perf_counter() - started) * 1000)
    speed = {"chunks": len(texts), "seconds": seconds, "chunks_per_s": len(texts) / seconds, "query_ms_median": float(np.median(latencies)), "query_ms_p90": float(np.percentile(latencies, 90))}
    cache.mkdir(parents=True, exist_ok=True)
    np.savez(stem.with_suffix(".npz"), chunks=chunks, queries=query_vectors)
    stem.with_suffix(".json").write_text(json.dumps(speed))
    print(f"{label}{suffix} {data.name}: {len(texts)} texts in {seconds:.1f} s ({speed['chunks_per_s']:.1f}/s), query {speed['query_ms_median']:.1f} ms", file=sys.stderr, flush=True)
    return chunks, query_vectors, speed


def with_scores(data: Dataset, scores: np.ndarray) -> Dataset:
    """The dataset with its vector side (rv, sv, dv) replaced by the ranking of ``scores`` (queries x rows)."""
    rows = scores.shape[1]
    queries = []
    for query, row_scores in zip(data.queries, scores):
        order = np.argsort(-row_scores, kind="stable")[: DEPTH]
        rv, sv = np.full(rows, ABSENT), np.full(rows, np.nan)
        rv[order], sv[order] = np.arange(1, order.size + 1), row_scores[order]
        queries.append(dataclasses.replace(query, rv=rv, sv=sv, dv=document_ranks(rv, data.doc_of_row), extra={}))
    return dataclasses.replace(data, queries=queries)


def with_second_vector(data: Dataset, second: Dataset) -> Dataset:
    """``data`` (MiniLM vector side) with ``second``'s vector ranking stored in each query's extra."""
    queries = [dataclasses.replace(q, extra={"rv2": s.rv, "dv2": s.dv}) for q, s in zip(data.queries, second.queries)]
    return dataclasses.replace(data, queries=queries)


def v_doc_rank2(data: Dataset, query: Query, k: float, w: float, uv: float, w2: float, uv2: float) -> list[int]:
    """hybrid-doc with two vector retrievers: BM25 + w/(k+MiniLM rank) + uv/(k+its doc rank) + the same for the second."""
    rv2, dv2 = query.extra["rv2"], query.extra["dv2"]
    score = inverse(query.rb, k) + inverse(query.rv, k, w) + inverse(query.dv, k, uv) + inverse(rv2, k, w2) + inverse(dv2, k, uv2)
    return ranked(score, query, rv=np.minimum(query.rv, rv2))


FAMILIES = {
    "vector": (v_single, VARIANTS["vector"][1], "the embedder alone"),
    "hybrid-doc fixed": (v_doc_rank, [HYBRID_DOC], "the project's hybrid-doc parameters, untuned"),
    "wrrf": (v_rrf, VARIANTS["wrrf"][1], "weighted RRF with BM25, k and w tuned"),
    "doc-rank": (v_doc_rank, VARIANTS["doc-rank"][1], "hybrid-doc's family, k, w, ub, uv tuned"),
}
TWO_VECTOR_GRID = grid(k=[1, 2], w=[0.0, 0.1, 0.2], uv=[0.0, 0.1, 0.25], w2=[0.0, 0.1, 0.2, 0.4], uv2=[0.0, 0.1, 0.25, 0.5])


def score_families(label: str, code: Dataset, docs: Dataset, folds: np.ndarray, folds_rr: np.ndarray, families: dict) -> list[Result]:
    results, pool_configs, pool_scores = [], [], []
    functions = {name: function for name, (function, _, _) in families.items()}
    for name, (function, params_grid, about) in families.items():
        scores = np.stack([code_scores(code, run_variant(code, function, params)) for params in params_grid])
        configs = [(name, params) for params in params_grid]
        result = summarize(f"{label}: {name}", about, configs, scores, folds, folds_rr)
        result.docs = docs_scores(docs, run_variant(docs, function, result.final[1])).mean(axis=0)
        results.append(result)
        if len(params_grid) > 1 and name != "vector":
            pool_configs += configs
            pool_scores.append(scores)
    if len(pool_scores) > 1:
        result = summarize(f"{label}: cv-select", "nested: family and parameters per fold", pool_configs, np.concatenate(pool_scores), folds, folds_rr)
        name, params = result.final
        result.docs = docs_scores(docs, run_variant(docs, functions[name], params)).mean(axis=0)
        results.append(result)
    return results
