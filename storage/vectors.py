"""The embedded vector index: exact cosine similarity over the stored, L2-normalised embeddings."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def normalize_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


class VectorIndex:
    """Exact cosine search: one matrix product per query."""

    FILE = "embeddings.npy"

    def __init__(self, matrix: np.ndarray) -> None:
        self.matrix = normalize_rows(matrix)

    @property
    def size(self) -> int:
        return int(self.matrix.shape[0])

    def scores(self, query_vector: np.ndarray) -> np.ndarray:
        """Cosine similarity of every stored vector with ``query_vector``."""
        if not self.size:
            return np.zeros(0, dtype=np.float32)
        return self.matrix @ normalize_rows(np.asarray(query_vector).reshape(1, -1))[0]

    def save(self, directory: Path) -> None:
        np.save(directory / self.FILE, self.matrix)

    @classmethod
    def load(cls, directory: Path) -> "VectorIndex":
        return cls(np.load(directory / cls.FILE))
