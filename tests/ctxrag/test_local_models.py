"""Any local model end to end: an index embedded by a model folder, searched with it, and reranked by a local
cross-encoder named once in CTXRAG_RERANK (tiny models the tests build; nothing is downloaded)."""

from __future__ import annotations

from pathlib import Path

import pytest

import ctxrag
from ctxrag.storage.errors import InvalidInput
from ctxrag.storage.index_store import IndexStore
from tests.equipment.tiny_models import bi_encoder_folder, cross_encoder_folder
from tests.helpers import SAMPLE_CORPUS

pytestmark = pytest.mark.slow

QUERY = "how are retries delayed?"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, prefect_harness) -> tuple[Path, Path, Path]:  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("local-models")
    embedder = bi_encoder_folder(
        root / "tiny-embedder", pooling="cls", prompts={"query": "q: "}, onnx=True, torch_weights=False
    )
    reranker = cross_encoder_folder(root / "tiny-reranker")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CTXRAG_HOME", str(root / "home"))
        report = ctxrag.index(SAMPLE_CORPUS, name="tiny", embedding_model=str(embedder))
    assert report.status == "published" and report.chunks > 0
    return root / "home", embedder, reranker


def test_the_index_records_the_model_and_searches_with_it(
    indexed: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    home, embedder, _ = indexed
    monkeypatch.setenv("CTXRAG_HOME", str(home))
    built = IndexStore(home).manifest("tiny")["config"]["embedder"]
    assert (
        built["source"] == str(embedder.resolve())
        and built["model"] == "tiny-embedder"
        and built["max_seq_length"] == 128
    )
    hits = ctxrag.search(QUERY, name="tiny", k=5, strategy="vector")
    assert len(hits) == 5 and all("vector" in hit.ranks for hit in hits)


def test_a_configured_cross_encoder_reranks_the_default_search(
    indexed: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    home, _, reranker = indexed
    monkeypatch.setenv("CTXRAG_HOME", str(home))
    plain = [hit.chunk_id for hit in ctxrag.search(QUERY, name="tiny", k=5, rerank="none")]
    named = [hit.chunk_id for hit in ctxrag.search(QUERY, name="tiny", k=5, rerank=f"local:{reranker}")]
    monkeypatch.setenv("CTXRAG_RERANK", f"local:{reranker}")
    configured = [hit.chunk_id for hit in ctxrag.search(QUERY, name="tiny", k=5)]
    assert configured == named and named != plain
    assert [hit.chunk_id for hit in ctxrag.search(QUERY, name="tiny", k=5, rerank="none")] == plain


def test_a_wrong_reranker_fails_before_the_index_is_read(
    indexed: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    home, embedder, _ = indexed
    monkeypatch.setenv("CTXRAG_HOME", str(home))
    with pytest.raises(InvalidInput, match="holds a bi-encoder"):
        ctxrag.search(QUERY, name="no-such-index", rerank=f"local:{embedder}")
