"""The embedded backend: bm25s and exact cosine (numpy), as files in the version's folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from ctxrag.storage.backends.base import Ranking, State
from ctxrag.storage.bm25 import Bm25Index
from ctxrag.storage.vectors import VectorIndex

BM25_FOLDER = "bm25"


def top_rows(scores: np.ndarray, k: int, matches_only: bool = False) -> list[int]:
    """Rows of the ``k`` highest scores, ties broken by row order; ``matches_only`` drops rows scoring 0."""
    if k <= 0 or scores.size == 0:
        return []
    order = np.argsort(-scores, kind="stable")[:k]
    if matches_only:
        order = order[scores[order] > 0]
    return [int(row) for row in order]


@dataclass
class EmbeddedRanker:
    bm25: Bm25Index
    vectors: VectorIndex
    server_fusion: bool = False

    def rank_bm25(self, query: str, depth: int) -> Ranking:
        scores = self.bm25.scores(query)
        return [(row, float(scores[row])) for row in top_rows(scores, depth, matches_only=True)]

    def rank_vector(self, vector: np.ndarray, depth: int) -> Ranking:
        scores = self.vectors.scores(vector)
        return [(row, float(scores[row])) for row in top_rows(scores, depth)]

    def fuse(self, query: str, vector: np.ndarray, k: int, depth: int) -> Ranking:
        raise NotImplementedError("the embedded backend fuses in ctxrag (ctxrag.tasks.retrieval.search), not on a server")


class EmbeddedBackend:
    name = "embedded"

    def build(self, index: str, folder: Path, rows: pa.Table, texts: list[str], vectors: np.ndarray, live: bool) -> State:
        Bm25Index.build(texts).save(folder / BM25_FOLDER)
        VectorIndex(vectors).save(folder)
        return None

    def promote(self, index: str, state: State) -> None:
        return None  # the folder is the version: IndexStore's pointer switch serves it

    def discard(self, index: str, state: State) -> None:
        return None  # IndexStore removes the folder

    def delete(self, index: str, states: list[State]) -> None:
        return None

    def open(self, index: str, folder: Path, state: State, staged: bool) -> EmbeddedRanker:
        return EmbeddedRanker(Bm25Index.load(folder / BM25_FOLDER), VectorIndex.load(folder))
