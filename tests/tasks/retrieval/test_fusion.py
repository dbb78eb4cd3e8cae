"""Rank fusions on hand-written rankings: exact scores, order and ties."""

from __future__ import annotations

import numpy as np
import pytest

from ctxrag.storage.fusion import RRF_K
from ctxrag.tasks.retrieval.fusion import (
    DOC_FUSION_DEFINITION_WEIGHT,
    DOC_FUSION_DOCUMENT_WEIGHTS,
    DOC_FUSION_RRF_K,
    DOC_FUSION_WEIGHTS,
    SCORE_FUSION_VECTOR_WEIGHT,
    WEIGHTED_BM25_WEIGHT,
    WEIGHTED_VECTOR_WEIGHT,
    RankedRow,
    document_fusion,
    reciprocal_rank_fusion,
    score_fusion,
    weighted_fusion,
)

WEIGHTS = {"vector": 0.8, "bm25": 0.2}


def rows_of(hits: list[RankedRow]) -> list[int]:
    return [hit.row for hit in hits]


# --- fusion ------------------------------------------------------------------------------------------------------

RANKINGS = {"vector": [2, 0, 1], "bm25": [0, 3]}  # row 1 and row 2: vector only; row 3: bm25 only


def test_rrf_exact_scores_and_order() -> None:
    assert RRF_K == 60
    hits = reciprocal_rank_fusion(RANKINGS, k=10)
    # row 0: vector rank 2, bm25 rank 1 -> 1/62 + 1/61 = 0.032520...
    # row 2: vector rank 1             -> 1/61        = 0.016393...
    # row 3: bm25 rank 2               -> 1/62        = 0.016129...
    # row 1: vector rank 3             -> 1/63        = 0.015873...
    assert rows_of(hits) == [0, 2, 3, 1]
    expected = [1 / 62 + 1 / 61, 1 / 61, 1 / 62, 1 / 63]
    assert [hit.score for hit in hits] == pytest.approx(expected, rel=1e-12)
    assert [hit.ranks for hit in hits] == [{"vector": 2, "bm25": 1}, {"vector": 1}, {"bm25": 2}, {"vector": 3}]


def test_rrf_with_another_constant() -> None:
    # rrf_k = 0: row 0 -> 1/2 + 1/1 = 1.5; row 2 -> 1; row 3 -> 1/2; row 1 -> 1/3
    hits = reciprocal_rank_fusion(RANKINGS, k=10, rrf_k=0)
    assert rows_of(hits) == [0, 2, 3, 1]
    assert [hit.score for hit in hits] == pytest.approx([1.5, 1.0, 0.5, 1 / 3])


def test_rrf_truncates_to_k() -> None:
    assert rows_of(reciprocal_rank_fusion(RANKINGS, k=2)) == [0, 2]
    assert reciprocal_rank_fusion(RANKINGS, k=0) == []


def test_weighted_fusion_exact_scores_and_order() -> None:
    hits = weighted_fusion(RANKINGS, WEIGHTS, k=10)
    # row 2: 0.8 / 1           = 0.8
    # row 0: 0.8 / 2 + 0.2 / 1 = 0.6
    # row 1: 0.8 / 3           = 0.2667
    # row 3: 0.2 / 2           = 0.1
    assert rows_of(hits) == [2, 0, 1, 3]
    assert [hit.score for hit in hits] == pytest.approx([0.8, 0.6, 0.8 / 3, 0.1], rel=1e-12)
    assert hits[3].found_by == ["bm25"]


def test_weighted_fusion_constants_are_the_cookbooks() -> None:
    assert (WEIGHTED_VECTOR_WEIGHT, WEIGHTED_BM25_WEIGHT) == (0.8, 0.2)


def test_fusion_of_empty_rankings() -> None:
    assert reciprocal_rank_fusion({}, k=5) == []
    assert reciprocal_rank_fusion({"vector": [], "bm25": []}, k=5) == []
    assert weighted_fusion({"vector": [], "bm25": []}, WEIGHTS, k=5) == []


def test_fusion_of_a_single_retriever_keeps_its_order() -> None:
    hits = reciprocal_rank_fusion({"bm25": [4, 1, 7]}, k=10)
    assert rows_of(hits) == [4, 1, 7]
    assert [hit.found_by for hit in hits] == [["bm25"]] * 3


@pytest.mark.parametrize("rankings", [{"vector": [0, 1], "bm25": [1, 0]}, {"vector": [1, 0], "bm25": [0, 1]}])
def test_rrf_equal_scores_and_equal_best_rank_are_ordered_by_row(rankings: dict[str, list[int]]) -> None:
    # both rows: 1/61 + 1/62, best single rank 1 -> row order
    hits = reciprocal_rank_fusion(rankings, k=10)
    assert hits[0].score == hits[1].score == pytest.approx(1 / 61 + 1 / 62)
    assert rows_of(hits) == [0, 1]


def test_equal_scores_are_ordered_by_best_single_rank_before_row() -> None:
    # row 1: vector rank 4 -> 0.8 / 4 = 0.2; row 9: bm25 rank 1 -> 0.2 / 1 = 0.2 (exactly equal floats)
    assert 0.8 / 4 == 0.2 / 1
    hits = weighted_fusion({"vector": [5, 6, 7, 1], "bm25": [9]}, WEIGHTS, k=10)
    # 5: 0.8, 6: 0.4, 7: 0.2667, then the tie: row 9 (best rank 1) before row 1 (best rank 4)
    assert rows_of(hits) == [5, 6, 7, 9, 1]


def test_hit_found_by_is_sorted_names() -> None:
    assert RankedRow(0, 1.0, {"vector": 2, "bm25": 1}).found_by == ["bm25", "vector"]
    assert RankedRow(0, 1.0, {"vector": 1}).found_by == ["vector"]
    assert RankedRow(0, 1.0).found_by == []


# --- document evidence (hybrid-doc) ---

DOC_OF_ROW = {0: "a", 1: "a", 2: "b", 3: "c"}


def test_document_fusion_exact_scores_and_order() -> None:
    # vector ranking 2, 0, 1 -> documents ranked b (row 2) = 1, a (row 0) = 2; row 1's "a" is already ranked
    hits = document_fusion(RANKINGS, DOC_OF_ROW, {"bm25": 1.0, "vector": 0.5}, {"vector": 0.25}, k=10, rrf_k=1)
    # row 0: bm25 1/(1+1) + vector 0.5/(1+2) + document a 0.25/(1+2) = 1/2 + 1/6 + 1/12 = 3/4
    # row 2: vector 0.5/(1+1) + document b 0.25/(1+1)                 = 1/4 + 1/8        = 3/8
    # row 3: bm25 1/(1+2); document c not in the vector ranking        = 1/3
    # row 1: vector 0.5/(1+3) + document a 0.25/(1+2)                  = 1/8 + 1/12       = 5/24
    assert rows_of(hits) == [0, 2, 3, 1]
    assert [hit.score for hit in hits] == pytest.approx([3 / 4, 3 / 8, 1 / 3, 5 / 24], rel=1e-12)
    assert [hit.ranks for hit in hits] == [{"vector": 2, "bm25": 1}, {"vector": 1}, {"bm25": 2}, {"vector": 3}]
    # without the document term row 3 (1/3) is ahead of row 2 (1/4)
    assert rows_of(document_fusion(RANKINGS, DOC_OF_ROW, {"bm25": 1.0, "vector": 0.5}, {}, k=10, rrf_k=1)) == [
        0,
        3,
        2,
        1,
    ]


def test_document_fusion_ranks_a_document_by_its_best_chunk() -> None:
    # bm25 ranking 0, 1, 3 -> documents a = 1 (rows 0 and 1 alike), c = 2
    hits = document_fusion({"bm25": [0, 1, 3]}, DOC_OF_ROW, {"bm25": 1.0}, {"bm25": 1.0}, k=10, rrf_k=0)
    # row 0: 1/1 + 1/1 = 2; row 1: 1/2 + 1/1 = 1.5; row 3: 1/3 + 1/2 = 5/6
    assert rows_of(hits) == [0, 1, 3]
    assert [hit.score for hit in hits] == pytest.approx([2.0, 1.5, 5 / 6], rel=1e-12)


def test_document_fusion_adds_no_chunk_that_no_retriever_found() -> None:
    # row 1 shares document "a" with row 0 but is in no ranking
    hits = document_fusion({"bm25": [0], "vector": [2]}, DOC_OF_ROW, {"bm25": 1.0, "vector": 1.0}, {"bm25": 1.0}, k=10)
    assert rows_of(hits) == [0, 2]


def test_document_fusion_without_document_weights_is_rrf() -> None:
    plain = document_fusion(RANKINGS, DOC_OF_ROW, {"bm25": 1.0, "vector": 1.0}, {}, k=10, rrf_k=RRF_K)
    assert plain == reciprocal_rank_fusion(RANKINGS, k=10)


def test_document_fusion_ties_best_single_rank_then_row() -> None:
    # rows 5 and 6: bm25 rank 1 / vector rank 1, weights equal, documents unranked -> same score 1/2, same best
    # rank 1 -> row order; row 4: vector rank 2 -> 1/3
    hits = document_fusion(
        {"vector": [6, 4], "bm25": [5]}, {4: "x", 5: "y", 6: "z"}, {"bm25": 1.0, "vector": 1.0}, {}, k=10, rrf_k=1
    )
    assert rows_of(hits) == [5, 6, 4]
    assert document_fusion({}, {}, DOC_FUSION_WEIGHTS, DOC_FUSION_DOCUMENT_WEIGHTS, k=5) == []
    assert rows_of(document_fusion(RANKINGS, DOC_OF_ROW, DOC_FUSION_WEIGHTS, DOC_FUSION_DOCUMENT_WEIGHTS, k=2)) == [
        0,
        3,
    ]


def test_document_fusion_constants_are_the_cross_validated_ones() -> None:
    assert (DOC_FUSION_RRF_K, DOC_FUSION_WEIGHTS, DOC_FUSION_DOCUMENT_WEIGHTS) == (
        2,
        {"bm25": 1.0, "vector": 0.3},
        {"vector": 0.25},
    )
    assert DOC_FUSION_DEFINITION_WEIGHT == 0.125


def test_document_fusion_adds_the_definition_weight_to_defining_rows() -> None:
    plain = document_fusion(RANKINGS, DOC_OF_ROW, {"bm25": 1.0, "vector": 0.5}, {}, k=10, rrf_k=1)
    lifted = document_fusion(
        RANKINGS, DOC_OF_ROW, {"bm25": 1.0, "vector": 0.5}, {}, k=10, defining={1}, rrf_k=1, definition_weight=0.3
    )
    # row 1: vector 0.5/(1+3) = 1/8, + 0.3 -> 17/40, past row 3 (bm25 1/3) and row 2 (vector 1/4)
    assert rows_of(plain) == [0, 3, 2, 1]
    assert rows_of(lifted) == [0, 1, 3, 2]
    assert lifted[1].score == pytest.approx(1 / 8 + 0.3, rel=1e-12)
    assert lifted[1].ranks == {"vector": 3}


# --- standardized scores (hybrid-score) ------------------------------------------------------------------------------

BM25_SCORED = [(0, 3.0), (3, 1.0)]  # z: row 0 = +1, row 3 = -1 (mean 2, sd 1); absent rows get -1
VECTOR_SCORED = [
    (2, 0.9),
    (0, 0.5),
    (1, 0.1),
]  # z: row 2 = +1.2247, row 0 = 0, row 1 = -1.2247; absent rows get -1.2247


def test_score_fusion_exact_scores_and_order() -> None:
    z = 0.4 / np.sqrt(0.32 / 3)  # 1.2247...
    hits = score_fusion(BM25_SCORED, VECTOR_SCORED, k=10, vector_weight=0.6)
    # row 0: 0.4 x 1 + 0.6 x 0 = 0.4          row 2: 0.4 x -1 + 0.6 x z = 0.3348
    # rows 3 and 1: 0.4 x -1 + 0.6 x -z, equal: row 3 (best rank 2) before row 1 (best rank 3)
    assert rows_of(hits) == [0, 2, 3, 1]
    assert [hit.score for hit in hits] == pytest.approx(
        [0.4, -0.4 + 0.6 * z, -0.4 - 0.6 * z, -0.4 - 0.6 * z], rel=1e-12
    )
    assert [hit.ranks for hit in hits] == [{"vector": 2, "bm25": 1}, {"vector": 1}, {"bm25": 2}, {"vector": 3}]


def test_score_fusion_weight_moves_between_the_retrievers() -> None:
    # weight 0: BM25's z alone; rows 3, 2 and 1 all have its lowest (-1) and go by their best single rank (2, 1, 3)
    assert rows_of(score_fusion(BM25_SCORED, VECTOR_SCORED, k=10, vector_weight=0.0)) == [0, 2, 3, 1]
    assert rows_of(score_fusion(BM25_SCORED, VECTOR_SCORED, k=10, vector_weight=1.0)) == [2, 0, 3, 1]  # the vector's
    assert rows_of(score_fusion(BM25_SCORED, VECTOR_SCORED, k=2)) == [0, 2]
    assert SCORE_FUSION_VECTOR_WEIGHT == 0.5


def test_score_fusion_keeps_a_single_rows_raw_score() -> None:
    # one BM25 match: no spread to standardize by, its raw 7.5 counts (an absent row 0); vector z: +1, -1
    hits = score_fusion([(4, 7.5)], [(4, 0.2), (5, 0.1)], k=10, vector_weight=0.6)
    assert rows_of(hits) == [4, 5]
    assert [hit.score for hit in hits] == pytest.approx([0.4 * 7.5 + 0.6, -0.6], rel=1e-12)


def test_score_fusion_of_equal_scores_and_of_nothing() -> None:
    hits = score_fusion([(1, 2.0), (0, 2.0)], [], k=10)  # no spread: z = 0 for both -> row order
    assert rows_of(hits) == [1, 0] and [hit.score for hit in hits] == [0.0, 0.0]  # best single rank first
    assert score_fusion([], [], k=5) == []
    assert score_fusion(BM25_SCORED, VECTOR_SCORED, k=0) == []
