"""BM25 postings built in bounded memory: bm25s's Lucene scores, to the last bit, without its lists of tokens.

bm25s's ``BM25.index`` holds every document's tokens as Python lists, their ids as more lists, then three arrays of
every (document, term) entry and, to sort them, four more of 8 bytes an entry: ~2 GB for 1M chunks beyond the texts.
Here texts are tokenized a block at a time into term ids, each block's (document, term, count) entries kept in 6 bytes
each (terms numbered in first-seen order); once all are counted, the entries are scored (bm25s's formulas, in its
order of float64 operations, so the float32 scores are equal) and scattered block by block into the compressed
columns bm25s saves (each term's documents in ascending order, as bm25s's sort leaves them)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

import numpy as np

from ctxrag.storage.tokenize import tokenize

BLOCK = 8192  # documents tokenized and counted together


@dataclass
class _Entries:
    """One block's (document, term, count) entries, by document then term: each document's number of entries, and
    each entry's term and count (6 bytes an entry; the documents are implied)."""

    first: int
    per_document: np.ndarray
    terms: np.ndarray
    counts: np.ndarray

    def documents(self) -> np.ndarray:
        return np.repeat(np.arange(self.first, self.first + len(self.per_document), dtype=np.int32), self.per_document)


_EMPTY = _Entries(0, np.empty(0, dtype=np.int32), np.empty(0, dtype=np.int32), np.empty(0, dtype=np.uint16))


def _blocks(texts: Iterable[str]) -> Iterator[list[str]]:
    iterator = iter(texts)
    while block := list(islice(iterator, BLOCK)):
        yield block


def _count(block: list[str], first: int, vocab: dict[str, int]) -> tuple[_Entries, np.ndarray]:
    """The block's entries (documents numbered from ``first``) and its documents' lengths in tokens."""
    ids: list[int] = []
    lengths = np.zeros(len(block), dtype=np.int64)
    for number, text in enumerate(block):
        tokens = tokenize(text)
        lengths[number] = len(tokens)
        ids.extend([vocab.setdefault(token, len(vocab)) for token in tokens])
    documents = np.repeat(np.arange(len(block), dtype=np.int64), lengths)
    pairs, counts = np.unique((documents << 32) | np.asarray(ids, dtype=np.int64), return_counts=True)
    per_document = np.bincount(pairs >> 32, minlength=len(block)).astype(np.int32)
    count_type = np.uint16 if counts.size == 0 or counts.max() <= np.iinfo(np.uint16).max else np.int32
    return _Entries(first, per_document, (pairs & 0xFFFFFFFF).astype(np.int32), counts.astype(count_type)), lengths


def build_postings(texts: Iterable[str], k1: float, b: float) -> tuple[dict[str, Any] | None, dict[str, int], int]:
    """bm25s's saved index of ``texts`` (Lucene BM25): its ``scores`` (``data``, ``indices``, ``indptr``,
    ``num_docs``) and vocabulary, and the number of texts. ``scores`` is None when no text has a term."""
    from bm25s.scoring import _build_idf_array, _score_idf_lucene

    vocab: dict[str, int] = {}
    blocks: list[_Entries] = []
    lengths: list[np.ndarray] = []
    size = 0
    for block in _blocks(texts):
        entries, block_lengths = _count(block, size, vocab)
        blocks.append(entries)
        lengths.append(block_lengths)
        size += len(block)
    if not vocab:
        return None, vocab, size
    frequencies = np.zeros(len(vocab), dtype=np.int64)
    for entries in blocks:
        frequencies += np.bincount(entries.terms, minlength=len(vocab))
    # bm25s: idf from a {term: documents} dict in Python floats; the mean length of int64 lengths
    idf = _build_idf_array(dict(enumerate(frequencies.tolist())), size, _score_idf_lucene, "float32")
    lengths_all = np.concatenate(lengths)
    average = lengths_all.mean()
    indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
    np.cumsum(frequencies, out=indptr[1:])
    data = np.empty(int(indptr[-1]), dtype=np.float32)
    indices = np.empty(int(indptr[-1]), dtype=np.int32)
    filled = indptr[:-1].copy()  # each term's next free entry
    for number, entries in enumerate(blocks):
        order = np.argsort(entries.terms, kind="stable")  # by term, each term's documents in ascending order
        terms, documents = entries.terms[order], entries.documents()[order]
        tf = entries.counts[order].astype(np.float64)
        length = lengths_all[documents].astype(np.float64)
        tfc = tf / (k1 * ((1 - b) + b * length / average) + tf)  # bm25s's _score_tfc_robertson, in float64 as there
        per_term = np.bincount(terms, minlength=len(vocab))
        starts = np.zeros(len(vocab) + 1, dtype=np.int64)
        np.cumsum(per_term, out=starts[1:])
        slots = filled[terms] + (np.arange(len(terms)) - starts[terms])
        data[slots] = (idf[terms].astype(np.float64) * tfc).astype(np.float32)
        indices[slots] = documents
        filled += per_term
        blocks[number] = _EMPTY  # each block freed once placed
    return {"data": data, "indices": indices, "indptr": indptr, "num_docs": size}, vocab, size
