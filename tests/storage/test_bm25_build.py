"""BM25 postings built in bounded memory: bm25s's own index of the same tokens, to the last bit, in a fraction of its
memory."""

from __future__ import annotations

import logging
import random
import tracemalloc
from collections.abc import Iterator

import numpy as np
import pytest

import ctxrag.storage.bm25_build as bm25_build
from ctxrag.storage.bm25 import BM25_B, BM25_K1, METHOD
from ctxrag.storage.bm25_build import build_postings
from ctxrag.storage.tokenize import tokenize, word_terms
from tests.storage.test_bm25 import _texts_and_queries


def _bm25s_index(texts: list[str]) -> tuple[dict, dict[str, int]]:
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)
    retriever = bm25s.BM25(k1=BM25_K1, b=BM25_B, method=METHOD)
    retriever.index([tokenize(text) for text in texts], show_progress=False)
    return retriever.scores, retriever.vocab_dict


def _generated(count: int, words: int = 120, seed: int = 1) -> Iterator[str]:
    vocabulary = [f"word{number}" for number in range(3_000)]
    rng = random.Random(seed)
    return (" ".join(rng.choices(vocabulary, k=words)) for _ in range(count))


def test_the_postings_are_bm25s_own_to_the_last_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every term's documents and scores equal those of bm25s's ``index()`` (its term ids are another numbering), over
    several blocks, with a text of no tokens, one of stop words only and a term counted past 65,535 in a document."""
    monkeypatch.setattr(bm25_build, "BLOCK", 100)
    texts = _texts_and_queries()[0] + ["", "the and of", "lemon " * 70_000] + list(_generated(250))
    theirs, their_vocab = _bm25s_index(texts)
    ours, vocab, size = build_postings(iter(texts), BM25_K1, BM25_B)
    assert ours is not None and size == ours["num_docs"] == theirs["num_docs"] == len(texts)
    assert set(vocab) | {""} == set(their_vocab)
    for name in ("data", "indices", "indptr"):
        assert ours[name].dtype == theirs[name].dtype and ours[name].shape == theirs[name].shape
    for term, column in vocab.items():
        start, end = ours["indptr"][column : column + 2]
        their_start, their_end = theirs["indptr"][their_vocab[term] : their_vocab[term] + 2]
        np.testing.assert_array_equal(
            ours["indices"][start:end], theirs["indices"][their_start:their_end], err_msg=term
        )
        assert ours["data"][start:end].tobytes() == theirs["data"][their_start:their_end].tobytes(), term


def test_no_terms_build_nothing() -> None:
    assert build_postings(iter(["", "the of and"]), BM25_K1, BM25_B) == (None, {}, 2)


def _peak_and_postings(texts: int) -> tuple[int, int]:
    word_terms.cache_clear()
    tracemalloc.start()
    try:
        scores, _, _ = build_postings(_generated(texts, words=60), BM25_K1, BM25_B)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert scores is not None
    return peak, sum(scores[name].nbytes for name in ("data", "indices", "indptr"))


def test_memory_grows_with_the_postings_not_the_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    """Texts read from a generator, 200 at a time: 2,000 more texts of 60 words raise the build's peak (Python and
    numpy allocations, traced) by about the postings they add (1.0x measured; bound 2.5x). bm25s's ``index()`` of
    the same tokens grows by 7.8x (lists of tokens and of ids, then 32 bytes an entry to sort them)."""
    import bm25s.scoring  # noqa: F401 - imported by the build: its import is not the build's memory

    monkeypatch.setattr(bm25_build, "BLOCK", 200)
    (small, small_postings), (large, large_postings) = _peak_and_postings(2_000), _peak_and_postings(4_000)
    assert large - small < 2.5 * (large_postings - small_postings), (small, large, small_postings, large_postings)
