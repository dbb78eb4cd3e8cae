"""Evaluation over fixed rankings: per-query and mean metrics equal hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from ctxrag.storage.backends.embedded import EmbeddedRanker, top_rows
from ctxrag.storage.bm25 import Bm25Index
from ctxrag.storage.index_store import StoredIndex
from ctxrag.storage.vectors import VectorIndex
from ctxrag.tasks.evaluation.evalset import EvalFormat, EvalQuery, EvalSet
from ctxrag.tasks.evaluation.evaluate import (
    Evaluation,
    NoGoldenChunksInIndex,
    chunk_refs,
    evaluate,
    require_golden_chunks,
)
from ctxrag.tasks.retrieval.search import Searcher, Strategy
from tests.equipment.fixed_searcher import FakeSearcher

# rows: 0 a#0, 1 a#1, 2 b#0, 3 b#1, 4 c#0, 5 c#1
JSONL_CHUNKS = pa.table(
    {
        "chunk_id": [f"id{i}" for i in range(6)],
        "doc_id": ["a", "a", "b", "b", "c", "c"],
        "chunk_index": pa.array([0, 1, 0, 1, 0, 1], type=pa.int64()),
    }
)
JSONL_SET = EvalSet(
    "q.jsonl",
    EvalFormat.PASS_AT_K,
    [
        EvalQuery("1", "first", ("a#1", "b#0")),
        EvalQuery("2", "second", ("c#1", "zz#9")),  # zz#9 is not in the index
    ],
)
IDEAL_2 = 1 + 1 / math.log2(3)  # ideal DCG of two golden chunks: 1.63093

JSONL_RANKINGS = {
    (Strategy.VECTOR, "first"): [1, 3, 2, 0],
    (Strategy.VECTOR, "second"): [0, 5],
    (Strategy.BM25, "first"): [],
    (Strategy.BM25, "second"): [5],
}


def test_chunk_refs_per_format() -> None:
    searcher = FakeSearcher(JSONL_CHUNKS, {})
    assert chunk_refs(searcher, JSONL_SET) == ["a#0", "a#1", "b#0", "b#1", "c#0", "c#1"]  # type: ignore[arg-type]
    docs = EvalSet("e.json", EvalFormat.DOCS, [])
    assert chunk_refs(searcher, docs) == [f"id{i}" for i in range(6)]  # type: ignore[arg-type]


def test_jsonl_pass_at_k_by_hand() -> None:
    searcher = FakeSearcher(JSONL_CHUNKS, JSONL_RANKINGS)
    result = evaluate(searcher, JSONL_SET, [Strategy.VECTOR, Strategy.BM25], [1, 3])  # type: ignore[arg-type]
    assert isinstance(result, Evaluation)
    # vector, "first":  top 1 = a#1 -> 1/2;  top 3 = a#1, b#1, b#0 -> 2/2 = 1
    # vector, "second": top 1 = a#0 -> 0;    top 3 = a#0, c#1 -> 1/2 (zz#9 still counts as golden)
    # means: pass@1 = (1/2 + 0) / 2 = 0.25; pass@3 = (1 + 1/2) / 2 = 0.75
    # bm25, "first": nothing -> 0, 0;  "second": c#1 -> 1/2, 1/2; means 0.25, 0.25
    # hit@k: vector "first" 1, 1; "second" 0, 1 -> 0.5, 1.0;  bm25 "first" 0, 0; "second" 1, 1 -> 0.5, 0.5
    # ndcg@1 (ideal over min(1, 2) = 1 rank): vector 1, 0 -> 0.5; bm25 0, 1 -> 0.5
    # ndcg@3 (ideal 1 + 1/log2 3 = 1.63093): vector "first" a#1 at 1, b#0 at 3 -> 1.5 / 1.63093 = 0.91972;
    #   "second" c#1 at 2 -> 0.63093 / 1.63093 = 0.38685; mean 0.65329.  bm25 "second" c#1 at 1 -> 0.61315; mean 0.30657
    assert result.metrics == {
        "vector": {
            "pass@1": pytest.approx(0.25),
            "pass@3": pytest.approx(0.75),
            "hit@1": pytest.approx(0.5),
            "hit@3": pytest.approx(1.0),
            "ndcg@1": pytest.approx(0.5),
            "ndcg@3": pytest.approx((1.5 + 1 / math.log2(3)) / IDEAL_2 / 2),
        },
        "bm25": {
            "pass@1": pytest.approx(0.25),
            "pass@3": pytest.approx(0.25),
            "hit@1": pytest.approx(0.5),
            "hit@3": pytest.approx(0.5),
            "ndcg@1": pytest.approx(0.5),
            "ndcg@3": pytest.approx(1 / IDEAL_2 / 2),
        },
    }
    assert result.metrics["vector"]["ndcg@3"] == pytest.approx(0.65329, abs=1e-5)
    assert list(result.metrics["vector"]) == ["pass@1", "pass@3", "hit@1", "hit@3", "ndcg@1", "ndcg@3"]
    assert result.missing_golden == ["zz#9"]
    assert result.seconds >= 0
    # every search asks for max(ks) results
    assert {k for _, _, k in searcher.calls} == {3}
    assert len(searcher.calls) == 4


def test_jsonl_per_query_rows() -> None:
    searcher = FakeSearcher(JSONL_CHUNKS, JSONL_RANKINGS)
    result = evaluate(searcher, JSONL_SET, [Strategy.VECTOR, Strategy.BM25], [1, 3])  # type: ignore[arg-type]
    assert result.per_query.column_names == [
        "strategy",
        "query_id",
        "query",
        "golden",
        "pass@1",
        "pass@3",
        "hit@1",
        "hit@3",
        "ndcg@1",
        "ndcg@3",
        "retrieved",
    ]
    first, second = ["a#1", "b#0"], ["c#1", "zz#9"]
    assert result.per_query.to_pylist() == [
        {
            "strategy": "vector",
            "query_id": "1",
            "query": "first",
            "golden": first,
            "pass@1": 0.5,
            "pass@3": 1.0,
            "hit@1": 1.0,
            "hit@3": 1.0,
            "ndcg@1": 1.0,
            "ndcg@3": pytest.approx(1.5 / IDEAL_2),
            "retrieved": ["a#1", "b#1", "b#0"],
        },
        {
            "strategy": "vector",
            "query_id": "2",
            "query": "second",
            "golden": second,
            "pass@1": 0.0,
            "pass@3": 0.5,
            "hit@1": 0.0,
            "hit@3": 1.0,
            "ndcg@1": 0.0,
            "ndcg@3": pytest.approx((1 / math.log2(3)) / IDEAL_2),
            "retrieved": ["a#0", "c#1"],
        },
        {
            "strategy": "bm25",
            "query_id": "1",
            "query": "first",
            "golden": first,
            "pass@1": 0.0,
            "pass@3": 0.0,
            "hit@1": 0.0,
            "hit@3": 0.0,
            "ndcg@1": 0.0,
            "ndcg@3": 0.0,
            "retrieved": [],
        },
        {
            "strategy": "bm25",
            "query_id": "2",
            "query": "second",
            "golden": second,
            "pass@1": 0.5,
            "pass@3": 0.5,
            "hit@1": 1.0,
            "hit@3": 1.0,
            "ndcg@1": 1.0,
            "ndcg@3": pytest.approx(1 / IDEAL_2),
            "retrieved": ["c#1"],
        },
    ]


# rows 0..4: chunk links l0..l4
DOCS_CHUNKS = pa.table(
    {"chunk_id": ["l0", "l1", "l2", "l3", "l4"], "doc_id": ["p"] * 5, "chunk_index": [0, 1, 2, 3, 4]}
)
DOCS_SET = EvalSet(
    "e.json",
    EvalFormat.DOCS,
    [EvalQuery("q1", "one", ("l0",)), EvalQuery("q2", "two", ("l2", "l3", "l4"))],
)
DOCS_RANKINGS = {(Strategy.HYBRID, "one"): [0, 1], (Strategy.HYBRID, "two"): [1, 2]}


def test_docs_metrics_by_hand_with_f1_from_the_means() -> None:
    searcher = FakeSearcher(DOCS_CHUNKS, DOCS_RANKINGS)
    result = evaluate(searcher, DOCS_SET, [Strategy.HYBRID], [1, 2])  # type: ignore[arg-type]
    metrics = result.metrics["hybrid"]
    # k = 1: q1 [l0] -> P 1, R 1, RR 1;  q2 [l1] -> P 0, R 0, RR 0
    #   means P 0.5, R 0.5 -> F1 = 2 * 0.5 * 0.5 / 1 = 0.5; MRR 0.5
    # k = 2: q1 [l0, l1] -> P 1/2, R 1/1, RR 1;  q2 [l1, l2] -> P 1/2, R 1/3, RR 1/2
    #   mean P = 1/2, mean R = (1 + 1/3) / 2 = 2/3, MRR = (1 + 1/2) / 2 = 3/4
    #   F1 from the means = 2 * (1/2) * (2/3) / (1/2 + 2/3) = (2/3) / (7/6) = 4/7 = 0.5714
    #   (the mean of per-query F1 would be (2/3 + 2/5) / 2 = 8/15 = 0.5333: q1 F1 = 2/3, q2 F1 = 2 * (1/6) / (5/6) = 2/5)
    # hit: k = 1: q1 1, q2 0 -> 0.5;  k = 2: q1 1, q2 1 (l2 at rank 2) -> 1.0
    # ndcg: k = 1: q1 1, q2 0 -> 0.5
    #   k = 2: q1 l0 at rank 1, ideal over min(2, 1) = 1 rank -> 1
    #          q2 l2 at rank 2: 1/log2(3) = 0.63093, ideal over min(2, 3) = 2 ranks = 1.63093 -> 0.38685;  mean 0.69343
    assert list(metrics) == [
        "precision@1",
        "recall@1",
        "f1@1",
        "mrr@1",
        "precision@2",
        "recall@2",
        "f1@2",
        "mrr@2",
        "hit@1",
        "hit@2",
        "ndcg@1",
        "ndcg@2",
    ]
    assert metrics == {
        "precision@1": pytest.approx(0.5),
        "recall@1": pytest.approx(0.5),
        "f1@1": pytest.approx(0.5),
        "mrr@1": pytest.approx(0.5),
        "precision@2": pytest.approx(0.5),
        "recall@2": pytest.approx(2 / 3),
        "f1@2": pytest.approx(4 / 7),
        "mrr@2": pytest.approx(0.75),
        "hit@1": pytest.approx(0.5),
        "hit@2": pytest.approx(1.0),
        "ndcg@1": pytest.approx(0.5),
        "ndcg@2": pytest.approx((1 + 1 / math.log2(3) / IDEAL_2) / 2),
    }
    assert metrics["ndcg@2"] == pytest.approx(0.69343, abs=1e-5)
    assert metrics["f1@2"] != pytest.approx(8 / 15)
    assert result.missing_golden == []


def test_docs_per_query_rows() -> None:
    searcher = FakeSearcher(DOCS_CHUNKS, DOCS_RANKINGS)
    result = evaluate(searcher, DOCS_SET, [Strategy.HYBRID], [2])  # type: ignore[arg-type]
    assert result.per_query.column_names == [
        "strategy",
        "query_id",
        "query",
        "golden",
        "precision@2",
        "recall@2",
        "mrr@2",
        "hit@2",
        "ndcg@2",
        "retrieved",
    ]
    rows = result.per_query.to_pylist()
    assert [row["golden"] for row in rows] == [["l0"], ["l2", "l3", "l4"]]
    assert [row["hit@2"] for row in rows] == [1.0, 1.0]
    assert [row["ndcg@2"] for row in rows] == pytest.approx([1.0, 1 / math.log2(3) / IDEAL_2])
    assert [row["retrieved"] for row in rows] == [["l0", "l1"], ["l1", "l2"]]
    assert [row["precision@2"] for row in rows] == pytest.approx([0.5, 0.5])
    assert [row["recall@2"] for row in rows] == pytest.approx([1.0, 1 / 3])
    assert [row["mrr@2"] for row in rows] == pytest.approx([1.0, 0.5])


def test_docs_missing_golden_chunks_are_reported_sorted_once() -> None:
    evalset = EvalSet(
        "e.json",
        EvalFormat.DOCS,
        [EvalQuery("q1", "one", ("l0", "zz", "gone")), EvalQuery("q2", "two", ("gone", "l4"))],
    )
    result = evaluate(FakeSearcher(DOCS_CHUNKS, {}), evalset, [Strategy.BM25], [3])  # type: ignore[arg-type]
    assert result.missing_golden == ["gone", "zz"]


def test_jsonl_golden_pair_with_a_wrong_chunk_index_is_missing() -> None:
    evalset = EvalSet("q.jsonl", EvalFormat.PASS_AT_K, [EvalQuery("1", "q", ("a#0", "a#7", "nodoc#0"))])
    result = evaluate(FakeSearcher(JSONL_CHUNKS, {}), evalset, [Strategy.BM25], [5])  # type: ignore[arg-type]
    assert result.missing_golden == ["a#7", "nodoc#0"]
    assert result.metrics == {"bm25": {"pass@5": 0.0, "hit@5": 0.0, "ndcg@5": 0.0}}


def test_an_index_holding_none_of_the_golden_chunks_is_an_error_naming_it_and_the_counts() -> None:
    other_corpus = EvalSet(
        "data/evaluation_set.jsonl",
        EvalFormat.PASS_AT_K,
        [
            EvalQuery("1", "q", ("5e4c#0", "5e4c#1")),
            EvalQuery("2", "r", ("5e4c#1", "77aa#3")),
            EvalQuery("3", "s", ("a#9",)),
        ],
    )
    with pytest.raises(NoGoldenChunksInIndex) as raised:
        require_golden_chunks(FakeSearcher(JSONL_CHUNKS, {}), other_corpus, "docs")  # type: ignore[arg-type]
    assert str(raised.value).startswith(
        "index 'docs' holds none of the 3 questions' 4 golden chunks of evaluation_set.jsonl: is --name right"
    )
    assert isinstance(raised.value, LookupError)


def test_a_partial_overlap_is_scored_not_refused() -> None:
    require_golden_chunks(FakeSearcher(JSONL_CHUNKS, {}), JSONL_SET, "docs")  # type: ignore[arg-type]  (zz#9 missing)
    docs_set = EvalSet("e.json", EvalFormat.DOCS, [EvalQuery("q1", "one", ("gone",)), EvalQuery("q2", "two", ("l4",))])
    require_golden_chunks(FakeSearcher(DOCS_CHUNKS, {}), docs_set, "docs")  # type: ignore[arg-type]


def test_progress_is_reported_per_strategy_and_query() -> None:
    seen: list[tuple[int, int]] = []
    evaluate(
        FakeSearcher(JSONL_CHUNKS, JSONL_RANKINGS),
        JSONL_SET,
        [Strategy.VECTOR, Strategy.BM25],
        [1],  # type: ignore[arg-type]
        progress=lambda done, total: seen.append((done, total)),
    )
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_no_strategies() -> None:
    result = evaluate(FakeSearcher(JSONL_CHUNKS, {}), JSONL_SET, [], [5])  # type: ignore[arg-type]
    assert result.metrics == {}
    assert result.per_query.num_rows == 0
    assert result.missing_golden == ["zz#9"]


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        (EvalFormat.PASS_AT_K, {"pass@3": 0.0, "hit@3": 0.0, "ndcg@3": 0.0}),
        (
            EvalFormat.DOCS,
            {"precision@3": 0.0, "recall@3": 0.0, "f1@3": 0.0, "mrr@3": 0.0, "hit@3": 0.0, "ndcg@3": 0.0},
        ),
    ],
    ids=["jsonl", "docs"],
)
def test_evaluation_set_without_queries(fmt: EvalFormat, expected: dict[str, float]) -> None:
    result = evaluate(FakeSearcher(JSONL_CHUNKS, {}), EvalSet("x", fmt, []), [Strategy.BM25], [3])  # type: ignore[arg-type]
    assert result.metrics == {"bm25": expected}
    assert result.per_query.num_rows == 0


# --- with the real Searcher over a hand-built index (fixed vector scores, no model) -------------------------------

TEXTS = ["lemon kiwi", "mango melon", "lemon lemon mango", "grape"]
VECTOR = np.array([0.1, 0.9, 0.3, 0.9], dtype=np.float32)  # vector ranking 1, 3, 2, 0 for every query


class FixedVectorRanker(EmbeddedRanker):
    def rank_vector(self, vector: np.ndarray, depth: int, allowed: object = None) -> list[tuple[int, float]]:
        return [(row, float(VECTOR[row])) for row in top_rows(VECTOR, depth)]


class FixedSearcher(Searcher):
    def query_vector(self, query: str) -> np.ndarray:
        return np.zeros(1, dtype=np.float32)


def real_searcher() -> Searcher:
    chunks = pa.table(
        {"chunk_id": [f"c{i}" for i in range(4)], "doc_id": ["d"] * 4, "chunk_index": pa.array(range(4), pa.int64())}
    )
    searcher = FixedSearcher.__new__(FixedSearcher)
    searcher.index = StoredIndex(
        {"config": {}}, chunks, FixedVectorRanker(Bm25Index.build(TEXTS), VectorIndex(np.eye(4)))
    )
    searcher.embedder = None
    searcher.candidates = 150
    searcher.server_rrf = False
    return searcher


@pytest.mark.parametrize(
    ("strategy", "top3", "pass1", "pass3", "ndcg3"),
    [
        # "lemon": BM25 ranks rows 2, 0; vector 1, 3, 2, 0
        (Strategy.VECTOR, ["d#1", "d#3", "d#2"], 0.0, 1.0, 0.5),  # d#2 at rank 3: 1 / log2(4)
        (Strategy.BM25, ["d#2", "d#0"], 1.0, 1.0, 1.0),
        # RRF: row 2 = 1/63 + 1/61, row 0 = 1/64 + 1/62, row 1 = 1/61, row 3 = 1/62
        (Strategy.HYBRID, ["d#2", "d#0", "d#1"], 1.0, 1.0, 1.0),
        # weighted: row 1 = 0.8, row 2 = 0.8/3 + 0.2 = 0.467, row 3 = 0.4, row 0 = 0.8/4 + 0.2/2 = 0.3
        (Strategy.HYBRID_WEIGHTED, ["d#1", "d#2", "d#3"], 0.0, 1.0, 1 / math.log2(3)),  # rank 2: 0.63093
    ],
)
def test_every_strategy_on_a_real_searcher(
    strategy: Strategy, top3: list[str], pass1: float, pass3: float, ndcg3: float
) -> None:
    evalset = EvalSet("q.jsonl", EvalFormat.PASS_AT_K, [EvalQuery("1", "lemon", ("d#2",))])
    result = evaluate(real_searcher(), evalset, [strategy], [1, 3])
    assert result.per_query["retrieved"].to_pylist() == [top3]
    # one golden chunk: hit@k equals pass@k, and ndcg@1 too
    assert result.metrics == {
        strategy.value: {
            "pass@1": pass1,
            "pass@3": pass3,
            "hit@1": pass1,
            "hit@3": pass3,
            "ndcg@1": pass1,
            "ndcg@3": pytest.approx(ndcg3),
        }
    }
