"""Retrieval metrics against hand-computed values."""

from __future__ import annotations

import math

import pytest

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

RETRIEVED = ["a", "b", "c", "d", "e"]


# --- pass@k / recall ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("golden", "k", "expected"),
    [
        (["a"], 1, 1.0),
        (["b"], 1, 0.0),  # b is at rank 2, outside the top 1
        (["a", "c"], 2, 0.5),  # a in the top 2, c not: 1 / 2
        (["a", "c"], 3, 1.0),
        (["a", "c", "z"], 5, 2 / 3),  # z never retrieved: 2 / 3
        (["z", "y"], 5, 0.0),
        (["e"], 100, 1.0),  # k beyond the list
        (["a"], 0, 0.0),
    ],
)
def test_pass_at_k(golden: list[str], k: int, expected: float) -> None:
    assert pass_at_k(RETRIEVED, golden, k) == pytest.approx(expected)
    assert recall_at_k(RETRIEVED, golden, k) == pytest.approx(expected)


def test_pass_at_k_counts_repeated_golden_once() -> None:
    # golden {a, z}: a found -> 1 / 2 (not 2 / 3)
    assert pass_at_k(RETRIEVED, ["a", "a", "z"], 5) == pytest.approx(0.5)


def test_pass_at_k_empty_inputs() -> None:
    assert pass_at_k([], ["a"], 5) == 0.0
    assert pass_at_k(RETRIEVED, [], 5) == 0.0
    assert pass_at_k([], [], 5) == 0.0
    assert recall_at_k([], [], 3) == 0.0


def test_pass_at_k_works_on_tuples_and_ints() -> None:
    assert pass_at_k((3, 1, 2), (2, 9), 3) == pytest.approx(0.5)


# --- precision ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("golden", "k", "expected"),
    [
        (["a"], 1, 1.0),
        (["a", "c"], 3, 2 / 3),  # 2 hits in a, b, c
        (["a", "c"], 5, 2 / 5),
        (["z"], 5, 0.0),
        (["a", "b", "c", "d", "e", "f"], 5, 1.0),
    ],
)
def test_precision_at_k(golden: list[str], k: int, expected: float) -> None:
    assert precision_at_k(RETRIEVED, golden, k) == pytest.approx(expected)


def test_precision_with_fewer_than_k_retrieved_divides_by_what_was_retrieved() -> None:
    # 2 retrieved, 1 golden among them: 1 / 2, not 1 / 10
    assert precision_at_k(["a", "b"], ["b"], 10) == pytest.approx(0.5)


def test_precision_counts_a_duplicate_chunk_once() -> None:
    # top 3 = a, a, b -> distinct {a, b}; golden a -> 1 / 2
    assert precision_at_k(["a", "a", "b", "c"], ["a"], 3) == pytest.approx(0.5)
    # duplicates of a non-golden chunk: top 3 = x, x, a -> distinct {x, a} -> 1 / 2
    assert precision_at_k(["x", "x", "a"], ["a"], 3) == pytest.approx(0.5)


def test_precision_empty_inputs() -> None:
    assert precision_at_k([], ["a"], 3) == 0.0
    assert precision_at_k(RETRIEVED, [], 3) == 0.0
    assert precision_at_k(RETRIEVED, ["a"], 0) == 0.0


# --- reciprocal rank ---------------------------------------------------------------------------------------------


def test_reciprocal_rank_first_hit_at_rank_three() -> None:
    assert reciprocal_rank_at_k(RETRIEVED, ["c", "e"], 5) == pytest.approx(1 / 3)


def test_reciprocal_rank_uses_the_first_golden_hit() -> None:
    assert reciprocal_rank_at_k(RETRIEVED, ["e", "b"], 5) == pytest.approx(1 / 2)
    assert reciprocal_rank_at_k(RETRIEVED, ["a"], 5) == 1.0


def test_reciprocal_rank_no_hit_is_zero() -> None:
    assert reciprocal_rank_at_k(RETRIEVED, ["z"], 5) == 0.0


def test_reciprocal_rank_hit_beyond_k_is_zero() -> None:
    assert reciprocal_rank_at_k(RETRIEVED, ["d"], 3) == 0.0
    assert reciprocal_rank_at_k(RETRIEVED, ["d"], 4) == pytest.approx(1 / 4)


def test_reciprocal_rank_empty_inputs() -> None:
    assert reciprocal_rank_at_k([], ["a"], 3) == 0.0
    assert reciprocal_rank_at_k(RETRIEVED, [], 3) == 0.0


# --- hit@k --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("golden", "k", "expected"),
    [
        (["c"], 3, 1.0),
        (["c"], 2, 0.0),  # c is at rank 3
        (["e", "z"], 5, 1.0),  # one of two golden is enough (pass@5 would be 1 / 2)
        (["d", "b"], 2, 1.0),
        (["z", "y"], 5, 0.0),
        (["e"], 100, 1.0),
        (["a"], 0, 0.0),
    ],
)
def test_hit_at_k(golden: list[str], k: int, expected: float) -> None:
    assert hit_at_k(RETRIEVED, golden, k) == expected


def test_hit_at_k_empty_inputs() -> None:
    assert hit_at_k([], ["a"], 5) == 0.0
    assert hit_at_k(RETRIEVED, [], 5) == 0.0


# --- nDCG@k -------------------------------------------------------------------------------------------------------

LOG2_3 = math.log2(3)  # 1.58496: the discount at rank 2
IDEAL_2 = 1 + 1 / LOG2_3  # 1.63093: two golden chunks at ranks 1 and 2


@pytest.mark.parametrize(
    ("golden", "k", "expected"),
    [
        (["a"], 5, 1.0),  # DCG 1 / log2(2) = 1, ideal 1
        (["c"], 5, 0.5),  # rank 3: 1 / log2(4) = 0.5, ideal 1
        (["b"], 1, 0.0),
        (["a", "c"], 5, 1.5 / IDEAL_2),  # (1 + 0.5) / 1.63093 = 0.91972
        (["a", "c"], 2, 1 / IDEAL_2),  # c outside the top 2: 1 / 1.63093 = 0.61315
        (["a", "c"], 1, 1.0),  # ideal over min(k, 2) = 1 rank: 1 / 1
        (["b", "d"], 5, (1 / LOG2_3 + 1 / math.log2(5)) / IDEAL_2),  # (0.63093 + 0.43068) / 1.63093 = 0.65092
        (["c", "z"], 5, 0.5 / IDEAL_2),  # z not retrieved but golden: the ideal still has two: 0.30657
        (["z"], 5, 0.0),
        (["a"], 0, 0.0),
        (["a", "b", "c", "d", "e", "f"], 5, 1.0),  # ideal over min(5, 6) = 5 ranks, all filled
    ],
)
def test_ndcg_at_k(golden: list[str], k: int, expected: float) -> None:
    assert ndcg_at_k(RETRIEVED, golden, k) == pytest.approx(expected)


def test_ndcg_hand_values() -> None:
    assert ndcg_at_k(RETRIEVED, ["a", "c"], 5) == pytest.approx(0.91972, abs=1e-5)
    assert ndcg_at_k(RETRIEVED, ["b", "d"], 5) == pytest.approx(0.65092, abs=1e-5)


def test_ndcg_counts_each_golden_chunk_once() -> None:
    # a duplicated golden chunk in the ranking gains once: [a, a, b] vs golden {a} -> 1, not 1 + 1 / log2(3)
    assert ndcg_at_k(["a", "a", "b"], ["a"], 3) == pytest.approx(1.0)
    # repeated golden references are one chunk: golden {a, z}, a at rank 1 -> 1 / 1.63093
    assert ndcg_at_k(RETRIEVED, ["a", "a", "z"], 5) == pytest.approx(1 / IDEAL_2)
    # [x, x, a] vs golden {x, a}: x at rank 1, a at rank 3 -> (1 + 0.5) / 1.63093
    assert ndcg_at_k(["x", "x", "a"], ["x", "a"], 3) == pytest.approx(1.5 / IDEAL_2)


def test_ndcg_empty_inputs() -> None:
    assert ndcg_at_k([], ["a"], 5) == 0.0
    assert ndcg_at_k(RETRIEVED, [], 5) == 0.0
    assert ndcg_at_k([], [], 5) == 0.0


def test_ndcg_stays_within_zero_and_one() -> None:
    for k in range(0, 8):
        for golden in (["a"], ["e", "a"], ["b", "c", "d"], list("abcdefg"), ["z"]):
            assert 0.0 <= ndcg_at_k(RETRIEVED, golden, k) <= 1.0 + 1e-12


# --- F1 and mean -------------------------------------------------------------------------------------------------


def test_f1_from_means() -> None:
    # 2 * 0.5 * 0.25 / (0.5 + 0.25) = 0.25 / 0.75 = 1 / 3
    assert f1_from_means(0.5, 0.25) == pytest.approx(1 / 3)
    assert f1_from_means(1.0, 1.0) == pytest.approx(1.0)
    assert f1_from_means(1.0, 0.0) == 0.0


def test_f1_from_means_zero_case() -> None:
    assert f1_from_means(0.0, 0.0) == 0.0


def test_mean() -> None:
    assert mean([1.0, 0.0, 0.5]) == pytest.approx(0.5)
    assert mean([0.25]) == 0.25


def test_mean_of_nothing_is_zero() -> None:
    assert mean([]) == 0.0
