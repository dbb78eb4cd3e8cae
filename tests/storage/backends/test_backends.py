"""The backend registry and the embedded backend: build a version's files, open them as a ranker."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from ctxrag.storage.backends import BACKENDS, backend_for
from ctxrag.storage.backends.embedded import EmbeddedBackend, EmbeddedRanker, top_rows
from ctxrag.storage.errors import InvalidInput


def test_each_named_backend_is_found_and_an_unknown_one_is_a_clear_error() -> None:
    assert [backend_for(name).name for name in BACKENDS] == list(BACKENDS)
    with pytest.raises(InvalidInput, match="unknown backend 'solr'; choose one of: embedded, elasticsearch"):
        backend_for("solr")


def test_the_embedded_backend_builds_files_and_opens_them_as_a_ranker(tmp_path: Path) -> None:
    backend = EmbeddedBackend()
    texts = ["lemon kiwi", "mango melon", "lemon lemon mango"]
    state = backend.build(
        "docs", tmp_path, pa.table({"content": texts}), texts, np.eye(3, 4, dtype=np.float32), live=True
    )
    assert state is None and sorted(path.name for path in tmp_path.iterdir()) == ["bm25", "embeddings.npy"]
    ranker = backend.open("docs", tmp_path, state, staged=False)
    assert isinstance(ranker, EmbeddedRanker) and ranker.server_fusion is False
    assert [row for row, _ in ranker.rank_bm25("lemon", 5)] == [2, 0]
    assert ranker.rank_vector(np.array([0, 1, 0, 0], dtype=np.float32), 2) == [(1, 1.0), (0, 0.0)]
    with pytest.raises(NotImplementedError):
        ranker.fuse("lemon", np.zeros(4), 3, 10)


# --- top_rows ----------------------------------------------------------------------------------------------------


def test_top_rows_orders_by_score_then_row() -> None:
    scores = np.array([0.5, 0.9, 0.5, 0.0, 0.9], dtype=np.float32)
    assert top_rows(scores, 5) == [1, 4, 0, 2, 3]
    assert top_rows(scores, 3) == [1, 4, 0]
    assert top_rows(scores, 100) == [1, 4, 0, 2, 3]


def test_top_rows_ties_are_broken_by_row_for_large_arrays() -> None:
    # a stable sort is needed: numpy's default quicksort does not keep row order for many equal values
    scores = np.ones(1000, dtype=np.float32)
    assert top_rows(scores, 1000) == list(range(1000))


def test_top_rows_matches_only_drops_zero_and_negative_scores() -> None:
    scores = np.array([0.0, 2.0, -1.0, 0.5, 0.0])
    assert top_rows(scores, 5, matches_only=True) == [1, 3]
    assert top_rows(scores, 5) == [1, 3, 0, 4, 2]
    assert top_rows(np.zeros(4), 4, matches_only=True) == []


def test_top_rows_empty_and_nonpositive_k() -> None:
    assert top_rows(np.zeros(0), 5) == []
    assert top_rows(np.zeros(0), 5, matches_only=True) == []
    assert top_rows(np.array([1.0, 2.0]), 0) == []
    assert top_rows(np.array([1.0, 2.0]), -3) == []


def test_top_rows_returns_python_ints() -> None:
    assert all(type(row) is int for row in top_rows(np.array([0.3, 0.1]), 2))
