"""The ``index`` flow: load -> contextualize (mapped per document) -> embed -> publish, idempotent and atomic."""

from __future__ import annotations

import time
from pathlib import Path

import ctxrag.offline  # noqa: F401  (before Prefect)
from prefect import flow
from prefect.artifacts import create_table_artifact

from ctxrag.offline import ctxrag_home
from storage.index_store import IndexStore, validate_name
from tasks.contextualize import ContextualizerKind
from tasks.embed import DEFAULT_MAX_SEQ_LENGTH, EmbedderSpec
from tasks.indexing import (
    contextualize_document,
    documents_to_contextualize,
    embed_chunks,
    indexed_text,
    load_corpus,
    plan_index,
    publish_index,
    stored_contexts,
)


class DocumentsFailed(RuntimeError):
    """Some documents could not be contextualized; the others' results are stored and reused by the next run."""


@flow(name="ctxrag-index")
def index_corpus(
    source: str,
    name: str = "default",
    contextualizer: str = "structural",
    max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH,
    home: str | None = None,
) -> dict[str, object]:
    """Index SOURCE (a JSON corpus or a folder) under NAME; returns a report of what was done and reused."""
    validate_name(name)
    ContextualizerKind.from_str(contextualizer)
    root = Path(home) if home else ctxrag_home()
    spec = EmbedderSpec(max_seq_length=max_seq_length)
    store = IndexStore(root)
    seconds: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        seconds[stage] = round(now - clock, 3)
        clock = now

    with store.lock(name):
        corpus = load_corpus(source)
        lap("load")
        pending = documents_to_contextualize(corpus, contextualizer, root)
        by_document = {document.doc_id: document for document in corpus.documents}
        futures = {
            doc_id: contextualize_document.submit(
                by_document[doc_id], [chunk for chunk in corpus.chunks if chunk.doc_id == doc_id], contextualizer, root
            )
            for doc_id in pending
        }
        for future in futures.values():
            future.wait()
        failed = {doc_id: str(future.state.message) for doc_id, future in futures.items() if future.state.is_failed()}
        if failed:
            listing = "; ".join(f"{doc_id}: {message}" for doc_id, message in sorted(failed.items()))
            raise DocumentsFailed(f"{len(failed)} of {len(pending)} documents failed (the rest are saved): {listing}")
        contexts = stored_contexts(corpus, contextualizer, root)
        lap("contextualize")
        texts = [indexed_text(context, chunk.content) for context, chunk in zip(contexts, corpus.chunks)]
        vectors, embedded = embed_chunks(texts, spec, root)
        lap("embed")
        plan = plan_index(corpus, contexts, spec, contextualizer)
        live = store.manifest(name)
        up_to_date = live is not None and live.get("build_key") == plan.build_key
        version = live["version"] if up_to_date else publish_index(name, root, plan, vectors, source)
        lap("publish")
    report = {
        "index": name,
        "version": version,
        "status": "unchanged" if up_to_date else "published",
        "documents": len(corpus.documents),
        "chunks": len(corpus.chunks),
        "documents_contextualized": len(pending),
        "chunks_embedded": embedded,
        "chunks_embedding_reused": len(texts) - embedded,
        "seconds": seconds,
        "warnings": corpus.warnings,
    }
    create_table_artifact(
        key=f"ctxrag-index-{name}".replace("_", "-"),
        table=[{"item": key, "value": str(value)} for key, value in report.items() if key not in {"warnings", "seconds"}],
        description=f"ctxrag index run for {name!r}",
    )
    return report
