"""Score search strategies on an evaluation set: per-query results and the averaged metrics table."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import pyarrow as pa

from tasks.evalset import EvalFormat, EvalSet, golden_ref
from tasks.metrics import f1_from_means, mean, pass_at_k, precision_at_k, recall_at_k, reciprocal_rank_at_k
from tasks.search import Searcher, Strategy


@dataclass
class Evaluation:
    """Metrics (strategy -> metric -> fraction), the per-query rows, and golden chunks absent from the index."""

    metrics: dict[str, dict[str, float]]
    per_query: pa.Table
    missing_golden: list[str] = field(default_factory=list)
    seconds: float = 0.0


def chunk_refs(searcher: Searcher, evalset: EvalSet) -> list[str]:
    """How each index row is named in the evaluation set's golden lists."""
    chunks = searcher.index.chunks
    if evalset.format is EvalFormat.DOCS:
        return chunks["chunk_id"].to_pylist()
    return [golden_ref(doc, index) for doc, index in zip(chunks["doc_id"].to_pylist(), chunks["chunk_index"].to_pylist())]


def evaluate(
    searcher: Searcher,
    evalset: EvalSet,
    strategies: list[Strategy],
    ks: list[int],
    progress: Callable[[int, int], None] | None = None,
) -> Evaluation:
    started = time.perf_counter()
    refs = chunk_refs(searcher, evalset)
    known = set(refs)
    missing = sorted({ref for query in evalset.queries for ref in query.golden if ref not in known})
    depth = max(ks)
    rows: list[dict[str, object]] = []
    metrics: dict[str, dict[str, float]] = {}
    total, done = len(strategies) * len(evalset.queries), 0
    for strategy in strategies:
        scores: dict[str, list[float]] = {}
        for query in evalset.queries:
            hits = searcher.search(query.query, strategy, depth)
            retrieved = [refs[hit.row] for hit in hits]
            row: dict[str, object] = {"strategy": strategy.value, "query_id": query.query_id, "query": query.query}
            for k in ks:
                for name, value in _query_metrics(evalset.format, retrieved, list(query.golden), k).items():
                    scores.setdefault(name, []).append(value)
                    row[name] = value
            row["retrieved"] = retrieved
            rows.append(row)
            done += 1
            if progress:
                progress(done, total)
        metrics[strategy.value] = _summarize(evalset.format, scores, ks)
    return Evaluation(metrics, pa.Table.from_pylist(rows), missing, time.perf_counter() - started)


def _query_metrics(fmt: EvalFormat, retrieved: list[str], golden: list[str], k: int) -> dict[str, float]:
    if fmt is EvalFormat.PASS_AT_K:
        return {f"pass@{k}": pass_at_k(retrieved, golden, k)}
    return {
        f"precision@{k}": precision_at_k(retrieved, golden, k),
        f"recall@{k}": recall_at_k(retrieved, golden, k),
        f"mrr@{k}": reciprocal_rank_at_k(retrieved, golden, k),
    }


def _summarize(fmt: EvalFormat, scores: dict[str, list[float]], ks: list[int]) -> dict[str, float]:
    names = [name for k in ks for name in _query_metrics(fmt, [], [], k)]
    summary = {name: mean(scores.get(name, [])) for name in names}
    if fmt is EvalFormat.DOCS:
        ordered: dict[str, float] = {}
        for k in ks:
            precision, recall = summary[f"precision@{k}"], summary[f"recall@{k}"]
            ordered.update({f"precision@{k}": precision, f"recall@{k}": recall, f"f1@{k}": f1_from_means(precision, recall), f"mrr@{k}": summary[f"mrr@{k}"]})
        return ordered
    return summary
