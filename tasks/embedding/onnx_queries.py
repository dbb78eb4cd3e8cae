"""The packaged MiniLM's fp32 ONNX graph and ``OnnxEncoder``, which runs any ONNX bi-encoder on onnxruntime: no torch.

The graph is built once per machine (``ctxrag.storage.environment.models_dir``) from the packaged model's safetensors
weights (``ctxrag.tasks.embedding.bert_graph``, ~5 s) and kept if its probe vectors are whole (finite, unit length);
its vectors equal sentence-transformers' on torch within 1e-6 cosine (tests/tasks/embedding, where the torch extra is
installed). It encodes the queries of fp32 and bf16 indexes and the documents of fp32 ones (on the CPU), so
``search`` and ``evaluate`` give a query the same vector as ``index`` would. ``OnnxEncoder`` also runs the int8 file
(``ctxrag.tasks.embedding.onnx_int8``) and models from folders. Pooling and normalisation are the model's own (mean over
tokens, unit length, for MiniLM).
"""

from __future__ import annotations

import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from ctxrag.tasks.embedding.model_sources import PACKAGED

logger = logging.getLogger(__name__)

PACKAGE = PACKAGED.package
PROBES = ["where are retries configured?", "def parse(self, text: str) -> list[str]:", "a longer question " * 20]
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
BATCH = 32
BATCH_TOKENS = 2_048  # a batch's padded tokens at most: 8 inputs of 256 (an fp32 index's peak, docs/decisions.md)


def export_path(models_dir: Path, model: str) -> Path:
    """Where the fp32 graph of ``model`` lives: named by the model package's pinned version (the name a torch export
    of the same weights had, so a machine's earlier file is used as it is)."""
    return models_dir / f"{model}-{PACKAGE}-{PACKAGED.version}.onnx"


def export_query_model(model_dir: Path, target: Path) -> bool:
    """Build the fp32 graph of the transformer at ``model_dir`` into ``target`` (atomically) and keep it if its probe
    vectors are whole; False if not."""
    from ctxrag.tasks.embedding.bert_graph import build_bert_graph

    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.partial")
    try:
        build_bert_graph(model_dir, partial)
        got = OnnxEncoder(partial, model_dir, 512).embed(PROBES)
        if not (np.isfinite(got).all() and np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-4)):
            logger.warning("the ONNX graph of %s gives no whole vectors; not kept", model_dir.name)
            return False
        os.replace(partial, target)
        return True
    finally:
        partial.unlink(missing_ok=True)  # gone after os.replace; a failed or rejected graph leaves nothing


def token_sorted_batches(lengths: list[int], batch_size: int, max_tokens: int | None = None) -> list[list[int]]:
    """Positions grouped into batches of similar token count, longest first (ties keep their order): at most
    ``batch_size`` each and, with ``max_tokens``, at most that many tokens once padded to the batch's longest."""
    order = sorted(range(len(lengths)), key=lambda position: -lengths[position])
    batches: list[list[int]] = []
    for position in order:
        batch = batches[-1] if batches else None
        if (
            batch is None
            or len(batch) == batch_size
            or (max_tokens is not None and (len(batch) + 1) * lengths[batch[0]] > max_tokens)
        ):
            batches.append([position])
        else:
            batch.append(position)
    return batches


def _pool(hidden: np.ndarray, mask: np.ndarray, pooling: str = "mean", dense: tuple[Any, ...] = ()) -> np.ndarray:
    """Mean over real tokens (MiniLM's sentence-transformers pooling), the first token's state (``cls``) or the
    largest value of each dimension over real tokens (``max``), then the model's Dense layers
    (``ctxrag.tasks.embedding.model_card.DenseLayer``), then unit length; an output that is already one vector per
    input (2-d) is only scaled."""
    if hidden.ndim == 2:
        vectors = hidden
    elif pooling == "cls":
        vectors = hidden[:, 0]
    elif pooling == "max":
        vectors = np.where(mask[..., None] > 0, hidden, np.float32(-1e9)).max(axis=1)
    else:
        vectors = (hidden * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
    for layer in dense:
        vectors = layer.apply(vectors)
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
        dense: tuple[Any, ...] = (),
    ) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1 if alone else max(1, min(threads, os.cpu_count() or 1))
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # Batches without onnxruntime's arena: it keeps its largest batch's activations in chunks grown by powers of
        # two (an fp32 index peaked 30% above torch's); an input alone keeps it (docs/decisions.md, "fp32 memory").
        options.enable_cpu_mem_arena = alone
        self.alone, self.threads, self.pooling, self.dense = alone, threads, pooling, dense
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
        for batch in token_sorted_batches([len(row) for row in ids], BATCH, BATCH_TOKENS):
            arrays = self._padded([ids[position] for position in batch])
            pooled = _pool(self._hidden(arrays), arrays["attention_mask"], self.pooling, self.dense)
            if vectors.shape[1] == 0:
                vectors = np.zeros((len(ids), pooled.shape[1]), dtype=np.float32)
            vectors[batch] = pooled
        return vectors

    def _embed_alone(self, ids: list[list[int]]) -> np.ndarray:
        """Each input in a run of its own, longest first, ``threads`` runs at a time (onnxruntime releases the GIL)."""

        def run(row: list[int]) -> np.ndarray:
            arrays = self._padded([row])
            return _pool(self._hidden(arrays), arrays["attention_mask"], self.pooling, self.dense)[0]

        order = sorted(range(len(ids)), key=lambda position: -len(ids[position]))
        if len(ids) <= 1 or self.threads <= 1:  # a query (or nothing): no thread to start
            rows = [run(ids[position]) for position in order]
        else:
            with ThreadPoolExecutor(min(self.threads, len(ids))) as pool:
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
