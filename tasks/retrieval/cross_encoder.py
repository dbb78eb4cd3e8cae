"""A local cross-encoder as a reranker: a model folder or Hugging Face id (``ctxrag.tasks.embedding.model_card``),
ONNX on onnxruntime or transformers weights on torch, scoring each (query, candidate) pair.

The model is checked to be a cross-encoder when the reranker is built, before any search. A candidate is cut to what
the model reads with the query (``max_length`` word pieces), and candidates are scored in batches of similar length.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ctxrag.tasks.embedding.model_card import ModelCard
from ctxrag.tasks.embedding.model_sources import resolve_model

DEPTH = 30  # candidates a cross-encoder reads per query, at least (k more when k is larger)
PAIR_TOKENS = 256  # word pieces of a (query, candidate) pair: the candidate's start is what the model reads
BATCH = 16


@dataclass
class CrossEncoderReranker:
    """Reorders candidates by a local cross-encoder's score of (query, candidate); ties keep the strategy's order."""

    reference: str
    label: str = "rerank-local"
    card: ModelCard = field(init=False)

    def __post_init__(self) -> None:
        self.card = resolve_model(self.reference, want="cross-encoder")

    def depth(self, k: int) -> int:
        return max(DEPTH, k)

    def scores(self, query: str, documents: list[str]) -> np.ndarray:
        """The model's relevance score of each document for ``query`` (higher: more relevant)."""
        tokenizer = pair_tokenizer(self.card.folder, min(PAIR_TOKENS, self.card.max_length))
        encodings = tokenizer.encode_batch([(query, text) for text in documents])
        scorer = pair_scorer(self.card.weights, self.card.folder)
        scores = np.zeros(len(documents), dtype=np.float32)
        order = sorted(range(len(documents)), key=lambda position: -len(encodings[position].ids))
        for start in range(0, len(order), BATCH):
            batch = order[start : start + BATCH]
            scores[batch] = scorer([encodings[position] for position in batch])
        return scores

    def rerank(self, query: str, documents: list[str], k: int) -> list[int]:
        if not documents:
            return []
        scores = self.scores(query, documents)
        return sorted(range(len(documents)), key=lambda index: (-float(scores[index]), index))[:k]


@lru_cache(maxsize=2)
def pair_tokenizer(folder: Path, max_length: int) -> Any:
    """The model's tokenizer for pairs, cutting the candidate (the second text) first."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_truncation(max_length, strategy="only_second")
    tokenizer.no_padding()
    return tokenizer


@lru_cache(maxsize=2)
def pair_scorer(weights: Path, folder: Path) -> Any:
    """A function from a batch of pair encodings to their scores: the first logit (one label), or the second's
    log-odds over the first (two labels)."""
    names = ("input_ids", "attention_mask", "token_type_ids")

    def arrays(encodings: list[Any]) -> dict[str, np.ndarray]:
        width = max(len(encoding.ids) for encoding in encodings)
        batch = {name: np.zeros((len(encodings), width), dtype=np.int64) for name in names}
        for row, encoding in enumerate(encodings):
            batch["input_ids"][row, : len(encoding.ids)] = encoding.ids
            batch["attention_mask"][row, : len(encoding.ids)] = 1
            batch["token_type_ids"][row, : len(encoding.ids)] = encoding.type_ids
        return batch

    if weights.suffix == ".onnx":
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = onnxruntime.InferenceSession(str(weights), options, providers=["CPUExecutionProvider"])
        taken = [graph_input.name for graph_input in session.get_inputs()]
        return lambda encodings: _relevance(
            session.run(None, {name: value for name, value in arrays(encodings).items() if name in taken})[0]
        )

    from ctxrag.storage.extras import require

    feature = f"the cross-encoder reranker {folder.name} (transformers weights, no .onnx file)"
    torch = require("torch", "torch", feature)
    AutoModelForSequenceClassification = require("transformers", "torch", feature).AutoModelForSequenceClassification
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()
    model = AutoModelForSequenceClassification.from_pretrained(str(folder), local_files_only=True).eval()

    def score(encodings: list[Any]) -> np.ndarray:
        with torch.inference_mode():
            inputs = {name: torch.from_numpy(value) for name, value in arrays(encodings).items()}
            return _relevance(model(**inputs).logits.float().numpy())

    return score


def _relevance(logits: np.ndarray) -> np.ndarray:
    if logits.ndim == 1 or logits.shape[1] == 1:
        return logits.reshape(-1)
    return logits[:, -1] - logits[:, 0]
