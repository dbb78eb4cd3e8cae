"""The embedded backend: bm25s and cosine search (exact with numpy; from ``ANN_MIN_ROWS`` rows on, faiss's fast scan
with exact scores, ``ctxrag.storage.ann``), as files in the version's folder."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from ctxrag.storage.ann import AnnVectorIndex, build_ann, load_vectors, wants_ann
from ctxrag.storage.backends.base import Ranking, RowSet, State
from ctxrag.storage.bm25 import Bm25Index
from ctxrag.storage.vectors import VectorIndex, save_unit_rows, top_rows

BM25_FOLDER = "bm25"
__all__ = ["EmbeddedBackend", "EmbeddedRanker", "top_rows"]


@dataclass
class EmbeddedRanker:
    bm25: Bm25Index
    vectors: VectorIndex | AnnVectorIndex
    server_fusion: bool = False

    def rank_bm25(self, query: str, depth: int, allowed: RowSet | None = None) -> Ranking:
        scores = self.bm25.scores(query)
        if allowed is not None:
            scores = np.where(allowed.mask, scores, 0.0)  # a row scoring 0 is no match
        return [(row, float(scores[row])) for row in top_rows(scores, depth, matches_only=True)]

    def rank_vector(self, vector: np.ndarray, depth: int, allowed: RowSet | None = None) -> Ranking:
        return self.vectors.rank(vector, depth, allowed)

    def fuse(self, query: str, vector: np.ndarray, k: int, depth: int, allowed: RowSet | None = None) -> Ranking:
        raise NotImplementedError(
            "the embedded backend fuses in ctxrag (ctxrag.tasks.retrieval.search), not on a server"
        )


class EmbeddedBackend:
    name = "embedded"

    def build(
        self,
        index: str,
        folder: Path,
        rows: Callable[[], pa.Table],
        texts: Iterable[str],
        vectors: np.ndarray,
        live: bool,
    ) -> State:
        Bm25Index.build(texts).save(folder / BM25_FOLDER)
        if wants_ann(len(vectors)):
            return build_ann(vectors, folder)  # embeddings.npy and ann.faiss, staged with the version
        save_unit_rows(vectors, folder)
        return None

    def promote(self, index: str, state: State) -> None:
        return None  # the folder is the version: IndexStore's pointer switch serves it

    def discard(self, index: str, state: State) -> None:
        return None  # IndexStore removes the folder

    def delete(self, index: str, states: list[State]) -> None:
        return None

    def open(self, index: str, folder: Path, state: State, staged: bool) -> EmbeddedRanker:
        return EmbeddedRanker(Bm25Index.load(folder / BM25_FOLDER), load_vectors(folder))
