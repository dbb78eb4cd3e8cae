"""Search strategies and their configurations, on a hand-built index with fixed vector scores (no embedding model)."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from ctxrag.storage.chunk_table import ChunkTable
from ctxrag.storage.errors import InvalidInput
from ctxrag.tasks.retrieval.fusion import (
    DOC_FUSION_DEFINITION_WEIGHT,
    DOC_FUSION_DOCUMENT_WEIGHTS,
    DOC_FUSION_WEIGHTS,
    SCORE_FUSION_VECTOR_WEIGHT,
    RankedRow,
    document_fusion,
    score_fusion,
)
from ctxrag.tasks.retrieval.search import DEFAULT_STRATEGY, DEFINES, Searcher, Strategy, StrategyConfig
from tests.equipment.fixed_searcher import TEXTS, make_searcher, stored_index

WEIGHTS = {"vector": 0.8, "bm25": 0.2}


def rows_of(hits: list[RankedRow]) -> list[int]:
    return [hit.row for hit in hits]


# --- Strategy ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", list(Strategy))
def test_strategy_from_str_round_trip(strategy: Strategy) -> None:
    assert Strategy.from_str(strategy.value) is strategy


def test_strategy_values() -> None:
    assert [strategy.value for strategy in Strategy] == [
        "vector",
        "bm25",
        "hybrid",
        "hybrid-weighted",
        "hybrid-doc",
        "hybrid-score",
    ]
    assert DEFAULT_STRATEGY == "hybrid-score"


@pytest.mark.parametrize("value", ["Hybrid", "rrf", "", "hybrid_weighted"])
def test_strategy_from_str_error_lists_the_choices(value: str) -> None:
    with pytest.raises(ValueError) as raised:
        Strategy.from_str(value)
    assert (
        str(raised.value)
        == f"unknown strategy {value!r}; choose one of: vector, bm25, hybrid, hybrid-weighted, hybrid-doc, hybrid-score"
    )


@pytest.mark.parametrize(
    ("written", "config", "label"),
    [
        ("hybrid-score", StrategyConfig(Strategy.HYBRID_SCORE), "hybrid-score"),
        (
            "hybrid-score(vector_weight=0.3)",
            StrategyConfig(Strategy.HYBRID_SCORE, vector_weight=0.3),
            "hybrid-score(vector_weight=0.3)",
        ),
        (" hybrid( rrf_k = 10 ) ", StrategyConfig(Strategy.HYBRID, rrf_k=10), "hybrid(rrf_k=10)"),
        ("hybrid(rrf_k=60)", StrategyConfig(Strategy.HYBRID), "hybrid"),  # the default value is not written
        ("bm25()", StrategyConfig(Strategy.BM25), "bm25"),
    ],
)
def test_strategy_config_reads_and_writes_its_parameters(written: str, config: StrategyConfig, label: str) -> None:
    assert StrategyConfig.from_str(written) == config
    assert config.label == label
    assert StrategyConfig.from_str(label) == config
    assert StrategyConfig.from_dict(config.to_dict()) == config


def test_strategy_config_dict_names_only_the_strategys_own_parameters() -> None:
    assert StrategyConfig(Strategy.HYBRID_SCORE, vector_weight=0.4).to_dict() == {
        "strategy": "hybrid-score",
        "vector_weight": 0.4,
    }
    assert StrategyConfig(Strategy.HYBRID_DOC).to_dict() == {"strategy": "hybrid-doc"}


@pytest.mark.parametrize(
    ("written", "message"),
    [
        ("hybrid(vector_weight=0.3)", "strategy hybrid has no parameter 'vector_weight' (its parameters: rrf_k)"),
        ("hybrid-doc(rrf_k=2)", "strategy hybrid-doc has no parameter 'rrf_k' (its parameters: none)"),
        ("hybrid-score(vector_weight=much)", "strategy hybrid-score: vector_weight='much' is not a number"),
        ("hybrid-score(vector_weight=1.5)", "vector_weight must be between 0 and 1, got 1.5"),
        ("hybrid(rrf_k)", "strategy 'hybrid(rrf_k)': write each parameter as name=value"),
        ("hybrid(rrf_k=1", "cannot read strategy 'hybrid(rrf_k=1'"),
        ("rrf(k=1)", "unknown strategy 'rrf'"),
    ],
)
def test_strategy_config_errors_name_what_is_wrong(written: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(").replace(")", r"\)")):
        StrategyConfig.from_str(written)


# --- Searcher ----------------------------------------------------------------------------------------------------


def test_fake_index_bm25_scores_by_hand() -> None:
    # N = 4, lengths 2, 2, 3, 1 -> avgdl = 2; "lemon" in rows 0, 2: idf = ln(1 + 2.5 / 2.5) = ln 2
    # row 0: tf 1, dl 2 -> 1 / (1 + 1.2 * (0.25 + 0.75 * 1))   = 1 / 2.2
    # row 2: tf 2, dl 3 -> 2 / (2 + 1.2 * (0.25 + 0.75 * 1.5)) = 2 / 3.65
    scores = stored_index(TEXTS).ranker.bm25.scores("lemon")
    np.testing.assert_allclose(scores, [math.log(2) / 2.2, 0, math.log(2) * 2 / 3.65, 0], rtol=1e-6)


def test_search_bm25_returns_only_matching_rows() -> None:
    searcher = make_searcher()
    hits = searcher.search("lemon", Strategy.BM25, k=10)
    assert rows_of(hits) == [2, 0]  # rows 1 and 3 score 0 and are left out
    assert [hit.score for hit in hits] == pytest.approx([math.log(2) * 2 / 3.65, math.log(2) / 2.2], rel=1e-6)
    assert [hit.ranks for hit in hits] == [{"bm25": 1}, {"bm25": 2}]
    assert searcher.vector_queries == []  # BM25 alone does not embed the query
    assert searcher.search("zeppelin", Strategy.BM25, k=10) == []


def test_search_vector_keeps_every_row_up_to_k() -> None:
    searcher = make_searcher()
    hits = searcher.search("lemon", Strategy.VECTOR, k=3)
    assert rows_of(hits) == [1, 3, 2]  # 0.9, 0.9 (tie: row order), 0.3
    assert [hit.score for hit in hits] == pytest.approx([0.9, 0.9, 0.3])
    assert [hit.ranks for hit in hits] == [{"vector": 1}, {"vector": 2}, {"vector": 3}]
    assert searcher.vector_queries == ["lemon"]
    assert rows_of(searcher.search("zeppelin", Strategy.VECTOR, k=10)) == [1, 3, 2, 0]


def test_search_hybrid_is_rrf_of_both_rankings() -> None:
    hits = make_searcher().search("lemon", Strategy.HYBRID, k=10)
    # vector ranking 1, 3, 2, 0; bm25 ranking 2, 0
    # row 2: 1/63 + 1/61 = 0.032266   row 0: 1/64 + 1/62 = 0.031754
    # row 1: 1/61        = 0.016393   row 3: 1/62        = 0.016129
    assert rows_of(hits) == [2, 0, 1, 3]
    assert [hit.score for hit in hits] == pytest.approx([1 / 63 + 1 / 61, 1 / 64 + 1 / 62, 1 / 61, 1 / 62])
    assert [hit.found_by for hit in hits] == [["bm25", "vector"], ["bm25", "vector"], ["vector"], ["vector"]]


def test_search_hybrid_weighted_is_the_cookbook_fusion() -> None:
    hits = make_searcher().search("lemon", Strategy.HYBRID_WEIGHTED, k=10)
    # row 1: 0.8 / 1 = 0.8            row 2: 0.8 / 3 + 0.2 / 1 = 0.4667
    # row 3: 0.8 / 2 = 0.4            row 0: 0.8 / 4 + 0.2 / 2 = 0.3
    assert rows_of(hits) == [1, 2, 3, 0]
    assert [hit.score for hit in hits] == pytest.approx([0.8, 0.8 / 3 + 0.2, 0.4, 0.3])


def test_search_hybrid_score_fuses_both_scored_rankings() -> None:
    searcher = make_searcher()
    hits = searcher.search("lemon", Strategy.HYBRID_SCORE, k=10)
    expected = score_fusion(
        searcher.rank_bm25("lemon", 150), searcher.rank_vector("lemon", 150), 10, SCORE_FUSION_VECTOR_WEIGHT
    )
    # vector z: rows 1 and 3 +0.98, row 2 -0.70, row 0 -1.26; BM25 z: row 2 +1, row 0 -1, rows 1 and 3 (absent) -1
    assert hits == expected and rows_of(hits) == [
        2,
        1,
        3,
        0,
    ]  # half and half: 0.150, -0.010, -0.010 (row 1's vector rank is better), -1.130
    bm25_led = searcher.search("lemon", StrategyConfig(Strategy.HYBRID_SCORE, vector_weight=0.1), k=10)
    assert rows_of(bm25_led) == [2, 1, 3, 0]  # 0.830, -0.802, -0.802, -1.026


def test_search_hybrid_reads_its_rrf_constant() -> None:
    searcher = make_searcher()
    assert searcher.search("lemon", StrategyConfig(Strategy.HYBRID, rrf_k=0), k=10) == [
        RankedRow(2, 1 / 3 + 1 / 1, {"vector": 3, "bm25": 1}),
        RankedRow(1, 1.0, {"vector": 1}),
        RankedRow(0, 1 / 4 + 1 / 2, {"vector": 4, "bm25": 2}),
        RankedRow(3, 1 / 2, {"vector": 2}),
    ]


@pytest.mark.parametrize(
    "written",
    ["vector", "bm25", "hybrid", "hybrid(rrf_k=5)", "hybrid-weighted", "hybrid-doc", "hybrid-score(vector_weight=0.3)"],
)
def test_fuse_on_stored_rankings_is_search(written: str) -> None:
    searcher = make_searcher(WIDE_TEXTS, WIDE_VECTOR)
    config = StrategyConfig.from_str(written)
    rankings = searcher.rankings("melon kiwi", 150)
    assert searcher.fuse("melon kiwi", config, rankings, 3) == searcher.search("melon kiwi", config, 3)


def test_server_rrf_refuses_another_rrf_constant() -> None:
    searcher = make_searcher()
    searcher.server_rrf = True
    with pytest.raises(InvalidInput, match="server-side RRF uses k=60"):
        searcher.search("lemon", StrategyConfig(Strategy.HYBRID, rrf_k=10), k=3)


WIDE_TEXTS = ["lemon kiwi", "mango melon", "lemon lemon mango", "grape", "melon", "kiwi"]
WIDE_VECTOR = np.array([0.1, 0.9, 0.0, 0.8, 0.7, 0.2], dtype=np.float32)  # vector ranking: 1, 3, 4, 5, 0, 2


def test_hybrid_includes_rows_found_by_only_one_retriever() -> None:
    # candidates 3, k 3 -> depth 3: vector 1, 3, 4; bm25 ("lemon") 2, 0
    hits = make_searcher(WIDE_TEXTS, WIDE_VECTOR, candidates=3).search("lemon", Strategy.HYBRID, k=3)
    # row 1: 1/61 and row 2: 1/61 (tie, best rank 1 both -> row 1 first); row 3: 1/62 and row 0: 1/62 (-> row 0 first)
    assert rows_of(hits) == [1, 2, 0]
    assert [hit.found_by for hit in hits] == [["vector"], ["bm25"], ["bm25"]]
    assert [hit.score for hit in hits] == pytest.approx([1 / 61, 1 / 61, 1 / 62])


def test_hybrid_weighted_includes_rows_found_by_only_one_retriever() -> None:
    # candidates 3, k 5 -> depth 5: vector 1, 3, 4, 5, 0; bm25 2, 0 (row 2 is only found by BM25)
    hits = make_searcher(WIDE_TEXTS, WIDE_VECTOR, candidates=3).search("lemon", Strategy.HYBRID_WEIGHTED, k=5)
    # row 1: 0.8/1 = 0.8; row 3: 0.8/2 = 0.4; row 4: 0.8/3 = 0.267; row 0: 0.8/5 + 0.2/2 = 0.26;
    # row 2: 0.2/1 = 0.2 and row 5: 0.8/4 = 0.2 tie -> row 2 (best single rank 1) first, row 5 cut by k
    assert rows_of(hits) == [1, 3, 4, 0, 2]
    assert [hit.score for hit in hits] == pytest.approx([0.8, 0.4, 0.8 / 3, 0.8 / 5 + 0.1, 0.2])
    assert hits[4].found_by == ["bm25"] and hits[3].found_by == ["bm25", "vector"]


def test_hybrid_depth_is_at_least_k() -> None:
    # candidates 1 but k 4: both retrievers are read 4 deep, so all rows appear
    hits = make_searcher(candidates=1).search("lemon", Strategy.HYBRID, k=4)
    assert sorted(rows_of(hits)) == [0, 1, 2, 3]


@pytest.mark.parametrize("strategy", list(Strategy))
def test_every_strategy_returns_distinct_rows_best_first_at_most_k(strategy: Strategy) -> None:
    searcher = make_searcher()
    for k in (1, 2, 3, 10):
        hits = searcher.search("lemon mango", strategy, k)
        assert len(hits) <= k
        assert len(set(rows_of(hits))) == len(hits)
        assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)
        assert all(isinstance(hit.score, float) for hit in hits)
        assert hits == searcher.search("lemon mango", strategy, k)  # deterministic


@pytest.mark.parametrize("strategy", list(Strategy))
def test_every_strategy_with_k_zero_returns_nothing(strategy: Strategy) -> None:
    assert make_searcher().search("lemon", strategy, k=0) == []


@pytest.mark.parametrize("strategy", list(Strategy))
def test_every_strategy_on_an_empty_index_returns_nothing(strategy: Strategy) -> None:
    searcher = make_searcher(texts=[], vector=np.zeros(0, dtype=np.float32))
    assert searcher.search("lemon", strategy, k=5) == []


@pytest.mark.parametrize("strategy", list(Strategy))
def test_every_strategy_orders_duplicate_chunks_by_row(strategy: Strategy) -> None:
    # rows 0 and 2 are the same chunk (same text, same vector score)
    searcher = make_searcher(texts=["lemon kiwi", "mango", "lemon kiwi"], vector=np.array([0.7, 0.1, 0.7]))
    rows = rows_of(searcher.search("lemon", strategy, k=3))
    assert rows.index(0) < rows.index(2)
    assert rows[:2] == [0, 2]


def test_vector_scores_embeds_the_query_with_the_query_input_type() -> None:
    calls = []

    class FakeEmbedder:
        def embed(self, texts: list[str], input_type: str = "document") -> np.ndarray:
            calls.append((texts, input_type))
            return np.array([[0.0, 1.0, 0.0, 0.0]], dtype=np.float32)

    searcher = Searcher.__new__(Searcher)
    searcher.index = stored_index(TEXTS)  # identity vectors: row i is the unit vector e_i
    searcher.embedder = FakeEmbedder()
    searcher.candidates = 150
    searcher._query_store, searcher._query_vectors = None, {}  # no home: nothing stored
    assert searcher.rank_vector("what?", 2) == [(1, 1.0), (0, 0.0)]
    assert searcher.rank_vector("what?", 2) == [(1, 1.0), (0, 0.0)]
    assert calls == [(["what?"], "query")]  # embedded once, however often it is searched
    assert rows_of(searcher.search("lemon", Strategy.VECTOR, k=1)) == [1]


def counting_embedder(monkeypatch) -> list[list[str]]:  # type: ignore[no-untyped-def]
    """Every searcher's embedder replaced by one that records the texts of each call (the list returned) and gives
    every text the vector (0, 1, 0, 0)."""
    import ctxrag.tasks.retrieval.search

    calls: list[list[str]] = []

    class CountingEmbedder:
        def embed(self, texts: list[str], input_type: str = "document") -> np.ndarray:
            calls.append(texts)
            return np.array([[0.0, 1.0, 0.0, 0.0]] * len(texts), dtype=np.float32)

    monkeypatch.setattr(
        ctxrag.tasks.retrieval.search, "make_embedder", lambda spec, ledger, run_id, models_dir=None: CountingEmbedder()
    )
    return calls


def test_local_query_vectors_are_stored_so_a_later_searcher_loads_no_model(tmp_path, monkeypatch) -> None:
    calls = counting_embedder(monkeypatch)
    first = Searcher(stored_index(TEXTS), home=tmp_path)
    first.prefetch(["what?", "which?"])
    assert sorted(calls[0]) == ["what?", "which?"] and len(calls) == 1

    later = Searcher(stored_index(TEXTS), home=tmp_path)  # a later command, same CTXRAG_HOME
    assert later.rank_vector("which?", 1) == [(1, 1.0)]
    assert later.rank_vector("new?", 1) == [(1, 1.0)]
    assert calls[1:] == [["new?"]]  # only the unseen query was embedded


def test_a_long_lived_searcher_keeps_the_latest_local_query_vectors_in_memory_only(tmp_path, monkeypatch) -> None:
    calls = counting_embedder(monkeypatch)
    searcher = Searcher(stored_index(TEXTS), home=tmp_path, remember=2)
    for query in ["a?", "b?", "c?"]:
        assert searcher.rank_vector(query, 1) == [(1, 1.0)]
    assert list(searcher._query_vectors) == ["b?", "c?"]  # the oldest forgotten
    searcher.prefetch(["d?", "e?", "f?"])  # a batch larger than the bound is kept whole until searched
    assert list(searcher._query_vectors) == ["d?", "e?", "f?"]
    searcher.rank_vector("a?", 1)
    assert calls == [["a?"], ["b?"], ["c?"], ["d?", "e?", "f?"], ["a?"]]  # a forgotten query is embedded again
    assert not list(tmp_path.rglob("*.parquet"))  # and none was stored for later processes


# --- document evidence (hybrid-doc) -------------------------------------------------------------------------------


def test_search_hybrid_doc_uses_the_chunks_documents() -> None:
    # vector ranking 1, 3, 2, 0 (documents y, y, x, x -> y = 1, x = 2); bm25 ("lemon") 2, 0; rrf_k 2
    hits = make_searcher(doc_ids=["x", "y", "x", "y"]).search("lemon", Strategy.HYBRID_DOC, k=10)
    # row 2: bm25 1/3 + vector 0.3/5 + document x 0.25/4 = 1/3 + 3/50 + 1/16
    # row 0: bm25 1/4 + vector 0.3/6 + document x 0.25/4 = 1/4 + 1/20 + 1/16
    # row 1: vector 0.3/3 + document y 0.25/3            = 1/10 + 1/12
    # row 3: vector 0.3/4 + document y 0.25/3            = 3/40 + 1/12
    assert rows_of(hits) == [2, 0, 1, 3]
    expected = [1 / 3 + 3 / 50 + 1 / 16, 1 / 4 + 1 / 20 + 1 / 16, 1 / 10 + 1 / 12, 3 / 40 + 1 / 12]
    assert [hit.score for hit in hits] == pytest.approx(expected, rel=1e-12)
    assert [hit.found_by for hit in hits] == [["bm25", "vector"], ["bm25", "vector"], ["vector"], ["vector"]]


def test_search_hybrid_doc_lifts_a_chunk_of_the_vector_rankings_top_document() -> None:
    # bm25 ("melon kiwi"): 4, 5 (equal scores), 0, 1 (equal scores); vector: 1, 3, 4, 5, 0, 2
    # documents q, p, q, r, s, t -> vector document ranks p = 1 (row 1), r = 2, s = 3, t = 4, q = 5 (row 0)
    searcher = make_searcher(WIDE_TEXTS, WIDE_VECTOR, doc_ids=["q", "p", "q", "r", "s", "t"])
    hits = searcher.search("melon kiwi", Strategy.HYBRID_DOC, k=10)
    # row 4: 1/3 + 0.3/5 + 0.25/5 = 0.443333    row 1: 1/6 + 0.3/3 + 0.25/3 = 0.35
    # row 5: 1/4 + 0.3/6 + 0.25/6 = 0.341667    row 0: 1/5 + 0.3/7 + 0.25/7 = 0.278571
    # row 3: 0.3/4 + 0.25/4 = 0.1375            row 2: 0.3/8 + 0.25/7 = 0.073214
    assert rows_of(hits) == [4, 1, 5, 0, 3, 2]
    expected = [
        1 / 3 + 3 / 50 + 1 / 20,
        1 / 6 + 1 / 10 + 1 / 12,
        1 / 4 + 1 / 20 + 1 / 24,
        1 / 5 + 3 / 70 + 1 / 28,
        3 / 40 + 1 / 16,
        3 / 80 + 1 / 28,
    ]
    assert [hit.score for hit in hits] == pytest.approx(expected, rel=1e-12)
    # without the document term row 5 (1/4 + 1/20) stays ahead of row 1 (1/6 + 1/10)
    rankings = {"vector": [1, 3, 4, 5, 0, 2], "bm25": [4, 5, 0, 1]}
    assert rows_of(document_fusion(rankings, {}, DOC_FUSION_WEIGHTS, {}, k=10)) == [4, 5, 1, 0, 3, 2]


# --- definition evidence (hybrid-doc) -----------------------------------------------------------------------------


DEFINING_TEXTS = [
    "def parse_header(line): return line.split(':')",
    "parse the header line of a request",
    "header = parse_header(raw)",
]


def test_search_hybrid_doc_adds_the_weight_to_the_chunk_that_defines_a_name_the_query_mentions() -> None:
    searcher = make_searcher(DEFINING_TEXTS, np.array([0.1, 0.9, 0.5], dtype=np.float32))  # vector ranking 1, 2, 0
    query = "where is parse_header"
    bm25 = [row for row, _ in searcher.rank_bm25(query, 10)]
    assert sorted(bm25) == [0, 1, 2]  # "parse", "header" match row 1 too; only row 0 defines parse_header
    hits = {hit.row: hit.score for hit in searcher.search(query, Strategy.HYBRID_DOC, k=3)}
    documents = {row: f"d{row}" for row in range(3)}
    without = document_fusion(
        {"vector": [1, 2, 0], "bm25": bm25}, documents, DOC_FUSION_WEIGHTS, DOC_FUSION_DOCUMENT_WEIGHTS, k=3
    )
    expected = {hit.row: hit.score + (DOC_FUSION_DEFINITION_WEIGHT if hit.row == 0 else 0.0) for hit in without}
    assert hits == pytest.approx(expected, rel=1e-12)
    assert searcher.rows_defining({"parse_header"}, [0, 1, 2]) == {0}


def test_rows_defining_reads_the_defines_column_when_the_index_has_one() -> None:
    searcher = make_searcher(DEFINING_TEXTS)
    assert searcher.rows_defining({"parse_header"}, [0, 1, 2]) == {0}  # from the chunks' text
    searcher.index.chunks = ChunkTable(
        searcher.index.chunks.read().append_column(DEFINES, pa.array([[], ["header"], []], pa.list_(pa.string())))
    )
    assert searcher.rows_defining({"parse_header"}, [0, 1, 2]) == set()  # the column, not the text
    assert searcher.rows_defining({"header"}, [0, 1, 2]) == {1}
    assert searcher.rows_defining(set(), [0, 1, 2]) == set()
    assert searcher.rows_defining({"header"}, []) == set()


def test_strategy_of_is_the_named_one_else_the_tuned_one_else_the_default(tmp_path) -> None:
    from ctxrag.storage.errors import CorruptIndexError
    from ctxrag.storage.index_store import IndexStore
    from ctxrag.tasks.retrieval.search import strategy_of

    store = IndexStore(tmp_path)
    (tmp_path / "indexes" / "docs").mkdir(parents=True)
    tuning = tmp_path / "indexes" / "docs" / "tuning.json"
    assert strategy_of(store, "docs") == StrategyConfig.from_str(DEFAULT_STRATEGY)
    tuning.write_text('{"strategy": null, "reason": "too few questions"}')  # tuned, default kept
    assert strategy_of(store, "docs") == StrategyConfig.from_str(DEFAULT_STRATEGY)
    tuning.write_text('{"strategy": {"strategy": "hybrid", "rrf_k": 10}}')
    assert strategy_of(store, "docs").label == "hybrid(rrf_k=10)"
    assert strategy_of(store, "docs", "bm25") == StrategyConfig(Strategy.BM25)
    tuning.write_text('{"strategy": {"strategy": "rrf"}}')
    with pytest.raises(
        CorruptIndexError, match="index 'docs': its tuning.json names no strategy ctxrag knows .*run ctxrag tune again"
    ):
        strategy_of(store, "docs")


def test_query_vectors_have_their_own_table_and_a_paid_one_stored_with_the_chunks_is_not_paid_again(tmp_path) -> None:
    from ctxrag.storage.artifacts import embeddings_cache, queries_cache
    from ctxrag.tasks.embedding.embed import EmbedderSpec, vector_rows

    calls: list[list[str]] = []

    class FakeEmbedder:
        def embed(self, texts: list[str], input_type: str = "document") -> np.ndarray:
            calls.append(list(texts))
            return np.ones((len(texts), 4), dtype=np.float32)

    def searcher_for(spec: EmbedderSpec) -> Searcher:
        searcher = Searcher.__new__(Searcher)
        searcher.index, searcher.spec, searcher.embedder = stored_index(TEXTS), spec, FakeEmbedder()
        searcher._home, searcher._query_store, searcher._query_vectors = tmp_path, queries_cache(tmp_path), {}
        return searcher

    voyage = EmbedderSpec("voyage", "voyage-2", 0)
    before = voyage.cache_key("asked before", "query")  # stored with the chunks' vectors by an earlier release
    embeddings_cache(tmp_path).append(vector_rows([before], np.full((1, 4), 0.5, dtype=np.float32), paid=True))
    searcher = searcher_for(voyage)
    searcher.prefetch(["asked before", "new"])
    assert calls == [["new"]] and np.allclose(searcher.query_vector("asked before"), 0.5)
    assert queries_cache(tmp_path).keys() == {before, voyage.cache_key("new", "query")}
    local = EmbedderSpec.choose("local", None, 512, None)
    searcher_for(local).prefetch(["a local query"])
    assert calls[-1] == ["a local query"] and embeddings_cache(tmp_path).keys() == {before}  # queries never go there
    assert local.cache_key("a local query", "query") in queries_cache(tmp_path).keys()
