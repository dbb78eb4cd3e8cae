"""The embedding cache (only missing texts are embedded, in order) and the local embedder's batching and vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ctxrag.storage.artifacts import RowCache
from ctxrag.tasks.embedding.embed import (
    LOCAL_PERSIST_EVERY,
    PERSIST_EVERY,
    EmbedderSpec,
    LocalEmbedder,
    embed_missing,
    embed_with_cache,
)
from ctxrag.tasks.embedding.windows import split_windows


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


class CallRecorder(CountingEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []

    def embed(self, texts: list[str], input_type: str = "document") -> np.ndarray:
        self.calls.append(len(texts))
        return super().embed(texts, input_type)


def test_the_local_model_embeds_larger_parts_than_a_paid_api(tmp_path: Path) -> None:
    """Local windows are batched within a part, so a larger part pads less; a paid API's part stays small, so a
    killed run loses few paid vectors."""
    texts = [f"text {number}" for number in range(LOCAL_PERSIST_EVERY + 1)]
    for spec, every in (
        (EmbedderSpec(window_tokens=256), LOCAL_PERSIST_EVERY),
        (EmbedderSpec("voyage", "voyage-2", 0), PERSIST_EVERY),
    ):
        embedder = CallRecorder()
        embed_missing(texts, spec, RowCache(tmp_path / spec.provider, "embeddings"), embedder=embedder)
        assert max(embedder.calls) == every and sum(embedder.calls) == len(texts)
    assert LOCAL_PERSIST_EVERY > PERSIST_EVERY


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


class TokenCountingEmbedder(CountingEmbedder):
    def token_counts(self, texts: list[str]) -> list[int]:
        return [text.count(" ") + 1 for text in texts]


def test_the_cache_orders_by_token_count_when_the_embedder_counts_tokens(tmp_path: Path) -> None:
    embedder = TokenCountingEmbedder()
    vectors, _ = embed_with_cache(
        ["a b c", "longest-in-characters", "a b"], EmbedderSpec(), RowCache(tmp_path, "e"), embedder=embedder
    )
    assert embedder.seen == ["a b c", "a b", "longest-in-characters"]
    assert vectors[:, 0].tolist() == [5, 21, 3]


TEXTS = [
    "def retry(fn, attempts=3):\n    for attempt in range(attempts):\n        try:\n            return fn()\n        except OSError:\n            time.sleep(2 ** attempt)",
    "How are failed requests retried?",
    "The differential executor runs both targets and compares their outputs byte for byte. " * 12,
    "x",
]


@pytest.mark.slow  # the local model, in two precisions
def test_bf16_vectors_are_float32_unit_length_and_close_to_fp32() -> None:
    """The real packaged model, a handful of texts (bf16 is forced: on a CPU without it, it is emulated)."""
    fp32 = LocalEmbedder(EmbedderSpec(), precision="fp32").embed(TEXTS)
    bf16_embedder = LocalEmbedder(EmbedderSpec(), precision="bf16")
    bf16 = bf16_embedder.embed(TEXTS)
    assert bf16_embedder.precision == "bf16"
    assert bf16.dtype == np.float32 and bf16.shape == fp32.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(bf16, axis=1), 1.0, atol=1e-5)
    assert np.allclose(np.linalg.norm(fp32, axis=1), 1.0, atol=1e-5)
    assert np.all(np.sum(bf16 * fp32, axis=1) > 0.99)
    single = LocalEmbedder(EmbedderSpec(), precision="fp32").embed(TEXTS[1:2])  # rows keep the texts' order
    assert float(single[0] @ fp32[1]) > 0.9999


@pytest.mark.slow  # the local model
def test_a_windowed_spec_averages_the_windows_the_model_embeds() -> None:
    """The real packaged model: a long text's vector is the unit mean of its windows' plain vectors."""
    spec = EmbedderSpec(window_tokens=32)
    embedder, plain = LocalEmbedder(spec, precision="fp32"), LocalEmbedder(EmbedderSpec(), precision="fp32")
    lines = [f"def handler_{number}(request): return render(request, 'page_{number}.html')" for number in range(8)]
    text = spec.embedded_text("File: app/views.py.", "\n".join(lines))
    windows = split_windows(text, 32, embedder._piece_counts)
    assert len(windows) > 2 and all(window.startswith("File: app/views.py.\n\n") for window in windows)
    ids, owners = embedder._window_ids([short_text := spec.embedded_text("", "x = 1"), text])
    assert ids == [
        embedder.model.tokenizer(window)["input_ids"] for window in [short_text.strip(), *windows]
    ]  # tokenized once
    assert owners == [0] + [1] * len(windows)
    expected = plain.embed(windows).sum(axis=0)
    library = embedder.model.encode(windows, normalize_embeddings=False).sum(axis=0)  # sentence-transformers' own path
    assert float(expected @ library / np.linalg.norm(expected) / np.linalg.norm(library)) > 0.99999
    [vector] = embedder.embed([text])
    assert float(vector @ (expected / np.linalg.norm(expected))) > 0.9999
    assert float(vector @ plain.embed([text])[0]) < 0.999  # not the whole text's vector
    short = spec.embedded_text("File: a.py.", "x = 1")
    assert float(embedder.embed([short])[0] @ plain.embed(["File: a.py.\n\nx = 1"])[0]) > 0.9999  # one window
    assert np.allclose(
        embedder.embed(["where is the router?"], "query"), plain.embed(["where is the router?"], "query")
    )
