"""The approximate vector index of large versions: recall against exact search, staged and promoted with its version,
and nothing changed below the threshold."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import ctxrag.storage.ann as ann
from ctxrag.storage.ann import AnnVectorIndex
from ctxrag.storage.backends.embedded import EmbeddedBackend
from ctxrag.storage.index_store import IndexStore
from ctxrag.storage.vectors import VectorIndex, normalize_rows

ROWS, DIMENSION = 3_000, 64


def unit_rows(rows: int, seed: int) -> np.ndarray:
    return normalize_rows(np.random.default_rng(seed).standard_normal((rows, DIMENSION)))


def parts(vectors: np.ndarray, tag: str) -> tuple[dict, pa.Table, list[str], np.ndarray]:
    texts = [f"chunk {row} of {tag}" for row in range(len(vectors))]
    manifest = {"config": {"embedder": {"provider": "local"}}, "tag": tag}
    return (
        manifest,
        pa.table({"chunk_id": [f"{tag}-{row}" for row in range(len(vectors))], "content": texts}),
        texts,
        vectors,
    )


@pytest.fixture
def lowered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The threshold at 1,000 rows and 300 candidates a query (a tenth of ROWS: the scan must find them)."""
    monkeypatch.setattr(ann, "ANN_MIN_ROWS", 1_000)
    monkeypatch.setattr(ann, "ANN_CANDIDATES", 300)


def test_the_ann_path_finds_the_exact_top_10_and_scores_its_rows_exactly(tmp_path: Path, lowered: None) -> None:
    vectors = unit_rows(ROWS, 1)
    state = EmbeddedBackend().build("big", tmp_path, *parts(vectors, "v1")[1:], live=True)
    assert state == {"ann": "faiss PQ32x4fs", "candidates": 300} and (tmp_path / ann.FILE).is_file()
    ranker = EmbeddedBackend().open("big", tmp_path, state, staged=False)
    assert isinstance(ranker.vectors, AnnVectorIndex)
    exact = VectorIndex(vectors)
    queries = np.random.default_rng(2).standard_normal((50, DIMENSION))
    top = [
        {row for row, _ in ranker.rank_vector(query, 10)} for query in queries
    ]  # 300 candidates: a tenth of the rows
    recall = np.mean([len(got & {row for row, _ in exact.rank(query, 10)}) / 10 for query, got in zip(queries, top)])
    assert recall >= 0.98
    found = [ranker.rank_vector(query, 150) for query in queries]
    assert all(len(got) == 150 for got in found)  # the depth the hybrid strategies read
    for query, got in zip(queries, found):  # exact cosines of the rows found, best first
        assert [score for _, score in got] == sorted((score for _, score in got), reverse=True)
        np.testing.assert_allclose(
            [score for _, score in got], exact.scores(query)[[row for row, _ in got]], rtol=1e-5, atol=1e-6
        )


def test_below_the_threshold_nothing_changes(tmp_path: Path, lowered: None) -> None:
    vectors = unit_rows(999, 3)
    state = EmbeddedBackend().build("small", tmp_path, *parts(vectors, "v1")[1:], live=True)
    assert state is None and sorted(path.name for path in tmp_path.iterdir()) == ["bm25", "embeddings.npy"]
    ranker = EmbeddedBackend().open("small", tmp_path, state, staged=False)
    exact = VectorIndex.load(tmp_path)
    for query in np.random.default_rng(4).standard_normal((5, DIMENSION)):
        scores = exact.scores(query)
        reference = np.argsort(-scores, kind="stable")[:150]  # the ranking before the ANN: a full stable sort
        assert ranker.rank_vector(query, 150) == [(int(row), float(scores[row])) for row in reference]


def test_a_version_with_an_ann_index_is_staged_and_promoted_whole(tmp_path: Path, lowered: None) -> None:
    store = IndexStore(tmp_path)
    first = store.publish("big", *parts(unit_rows(1_200, 5), "v1"))
    assert {path.name for path in first.iterdir()} >= {"embeddings.npy", ann.FILE, "manifest.json"}
    assert json.loads((first / "manifest.json").read_text())["embedded"]["ann"] == "faiss PQ32x4fs"
    staged = store.publish("big", *parts(unit_rows(1_100, 6), "v2"), live=False)
    assert store.live_version("big") == first and (staged / ann.FILE).is_file()
    store.promote("big", staged.name)
    opened = store.open("big")
    assert (
        opened.manifest["tag"] == "v2"
        and isinstance(opened.ranker.vectors, AnnVectorIndex)
        and opened.ranker.vectors.size == 1_100
    )


def test_a_failed_ann_build_leaves_the_live_version_usable(
    tmp_path: Path, lowered: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = IndexStore(tmp_path)
    first = store.publish("big", *parts(unit_rows(1_200, 7), "v1"))
    query = np.random.default_rng(8).standard_normal(DIMENSION)
    before = store.open("big").ranker.rank_vector(query, 20)

    def broken(matrix: np.ndarray, directory: Path) -> dict:
        (directory / ann.FILE).write_bytes(b"half")
        raise OSError("disk full")

    monkeypatch.setattr("ctxrag.storage.backends.embedded.build_ann", broken)
    with pytest.raises(OSError, match="disk full"):
        store.publish("big", *parts(unit_rows(1_300, 9), "v2"))
    assert store.live_version("big") == first
    assert not [
        path.name for path in (tmp_path / "indexes" / "big").iterdir() if path.name.startswith(".")
    ]  # no staging left
    assert [path.name for path in (tmp_path / "indexes" / "big" / "versions").iterdir()] == [first.name]
    opened = store.open("big")
    assert opened.manifest["tag"] == "v1" and opened.ranker.rank_vector(query, 20) == before
