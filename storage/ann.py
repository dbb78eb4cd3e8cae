"""The approximate vector index of a large version: faiss's product-quantized fast scan, its candidates scored exactly.

A version of ``ANN_MIN_ROWS`` rows or more gets ``ann.faiss`` beside its ``embeddings.npy``, built with the rest of
the version in its staging folder (so it is promoted, kept and pruned with it). Its codes are 4 bits for each pair of
dimensions (``PQ{d/2}x4fs``, 96 bytes a 384-dimension row): a query scans them all (a few ms for 1M rows, one core),
keeps the ``ANN_CANDIDATES`` best and scores those exactly (cosine) against the stored rows, read from a memory map:
the ranking's scores are exact cosines, only a row missing from the candidates can be missed. Below the threshold
search stays exact (``ctxrag.storage.vectors.VectorIndex``). The choice and its figures: docs/decisions.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ctxrag.storage.vectors import VectorIndex, forget_pages, normalize_rows, save_unit_rows, top_rows

if TYPE_CHECKING:
    from ctxrag.storage.backends.base import RowSet

ANN_MIN_ROWS = 200_000  # exact search below (unchanged to the last digit); approximate from here on
ANN_CANDIDATES = 4096  # rows scored exactly for each query (at least 8x the asked depth)
EXACT_ALLOWED_ROWS = 65_536  # a source filter keeping at most this many rows scores them all exactly (~100 MB read)
TRAINING_ROWS = 65_536  # the quantizer's k-means sample
FILE = "ann.faiss"


def _faiss() -> Any:
    """faiss, imported when a large version is built or opened (0.3 s), on one thread: on 2 busy cores its OpenMP
    threads trained 45x slower than one (3,000 rows: 11.8 s against 0.26 s); one thread builds 1M rows in ~20 s."""
    import faiss

    faiss.omp_set_num_threads(1)
    return faiss


def wants_ann(rows: int) -> bool:
    return rows >= ANN_MIN_ROWS


def build_ann(vectors: np.ndarray, directory: Path) -> dict[str, Any]:
    """Write the index of ``vectors``' rows at unit length to ``directory``, with their ``embeddings.npy`` (both from
    the same blocks of unit rows: ``save_unit_rows``); returns what the version's manifest records."""
    faiss = _faiss()
    rows, dimension = vectors.shape
    codes = dimension // 2 if dimension % 2 == 0 else dimension  # a 4-bit code for each pair of dimensions
    index = faiss.IndexPQFastScan(dimension, codes, 4, faiss.METRIC_INNER_PRODUCT)
    sample = np.random.default_rng(0).choice(rows, min(rows, TRAINING_ROWS), replace=False)
    training = normalize_rows(vectors[np.sort(sample)])
    forget_pages(vectors)  # the sample's rows, read from a scratch file's pages
    index.train(training)
    del training
    save_unit_rows(vectors, directory, each=index.add)  # blocks of a multiple of 32 rows: the codes of one add()
    faiss.write_index(index, str(directory / FILE))
    return {"ann": f"faiss PQ{codes}x4fs", "candidates": ANN_CANDIDATES}


class AnnVectorIndex:
    """Cosine search through the fast-scan codes: ``rank`` gives exact scores for the rows it finds."""

    def __init__(self, matrix: np.ndarray, index: Any) -> None:
        self.matrix = matrix  # the stored unit rows (a memory map: only candidates are read)
        self.index = index

    @property
    def size(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def label(self) -> str:
        return f"faiss PQ{self.index.M}x4fs, {ANN_CANDIDATES} candidates"

    def rank(self, query_vector: np.ndarray, depth: int, allowed: RowSet | None = None) -> list[tuple[int, float]]:
        """The ``depth`` nearest rows by exact cosine among the fast scan's candidates; only ``allowed`` rows when
        given: candidates drawn deeper while too few are allowed, and a filter of at most ``EXACT_ALLOWED_ROWS`` rows
        scored exactly, every allowed row."""
        if allowed is not None:
            depth = min(depth, allowed.size)
        if depth <= 0 or not self.size:
            return []
        query = normalize_rows(np.asarray(query_vector).reshape(1, -1))
        if allowed is not None and allowed.size <= EXACT_ALLOWED_ROWS:
            return self._scored(np.flatnonzero(allowed.mask), query[0], depth)
        candidates = max(ANN_CANDIDATES, 8 * depth)
        while True:
            found = self.index.search(query, min(self.size, candidates))[1][0]
            rows = np.sort(found[found >= 0])
            if allowed is not None:
                rows = rows[allowed.mask[rows]]
            if allowed is None or len(rows) >= depth or candidates >= self.size:
                return self._scored(rows, query[0], depth)
            candidates *= 8

    def _scored(self, rows: np.ndarray, query: np.ndarray, depth: int) -> list[tuple[int, float]]:
        scores = np.einsum("ij,j->i", self.matrix[rows], query)  # one thread, no BLAS thread pool to wake
        return [(int(rows[at]), float(scores[at])) for at in top_rows(scores, depth)]

    @classmethod
    def load(cls, directory: Path) -> AnnVectorIndex:
        return cls(np.load(directory / VectorIndex.FILE, mmap_mode="r"), _faiss().read_index(str(directory / FILE)))


def load_vectors(directory: Path) -> VectorIndex | AnnVectorIndex:
    """A version's vector index: the approximate one where the version has it, else exact."""
    return AnnVectorIndex.load(directory) if (directory / FILE).is_file() else VectorIndex.load(directory)
