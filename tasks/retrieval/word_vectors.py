"""How near in meaning a query and a few lines are, by word-piece vectors: the packaged MiniLM's input embedding table
(its ``model.safetensors``, memory-mapped: only the rows asked are read) and its tokenizer.

A line's score is the mean, over the query's word pieces, of the best cosine among the line's pieces (the maximum
similarity of late-interaction retrievers, on static vectors). It ranks the lines of a hit found by its meaning alone
(``ctxrag.tasks.retrieval.matches``) in microseconds a line, where running the model on each line took ~1.7 ms of CPU
a line (docs/decisions.md, "Lines by meaning"). The same table serves every index, whatever its embedder: a line is
not worth a model run, nor a paid request.
"""

from __future__ import annotations

import json
import re
import struct
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ctxrag.tasks.common.bounded import keep

# Texts whose word pieces a process keeps (~5 MB with the texts: 7,045 lines took 2.2 MB); a long-lived service
# meets a chunk's lines again.
KEPT_TEXTS = 16_384
KEPT_WORDS = 16_384  # words whose pieces a process keeps (~250 bytes each: the cookbook's 5,131 words took 1.3 MB)
ASCII_LINE = re.compile(r"[\t\x20-\x7e]*")  # printable ASCII and tabs: BERT's normalizer changes nothing but case
BERT_WORDS = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")  # its pre-tokenizer there: letters and digits, each other sign alone
TABLE_SUFFIX = "word_embeddings.weight"  # BERT's input embedding table, with or without a "bert." prefix
DTYPES = {"F32": np.float32, "F16": np.float16}


class WordVectors:
    """The word-piece vectors of a BERT-style model folder (``tokenizer.json``, ``model.safetensors``)."""

    def __init__(self, model_dir: Path) -> None:
        from tokenizers import Tokenizer

        self.table = embedding_table(model_dir / "model.safetensors")
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        self._kept: dict[str, np.ndarray] = {}  # text -> its word pieces, the latest last
        self._words: dict[str, list[int]] = {}  # word -> its word pieces (``by_words``), the latest last
        self._keeping = threading.Lock()  # one process-wide instance: indexes searched on several threads share it
        self.by_words = _uncased_bert(self.tokenizer)

    def similarity(self, query: str, texts: list[str]) -> list[float]:
        """Each text's nearness to ``query`` (-1 for a text without a word piece). Single-threaded on purpose: the
        tokenizer's batch and a BLAS product hand a few microseconds' work to other threads, which on a busy 2-core
        machine waited 10-20 ms for a core (measured at load 5)."""
        pieces = [self.pieces(text) for text in [query, *texts]]
        scores = np.full(len(texts), -1.0)
        lengths = np.array([len(row) for row in pieces[1:]], dtype=np.intp)
        present = lengths > 0
        if not len(pieces[0]) or not present.any():
            return scores.tolist()
        used, column = np.unique(np.concatenate(pieces), return_inverse=True)  # each piece's column among ``used``
        rows = np.asarray(self.table[used], dtype=np.float32)
        rows /= np.maximum(np.sqrt(np.einsum("ud,ud->u", rows, rows)), 1e-12)[:, None]  # 9 us, linalg.norm's 30-70
        near = np.einsum("qd,ud->qu", rows[column[: len(pieces[0])]], rows)  # numpy's own loop
        starts = np.cumsum(lengths) - lengths  # where each text's pieces begin among the texts' pieces
        # Each query piece's best cosine in each text (its run of pieces), then their mean: texts without a piece
        # have no run, and keep -1.
        best = np.maximum.reduceat(near[:, column[len(pieces[0]) :]], starts[present], axis=1)
        scores[present] = best.mean(axis=0)
        return scores.tolist()

    def pieces(self, text: str) -> np.ndarray:
        """``text``'s word-piece ids, kept for the next time (at most ``KEPT_TEXTS``, the oldest dropped first; as
        int32 arrays, ~4x less memory than lists of ints)."""
        found = self._kept.get(text)
        if found is None:
            found = np.asarray(self._encode(text), dtype=np.int32)
            with self._keeping:
                keep(self._kept, text, found, KEPT_TEXTS)
        return found

    def _encode(self, text: str) -> list[int]:
        """The tokenizer's word pieces of ``text``. With an uncased BERT tokenizer (MiniLM's), a line of printable
        ASCII (nearly every line of code) is split into words as its normalizer and pre-tokenizer would, and each word's
        pieces are kept: ~3-8 us a line, where the tokenizer takes ~25 (the same pieces for each of the cookbook's
        12,301 lines: tests/tasks/retrieval/test_word_vectors.py)."""
        if not (self.by_words and ASCII_LINE.fullmatch(text)):
            return self.tokenizer.encode(text, add_special_tokens=False).ids
        ids: list[int] = []
        for word in BERT_WORDS.findall(text.lower()):
            pieces = self._words.get(word)
            if pieces is None:
                pieces = self.tokenizer.encode(word, add_special_tokens=False).ids
                with self._keeping:
                    keep(self._words, word, pieces, KEPT_WORDS)
            ids += pieces
        return ids


def _uncased_bert(tokenizer: Any) -> bool:
    """True for an uncased BERT tokenizer (BertNormalizer lowercasing, BertPreTokenizer), whose pieces of a printable
    ASCII line are those of its words."""
    setup = json.loads(tokenizer.to_str())
    normalizer, pre_tokenizer = setup.get("normalizer") or {}, setup.get("pre_tokenizer") or {}
    return (
        normalizer.get("type") == "BertNormalizer"
        and normalizer.get("lowercase") is True
        and pre_tokenizer.get("type") == "BertPreTokenizer"
    )


def embedding_table(weights: Path) -> np.ndarray:
    """The input embedding table in ``weights`` (a safetensors file), memory-mapped read-only; ``ValueError`` when the
    file holds none in a type numpy reads."""
    with weights.open("rb") as file:
        (header_size,) = struct.unpack("<Q", file.read(8))
        header = json.loads(file.read(header_size))
    for name, entry in header.items():
        if name.endswith(TABLE_SUFFIX) and entry.get("dtype") in DTYPES and len(entry.get("shape", ())) == 2:
            start, _ = entry["data_offsets"]
            shape = tuple(entry["shape"])
            return np.memmap(weights, DTYPES[entry["dtype"]], mode="r", offset=8 + header_size + start, shape=shape)
    raise ValueError(f"{weights} holds no {TABLE_SUFFIX} in F32 or F16")


@lru_cache(maxsize=1)
def packaged_word_vectors() -> WordVectors | None:
    """The packaged MiniLM's word-piece vectors, loaded once a process; None where its files are not on this machine
    (a display aid never fetches a model: the first index with the default model fetches them)."""
    from ctxrag.tasks.embedding.model_sources import packaged_model_if_present

    folder = packaged_model_if_present()
    return None if folder is None else WordVectors(folder)
