"""The index flow's stages as Prefect tasks: load, contextualize (per document), embed, publish.

Tasks take plain values and a home folder, never clients. Their outputs are persisted as they are made, in the
content-keyed artifact store, which is the cache across runs: a re-run reuses every stored context and vector.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
from prefect import get_run_logger, task
from prefect.cache_policies import NONE

from storage.artifacts import KEY, RowCache
from storage.bm25 import Bm25Index
from storage.index_store import IndexStore
from storage.vectors import VectorIndex
from tasks.contextualize import context_key, make_contextualizer
from tasks.embed import EmbedderSpec, embed_with_cache
from tasks.load import load_source
from tasks.models import Chunk, Corpus, CorpusError, Document, sha256_hex
from tasks.progress import stage_progress

BM25_PARAMETERS = {"k1": 1.2, "b": 0.75}


def _retry_unless_bad_input(task, task_run, state) -> bool:  # type: ignore[no-untyped-def]
    """Retry I/O hiccups, not bad input: a malformed corpus will not get better."""
    try:
        state.result()
    except CorpusError:
        return False
    except Exception:
        return True
    return False


@task(retries=2, retry_delay_seconds=[1, 5], retry_condition_fn=_retry_unless_bad_input, cache_policy=NONE)
def load_corpus(source: str) -> Corpus:
    """Read and validate the source (a JSON corpus or a folder); skipped records are logged as warnings."""
    corpus = load_source(source)
    logger = get_run_logger()
    for warning in corpus.warnings:
        logger.warning(warning)
    return corpus


def contexts_cache(home: Path) -> RowCache:
    return RowCache(home, "contexts")


def embeddings_cache(home: Path) -> RowCache:
    return RowCache(home, "embeddings")


@task(cache_policy=NONE)
def documents_to_contextualize(corpus: Corpus, contextualizer: str, home: Path) -> list[str]:
    """Ids of documents that have at least one chunk without a stored context."""
    worker = make_contextualizer(contextualizer)
    stored = contexts_cache(home).keys()
    return sorted({chunk.doc_id for chunk in corpus.chunks if context_key(chunk, worker) not in stored})


@task(retries=2, retry_delay_seconds=[2, 10], cache_policy=NONE)
def contextualize_document(document: Document, chunks: list[Chunk], contextualizer: str, home: Path) -> int:
    """Write and persist the contexts of one document's chunks; returns how many were written."""
    worker = make_contextualizer(contextualizer)
    contexts = worker.contextualize(document, chunks)
    if len(contexts) != len(chunks):
        raise RuntimeError(f"{worker.name} returned {len(contexts)} contexts for {len(chunks)} chunks of {document.doc_id}")
    keys = [context_key(chunk, worker) for chunk in chunks]
    contexts_cache(home).append(pa.table({KEY: keys, "doc_id": [document.doc_id] * len(chunks), "context": contexts}))
    return len(chunks)


@task(cache_policy=NONE)
def stored_contexts(corpus: Corpus, contextualizer: str, home: Path) -> list[str]:
    """Every chunk's context, in chunk order, from the store (all must be there)."""
    worker = make_contextualizer(contextualizer)
    keys = [context_key(chunk, worker) for chunk in corpus.chunks]
    table = contexts_cache(home).read(keys=keys, columns=["context"])
    found = {} if table is None else dict(zip(table[KEY].to_pylist(), table["context"].to_pylist()))
    missing = [chunk.chunk_id for chunk, key in zip(corpus.chunks, keys) if key not in found]
    if missing:
        raise RuntimeError(f"{len(missing)} chunks have no stored context (first: {missing[0]})")
    return [found[key] for key in keys]


def indexed_text(context: str, content: str) -> str:
    """What is embedded and BM25-indexed: the context in front of the chunk."""
    return f"{context}\n\n{content}" if context else content


@task(retries=1, retry_delay_seconds=[5], cache_policy=NONE)
def embed_chunks(texts: list[str], spec: EmbedderSpec, home: Path) -> tuple[np.ndarray, int]:
    """Vectors for the texts (cached ones reused; the rest embedded in batches, persisted batch by batch)."""
    with stage_progress("embedding") as update:
        return embed_with_cache(texts, spec, embeddings_cache(home), progress=update)


@dataclass
class IndexPlan:
    """What a build would publish, and the key that says whether the live index already is exactly that."""

    config: dict[str, object]
    build_key: str
    rows: pa.Table = field(repr=False)


def plan_index(corpus: Corpus, contexts: list[str], spec: EmbedderSpec, contextualizer: str) -> IndexPlan:
    worker = make_contextualizer(contextualizer)
    config = {
        "backend": "embedded",
        "contextualizer": {"name": worker.name, "version": worker.version},
        "embedder": spec.to_dict(),
        "bm25": BM25_PARAMETERS,
    }
    chunks = corpus.chunks
    rows = pa.table(
        {
            "chunk_id": [chunk.chunk_id for chunk in chunks],
            "doc_id": [chunk.doc_id for chunk in chunks],
            "chunk_index": pa.array([chunk.chunk_index for chunk in chunks], type=pa.int64()),
            "key": [chunk.key for chunk in chunks],
            "heading": [chunk.heading for chunk in chunks],
            "content": [chunk.content for chunk in chunks],
            "context": contexts,
        }
    )
    build_key = sha256_hex(repr(sorted(config.items())), *(f"{chunk.chunk_id}|{chunk.key}" for chunk in chunks), *contexts)
    return IndexPlan(config, build_key, rows)


@task(cache_policy=NONE)
def publish_index(name: str, home: Path, plan: IndexPlan, vectors: np.ndarray, source: str) -> str:
    """Build the BM25 and vector indexes and make them the live version of ``name``; returns the version."""
    texts = [indexed_text(context, content) for context, content in zip(plan.rows["context"].to_pylist(), plan.rows["content"].to_pylist())]
    manifest = {
        "config": plan.config,
        "build_key": plan.build_key,
        "source": source,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "counts": {"chunks": plan.rows.num_rows, "documents": len(set(plan.rows["doc_id"].to_pylist()))},
    }
    version = IndexStore(home).publish(name, manifest, plan.rows, Bm25Index.build(texts, **BM25_PARAMETERS), VectorIndex(vectors))
    return version.name
