"""Stage 2: a context for every chunk, from the store or from the contextualizer (per document, or Message Batches).

Each chunk's context key is computed once per run (``context_keys``) and handed to the tasks with the chunks.
"""

from __future__ import annotations

import time
from pathlib import Path

from prefect import task
from prefect.cache_policies import NONE

from storage.artifacts import KEY, contexts_cache
from storage.ledger import Ledger
from tasks.contextualize import context_key
from tasks.contextualizers import ContextualizerSpec
from tasks.models import Chunk, Corpus, Document
from tasks.retry import retry_only_io

Keyed = list[tuple[Chunk, str]]  # chunks with their context keys


def context_keys(chunks: list[Chunk], spec: ContextualizerSpec) -> list[str]:
    """Every chunk's context key, in chunk order (the contextualizer's name and version are part of it)."""
    worker = spec.build()
    return [context_key(chunk, worker) for chunk in chunks]


def context_row(key: str, doc_id: str, context: str, paid: bool) -> dict[str, object]:
    """A stored context: ``paid`` ones are never removed by gc unless the user asks (see tasks.gc)."""
    return {KEY: key, "doc_id": doc_id, "context": context, "paid": paid, "created_at": time.time()}


def stored_keys(home: Path, keys: list[str]) -> set[str]:
    table = contexts_cache(home).read(keys=keys, columns=[])
    return set() if table is None else set(table[KEY].to_pylist())


@task(cache_policy=NONE)
def chunks_to_contextualize(corpus: Corpus, keys: list[str], home: Path) -> dict[str, Keyed]:
    """doc_id -> its chunks (with their keys) that have no stored context yet; documents with none are left out."""
    stored = stored_keys(home, keys)
    pending: dict[str, Keyed] = {}
    for chunk, key in zip(corpus.chunks, keys):
        if key not in stored:
            pending.setdefault(chunk.doc_id, []).append((chunk, key))
    return pending


@task(retries=2, retry_delay_seconds=[5, 30], retry_condition_fn=retry_only_io, cache_policy=NONE)
def contextualize_document(document: Document, pending: Keyed, spec: ContextualizerSpec, home: Path, run_id: str) -> int:
    """Write the contexts of a document's pending chunks, each saved as soon as it exists; returns how many."""
    stored = stored_keys(home, [key for _, key in pending])  # a task retry skips what was saved
    todo = [(chunk, key) for chunk, key in pending if key not in stored]
    if todo:
        keys = {chunk.chunk_id: key for chunk, key in todo}
        cache = contexts_cache(home)

        def save(pairs: list[tuple[Chunk, str]]) -> None:
            cache.append_rows([context_row(keys[chunk.chunk_id], chunk.doc_id, text, spec.paid) for chunk, text in pairs])

        spec.build(run_id).run(document, [chunk for chunk, _ in todo], save, Ledger(home).append)
    return len(todo)


@task(retries=1, retry_delay_seconds=[30], retry_condition_fn=retry_only_io, cache_policy=NONE)
def contextualize_in_batches(
    corpus: Corpus, pending: dict[str, Keyed], spec: ContextualizerSpec, home: Path, run_id: str, poll_seconds: float = 30.0
) -> dict[str, int]:
    """Message Batches mode: resume open batches, then submit what is still missing (see tasks.claude.batches)."""
    from tasks.claude.batches import BatchState, run_batches

    cache = contexts_cache(home)
    documents = {document.doc_id: document for document in corpus.documents}
    done = stored_keys(home, [key for keyed in pending.values() for _, key in keyed])

    def save(rows: list[tuple[str, str, str]]) -> None:
        cache.append_rows([context_row(key, doc_id, text, paid=True) for key, doc_id, text in rows])
        done.update(key for key, _, _ in rows)

    return run_batches(
        spec.build(run_id), [(documents[doc_id], [chunk for chunk, _ in keyed]) for doc_id, keyed in pending.items()],
        save, Ledger(home).append, BatchState(home), poll_seconds, is_done=lambda key: key in done,
    )


@task(cache_policy=NONE)
def finish_contextualization(home: Path) -> None:
    """Fold the stage's journal into Parquet."""
    contexts_cache(home).compact(min_parts=2)


@task(cache_policy=NONE)
def stored_contexts(corpus: Corpus, keys: list[str], home: Path) -> list[str]:
    """Every chunk's context, in chunk order, from the store (all must be there)."""
    table = contexts_cache(home).read(keys=keys, columns=["context"])
    found = {} if table is None else dict(zip(table[KEY].to_pylist(), table["context"].to_pylist()))
    missing = [chunk.chunk_id for chunk, key in zip(corpus.chunks, keys) if key not in found]
    if missing:
        raise RuntimeError(f"{len(missing)} chunks have no stored context (first: {missing[0]})")
    return [found[key] for key in keys]
