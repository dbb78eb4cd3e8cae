"""Stage 3: a vector for every indexed text. The texts without a stored vector are embedded by batch tasks (tens
of task runs for 10,000 chunks: the UI shows which batch failed, a retry redoes only that batch's unstored texts,
and a Dask cluster spreads them); then every vector is read back from the store in one pass."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from prefect import task
from prefect.cache_policies import NONE

from ctxrag.storage.artifacts import embeddings_cache
from ctxrag.storage.environment import models_dir
from ctxrag.storage.ledger import Ledger
from ctxrag.tasks.embedding.embed import EmbedderSpec, embed_missing, query_model_export, stored_vectors
from ctxrag.tasks.embedding.embedders import make_embedder
from ctxrag.tasks.common.progress import stage_progress
from ctxrag.tasks.common.retry import retry_only_io
from ctxrag.tasks.stored import unstored_texts

TEXTS_PER_TASK = 2048  # the local model: ~1 minute of work per task on 2 cores


@task(cache_policy=NONE)
def texts_to_embed(texts: list[str], spec: EmbedderSpec, home: Path) -> list[str]:
    """The distinct texts with no stored vector (one read of the stored keys)."""
    return unstored_texts(texts, spec, home)


@task(
    retries=2, retry_delay_seconds=[10, 60], retry_condition_fn=retry_only_io, cache_policy=NONE,
    task_run_name="embed-{label}",
)
def embed_batch(texts: list[str], spec: EmbedderSpec, home: Path, run_id: str = "", label: str = "") -> int:
    """Embed and store a batch of texts (stored batch by batch: a retry skips what an earlier try stored)."""
    embedder = make_embedder(spec, Ledger(home).append, run_id)
    with stage_progress(f"embedding {label}".strip(), "texts") as update:
        return embed_missing(texts, spec, embeddings_cache(home), progress=update, embedder=embedder)


@task(cache_policy=NONE)
def read_vectors(texts: list[str], spec: EmbedderSpec, home: Path, doc_ids: list[str] | None = None) -> np.ndarray:
    """Every text's vector, in order, from the store (``doc_ids``: each text's document, for embedders that read
    documents)."""
    keys = spec.document_keys(texts, doc_ids) if doc_ids is not None else None
    return stored_vectors(texts, spec, embeddings_cache(home), keys=keys)


@task(cache_policy=NONE)
def prepare_query_encoder(spec: EmbedderSpec) -> bool:
    """Make the local model's ONNX query export now, while torch is loaded for the documents (once per machine), so
    the first ``search`` or ``evaluate`` after this index loads no torch. False if it cannot be made (queries then
    stay on torch)."""
    return spec.provider != "local" or query_model_export(models_dir(), spec.model) is not None


def text_batches(texts: list[str], per_task: int = TEXTS_PER_TASK) -> list[list[str]]:
    return [texts[start : start + per_task] for start in range(0, len(texts), per_task)]
