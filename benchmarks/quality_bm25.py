"""Does a BM25 other than Lucene's defaults (k1 1.2, b 0.75) help the default `hybrid-doc`? Cross-validated (quality issue).

    .venv/bin/python benchmarks/quality_bm25.py [--shared-data PATH] [--home CTXRAG_HOME] [--out benchmarks/results]

Indexes the codebase set and the docs sample (summaries) with the `ctxrag` CLI on offline defaults, as
`quality_cv.py` does, and reuses its data and scoring. For every BM25 configuration (bm25s method x k1 x b) the
keyword index is rebuilt in memory over the same indexed texts (context + chunk, `ctxrag.storage.tokenize`), every query is
ranked again (150 deep), and `hybrid-doc`'s fusion (ctxrag.tasks.retrieval.search: RRF k=1, vector weight 0.1, vector document
weight 0.25) is applied to it and to the unchanged vector ranking. The BM25 configuration is chosen by the same
9-fold grouped cross-validation (objective: mean Pass@5/10/20 on the 8 training folds) and the held-out fold scored;
"CV" pools the held-out queries. A second family re-tunes the fusion's parameters jointly with BM25's (nested in
the same folds). The docs sample is only a check. Writes quality_bm25.md.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import tempfile
import time
from collections import Counter
from pathlib import Path

import bm25s
import numpy as np

from common import RESULTS, SHARED_DATA, write_report  # benchmarks/common.py
from quality_cv_data import ABSENT, DEPTH, KS, Dataset, cli_index, codebase_folds, document_ranks, load_dataset
from quality_cv_fusion import v_doc_rank
from quality_cv_report import interval
from quality_cv_select import code_scores, cross_validate, docs_scores
from ctxrag.storage.tokenize import tokenize  # noqa: E402
from ctxrag.tasks.common.models import indexed_text  # noqa: E402
from ctxrag.tasks.retrieval.fusion import DOC_FUSION_DOCUMENT_WEIGHTS, DOC_FUSION_RRF_K, DOC_FUSION_WEIGHTS  # noqa: E402

METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")
K1S = (0.6, 0.9, 1.2, 1.5, 2.0, 3.0)
BS = (0.3, 0.5, 0.6, 0.75, 0.9, 1.0)
DEFAULT = ("lucene", 1.2, 0.75)
HYBRID_DOC = {"k": DOC_FUSION_RRF_K, "w": DOC_FUSION_WEIGHTS["vector"], "ub": DOC_FUSION_DOCUMENT_WEIGHTS.get("bm25", 0.0),
              "uv": DOC_FUSION_DOCUMENT_WEIGHTS.get("vector", 0.0)}
FUSION_GRID = [{"k": k, "w": w, "ub": 0.0, "uv": uv} for k in (1, 2, 5) for w in (0.1, 0.2, 0.4) for uv in (0.1, 0.25, 0.5)]


def indexed_texts(data: Dataset) -> list[str]:
    chunks = data.searcher.index.chunks
    return [indexed_text(context or "", content) for context, content in zip(chunks["context"].to_pylist(), chunks["content"].to_pylist())]


def rerank_bm25(data: Dataset, tokens: list[list[str]], method: str, k1: float, b: float) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per query: (BM25 rank of every row, its score, its document's BM25 rank) under this configuration."""
    retriever = bm25s.BM25(k1=k1, b=b, method=method)
    retriever.index(tokens, show_progress=False)
    out = []
    for query in data.queries:
        ids = retriever.get_tokens_ids(tokenize(query.text))
        scores = np.asarray(retriever.get_scores(ids), dtype=np.float64) if ids else np.zeros(len(tokens))
        order = [row for row in np.argsort(-scores, kind="stable")[:DEPTH] if scores[row] > 0]
        ranks = np.full(len(tokens), ABSENT)
        ranks[order] = np.arange(1, len(order) + 1)
        out.append((ranks, np.where(np.isfinite(ranks), scores, 0.0), document_ranks(ranks, data.doc_of_row)))
    return out


def with_bm25(data: Dataset, ranked: list[tuple[np.ndarray, np.ndarray, np.ndarray]], fusion: dict) -> list[list[int]]:
    rows = []
    for query, (rb, sb, db) in zip(data.queries, ranked):
        saved = (query.rb, query.sb, query.db)
        query.rb, query.sb, query.db = rb, sb, db
        rows.append(v_doc_rank(data, query, **fusion))
        query.rb, query.sb, query.db = saved
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared-data", type=Path, default=SHARED_DATA)
    parser.add_argument("--home", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="ctxrag-quality-bm25-"))
    os.environ["CTXRAG_HOME"] = str(home)
    corpus = args.shared_data / "codebase" / "codebase_chunks.json"
    cli_index(home, corpus, "code")
    cli_index(home, args.shared_data / "anthropic_docs" / "anthropic_summary_indexed_docs.json", "docs")
    code = load_dataset("code", home, args.shared_data / "codebase" / "evaluation_set.jsonl")
    docs = load_dataset("docs", home, args.shared_data / "anthropic_docs" / "docs_evaluation_sample.json")
    folds = codebase_folds(corpus, code)
    code_tokens = [tokenize(text) for text in indexed_texts(code)]
    docs_tokens = [tokenize(text) for text in indexed_texts(docs)]
    configs = list(itertools.product(METHODS, K1S, BS))
    started = time.perf_counter()
    ranked = {config: rerank_bm25(code, code_tokens, *config) for config in configs}
    fixed = np.stack([code_scores(code, with_bm25(code, ranked[config], HYBRID_DOC)) for config in configs])
    bm25_alone = np.stack([code_scores(code, [[int(r) for r in np.argsort(rb, kind="stable")[:max(KS)] if np.isfinite(rb[r])] for rb, _, _ in ranked[config]]) for config in configs])
    joint_configs = [(config, fusion) for config in configs for fusion in FUSION_GRID]
    joint = np.stack([code_scores(code, with_bm25(code, ranked[config], fusion)) for config, fusion in joint_configs])
    seconds = time.perf_counter() - started
    default = configs.index(DEFAULT)
    reference = fixed[default]
    rows = []
    for label, scores, names in (
        ("bm25 alone, Lucene defaults (reference)", bm25_alone[default : default + 1], [configs[default]]),
        ("bm25 alone, tuned BM25", bm25_alone, configs),
        ("hybrid-doc, Lucene defaults (today's default)", fixed[default : default + 1], [configs[default]]),
        ("hybrid-doc fusion, tuned BM25", fixed, configs),
        ("hybrid-doc fusion re-tuned jointly with BM25", joint, joint_configs),
    ):
        cv, picks = cross_validate(scores, folds)
        plain = scores[int(np.argmax(scores.mean(axis=(1, 2))))]
        whole = names[int(np.argmax(scores.mean(axis=(1, 2))))]
        rows.append((label, plain.mean(axis=0), cv, Counter(str(names[p]) for p in picks), whole))
    docs_default = docs_scores(docs, with_bm25(docs, rerank_bm25(docs, docs_tokens, *DEFAULT), HYBRID_DOC)).mean(axis=0)
    lines = [
        "# BM25 parameters for `hybrid-doc`, cross-validated (codebase set), checked on the docs sample",
        "",
        f"`benchmarks/quality_bm25.py`, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        f"{len(configs)} BM25 configurations (bm25s methods {', '.join(METHODS)}; k1 {K1S}; b {BS}), "
        f"{len(FUSION_GRID)} fusion settings for the joint family; scoring took {seconds:.0f} s. Folds, objective and "
        "pooling as in `quality_cv.md` (9 folds of 10 documents, one codebase each).",
        "",
        "| family | plain P@5 | P@10 | P@20 | CV P@5 | CV P@10 | CV P@20 | CV vs today's hybrid-doc @5 / @10 / @20 | chosen on the whole set | fold picks |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for label, plain, cv, picks, whole in rows:
        vs = " / ".join(interval(cv[:, i], reference[:, i]) for i in range(len(KS)))
        shown = "; ".join(f"{count}x {pick}" for pick, count in picks.most_common(3)) + (" ..." if len(picks) > 3 else "")
        lines.append(f"| {label} | " + " | ".join(f"{100 * v:.2f}" for v in plain) + " | "
                     + " | ".join(f"{100 * v:.2f}" for v in cv.mean(axis=0)) + f" | {vs} | `{whole}` | {shown} |")
    best = rows[3][4]
    docs_best = docs_scores(docs, with_bm25(docs, rerank_bm25(docs, docs_tokens, *best), HYBRID_DOC)).mean(axis=0)
    lines += [
        "",
        f"Docs sample (summary index), hybrid-doc: Lucene defaults recall@3 {docs_default[0]:.3f} / MRR@3 {docs_default[1]:.3f}; "
        f"with the BM25 chosen on the whole codebase set {best}: {docs_best[0]:.3f} / {docs_best[1]:.3f}.",
        "",
        "Intervals: paired bootstrap (ctxrag.tasks.evaluation.significance, 10,000 resamples, 95%) of CV per-query Pass@k minus today's "
        "hybrid-doc, in points; `*` where it excludes 0.",
    ]
    write_report(args.out / "quality_bm25.md", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
