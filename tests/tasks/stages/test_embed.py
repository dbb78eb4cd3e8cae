"""Stage 3 without Prefect: only texts without a stored vector are embedded, in batches; vectors read back in order."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ctxrag.storage.artifacts import embeddings_cache
from ctxrag.tasks.embedding.embed import EmbedderSpec, stored_vectors
from ctxrag.tasks.stages import embed as stage
from ctxrag.tasks.stored import unstored_texts


class CountingEmbedder:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def embed(self, texts: list[str], input_type: str = "document") -> np.ndarray:
        self.seen += texts
        return np.array([[len(text), 1.0] for text in texts], dtype=np.float32)


def test_only_unstored_texts_are_embedded_and_read_back_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder = CountingEmbedder()
    monkeypatch.setattr(stage, "make_embedder", lambda spec, ledger=None, run_id="": embedder)
    spec = EmbedderSpec()
    texts = ["a", "bbb", "a", "cc"]
    todo = unstored_texts(texts, spec, tmp_path)
    assert todo == ["a", "bbb", "cc"]  # distinct
    batches = stage.text_batches(todo, per_task=2)
    assert batches == [["a", "bbb"], ["cc"]]
    assert sum(stage.embed_batch.fn(batch, spec, tmp_path) for batch in batches) == 3
    assert unstored_texts(texts + ["dddd"], spec, tmp_path) == ["dddd"]
    assert stage.embed_batch.fn(["a", "cc"], spec, tmp_path) == 0  # a retried batch embeds nothing twice
    vectors = stored_vectors(texts, spec, embeddings_cache(tmp_path))
    np.testing.assert_allclose(vectors[:, 0], [1, 3, 1, 2])
    assert sorted(embedder.seen) == ["a", "bbb", "cc"]
