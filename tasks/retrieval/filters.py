"""A search's source filter (``path``, ``language``) as the rows it keeps, applied inside the retrievers.

Each row's document is read once per opened index as codes into its distinct documents (``DocumentRows``: Arrow's
``unique`` and ``index_in`` over the memory-mapped ``doc_id`` column); a filter is then decided once per distinct
document and spread to the rows by the codes, so a filter costs one pass over the documents, not the chunks. The last
few filters' row sets are kept.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ctxrag.storage.backends import RowSet
from ctxrag.storage.chunk_table import ChunkTable
from ctxrag.tasks.common.languages import language_of
from ctxrag.tasks.common.search_request import path_spec

KEPT_FILTERS = 8  # row sets of the latest filters kept per index (a mask is one byte a row: 1 MB at 1M chunks)


@dataclass(frozen=True)
class SourceFilter:
    """Keeps the sources matching ``path`` (a gitignore-style pattern) and in ``language``; None for either keeps all."""

    path: str | None = None
    language: str | None = None

    def __bool__(self) -> bool:
        return self.path is not None or self.language is not None


class DocumentRows:
    """An index's rows by document, and the row sets of its recent filters."""

    def __init__(self, chunks: ChunkTable) -> None:
        self._chunks = chunks
        self._codes: np.ndarray | None = None
        self._documents: list[str] = []
        self._kept: OrderedDict[SourceFilter, RowSet] = OrderedDict()

    def rows(self, wanted: SourceFilter) -> RowSet:
        """The rows whose source ``wanted`` keeps."""
        if wanted in self._kept:
            self._kept.move_to_end(wanted)
            return self._kept[wanted]
        codes, documents = self._read()
        spec = path_spec(wanted.path) if wanted.path is not None else None
        keeps = np.fromiter(
            (
                (wanted.language is None or language_of(document) == wanted.language)
                and (spec is None or bool(spec.match_file(document)))
                for document in documents
            ),
            dtype=bool,
            count=len(documents),
        )
        kept_documents = tuple(document for document, kept in zip(documents, keeps) if kept)
        found = RowSet(keeps[codes] if len(codes) else np.zeros(0, dtype=bool), kept_documents)
        self._kept[wanted] = found
        while len(self._kept) > KEPT_FILTERS:
            self._kept.popitem(last=False)
        return found

    def _read(self) -> tuple[np.ndarray, list[str]]:
        if self._codes is None:
            import pyarrow.compute as pc

            column = self._chunks["doc_id"]
            distinct = pc.unique(column)
            self._codes = pc.index_in(column, value_set=distinct).to_numpy(zero_copy_only=False).astype(np.int64)
            self._documents = distinct.to_pylist()
        return self._codes, self._documents
