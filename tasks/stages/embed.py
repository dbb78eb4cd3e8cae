"""Stage 3: a vector for every indexed text. The texts without a stored vector are embedded by batch tasks (tens
of task runs for 10,000 chunks: the UI shows which batch failed, a retry redoes only that batch's unstored texts,
and a Dask cluster spreads them); then every vector is read back from the store in one pass."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from prefect import task
from prefect.cache_policies import NONE

from ctxrag.storage.artifacts import embeddings_cache
from ctxrag.storage.environment import models_dir
from ctxrag.storage.ledger import Ledger, summarize
from ctxrag.storage.vectors import forget_pages, scratch_matrix
from ctxrag.tasks.common.progress import stage_progress
from ctxrag.tasks.common.retry import retry_only_io
from ctxrag.tasks.embedding.embed import TEXTS_PER_TASK, EmbedderSpec, embed_missing, query_model_export, stored_vectors
from ctxrag.tasks.embedding.embedders import make_embedder
from ctxrag.tasks.runners import spreads_tasks
from ctxrag.tasks.stages.costs import paid_calls
from ctxrag.tasks.stages.embed_documents import embed_whole_documents
from ctxrag.tasks.stages.publish import BuildPlan
from ctxrag.tasks.stages.run import IndexRun


@dataclass(frozen=True)
class Vectors:
    """The stage's outcome: every row's vector (plan order), how many were embedded now, and the paid calls."""

    vectors: np.ndarray
    embedded: int
    costs: dict[str, object]


def embed_corpus(plan: BuildPlan, run: IndexRun) -> Vectors:
    """Embed what is not stored (batch tasks: at once on a Dask cluster, one after the other on threads, where one
    model uses both cores; an embedder that reads documents embeds them whole), then read every vector. Nothing, when
    the live version already is this plan (it keeps its own vectors: a no-op reads none, 0.2 s on the cookbook)."""
    spec, home = run.embedder, run.home
    if plan.live_version(run) is not None:
        return Vectors(np.empty((0, 0), dtype=np.float32), 0, summarize([]))
    if spec.embeds_documents:
        texts, doc_ids = plan.embedded_texts, plan.doc_ids
        embedded = embed_whole_documents(texts, doc_ids, spec, home, run.run_id)
        vectors = stored_vectors(texts, spec, embeddings_cache(home), keys=spec.document_keys(texts, doc_ids))
        return Vectors(vectors, embedded, paid_calls(home, run.run_id, "embed"))
    keys, todo = embedding_keys(plan, spec, home)
    batches = text_batches(todo)
    labels = [f"{number}-of-{len(batches)}" for number in range(1, len(batches) + 1)]
    if spreads_tasks():
        futures = [embed_batch.submit(batch, spec, home, run.run_id, label) for batch, label in zip(batches, labels)]
        embedded = sum(future.result() for future in futures)
    else:
        embedded = sum(embed_batch(batch, spec, home, run.run_id, label) for batch, label in zip(batches, labels))
        if embedded and spec.packaged and spec.precision != "int8":  # torch is loaded here now: the
            prepare_query_encoder(spec)  # query export costs ~2 s, once (an int8 index's queries run on its int8 file)
    del todo, batches
    vectors, found = embeddings_cache(home).matrix(
        keys, allocate=lambda rows, dimension: scratch_matrix(rows, dimension, home)
    )
    forget_pages(vectors)  # a large matrix is in its scratch file until the publish stage reads it, a block at a time
    if not found.all():
        first = plan.embedded_texts_of(int(np.flatnonzero(~found)[0]), 1)[0]
        raise RuntimeError(f"{int((~found).sum())} texts have no stored vector (first: {first[:80]!r})")
    return Vectors(vectors, embedded, paid_calls(home, run.run_id, "embed"))


def embedding_keys(plan: BuildPlan, spec: EmbedderSpec, home: Path) -> tuple[list[str], list[str]]:
    """Every row's embedding key (plan order), and the distinct texts with no stored vector, in first-seen order (as
    ``unstored_texts`` lists them). The texts are made a block of rows at a time and only the unstored ones are kept:
    1M embedded texts (~1 GB) are never all held."""
    keys = [spec.cache_key(text, "document") for _, block in plan.embedded_blocks() for text in block]
    missing = set(keys) - embeddings_cache(home).stored(keys)
    todo: dict[str, str] = {}
    for start, block in plan.embedded_blocks() if missing else ():
        todo.update((key, text) for key, text in zip(keys[start : start + len(block)], block) if key in missing)
    return keys, list(todo.values())


@task(
    retries=2,
    retry_delay_seconds=[10, 60],
    retry_condition_fn=retry_only_io,
    cache_policy=NONE,
    task_run_name="embed-{label}",
)
def embed_batch(texts: list[str], spec: EmbedderSpec, home: Path, run_id: str = "", label: str = "") -> int:
    """Embed and store a batch of texts (stored batch by batch: a retry skips what an earlier try stored)."""
    embedder = make_embedder(spec, Ledger(home).append, run_id)
    with stage_progress(f"embedding {label}".strip(), "texts") as update:
        return embed_missing(texts, spec, embeddings_cache(home), progress=update, embedder=embedder)


@task(cache_policy=NONE)
def prepare_query_encoder(spec: EmbedderSpec) -> bool:
    """Make the local model's ONNX query export now, while torch is loaded for the documents (once per machine), so
    the first ``search`` or ``evaluate`` after this index loads no torch. False if it cannot be made (queries then
    stay on torch)."""
    return not spec.packaged or query_model_export(models_dir(), spec.model) is not None


def text_batches(texts: list[str], per_task: int = TEXTS_PER_TASK) -> list[list[str]]:
    return [texts[start : start + per_task] for start in range(0, len(texts), per_task)]
