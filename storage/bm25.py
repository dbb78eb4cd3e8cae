"""The embedded keyword index: bm25s (Lucene-style BM25) over code-aware English tokens."""

from __future__ import annotations

from pathlib import Path

import bm25s
import numpy as np

from storage.tokenize import tokenize


class Bm25Index:
    """BM25 over a fixed list of documents; ``scores`` gives one score per document, in build order."""

    def __init__(self, retriever: bm25s.BM25, size: int) -> None:
        self._retriever = retriever
        self.size = size

    @classmethod
    def build(cls, texts: list[str], k1: float = 1.2, b: float = 0.75) -> "Bm25Index":
        """Index ``texts`` (k1 and b as Lucene and Elasticsearch default them)."""
        retriever = bm25s.BM25(k1=k1, b=b, method="lucene")
        if texts:
            retriever.index([tokenize(text) for text in texts], show_progress=False)
        return cls(retriever, len(texts))

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query`` (zeros when no query term is in the vocabulary)."""
        token_ids = self._retriever.get_tokens_ids(tokenize(query)) if self.size else []
        if not token_ids:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._retriever.get_scores(token_ids), dtype=np.float32)

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "size.txt").write_text(str(self.size))
        if self.size:
            self._retriever.save(str(directory), show_progress=False)

    @classmethod
    def load(cls, directory: Path) -> "Bm25Index":
        size = int((directory / "size.txt").read_text())
        retriever = bm25s.BM25.load(str(directory), show_progress=False) if size else bm25s.BM25()
        return cls(retriever, size)
