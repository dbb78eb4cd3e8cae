"""The embedding cache: only missing texts are embedded, in order, whatever else the cache holds."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from storage.artifacts import RowCache
from tasks.embed import EmbedderSpec, embed_with_cache


class CountingEmbedder:
    """Embeds a text as [len(text), 1] and remembers what it was asked."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def embed(self, texts: list[str], input_type: str = "document") -> np.ndarray:
        self.seen += texts
        return np.asarray([[len(text), 1.0] for text in texts], dtype=np.float32)


def test_only_missing_texts_are_embedded_and_rows_keep_their_order(tmp_path: Path) -> None:
    cache, spec, embedder = RowCache(tmp_path, "embeddings"), EmbedderSpec(), CountingEmbedder()
    vectors, embedded = embed_with_cache(["aa", "b"], spec, cache, embedder=embedder)
    assert embedded == 2 and vectors.tolist() == [[2, 1], [1, 1]]

    vectors, embedded = embed_with_cache(["cccc", "b", "aa"], spec, cache, embedder=embedder)
    assert embedded == 1 and embedder.seen == ["aa", "b", "cccc"]
    assert vectors.tolist() == [[4, 1], [1, 1], [2, 1]]


def test_a_cache_holding_only_other_texts_is_no_problem(tmp_path: Path) -> None:
    cache, embedder = RowCache(tmp_path, "embeddings"), CountingEmbedder()
    embed_with_cache(["other"], EmbedderSpec(), cache, embedder=embedder)
    vectors, embedded = embed_with_cache(["new"], EmbedderSpec(), cache, embedder=embedder)
    assert embedded == 1 and vectors.tolist() == [[3, 1]]


def test_the_key_depends_on_model_length_and_input_type() -> None:
    base = EmbedderSpec()
    assert base.cache_key("t", "document") != EmbedderSpec(max_seq_length=256).cache_key("t", "document")
    assert base.cache_key("t", "document") != base.cache_key("t", "query")
    assert base.cache_key("t", "document") == EmbedderSpec().cache_key("t", "document")
