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
parameters). Paired bootstrap (ctxrag.tasks.evaluation.significance) of each variant's held-out per-query Pass@k against bm25 and
against today's hybrid. The docs sample (20 questions) is only a check: each variant runs with the parameters chosen
on the whole codebase set, and recall@3 / MRR@3 are reported, never tuned on.

The parts: quality_cv_data.py (indexes and cached rankings, folds), quality_cv_fusion.py (the variants),
quality_cv_select.py (scoring, cross-validation) and quality_cv_report.py; the other quality benchmarks import them.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from common import RESULTS, SHARED_DATA, machine_meta, write_report  # benchmarks/common.py
from quality_cv_data import cli_index, codebase_folds, load_dataset, round_robin_folds
from quality_cv_fusion import prf_stats
from quality_cv_report import render, strategy_check
from quality_cv_select import check_docs, evaluate_variants


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
    from ctxrag.tasks.embedding.precision import choose_precision

    meta = {**machine_meta(), "precision": "%s (%s)" % choose_precision(), "strategy_check": strategy_check(code, docs)}
    write_report(args.out / "quality_cv.md", render(results, meta))


if __name__ == "__main__":
    main()
