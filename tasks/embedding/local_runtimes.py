"""What runs the local model, each loaded once per process: the fp32 ONNX graph (fp32 documents and the queries of fp32
and bf16 indexes) and the int8 file (int8 documents and queries), both on onnxruntime and made once per machine in
``models_dir``; sentence-transformers on torch (the torch extra) only for bf16 documents and on a GPU torch sees."""

from __future__ import annotations

import contextlib
import logging
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ctxrag.storage.extras import require
from ctxrag.storage.locks import one_process_at_a_time
from ctxrag.tasks.embedding.model_sources import log, packaged_model_path

__all__ = ["log", "packaged_model_path"]

logger = logging.getLogger(__name__)

MAKING_LOCK = ".making.lock"  # in models_dir: one process of the machine makes a file, the others wait and read it
TORCH_EXTRA = "torch"


@lru_cache(maxsize=4)
def sentence_transformer(path: str, max_seq_length: int, device: str = "cpu"):  # type: ignore[no-untyped-def]
    """sentence-transformers' model of the folder (bf16 documents, or on a GPU): the torch extra."""
    SentenceTransformer = require(
        "sentence_transformers", TORCH_EXTRA, "the local model in bf16 or on a GPU"
    ).SentenceTransformer
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()
    model = SentenceTransformer(path, device=device, local_files_only=True)
    model.max_seq_length = max_seq_length
    return model


def torch_vectors(
    model: Any, ids: list[list[int]], precision: str, device: str, batch_size: int, pad: int
) -> np.ndarray:
    """sentence-transformers' ``model``'s vectors of tokenized inputs (special tokens included), in bf16 autocast
    when ``precision`` is bf16. Batches are formed here by token count, longest first (sentence-transformers would
    sort by characters, which for code pads about half again as many positions), padded with ``pad`` and run through
    the model directly (the texts are not tokenized again)."""
    import torch

    from ctxrag.tasks.embedding.onnx_queries import token_sorted_batches

    vectors = np.zeros((len(ids), 0), dtype=np.float32)
    with autocast_to(precision, device), torch.inference_mode():
        for positions in token_sorted_batches([len(row) for row in ids], batch_size):
            width = max(len(ids[position]) for position in positions)
            input_ids = np.full((len(positions), width), pad, dtype=np.int64)
            mask = np.zeros((len(positions), width), dtype=np.int64)
            for row, position in enumerate(positions):
                input_ids[row, : len(ids[position])] = ids[position]
                mask[row, : len(ids[position])] = 1
            features = {
                "input_ids": torch.from_numpy(input_ids).to(device),
                "attention_mask": torch.from_numpy(mask).to(device),
            }
            encoded = model(features)["sentence_embedding"].float().cpu().numpy()
            if vectors.shape[1] == 0:
                vectors = np.zeros((len(ids), encoded.shape[1]), dtype=np.float32)
            vectors[positions] = encoded
    return vectors


def autocast_to(precision: str, device: str = "cpu") -> contextlib.AbstractContextManager[object]:
    """torch's bf16 autocast on ``device`` for "bf16"; nothing otherwise."""
    if precision != "bf16":
        return contextlib.nullcontext()
    import torch

    return torch.autocast(device, dtype=torch.bfloat16)


def query_model_export(models_dir: Path, model: str) -> Path | None:
    """The fp32 ONNX graph in ``models_dir``, built now (from the safetensors weights, no torch) if missing; None if
    it cannot be made."""
    from ctxrag.storage.errors import UserError
    from ctxrag.tasks.embedding.onnx_queries import export_path, export_query_model

    model_dir = packaged_model_path()  # fetched first where the package is not installed (outside the lock)
    with one_process_at_a_time(models_dir / MAKING_LOCK):
        try:
            target = export_path(models_dir, model)
            if not target.exists():
                log(f"building the ONNX graph of {model} (once): {target}")
                if not export_query_model(model_dir, target):
                    return None
            return target
        except UserError:
            raise
        except Exception as error:
            log(f"no ONNX graph of {model} ({type(error).__name__}: {error})")
            return None


@lru_cache(maxsize=8)
def query_encoder(models_dir: Path, model: str, max_seq_length: int, documents: bool = False):  # type: ignore[no-untyped-def]
    """The fp32 ONNX encoder, the graph built first if ``models_dir`` has none; None if that fails. Queries run on up to
    2 threads (a host program keeps its CPU), documents on every core this process may use."""
    from ctxrag.tasks.embedding.onnx_queries import OnnxEncoder

    target = query_model_export(models_dir, model)
    if target is None:
        return None
    try:
        return OnnxEncoder(
            target,
            packaged_model_path(),
            max_seq_length,
            threads=usable_cores() if documents else min(2, usable_cores()),
        )
    except Exception as error:
        log(f"no ONNX encoder of {model} ({type(error).__name__}: {error})")
        return None


def int8_model(models_dir: Path, model: str) -> Path:
    """The int8 file in ``models_dir``, made now (from the safetensors weights by onnxruntime's quantizer) if missing; ``Int8Refused`` if it
    cannot be made (an int8 vector is never made another way)."""
    from ctxrag.tasks.embedding.onnx_int8 import Int8Refused, int8_path, make_int8_model

    model_dir = packaged_model_path()  # fetched first where the package is not installed (outside the lock)
    with one_process_at_a_time(models_dir / MAKING_LOCK):
        target = int8_path(models_dir, model)
        if not target.exists():
            log(f"making int8 weights of {model} (once): {target}")
            if not make_int8_model(model_dir, target):
                raise Int8Refused(
                    f"the int8 weights of {model} are not within tolerance of fp32 here (see the log); embed in fp32 or bf16"
                )
        return target


@lru_cache(maxsize=4)
def int8_encoder(models_dir: Path, model: str, max_seq_length: int, documents: bool = True) -> Any:
    """The int8 encoder (an ``OnnxEncoder``, each input alone): documents on every core this process may use,
    queries on up to 2 (a host program keeps its CPU)."""
    from ctxrag.tasks.embedding.onnx_queries import OnnxEncoder

    cores = usable_cores()
    return OnnxEncoder(
        int8_model(models_dir, model),
        packaged_model_path(),
        max_seq_length,
        alone=True,
        threads=cores if documents else min(2, cores),
    )


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the OS says, else the machine's)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
