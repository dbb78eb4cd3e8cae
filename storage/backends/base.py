"""What every index backend offers (``IndexBackend``) and what an opened version answers (``Ranker``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeAlias

import numpy as np
import pyarrow as pa


@dataclass(frozen=True)
class RowSet:
    """The rows a search may return (its source filter's): ``mask`` has one flag per row of the version's chunk table,
    ``documents`` names the documents they belong to (for a backend that filters by document on a server)."""

    mask: np.ndarray
    documents: tuple[str, ...]

    @property
    def size(self) -> int:
        return int(np.count_nonzero(self.mask))


Ranking: TypeAlias = list[tuple[int, float]]  # (row in the version's chunk table, score), best first
State: TypeAlias = "dict[str, Any] | None"  # what a backend records of a version in its manifest, under its name


class Ranker(Protocol):
    """One opened version: rankings of its chunk rows for a query."""

    server_fusion: bool  # whether ``fuse`` ranks on the server

    def rank_bm25(self, query: str, depth: int, allowed: RowSet | None = None) -> Ranking:
        """The ``depth`` best rows by BM25 (only ``allowed`` rows, when given)."""
        ...

    def rank_vector(self, vector: np.ndarray, depth: int, allowed: RowSet | None = None) -> Ranking:
        """The ``depth`` rows nearest ``vector`` (only ``allowed`` rows, when given)."""
        ...

    def fuse(self, query: str, vector: np.ndarray, k: int, depth: int, allowed: RowSet | None = None) -> Ranking:
        """Reciprocal rank fusion computed by the backend itself (only where ``server_fusion``)."""
        ...


class IndexBackend(Protocol):
    """Builds and manages the versions of one named index; ``IndexStore`` owns the folders and manifests."""

    name: str

    def build(
        self,
        index: str,
        folder: Path,
        rows: Callable[[], pa.Table],
        texts: Iterable[str],
        vectors: np.ndarray,
        live: bool,
    ) -> State:
        """Index a version (files under ``folder``, or a server's index); ``live``: serve it now, else only stage it.
        ``rows()`` reads the version's rows (chunks.parquet, written by then) for a backend that needs them."""
        ...

    def promote(self, index: str, state: State) -> None:
        """Serve a staged version."""
        ...

    def discard(self, index: str, state: State) -> None:
        """Remove a staged version that will not be served."""
        ...

    def delete(self, index: str, states: list[State]) -> None:
        """Remove everything of the index the backend holds outside its folders (``states``: every kept version's)."""
        ...

    def open(self, index: str, folder: Path, state: State, staged: bool) -> Ranker:
        """The version as a ``Ranker`` (``staged``: a version not yet served, e.g. under a quality gate)."""
        ...
