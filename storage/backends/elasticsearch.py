"""The Elasticsearch backend: each version a physical index behind the alias (see ctxrag.storage.elasticsearch)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from ctxrag.storage.backends.base import Ranking, RowSet, State
from ctxrag.storage.elasticsearch import EsIndex, connect


@dataclass
class ElasticsearchRanker:
    es: EsIndex
    server_fusion: bool = field(default=True)

    def rank_bm25(self, query: str, depth: int, allowed: RowSet | None = None) -> Ranking:
        return self.es.bm25(query, depth, _documents(allowed))

    def rank_vector(self, vector: np.ndarray, depth: int, allowed: RowSet | None = None) -> Ranking:
        return self.es.knn(np.asarray(vector).tolist(), depth, documents=_documents(allowed))

    def fuse(self, query: str, vector: np.ndarray, k: int, depth: int, allowed: RowSet | None = None) -> Ranking:
        return self.es.rrf_server_side(query, np.asarray(vector).tolist(), k, depth, _documents(allowed))


def _documents(allowed: RowSet | None) -> tuple[str, ...] | None:
    """The documents a source filter keeps: the cluster filters by document (``doc_id``), not by row."""
    return None if allowed is None else allowed.documents


class ElasticsearchBackend:
    """Connects (``$ELASTICSEARCH_URL``) only when an operation needs the cluster."""

    name = "elasticsearch"

    def build(
        self,
        index: str,
        folder: Path,
        rows: Callable[[], pa.Table],
        texts: Iterable[str],
        vectors: np.ndarray,
        live: bool,
    ) -> State:
        return {"alias": index, "index": EsIndex(connect(), index).build(rows(), vectors, switch=live)}

    def promote(self, index: str, state: State) -> None:
        EsIndex(connect(), index).switch_to(_physical(state))

    def discard(self, index: str, state: State) -> None:
        EsIndex(connect(), index).drop(_physical(state))

    def delete(self, index: str, states: list[State]) -> None:
        EsIndex(connect(), index).delete(also=[str((state or {}).get("index", "")) for state in states])

    def open(self, index: str, folder: Path, state: State, staged: bool) -> ElasticsearchRanker:
        return ElasticsearchRanker(EsIndex(connect(), index, target=_physical(state) if staged else None))


def _physical(state: State) -> str:
    return str((state or {})["index"])
