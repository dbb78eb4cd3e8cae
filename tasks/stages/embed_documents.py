"""Stage 3 for an embedder that reads each chunk with its whole document (``voyage-context-3``): the documents with
any chunk lacking a stored vector are embedded whole, their chunks in order, by batch tasks; a document whose text
changed has new keys for all its chunks (``EmbedderSpec.document_keys``), so all are embedded again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from prefect import task
from prefect.cache_policies import NONE

from ctxrag.storage.artifacts import embeddings_cache
from ctxrag.storage.ledger import Ledger
from ctxrag.tasks.common.batching import packed
from ctxrag.tasks.common.retry import retry_only_io
from ctxrag.tasks.embedding.embed import TEXTS_PER_TASK, EmbedderSpec, vector_rows
from ctxrag.tasks.embedding.embedders import make_embedder

DocumentTexts = tuple[list[str], list[str]]  # a document's embedded texts in chunk order, and their cache keys


def documents_to_embed(texts: list[str], doc_ids: list[str], spec: EmbedderSpec, home: Path) -> list[DocumentTexts]:
    """Whole documents (in first-seen order) with at least one text whose vector is not stored."""
    keys = spec.document_keys(texts, doc_ids)
    known = embeddings_cache(home).stored(keys)
    documents: dict[str, DocumentTexts] = {}
    for doc_id, text, key in zip(doc_ids, texts, keys):
        documents.setdefault(doc_id, ([], []))
        documents[doc_id][0].append(text)
        documents[doc_id][1].append(key)
    return [document for document in documents.values() if not known.issuperset(document[1])]


@task(
    retries=2,
    retry_delay_seconds=[10, 60],
    retry_condition_fn=retry_only_io,
    cache_policy=NONE,
    task_run_name="embed-documents-{label}",
)
def embed_documents_batch(
    documents: list[DocumentTexts], spec: EmbedderSpec, home: Path, run_id: str = "", label: str = ""
) -> int:
    """Embed and store a batch of whole documents, each stored as soon as its request returns (a retry or a re-run
    after a kill sends only what is not stored); returns how many texts were embedded."""
    embedder = make_embedder(spec, Ledger(home).append, run_id)
    cache = embeddings_cache(home)

    def keep(finished: dict[int, np.ndarray]) -> None:  # one stored part per request
        keys = [key for number in finished for key in documents[number][1]]
        cache.append(vector_rows(keys, np.concatenate(list(finished.values())), paid=True))

    embedder.embed_documents([texts for texts, _ in documents], done=keep)  # type: ignore[attr-defined]
    return sum(len(keys) for _, keys in documents)


def embed_whole_documents(texts: list[str], doc_ids: list[str], spec: EmbedderSpec, home: Path, run_id: str) -> int:
    """Embed every document with a missing vector, one task per batch of documents; returns the texts embedded."""
    batches = packed(documents_to_embed(texts, doc_ids, spec, home), lambda document: len(document[0]), TEXTS_PER_TASK)
    return sum(
        embed_documents_batch(batch, spec, home, run_id, f"{number}-of-{len(batches)}")
        for number, batch in enumerate(batches, start=1)
    )
