"""Score search strategies on an evaluation set: per-query results and the averaged metrics table.

Rows are strategies, and ``<strategy>+rerank-<provider>`` for each reranker given. With an ``EndToEnd``, Claude
answers each query from the top chunks and a Claude judge grades the answer: ``accuracy`` joins the metrics.

A per-query row: ``strategy``, ``query_id``, ``query``, ``golden`` (its chunk references), the query's metrics,
``answer``/``correct`` (end to end only), and ``retrieved`` (the ranked references, ``max(ks)`` deep).
``ctxrag.tasks.evaluation.results.load_run`` reads them back from a run folder as a DataFrame.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from ctxrag.storage.errors import UserError
from ctxrag.tasks.evaluation.answer import EndToEnd
from ctxrag.tasks.evaluation.evalset import EvalFormat, EvalQuery, EvalSet, golden_ref
from ctxrag.tasks.evaluation.metrics import (
    f1_from_means,
    hit_at_k,
    mean,
    ndcg_at_k,
    pass_at_k,
    precision_at_k,
    recall_at_k,
    reciprocal_rank_at_k,
)
from ctxrag.tasks.retrieval.rerank import Reranker
from ctxrag.tasks.retrieval.search import Searcher, Strategy, StrategyConfig


@dataclass
class Evaluation:
    """Metrics (row -> metric -> fraction), the per-query rows, and what could not be scored cleanly."""

    metrics: dict[str, dict[str, float]]
    per_query: pa.Table
    missing_golden: list[str] = field(default_factory=list)
    seconds: float = 0.0
    unparseable_judgements: dict[str, int] = field(default_factory=dict)
    rerank_fallbacks: dict[str, int] = field(default_factory=dict)


class NoGoldenChunksInIndex(UserError, LookupError):
    """The index holds none of the evaluation set's golden chunks: every score would be zero (the wrong ``--name``, or
    a set made for another corpus)."""


def chunk_refs(searcher: Searcher, evalset: EvalSet) -> list[str]:
    """How each index row is named in the evaluation set's golden lists."""
    chunks = searcher.index.chunks
    if evalset.format is EvalFormat.DOCS:
        return chunks["chunk_id"].to_pylist()
    return [
        golden_ref(doc, index) for doc, index in zip(chunks["doc_id"].to_pylist(), chunks["chunk_index"].to_pylist())
    ]


def missing_golden(refs: list[str], evalset: EvalSet) -> list[str]:
    """The golden chunk references of ``evalset`` that are not among the index's ``refs``, sorted, once each."""
    known = set(refs)
    return sorted({ref for query in evalset.queries for ref in query.golden if ref not in known})


def require_golden_chunks(searcher: Searcher, evalset: EvalSet, index_name: str) -> None:
    """Raise ``NoGoldenChunksInIndex`` when the index holds none of the set's golden chunks (a partial overlap is
    scored: the missing ones count as misses, and ``evaluate`` lists them)."""
    golden = {ref for query in evalset.queries for ref in query.golden}
    if golden and len(missing_golden(chunk_refs(searcher, evalset), evalset)) == len(golden):
        raise NoGoldenChunksInIndex(
            f"index {index_name!r} holds none of the {len(evalset.queries)} questions' {len(golden)} golden chunks of "
            f"{Path(evalset.path).name}: is --name right, or is the evaluation set for another corpus?"
        )


def evaluate(
    searcher: Searcher,
    evalset: EvalSet,
    strategies: Sequence[Strategy | StrategyConfig],
    ks: list[int],
    progress: Callable[[int, int], None] | None = None,
    rerankers: list[Reranker] | None = None,
    end_to_end: EndToEnd | None = None,
    workers: int = 1,
) -> Evaluation:
    started = time.perf_counter()
    refs = chunk_refs(searcher, evalset)
    missing = missing_golden(refs, evalset)
    configs = [StrategyConfig.of(strategy) for strategy in strategies]
    variants: list[tuple[str, StrategyConfig, Reranker | None]] = [
        (name, config, reranker)
        for config in configs
        for name, reranker in [(config.label, None)] + [(f"{config.label}+{r.label}", r) for r in rerankers or []]
    ]
    result = Evaluation({}, pa.table({}), missing)
    rows: list[dict[str, object]] = []
    total, done, lock = len(variants) * len(evalset.queries), 0, threading.Lock()

    def score(name: str, strategy: StrategyConfig, reranker: Reranker | None, query: EvalQuery) -> dict[str, object]:
        nonlocal done
        hits = searcher.search(query.query, strategy, max(ks), reranker)
        retrieved = [refs[hit.row] for hit in hits]
        golden = list(query.golden)
        row: dict[str, object] = {"strategy": name, "query_id": query.query_id, "query": query.query, "golden": golden}
        row.update(query_metrics(evalset.format, retrieved, golden, ks))
        if end_to_end is not None:
            documents = [searcher.index.chunks.value("content", hit.row) for hit in hits[: min(ks)]]
            answer = end_to_end.answer(query.query, documents)
            row["answer"], row["correct"] = answer, end_to_end.judge(query.query, answer, query.answer)
        row["retrieved"] = retrieved
        with lock:
            done += 1
            if progress:
                progress(done, total)
        return row

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for name, strategy, reranker in variants:
            variant_rows = list(pool.map(lambda query: score(name, strategy, reranker, query), evalset.queries))
            rows += variant_rows
            result.metrics[name] = _summarize(evalset.format, variant_rows, ks)
            if end_to_end is not None:
                verdicts = [row["correct"] for row in variant_rows]
                judged = [verdict for verdict in verdicts if verdict is not None]
                result.unparseable_judgements[name] = len(verdicts) - len(judged)
                result.metrics[name]["accuracy"] = mean([1.0 if verdict else 0.0 for verdict in judged])
            if reranker is not None and hasattr(reranker, "fallbacks"):
                result.rerank_fallbacks[name] = reranker.fallbacks
                reranker.fallbacks = 0  # type: ignore[attr-defined]
    result.per_query = pa.Table.from_pylist(rows)
    result.seconds = time.perf_counter() - started
    return result


def query_metrics(fmt: EvalFormat, retrieved: list[str], golden: list[str], ks: list[int]) -> dict[str, float]:
    """One query's metrics: the format's own (per k, as before), then ``hit@k`` and ``ndcg@k`` for every k."""
    values: dict[str, float] = {}
    for k in ks:
        if fmt is EvalFormat.PASS_AT_K:
            values[f"pass@{k}"] = pass_at_k(retrieved, golden, k)
        else:
            values[f"precision@{k}"] = precision_at_k(retrieved, golden, k)
            values[f"recall@{k}"] = recall_at_k(retrieved, golden, k)
            values[f"mrr@{k}"] = reciprocal_rank_at_k(retrieved, golden, k)
    values.update({f"hit@{k}": hit_at_k(retrieved, golden, k) for k in ks})
    values.update({f"ndcg@{k}": ndcg_at_k(retrieved, golden, k) for k in ks})
    return values


def _summarize(fmt: EvalFormat, rows: list[dict[str, object]], ks: list[int]) -> dict[str, float]:
    """Means over the queries; for docs sets, ``f1@k`` (from the mean precision and mean recall) follows ``recall@k``."""
    summary = {name: mean([float(row[name]) for row in rows]) for name in query_metrics(fmt, [], [], ks)}  # type: ignore[arg-type]
    if fmt is EvalFormat.PASS_AT_K:
        return summary
    ordered: dict[str, float] = {}
    for name, value in summary.items():
        ordered[name] = value
        if name.startswith("recall@"):
            k = name.removeprefix("recall@")
            ordered[f"f1@{k}"] = f1_from_means(summary[f"precision@{k}"], value)
    return ordered
