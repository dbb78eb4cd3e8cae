"""The embedded vector index: exact cosine similarity over the stored, L2-normalised embeddings."""

from __future__ import annotations

import mmap
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ctxrag.storage.environment import private_dirs

if TYPE_CHECKING:
    from ctxrag.storage.backends.base import RowSet

BLOCK_ROWS = 16_384  # rows normalized and written at a time: 24 MiB of 384-dimension rows
SCRATCH_MIN_BYTES = 256 << 20  # a matrix this large is kept in a scratch file: 1M 384-dimension rows are 1.5 GB


def scratch_matrix(rows: int, dimension: int, folder: Path) -> np.ndarray:
    """A zeroed float32 matrix: in memory, or from ``SCRATCH_MIN_BYTES`` on, mapped from an unlinked file in
    ``folder`` (gone with the last reference to it, a killed run's too), whose pages ``forget_pages`` drops from the
    process once written or read: the index run then holds no 1.5 GB matrix while it builds BM25."""
    if rows * dimension * 4 < SCRATCH_MIN_BYTES:
        return np.zeros((rows, dimension), dtype=np.float32)
    private_dirs(folder)
    with tempfile.TemporaryFile(dir=folder) as handle:  # the mapping keeps the file; the handle is not needed
        return np.memmap(handle, dtype=np.float32, mode="w+", shape=(rows, dimension))


def forget_pages(matrix: np.ndarray) -> None:
    """Unmap what was read or written of a ``scratch_matrix`` file from this process (the file and the page cache
    keep it; a later read maps it again); an in-memory matrix is left as it is."""
    mapping = getattr(matrix, "_mmap", None)  # numpy's mapping of a np.memmap
    if isinstance(mapping, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        mapping.madvise(mmap.MADV_DONTNEED)


def normalize_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


def top_rows(scores: np.ndarray, k: int, matches_only: bool = False) -> list[int]:
    """Rows of the ``k`` highest scores, ties broken by row order; ``matches_only`` drops rows scoring 0 or less.

    The order of a stable sort of all the scores, at the cost of a partition: only the rows scoring at least the
    ``k``-th best (ties included, in row order) are sorted."""
    if k <= 0 or scores.size == 0:
        return []
    rows = np.flatnonzero(scores > 0) if matches_only else np.arange(scores.size)
    candidates = scores[rows] if matches_only else scores
    if k < candidates.size and not np.isnan(candidates).any():  # (a NaN sorts last, but partitions as the largest)
        kth = np.partition(candidates, candidates.size - k)[candidates.size - k]
        kept = np.flatnonzero(candidates >= kth)
        rows, candidates = rows[kept], candidates[kept]
    order = np.argsort(-candidates, kind="stable")[:k]
    return [int(row) for row in rows[order]]


def save_unit_rows(vectors: np.ndarray, directory: Path, each: Callable[[np.ndarray], None] | None = None) -> None:
    """Write ``VectorIndex(vectors).save``'s file, the same bytes, a block of rows at a time: ``normalize_rows`` of a
    block gives its rows as the whole matrix's would, and no second matrix is made. ``each`` sees every unit block."""
    matrix = np.asarray(vectors, dtype=np.float32)
    header = {"descr": np.lib.format.dtype_to_descr(matrix.dtype), "fortran_order": False, "shape": matrix.shape}
    with open(directory / VectorIndex.FILE, "wb") as handle:
        np.lib.format.write_array_header_1_0(handle, header)
        for start in range(0, len(matrix), BLOCK_ROWS):
            block = normalize_rows(matrix[start : start + BLOCK_ROWS])
            forget_pages(vectors)
            if each is not None:
                each(block)
            handle.write(block.data)  # its bytes, not a copy of them


class VectorIndex:
    """Exact cosine search: one matrix product per query."""

    FILE = "embeddings.npy"

    def __init__(self, matrix: np.ndarray, unit_rows: bool = False) -> None:
        self.matrix = matrix if unit_rows else normalize_rows(matrix)

    @property
    def size(self) -> int:
        return int(self.matrix.shape[0])

    def scores(self, query_vector: np.ndarray) -> np.ndarray:
        """Cosine similarity of every stored vector with ``query_vector``."""
        if not self.size:
            return np.zeros(0, dtype=np.float32)
        return self.matrix @ normalize_rows(np.asarray(query_vector).reshape(1, -1))[0]

    def rank(self, query_vector: np.ndarray, depth: int, allowed: RowSet | None = None) -> list[tuple[int, float]]:
        """The ``depth`` most similar rows with their cosines, best first (ties by row); only ``allowed`` rows when
        given (the others score below every cosine)."""
        scores = self.scores(query_vector)
        if allowed is not None:
            scores = np.where(allowed.mask, scores, -np.inf)
            depth = min(depth, allowed.size)
        return [(row, float(scores[row])) for row in top_rows(scores, depth)]

    def save(self, directory: Path) -> None:
        np.save(directory / self.FILE, self.matrix)

    @classmethod
    def load(cls, directory: Path) -> VectorIndex:
        """The stored matrix, memory-mapped: its rows are unit rows already (``save``, ``save_unit_rows``), so nothing
        is read until a query scores them, and no second matrix is made."""
        return cls(np.load(directory / cls.FILE, mmap_mode="r"), unit_rows=True)
