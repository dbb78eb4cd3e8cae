"""The embedded keyword index: bm25s (Lucene-style BM25) over code-aware English tokens."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from typing import TYPE_CHECKING, Any

import numpy as np

from ctxrag.storage.tokenize import tokenize

if TYPE_CHECKING:
    import bm25s

BM25_K1 = 1.2  # as Lucene and Elasticsearch default them; the Elasticsearch backend's similarity uses the same
BM25_B = 0.75


def _bm25s() -> Any:
    """bm25s, imported when an index is built or opened (0.13 s that a re-index with nothing to publish skips).
    It sets its own logger to DEBUG when imported, so its "Building index from tokens" reached every handler of the
    root logger (Prefect's console handler prints all levels) as a DEBUG line among an INFO-level run's logs; back to
    NOTSET, it follows the root logger's level, as every other library's logger does."""
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.NOTSET)
    return bm25s


class Bm25Index:
    """BM25 over a fixed list of documents; ``scores`` gives one score per document, in build order.

    ``retriever`` is None when no document has a single term (every query then scores zero everywhere).
    """

    def __init__(self, retriever: bm25s.BM25 | None, size: int) -> None:
        self._retriever = retriever
        self.size = size

    @classmethod
    def build(cls, texts: list[str], k1: float = BM25_K1, b: float = BM25_B) -> "Bm25Index":
        """Index ``texts``."""
        tokens = [tokenize(text) for text in texts]
        if not any(tokens):
            return cls(None, len(texts))
        retriever = _bm25s().BM25(k1=k1, b=b, method="lucene")
        retriever.index(tokens, show_progress=False)
        return cls(retriever, len(texts))

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query`` (zeros when no query term is in the vocabulary)."""
        token_ids = self._retriever.get_tokens_ids(tokenize(query)) if self._retriever else []
        if not token_ids or self._retriever is None:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._retriever.get_scores(token_ids), dtype=np.float32)

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "ctxrag.json").write_text(json.dumps({"size": self.size, "empty": self._retriever is None}))
        if self._retriever is not None:
            self._retriever.save(str(directory), show_progress=False)

    @classmethod
    def load(cls, directory: Path) -> "Bm25Index":
        meta = json.loads((directory / "ctxrag.json").read_text())
        retriever = None if meta["empty"] else _bm25s().BM25.load(str(directory), show_progress=False)
        return cls(retriever, meta["size"])
