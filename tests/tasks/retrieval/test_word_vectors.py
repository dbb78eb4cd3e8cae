"""Word-piece vectors: the packaged model's input embedding table, read from its safetensors file, ranks lines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from ctxrag.tasks.retrieval import word_vectors
from ctxrag.tasks.retrieval.word_vectors import embedding_table, packaged_word_vectors


def test_the_packaged_vectors_rank_a_line_of_the_query_s_meaning_first() -> None:
    vectors = packaged_word_vectors()
    assert vectors is not None  # the default model's package is a dependency of ctxrag
    lines = ["import os", "delay = base * factor ** attempt  # exponential backoff", "x = 1", ""]
    scores = vectors.similarity("how long to wait before trying again", lines)
    assert scores[1] == max(scores) and scores[3] == -1.0  # the backoff line; a blank line has no word piece
    assert vectors.similarity("", lines) == [-1.0] * 4


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_the_table_is_read_from_the_file_as_it_is_stored(tmp_path: Path, dtype: type) -> None:
    table = np.arange(12, dtype=dtype).reshape(4, 3)
    weights = tmp_path / "model.safetensors"
    save_file({"bert.pooler.dense.bias": np.ones(3, dtype), "bert.embeddings.word_embeddings.weight": table}, weights)
    read = embedding_table(weights)
    assert isinstance(read, np.memmap) and read.dtype == dtype and np.array_equal(read, table)


def test_a_file_without_the_table_is_a_clear_error(tmp_path: Path) -> None:
    weights = tmp_path / "model.safetensors"
    save_file({"classifier.weight": np.ones((2, 2), np.float32)}, weights)
    with pytest.raises(ValueError, match="holds no word_embeddings.weight"):
        embedding_table(weights)


def test_the_word_pieces_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    vectors = packaged_word_vectors()
    assert vectors is not None
    monkeypatch.setattr(word_vectors, "KEPT_TEXTS", 3)
    monkeypatch.setattr(vectors, "_kept", {})
    for number in range(5):
        vectors.pieces(f"line {number}")
    assert list(vectors._kept) == ["line 2", "line 3", "line 4"]  # the oldest dropped first
