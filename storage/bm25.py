"""The embedded keyword index: bm25s (Lucene-style BM25) over code-aware English tokens."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ctxrag.storage.bm25_build import build_postings
from ctxrag.storage.environment import private_dirs
from ctxrag.storage.errors import CorruptIndexError
from ctxrag.storage.tokenize import tokenize

if TYPE_CHECKING:
    import bm25s

BM25_K1 = 1.2  # as Lucene and Elasticsearch default them; the Elasticsearch backend's similarity uses the same
BM25_B = 0.75
METHOD = "lucene"
SUMMED_METHODS = frozenset({"lucene", "robertson", "atire"})  # bm25s's methods with no non-occurrence score to add


def _bm25s() -> Any:
    """bm25s, imported when an index is built or opened (0.13 s that a re-index with nothing to publish skips).
    It sets its own logger to DEBUG when imported, so its "Building index from tokens" reached every handler of the
    root logger (Prefect's console handler prints all levels) as a DEBUG line among an INFO-level run's logs; back to
    NOTSET, it follows the root logger's level, as every other library's logger does."""
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.NOTSET)
    return bm25s


def _mapped(array: np.ndarray) -> np.ndarray:
    """A memory-mapped array as a plain ndarray over the same mapping (no copy): ``np.memmap``'s own indexing and
    slicing make a memmap object each time, a few microseconds a term lookup's step (issue 51, item 7)."""
    return np.asarray(array)


TERMS_FILE, TERM_OFFSETS_FILE, TERM_IDS_FILE = "terms.ctxrag.bin", "terms.ctxrag.offsets.npy", "terms.ctxrag.ids.npy"


class SortedTerms:
    """bm25s's vocabulary (term -> id) as files ctxrag writes beside it: the terms' UTF-8 bytes sorted, their offsets
    and ids, memory-mapped and searched by bisection. A query looks up a few terms without parsing the whole
    vocabulary (a million chunks' ``vocab.index.json``, 5.8 MB, took 0.36 s to parse)."""

    def __init__(self, directory: Path) -> None:
        self._terms = (
            _mapped(np.memmap(directory / TERMS_FILE, dtype=np.uint8, mode="r"))
            if (directory / TERMS_FILE).stat().st_size
            else np.zeros(0, np.uint8)
        )
        self._offsets = _mapped(np.load(directory / TERM_OFFSETS_FILE, mmap_mode="r"))
        self._ids = _mapped(np.load(directory / TERM_IDS_FILE, mmap_mode="r"))

    @staticmethod
    def write(vocab: dict[str, int], directory: Path) -> None:
        terms = sorted((term.encode("utf-8"), number) for term, number in vocab.items())
        offsets = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum([len(term) for term, _ in terms], out=offsets[1:])
        (directory / TERMS_FILE).write_bytes(b"".join(term for term, _ in terms))
        np.save(directory / TERM_OFFSETS_FILE, offsets)
        np.save(directory / TERM_IDS_FILE, np.array([number for _, number in terms], dtype=np.int64))

    def _term(self, position: int) -> bytes:
        return self._terms[int(self._offsets[position]) : int(self._offsets[position + 1])].tobytes()

    def get(self, term: str) -> int | None:
        wanted, low, high = term.encode("utf-8"), 0, len(self._ids)
        while low < high:
            middle = (low + high) // 2
            if self._term(middle) < wanted:
                low = middle + 1
            else:
                high = middle
        return int(self._ids[low]) if low < len(self._ids) and self._term(low) == wanted else None


@dataclass(frozen=True)
class Postings:
    """The index bm25s built and saved: each term's documents and their precomputed BM25 scores, a sparse matrix in
    compressed columns (``indptr[t]:indptr[t+1]`` are term ``t``'s entries in ``indices`` and ``data``)."""

    vocab: dict[str, int] | SortedTerms
    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray

    @classmethod
    def of(cls, retriever: bm25s.BM25) -> Postings:
        return cls(
            retriever.vocab_dict, retriever.scores["data"], retriever.scores["indices"], retriever.scores["indptr"]
        )

    @classmethod
    def read(cls, directory: Path) -> Postings:
        """Read the files of ``bm25s.BM25.save`` without bm25s: a search then imports neither bm25s nor scipy (0.1 s of
        the command). The methods ctxrag builds add nothing at query time that the matrix does not hold."""
        params = json.loads((directory / "params.index.json").read_text())
        if params.get("method") not in SUMMED_METHODS:
            raise CorruptIndexError(f"{directory}: BM25 method {params.get('method')!r} is not one ctxrag builds")
        arrays = {
            name: _mapped(np.load(directory / f"{name}.csc.index.npy", mmap_mode="r"))
            for name in ("data", "indices", "indptr")
        }
        if (directory / TERM_IDS_FILE).exists():  # versions written before these files read bm25s's JSON
            return cls(SortedTerms(directory), **arrays)
        return cls(json.loads((directory / "vocab.index.json").read_text(encoding="utf-8")), **arrays)

    def scores(self, query_tokens: list[str], size: int) -> np.ndarray:
        """Each document's BM25 score: the sum of the query terms' entries (a repeated term counts each time), in
        float32, as ``bm25s.BM25.get_scores`` adds them."""
        scores = np.zeros(size, dtype=np.float32)
        for term in (found for token in query_tokens if (found := self.vocab.get(token)) is not None):
            start, end = self.indptr[term], self.indptr[term + 1]
            np.add.at(scores, self.indices[start:end], self.data[start:end])
        return scores


class Bm25Index:
    """BM25 over a fixed list of documents; ``scores`` gives one score per document, in build order.

    ``postings`` is None when no document has a single term (every query then scores zero everywhere); ``retriever``
    is bm25s's index while it is built and saved (None once read back).
    """

    def __init__(self, postings: Postings | None, size: int, retriever: bm25s.BM25 | None = None) -> None:
        self.postings = postings
        self.size = size
        self._retriever = retriever

    @classmethod
    def build(cls, texts: Iterable[str], k1: float = BM25_K1, b: float = BM25_B) -> Bm25Index:
        """Index ``texts`` (read once, a block at a time: ``ctxrag.storage.bm25_build``)."""
        scores, vocab, size = build_postings(texts, k1, b)
        if scores is None:
            return cls(None, size)
        retriever = _bm25s().BM25(k1=k1, b=b, method=METHOD)
        vocab.setdefault("", len(vocab))  # bm25s's empty token, last, as its index() adds it
        retriever.scores, retriever.vocab_dict, retriever.nonoccurrence_array = scores, vocab, None
        return cls(Postings.of(retriever), size, retriever)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query`` (zeros when no query term is in the vocabulary)."""
        if self.postings is None:
            return np.zeros(self.size, dtype=np.float32)
        return self.postings.scores(tokenize(query), self.size)

    def save(self, directory: Path) -> None:
        if self.postings is not None and self._retriever is None:
            raise ValueError("a BM25 index read back from disk is saved by copying its folder")
        private_dirs(directory)
        (directory / "ctxrag.json").write_text(json.dumps({"size": self.size, "empty": self.postings is None}))
        if self._retriever is not None:
            self._retriever.save(str(directory), show_progress=False)
            SortedTerms.write(self._retriever.vocab_dict, directory)

    @classmethod
    def load(cls, directory: Path) -> Bm25Index:
        meta = json.loads((directory / "ctxrag.json").read_text())
        return cls(None if meta["empty"] else Postings.read(directory), meta["size"])
