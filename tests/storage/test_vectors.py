"""The embedded vector index: exact cosine similarity over L2-normalised rows."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import ctxrag.storage.vectors as vectors_module
from ctxrag.storage.vectors import VectorIndex, forget_pages, normalize_rows, save_unit_rows, scratch_matrix, top_rows


def test_normalize_rows_unit_length_and_zero_rows_stay_zero() -> None:
    matrix = np.array([[3.0, 4.0], [0.0, 0.0], [0.0, -2.0]])
    normalized = normalize_rows(matrix)
    assert normalized.dtype == np.float32
    np.testing.assert_allclose(normalized, [[0.6, 0.8], [0.0, 0.0], [0.0, -1.0]])
    assert not np.isnan(normalized).any()


def test_cosine_ordering() -> None:
    index = VectorIndex(np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [-1.0, 0.0]]))
    scores = index.scores(np.array([2.0, 0.0]))  # query length does not matter
    # cos with (1, 0): 1, 1/sqrt(2), 0, -1
    np.testing.assert_allclose(scores, [1.0, 1 / np.sqrt(2), 0.0, -1.0], atol=1e-6)
    assert list(np.argsort(-scores)) == [0, 1, 2, 3]


def test_scores_ignore_stored_vector_length() -> None:
    index = VectorIndex(np.array([[10.0, 0.0], [0.1, 0.1]]))
    scores = index.scores(np.array([1.0, 1.0]))
    # cos((1,0),(1,1)) = 1/sqrt(2); cos((1,1),(1,1)) = 1 -> the short vector wins
    np.testing.assert_allclose(scores, [1 / np.sqrt(2), 1.0], atol=1e-6)


def test_zero_rows_score_zero() -> None:
    index = VectorIndex(np.array([[0.0, 0.0], [0.0, 3.0]]))
    scores = index.scores(np.array([0.0, 1.0]))
    np.testing.assert_allclose(scores, [0.0, 1.0], atol=1e-6)
    assert not np.isnan(scores).any()


def test_zero_query_scores_zero_everywhere() -> None:
    index = VectorIndex(np.array([[1.0, 0.0], [0.0, 1.0]]))
    np.testing.assert_array_equal(index.scores(np.zeros(2)), [0.0, 0.0])


def test_empty_index() -> None:
    index = VectorIndex(np.zeros((0, 4), dtype=np.float32))
    assert index.size == 0
    assert index.scores(np.ones(4)).shape == (0,)


def test_size() -> None:
    assert VectorIndex(np.ones((5, 3))).size == 5


def test_save_load_round_trip(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    index = VectorIndex(rng.normal(size=(6, 8)))
    index.save(tmp_path)
    assert (tmp_path / VectorIndex.FILE).is_file()
    loaded = VectorIndex.load(tmp_path)
    assert loaded.size == 6
    # load normalises the stored (already unit) rows again: equal up to float32 rounding (about 1 ulp)
    np.testing.assert_allclose(loaded.matrix, index.matrix, rtol=1e-6, atol=1e-7)
    query = rng.normal(size=8)
    np.testing.assert_allclose(loaded.scores(query), index.scores(query), rtol=1e-6, atol=1e-6)
    assert list(np.argsort(-loaded.scores(query))) == list(np.argsort(-index.scores(query)))


def test_empty_save_load_round_trip(tmp_path: Path) -> None:
    VectorIndex(np.zeros((0, 0), dtype=np.float32)).save(tmp_path)
    assert VectorIndex.load(tmp_path).size == 0


def test_stored_matrix_is_float32_unit_rows() -> None:
    index = VectorIndex(np.array([[2.0, 0.0, 0.0], [1.0, 2.0, 2.0]], dtype=np.float64))
    assert index.matrix.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(index.matrix, axis=1), [1.0, 1.0], rtol=1e-6)
    assert index.scores(np.array([1.0, 2.0, 2.0]))[1] == pytest.approx(1.0, abs=1e-6)


def reference_top_rows(scores: np.ndarray, k: int, matches_only: bool = False) -> list[int]:
    """top_rows as it was: a stable sort of every score."""
    order = np.argsort(-scores, kind="stable")[: max(k, 0)]
    return [int(row) for row in (order[scores[order] > 0] if matches_only else order)]


@pytest.mark.parametrize("seed", range(6))
def test_top_rows_is_the_full_stable_sort_to_the_last_row(seed: int) -> None:
    """The partition keeps every tie of the k-th score, so the order is a full stable sort's: rounded scores (many
    ties), zeros and negatives (matches_only), a NaN, and k below, at and above the number of rows."""
    rng = np.random.default_rng(seed)
    scores = np.round(rng.normal(size=2_000), 1).astype(np.float32)
    if seed % 2:
        scores[rng.choice(2_000, 3)] = np.nan
    for k in (0, 1, 7, 150, 1_999, 2_000, 5_000):
        for matches_only in (False, True):
            assert top_rows(scores, k, matches_only) == reference_top_rows(scores, k, matches_only)


def test_rank_is_top_rows_with_the_scores() -> None:
    index = VectorIndex(np.random.default_rng(3).normal(size=(500, 8)))
    query = np.ones(8)
    scores = index.scores(query)
    assert index.rank(query, 20) == [(row, float(scores[row])) for row in reference_top_rows(scores, 20)]


def test_unit_rows_are_saved_as_the_index_saves_them_a_block_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same bytes as ``VectorIndex(vectors).save``, and no second matrix: the traced peak is a few blocks."""
    monkeypatch.setattr(vectors_module, "BLOCK_ROWS", 512)
    matrix = np.random.default_rng(1).normal(size=(20_000, 64)).astype(np.float32) * 3
    matrix[7] = 0
    (tmp_path / "whole").mkdir()
    (tmp_path / "blocks").mkdir()
    VectorIndex(matrix).save(tmp_path / "whole")
    seen: list[int] = []
    tracemalloc.start()
    try:
        save_unit_rows(matrix, tmp_path / "blocks", each=lambda block: seen.append(len(block)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (tmp_path / "blocks" / VectorIndex.FILE).read_bytes() == (tmp_path / "whole" / VectorIndex.FILE).read_bytes()
    assert sum(seen) == 20_000 and max(seen) == 512
    assert peak < matrix.nbytes / 10, peak


def test_a_large_scratch_matrix_lives_in_an_unlinked_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vectors_module, "SCRATCH_MIN_BYTES", 1 << 20)
    small, large = scratch_matrix(100, 8, tmp_path), scratch_matrix(2_000, 256, tmp_path)
    assert not isinstance(small, np.memmap) and isinstance(large, np.memmap)
    assert list(tmp_path.iterdir()) == [] and not large.any()  # zeroed, and no file left to clean up
    rows = np.random.default_rng(2).normal(size=(2_000, 256)).astype(np.float32)
    large[:] = rows
    forget_pages(large)  # unmapped from the process: the values are still there
    forget_pages(small)
    np.testing.assert_array_equal(large, rows)
