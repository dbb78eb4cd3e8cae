"""Any local bi-encoder from a folder or a Hugging Face id (``ctxrag.tasks.embedding.model_card``), beside the packaged
MiniLM's tuned path (``ctxrag.tasks.embedding.embed.LocalEmbedder``).

An ONNX model runs on onnxruntime (an int8 file each input alone, as the packaged int8 model: its activations are
quantized per run), transformers weights on torch. Queries get the card's query prefix, documents its document
prefix; a windowed spec embeds a chunk as windows of the model's own word pieces and averages them, as MiniLM's.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ctxrag.storage.errors import InvalidInput
from ctxrag.tasks.common.memory import release_freed_memory
from ctxrag.tasks.embedding.embedder_spec import EmbedderSpec
from ctxrag.tasks.embedding.local_runtimes import usable_cores
from ctxrag.tasks.embedding.model_card import ModelCard
from ctxrag.tasks.embedding.model_sources import resolve_model
from ctxrag.tasks.embedding.windows import pooled_rows, split_windows

BATCH_SIZE = 32


class ModelEmbedder:
    """Unit-length float32 vectors from the model a spec's ``source`` names (checked against its ``fingerprint``)."""

    def __init__(self, spec: EmbedderSpec, card: ModelCard | None = None) -> None:
        self.spec = spec
        self._card = card

    @property
    def card(self) -> ModelCard:
        if self._card is None:
            self._card = card_for(self.spec)
        return self._card

    @property
    def precision(self) -> str:
        return self.card.precision

    def preload(self) -> None:
        self._encoder(documents=True)

    def token_counts(self, texts: list[str]) -> list[int]:
        """Word pieces per text as the model reads it (special tokens included, cut at its maximum)."""
        return [len(encoding.ids) for encoding in self._tokenizer().encode_batch(texts)]

    def embed(self, texts: list[str], input_type: str = "document") -> np.ndarray:
        """Rows in the texts' order; a windowed spec's documents are the mean of their windows' vectors."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        if input_type == "query":
            return self._encode([self.card.query_prefix + text for text in texts], documents=False)
        prefix = self.card.document_prefix
        if not self.spec.window_tokens:
            return self._encode([prefix + text for text in texts], documents=True)
        windows: list[str] = []
        owners: list[int] = []
        for number, text in enumerate(texts):
            for window in split_windows(text, self.spec.window_tokens, self._piece_counts):
                windows.append(prefix + window)
                owners.append(number)
        return pooled_rows(self._encode(windows, documents=True), owners, len(texts))

    def _piece_counts(self, texts: list[str]) -> list[int]:
        return [len(encoding.ids) for encoding in self._tokenizer().encode_batch(texts, add_special_tokens=False)]

    def _encode(self, texts: list[str], documents: bool) -> np.ndarray:
        encoder = self._encoder(documents)
        vectors = encoder.embed_ids([encoding.ids for encoding in self._tokenizer().encode_batch(texts)])
        release_freed_memory()
        return vectors

    def _tokenizer(self) -> Any:
        return model_tokenizer(self.card.folder, self.spec.max_seq_length)

    def _encoder(self, documents: bool) -> Any:
        card = self.card
        cores = usable_cores()
        threads = cores if documents else min(2, cores)
        if card.runtime == "onnx":
            return onnx_encoder(
                card.weights, card.folder, self.spec.max_seq_length, card.quantized, threads, card.pooling, card.dense
            )
        return TorchEncoder.load(card.folder, card.pooling, card.dense)


def card_for(spec: EmbedderSpec) -> ModelCard:
    """The card of the model an index was built with, checked to be that model (its fingerprint)."""
    card = resolve_model(spec.source, want=None)  # checked when the index was built
    if spec.fingerprint and card.fingerprint() != spec.fingerprint:
        raise InvalidInput(
            f"model {spec.source}: its files are not those the index was built with (fingerprint "
            f"{card.fingerprint()}, the index's {spec.fingerprint}); index again to use it"
        )
    return card


@lru_cache(maxsize=4)
def model_tokenizer(folder: Path, max_length: int) -> Any:
    """The model's own fast tokenizer (``tokenizer.json``), cutting at ``max_length``, unpadded."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_truncation(max_length)
    tokenizer.no_padding()
    return tokenizer


@lru_cache(maxsize=4)
def onnx_encoder(
    weights: Path, folder: Path, max_length: int, alone: bool, threads: int, pooling: str, dense: tuple[Any, ...] = ()
) -> Any:
    from ctxrag.tasks.embedding.onnx_queries import OnnxEncoder

    return OnnxEncoder(weights, folder, max_length, alone=alone, threads=threads, pooling=pooling, dense=dense)


class TorchEncoder:
    """transformers weights on torch (fp32, the CPU): token states pooled as the card says, unit length."""

    def __init__(self, model: Any, pooling: str, dense: tuple[Any, ...] = ()) -> None:
        self.model, self.pooling, self.dense = model, pooling, dense

    @classmethod
    @lru_cache(maxsize=2)
    def load(cls, folder: Path, pooling: str, dense: tuple[Any, ...] = ()) -> TorchEncoder:
        from ctxrag.storage.extras import require

        feature = f"the model {folder.name} (transformers weights, no .onnx file)"
        require("torch", "torch", feature)
        AutoModel = require("transformers", "torch", feature).AutoModel
        from transformers.utils import logging as transformers_logging

        transformers_logging.set_verbosity_error()
        return cls(AutoModel.from_pretrained(str(folder), local_files_only=True).eval(), pooling, dense)

    def embed_ids(self, ids: list[list[int]]) -> np.ndarray:
        import torch

        from ctxrag.tasks.embedding.onnx_queries import _pool, token_sorted_batches

        vectors = np.zeros((len(ids), 0), dtype=np.float32)
        with torch.inference_mode():
            for batch in token_sorted_batches([len(row) for row in ids], BATCH_SIZE):
                width = max(len(ids[position]) for position in batch)
                input_ids = np.zeros((len(batch), width), dtype=np.int64)
                mask = np.zeros((len(batch), width), dtype=np.int64)
                for row, position in enumerate(batch):
                    input_ids[row, : len(ids[position])] = ids[position]
                    mask[row, : len(ids[position])] = 1
                hidden = self.model(
                    input_ids=torch.from_numpy(input_ids), attention_mask=torch.from_numpy(mask)
                ).last_hidden_state
                pooled = _pool(hidden.float().numpy(), mask, self.pooling, self.dense)
                if vectors.shape[1] == 0:
                    vectors = np.zeros((len(ids), pooled.shape[1]), dtype=np.float32)
                vectors[batch] = pooled
        return vectors
