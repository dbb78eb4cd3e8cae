"""What a run would not pay again: a corpus compared with the store, in plain Python (no Prefect).

The index flow's tasks (``ctxrag.tasks.stages``) and ``ctxrag index --plan`` share these functions, so a plan and a run
make the same comparison: chunks whose context is stored, texts whose vector is stored, documents new, changed,
unchanged and removed against the live index.
"""

from __future__ import annotations

from pathlib import Path

from ctxrag.storage.artifacts import contexts_cache, embeddings_cache
from ctxrag.storage.index_store import IndexStore
from ctxrag.tasks.common.models import Chunk, Corpus
from ctxrag.tasks.context.offline import context_key
from ctxrag.tasks.context.spec import ContextualizerSpec
from ctxrag.tasks.embedding.embedder_spec import EmbedderSpec

Keyed = list[tuple[Chunk, str]]  # chunks with their context keys


def context_keys(corpus: Corpus, spec: ContextualizerSpec) -> list[str]:
    """Every chunk's context key, in chunk order (the contextualizer's name and version are part of it)."""
    worker = spec.build()
    documents = {document.doc_id: document for document in corpus.documents}
    return [context_key(chunk, worker, documents[chunk.doc_id]) for chunk in corpus.chunks]


def pending_chunks(corpus: Corpus, keys: list[str], home: Path) -> dict[str, Keyed]:
    """doc_id -> its chunks (with their keys) that have no stored context yet; documents with none are left out."""
    stored = contexts_cache(home).stored(keys)
    pending: dict[str, Keyed] = {}
    for chunk, key in zip(corpus.chunks, keys):
        if key not in stored:
            pending.setdefault(chunk.doc_id, []).append((chunk, key))
    return pending


def document_changes(corpus: Corpus, name: str, home: Path) -> dict[str, int]:
    """Documents new, changed, unchanged and removed, against the live index's state (by content hash)."""
    store = IndexStore(home)
    doc_ids, shas = store.chunk_column(name, "doc_id"), store.chunk_column(name, "doc_sha")
    live = dict(zip(doc_ids, shas)) if doc_ids is not None and shas is not None else {}
    current = {document.doc_id: document.doc_sha for document in corpus.documents}
    return {
        "new": sum(1 for doc_id in current if doc_id not in live),
        "changed": sum(1 for doc_id, sha in current.items() if doc_id in live and live[doc_id] != sha),
        "unchanged": sum(1 for doc_id, sha in current.items() if live.get(doc_id) == sha),
        "removed": sum(1 for doc_id in live if doc_id not in current),
    }


def unstored_texts(texts: list[str], spec: EmbedderSpec, home: Path) -> list[str]:
    """The distinct texts with no stored vector (one read of the stored keys)."""
    keys = {spec.cache_key(text, "document"): text for text in texts}
    known = embeddings_cache(home).stored(keys)
    return [text for key, text in keys.items() if key not in known]
