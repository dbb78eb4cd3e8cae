"""quality_cv.py's data: the indexes built with the `ctxrag` CLI, every query ranked once by BM25 and by the vector
index (DEPTH deep each) and kept as arrays of ranks and scores, and the folds the cross-validation holds out."""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from common import private_env, run_ctxrag  # benchmarks/common.py
from ctxrag.storage.index_store import IndexStore
from ctxrag.tasks.evaluation.evalset import EvalSet, load_evalset
from ctxrag.tasks.evaluation.evaluate import chunk_refs
from ctxrag.tasks.retrieval.search import Searcher
from ctxrag.tasks.context.structure import defined_names

DEPTH = 150  # each retriever's ranking, as the hybrid strategies read it (ctxrag.storage.fusion.FUSION_DEPTH)
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
