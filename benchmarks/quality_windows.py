"""Should the local model embed a chunk whole or as windows? Side by side on four question sets (issue: quality).

    .venv/bin/python benchmarks/quality_windows.py [--home CTXRAG_HOME] [--windows 128,256] [--out benchmarks/results]

MiniLM reads at most 512 word pieces of a text and was trained on short passages. ``ctxrag.tasks.embedding.windows`` embeds a chunk
as windows (the context with runs of whole lines of at most W word pieces) and averages their vectors. Here each
corpus's chunks are embedded three ways in one process, one after the other: whole (cut at 512, the previous
default) and pooled windows of each W; and, as a probe of a multi-vector index ctxrag does not have, each chunk
scored by its best window (max-sim over the same window vectors). Everything else is fixed: the index's BM25
ranking, its query vectors, the structural contexts. The corpora are the indexes ``quality_cv.py`` and
``quality_repos.py`` build (codebase set, docs sample, rich, sqlalchemy/orm; built here with the CLI when missing).

Scored: vector alone, hybrid (RRF 60) and hybrid-doc at the product's constants (ctxrag.tasks.retrieval.search) on every set; on the
codebase set also the 9-fold grouped CV of quality_cv's three fusion families (wrrf, doc-rank, doc-def) and their
nested selection, per embedding. Paired bootstrap (ctxrag.tasks.evaluation.significance) of each embedding against whole. The seconds
are rough (whole runs first and pays the warm-up; one call per embedding): compare speed with ``scale.py``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import quality_repos as repos
from common import RESULTS, SHARED_DATA, machine_meta, provenance, site_packages, write_report  # benchmarks/common.py
from quality_cv_data import (
    ABSENT, DEPTH, Dataset, Query, cli_index, codebase_folds, document_ranks, load_dataset, round_robin_folds,
)
from quality_cv_fusion import v_doc_signals, v_rrf, v_single
from quality_cv_report import describe, interval
from quality_cv_select import code_scores, docs_scores, evaluate_variants, run_variant
from ctxrag.tasks.embedding.embed import LocalEmbedder  # noqa: E402
from ctxrag.tasks.embedding.embedder_spec import LOCAL_DEFINES_CHARS, EmbedderSpec  # noqa: E402
from ctxrag.tasks.retrieval.fusion import DOC_FUSION_DEFINITION_WEIGHT, DOC_FUSION_DOCUMENT_WEIGHTS, DOC_FUSION_RRF_K, DOC_FUSION_WEIGHTS  # noqa: E402
from ctxrag.tasks.embedding.windows import pooled_rows, split_windows  # noqa: E402

CV_FAMILIES = ("wrrf", "doc-rank", "doc-def")
HYBRID_DOC = {  # the product's constants, in quality_cv's terms (BM25's own weight is 1 there)
    "k": DOC_FUSION_RRF_K, "w": DOC_FUSION_WEIGHTS["vector"], "ub": DOC_FUSION_DOCUMENT_WEIGHTS.get("bm25", 0.0),
    "uv": DOC_FUSION_DOCUMENT_WEIGHTS["vector"], "dm": DOC_FUSION_DEFINITION_WEIGHT,
}
assert DOC_FUSION_WEIGHTS["bm25"] == 1.0
STRATEGIES = {"vector": (v_single, {"retriever": "vector"}), "hybrid": (v_rrf, {"kb": 60, "kv": 60, "w": 1.0}), "hybrid-doc": (v_doc_signals, HYBRID_DOC)}


@dataclass
class Embedding:
    """One way of embedding a corpus: chunk vectors, or window vectors with each window's chunk (``owners``)."""

    vectors: np.ndarray
    owners: np.ndarray | None
    seconds: float
    texts: int
    pieces: int


def embeddings(data: Dataset, windows: list[int], embedder: LocalEmbedder) -> dict[str, Embedding]:
    """whole (the previous default), pooled windows of each size, and max-sim over the same windows (a probe)."""
    table = data.searcher.index.chunks
    pairs = list(zip(table["context"].to_pylist(), table["content"].to_pylist()))
    whole = EmbedderSpec(defines_chars=LOCAL_DEFINES_CHARS)
    texts = [whole.embedded_text(context, content) for context, content in pairs]
    started = time.perf_counter()
    vectors = embedder.embed(texts)
    out = {"whole": Embedding(vectors, None, time.perf_counter() - started, len(texts), sum(embedder.token_counts(texts)))}
    for size in windows:
        spec = EmbedderSpec(defines_chars=LOCAL_DEFINES_CHARS, window_tokens=size)
        split: list[str] = []
        owners: list[int] = []
        for row, (context, content) in enumerate(pairs):
            parts = split_windows(spec.embedded_text(context, content), size, embedder._piece_counts)
            split += parts
            owners += [row] * len(parts)
        started = time.perf_counter()
        vectors = embedder.embed(split)  # one vector per window; a windowed LocalEmbedder pools them the same way
        seconds, pieces = time.perf_counter() - started, sum(embedder.token_counts(split))
        out[f"windows {size}"] = Embedding(pooled_rows(vectors, owners, len(pairs)), None, seconds, len(split), pieces)
        out[f"max-sim {size} (probe)"] = Embedding(vectors, np.asarray(owners), seconds, len(split), pieces)
    return out


def with_vectors(data: Dataset, embedding: Embedding) -> Dataset:
    """``data`` with its vector ranking recomputed from ``embedding`` (max-sim: a chunk scores its best window)."""
    queries_matrix = np.stack([data.searcher.query_vector(query.text) for query in data.queries])
    rows = len(data.refs)
    similarity = queries_matrix @ embedding.vectors.T
    if embedding.owners is not None:
        best = np.full((len(data.queries), rows), -np.inf)
        for number in range(len(data.queries)):
            np.maximum.at(best[number], embedding.owners, similarity[number])
        similarity = best
    queries = []
    for number, query in enumerate(data.queries):
        order = np.argsort(-similarity[number], kind="stable")[: DEPTH]
        rv = np.full(rows, ABSENT)
        rv[order] = np.arange(1, order.size + 1)
        sv = np.full(rows, np.nan)
        sv[order] = similarity[number, order]
        queries.append(Query(query.text, query.golden, query.rb, rv, query.sb, sv, query.db, document_ranks(rv, data.doc_of_row)))
    return Dataset(data.name, data.searcher, data.evalset, data.refs, data.doc_of_row, queries, data.defines, data.chunk_index)


def scores(data: Dataset, docs: bool) -> dict[str, np.ndarray]:
    metric = docs_scores if docs else code_scores
    return {name: metric(data, run_variant(data, function, params)) for name, (function, params) in STRATEGIES.items()}


def render(results: dict[str, dict], meta: dict) -> str:
    lines = [
        "# Whole texts or pooled windows for the local model",
        "",
        f"{provenance(meta)}. Produced by "
        "`benchmarks/quality_windows.py` (method in its docstring). `embed s` is a rough cost: the embeddings run in "
        "one process, whole first (it pays the warm-up) and each as one big call, not as the index flow batches them; "
        "speed side by side is in `scale_windows.md`. Codebase set and repositories: Pass@5/10/20 (%); docs "
        "sample: recall@3 / MRR@3. Differences against whole: paired bootstrap, 10,000 resamples, 95%, `*` = the "
        "interval excludes 0. `max-sim` is a probe (ctxrag stores one vector per chunk).",
        "",
    ]
    for name, result in results.items():
        docs = result["docs"]
        lines += [f"## {name}: {result['chunks']:,} chunks, {result['queries']} questions", "",
                  "| embedding | texts | word pieces | embed s | " + " | ".join(f"{s} {'R@3 / MRR@3' if docs else '@5 / @10 / @20'}" for s in STRATEGIES) + " | hybrid-doc vs whole |",
                  "|---|---:|---:|---:|" + "---|" * (len(STRATEGIES) + 1)]
        base = result["scores"]["whole"]["hybrid-doc"]
        for embedding, table in result["scores"].items():
            cost = result["costs"][embedding]
            cells = [" / ".join(f"{value:.3f}" if docs else f"{100 * value:.2f}" for value in table[s].mean(axis=0)) for s in STRATEGIES]
            versus = "-" if embedding == "whole" else " / ".join(interval(table["hybrid-doc"][:, i], base[:, i]) for i in range(base.shape[1]))
            lines.append(f"| {embedding} | {cost.texts:,} | {cost.pieces:,} | {cost.seconds:.1f} | " + " | ".join(cells) + f" | {versus} |")
        lines.append("")
        if "cv" in result:
            lines += ["Codebase set, 9-fold grouped CV (quality_cv's families wrrf, doc-rank, doc-def; nested selection):", "",
                      "| embedding | cv-select CV @5 / @10 / @20 | plain | its whole-set choice | folds' families | vs whole (CV) |", "|---|---|---|---|---|---|"]
            whole_cv = result["cv"]["whole"]["cv-select"].cv
            for embedding, families in result["cv"].items():
                chosen = families["cv-select"]
                families_picked = ", ".join(f"{family} {count}" for family, count in sorted({p[0]: sum(q[0] == p[0] for q in chosen.picks) for p in chosen.picks}.items()))
                versus = "-" if embedding == "whole" else " / ".join(interval(chosen.cv[:, i], whole_cv[:, i]) for i in range(3))
                lines.append(f"| {embedding} | " + " / ".join(f"{100 * v:.2f}" for v in chosen.cv.mean(axis=0)) + " | "
                             + " / ".join(f"{100 * v:.2f}" for v in chosen.plain.mean(axis=0)) + f" | `{describe(chosen.final)}` | {families_picked} | {versus} |")
            lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=None)
    parser.add_argument("--windows", default="128,256", help="window sizes in word pieces")
    parser.add_argument("--packages", default="rich,sqlalchemy/orm", help="folders under site-packages (quality_repos)")
    parser.add_argument("--shared-data", type=Path, default=SHARED_DATA)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="ctxrag-quality-windows-"))
    os.environ["CTXRAG_HOME"] = str(home)
    data_dir, site = args.shared_data, site_packages()
    sets = [("code", data_dir / "codebase" / "codebase_chunks.json", data_dir / "codebase" / "evaluation_set.jsonl"),
            ("docs", data_dir / "anthropic_docs" / "anthropic_summary_indexed_docs.json", data_dir / "anthropic_docs" / "docs_evaluation_sample.json")]
    for package in args.packages.split(","):
        name = repos.repository_index_name(package)
        sets.append((name, *repos.prepare_repository(site / package, home, name)))
    embedder = LocalEmbedder(EmbedderSpec())
    windows = [int(size) for size in args.windows.split(",")]
    results: dict[str, dict] = {}
    for name, source, evalset in sets:
        cli_index(home, source, name)
        data = load_dataset(name, home, evalset)
        docs = name == "docs"
        result: dict = {"chunks": len(data.refs), "queries": len(data.queries), "docs": docs, "scores": {}, "costs": {}}
        if name == "code":
            folds, folds_rr = codebase_folds(source, data), round_robin_folds(source, data)
            result["cv"] = {}
        for label, embedding in embeddings(data, windows, embedder).items():
            rescored = with_vectors(data, embedding)
            result["scores"][label], result["costs"][label] = scores(rescored, docs), embedding
            if name == "code":
                result["cv"][label] = evaluate_variants(rescored, folds, folds_rr, CV_FAMILIES)
            print(f"{name} {label}: {embedding.seconds:.1f} s", file=sys.stderr, flush=True)
        results[name] = result
    write_report(args.out / "quality_windows.md", render(results, machine_meta()))


if __name__ == "__main__":
    main()
