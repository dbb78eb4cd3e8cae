"""Word-piece vectors: the packaged model's input embedding table, read from its safetensors file, ranks lines."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from ctxrag.tasks.retrieval import word_vectors
from ctxrag.tasks.retrieval.word_vectors import embedding_table, packaged_word_vectors
from tests.helpers import SAMPLE_CORPUS, SHARED_DATA

CODEBASE = SHARED_DATA / "codebase" / "codebase_chunks.json"
ODD_LINES = ["a\tb", "x\x01y", "del\x7fz", "snake_case_name", "a" * 150, "naïve café", "日本語 text", "😀 emoji", "ÄBC",
             "--flag=value", "http://x.y/z?q=1&r=2", "CamelCase42 + x**2", "  indented\tand\ttabbed  ", "", "\r"]  # fmt: skip


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


def _lines(texts: list[str]) -> list[str]:
    return [line.strip()[:300] for text in texts for line in text.split("\n") if line.strip()]


def _same_pieces_as_the_tokenizer(lines: list[str]) -> None:
    vectors = packaged_word_vectors()
    assert vectors is not None and vectors.by_words  # MiniLM's tokenizer is uncased BERT's
    wrong = [
        line for line in lines if vectors._encode(line) != vectors.tokenizer.encode(line, add_special_tokens=False).ids
    ]
    assert not wrong, f"{len(wrong)} of {len(lines)} lines get other pieces, e.g. {wrong[:3]}"


def test_a_line_s_pieces_word_by_word_are_the_tokenizer_s_on_the_sample_and_odd_lines() -> None:
    texts = [path.read_text(encoding="utf-8") for path in sorted(Path(SAMPLE_CORPUS).rglob("*")) if path.is_file()]
    _same_pieces_as_the_tokenizer(_lines(texts) + ODD_LINES)


def test_a_line_s_pieces_word_by_word_are_the_tokenizer_s_on_the_cookbook() -> None:
    if not CODEBASE.exists():
        pytest.skip(f"{CODEBASE} is not present (the cookbook's codebase corpus, expected under SHARED_DATA)")
    documents = json.loads(CODEBASE.read_text(encoding="utf-8"))
    lines = _lines([chunk["content"] for document in documents for chunk in document["chunks"]])
    assert len(lines) > 12_000
    _same_pieces_as_the_tokenizer(lines)


def test_only_an_uncased_bert_tokenizer_is_read_word_by_word(monkeypatch: pytest.MonkeyPatch) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    cased = Tokenizer(models.WordLevel({"[UNK]": 0, "Retry": 1}, unk_token="[UNK]"))
    cased.pre_tokenizer = pre_tokenizers.Whitespace()
    vectors = packaged_word_vectors()
    assert (
        vectors is not None and word_vectors._uncased_bert(vectors.tokenizer) and not word_vectors._uncased_bert(cased)
    )
    monkeypatch.setattr(vectors, "by_words", False)
    monkeypatch.setattr(vectors, "_words", {})
    line = "delay = base_delay * 2 ** attempt"
    assert vectors._encode(line) == vectors.tokenizer.encode(line, add_special_tokens=False).ids and not vectors._words


def test_a_line_s_score_is_the_mean_over_the_query_s_pieces_of_their_best_cosine_in_the_line() -> None:
    vectors = packaged_word_vectors()
    assert vectors is not None
    query = "how long to wait before trying again"
    lines = ["", "import os", "delay = base * factor ** attempt  # exponential backoff", "", "x = 1", "retry()", ""]

    def unit(ids: np.ndarray) -> np.ndarray:
        rows = np.asarray(vectors.table[ids], dtype=np.float64)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    asked = unit(vectors.pieces(query))
    expected = [float((asked @ unit(vectors.pieces(line)).T).max(axis=1).mean()) if line else -1.0 for line in lines]
    assert np.allclose(vectors.similarity(query, lines), expected, atol=1e-6)
