"""The index flow's stages as Prefect tasks: load, contextualize (per document), embed, publish.

Tasks take plain values and a home folder, never clients. Their outputs are persisted as they are made, in the
content-keyed artifact store, which is the cache across runs: a re-run reuses every stored context and vector.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from prefect import get_run_logger, task
from prefect.transactions import get_transaction
from prefect.cache_policies import NONE

from storage.errors import InvalidInput, UserError
from storage.artifacts import KEY, RowCache
from storage.bm25 import Bm25Index
from storage.index_store import IndexStore
from storage.vectors import VectorIndex
from storage.ledger import Ledger, summarize
from tasks.contextualize import Contextualizer, ContextualizerSpec, context_key
from tasks.embed import EmbedderSpec, embed_with_cache, make_embedder
from tasks.load import DEFAULT_MAX_FILE_BYTES, load_source
from tasks.models import Chunk, Corpus, CorpusError, Document, sha256_hex
from tasks.progress import stage_progress
from tasks.retry import ApiCallFailed
from tasks.secrets import MissingKey

BM25_PARAMETERS = {"k1": 1.2, "b": 0.75}


def _retry_unless_bad_input(task, task_run, state) -> bool:  # type: ignore[no-untyped-def]
    """Retry I/O hiccups only: not bad input (a malformed corpus will not get better), and never a paid call that
    failed for good (its own retry budget is spent: one budget per call, see tasks.retry)."""
    try:
        state.result()
    except (CorpusError, MissingKey, ValueError, ApiCallFailed):
        return False
    except Exception as error:  # noqa: BLE001 - decide by the error's own word when it has one
        return bool(getattr(error, "retryable", True))
    return False


@task(retries=2, retry_delay_seconds=[1, 5], retry_condition_fn=_retry_unless_bad_input, cache_policy=NONE)
def load_corpus(
    source: str,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> Corpus:
    """Read and validate the source (a JSON corpus or a folder, whose files ``include``/``exclude`` patterns and
    ``max_file_bytes`` pick); skipped records and files are logged as warnings."""
    corpus = load_source(source, include=include, exclude=exclude, max_file_bytes=max_file_bytes)
    logger = get_run_logger()
    for warning in corpus.warnings:
        logger.warning(warning)
    return corpus


def contexts_cache(home: Path) -> RowCache:
    return RowCache(home, "contexts")


def embeddings_cache(home: Path) -> RowCache:
    return RowCache(home, "embeddings")


@task(cache_policy=NONE)
def compare_with_live(corpus: Corpus, name: str, home: Path) -> dict[str, int]:
    """Documents new, changed, unchanged and removed, against the live index's state (by content hash)."""
    live: dict[str, str] = {}
    version = IndexStore(home).live_version(name)
    if version is not None and (version / "chunks.parquet").is_file():
        table = pq.read_table(version / "chunks.parquet")
        if "doc_sha" in table.column_names:
            live = dict(zip(table["doc_id"].to_pylist(), table["doc_sha"].to_pylist()))
    current = {document.doc_id: document.doc_sha for document in corpus.documents}
    return {
        "new": sum(1 for doc_id in current if doc_id not in live),
        "changed": sum(1 for doc_id, sha in current.items() if doc_id in live and live[doc_id] != sha),
        "unchanged": sum(1 for doc_id, sha in current.items() if live.get(doc_id) == sha),
        "removed": sum(1 for doc_id in live if doc_id not in current),
    }


def _stored_keys(home: Path, keys: list[str]) -> set[str]:
    table = contexts_cache(home).read(keys=keys, columns=[])
    return set() if table is None else set(table[KEY].to_pylist())


@task(cache_policy=NONE)
def chunks_to_contextualize(corpus: Corpus, spec: ContextualizerSpec, home: Path) -> dict[str, list[Chunk]]:
    """doc_id -> its chunks that have no stored context yet (documents with none pending are left out)."""
    worker = spec.build()
    keys = [context_key(chunk, worker) for chunk in corpus.chunks]
    stored = _stored_keys(home, keys)
    pending: dict[str, list[Chunk]] = {}
    for chunk, key in zip(corpus.chunks, keys):
        if key not in stored:
            pending.setdefault(chunk.doc_id, []).append(chunk)
    return pending


def context_row(key: str, doc_id: str, context: str, paid: bool) -> dict[str, object]:
    """A stored context: ``paid`` ones are never removed by gc unless the user asks (see tasks.gc)."""
    return {KEY: key, "doc_id": doc_id, "context": context, "paid": paid, "created_at": time.time()}


def _context_saver(home: Path, worker: Contextualizer, paid: bool):  # type: ignore[no-untyped-def]
    cache = contexts_cache(home)

    def save(pairs: list[tuple[Chunk, str]]) -> None:
        cache.append_rows([context_row(context_key(chunk, worker), chunk.doc_id, text, paid) for chunk, text in pairs])

    return save


@task(retries=2, retry_delay_seconds=[5, 30], retry_condition_fn=_retry_unless_bad_input, cache_policy=NONE)
def contextualize_document(document: Document, chunks: list[Chunk], spec: ContextualizerSpec, home: Path, run_id: str) -> int:
    """Write the contexts of a document's pending chunks, each saved as soon as it exists; returns how many."""
    worker = spec.build(run_id)
    stored = _stored_keys(home, [context_key(chunk, worker) for chunk in chunks])  # a task retry skips saved ones
    todo = [chunk for chunk in chunks if context_key(chunk, worker) not in stored]
    if todo:
        worker.run(document, todo, _context_saver(home, worker, spec.paid), Ledger(home).append)
    return len(todo)


@task(retries=1, retry_delay_seconds=[30], cache_policy=NONE)
def contextualize_in_batches(corpus: Corpus, pending: dict[str, list[Chunk]], spec: ContextualizerSpec, home: Path, run_id: str, poll_seconds: float = 30.0) -> dict[str, int]:
    """Message Batches mode: resume open batches, then submit what is still missing (see tasks.claude.batches)."""
    from tasks.claude.batches import BatchState, run_batches

    worker = spec.build(run_id)
    cache = contexts_cache(home)
    documents = {document.doc_id: document for document in corpus.documents}
    done = _stored_keys(home, [context_key(chunk, worker) for chunks in pending.values() for chunk in chunks])

    def save(rows: list[tuple[str, str, str]]) -> None:
        cache.append_rows([context_row(key, doc_id, text, paid=True) for key, doc_id, text in rows])
        done.update(key for key, _, _ in rows)

    return run_batches(
        worker, [(documents[doc_id], chunks) for doc_id, chunks in pending.items()], save, Ledger(home).append,
        BatchState(home), poll_seconds, is_done=lambda key: key in done,
    )


@task(cache_policy=NONE)
def finish_contextualization(home: Path) -> None:
    """Fold the stage's journal into Parquet."""
    contexts_cache(home).compact(min_parts=2)


@task(cache_policy=NONE)
def paid_calls(home: Path, run_id: str, stage: str) -> dict[str, object]:
    """This run's paid calls of one stage, summed (calls, tokens, cache-read share, cost, cost without caching)."""
    ledger = Ledger(home)
    ledger.compact()
    return summarize([row for row in ledger.rows(run_id) if row["stage"] == stage])


@task(cache_policy=NONE)
def stored_contexts(corpus: Corpus, spec: ContextualizerSpec, home: Path) -> list[str]:
    """Every chunk's context, in chunk order, from the store (all must be there)."""
    worker = spec.build()
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


@task(retries=2, retry_delay_seconds=[10, 60], retry_condition_fn=_retry_unless_bad_input, cache_policy=NONE)
def embed_chunks(texts: list[str], spec: EmbedderSpec, home: Path, run_id: str = "") -> tuple[np.ndarray, int]:
    """Vectors for the texts (cached ones reused; the rest embedded in batches, persisted batch by batch)."""
    embedder = make_embedder(spec, Ledger(home).append, run_id)
    with stage_progress("embedding") as update:
        return embed_with_cache(texts, spec, embeddings_cache(home), progress=update, embedder=embedder)


@dataclass
class IndexPlan:
    """What a build would publish, and the key that says whether the live index already is exactly that."""

    config: dict[str, object]
    build_key: str
    rows: pa.Table = field(repr=False)


def plan_index(
    corpus: Corpus, contexts: list[str], spec: EmbedderSpec, contextualizer: ContextualizerSpec, backend: str = "embedded"
) -> IndexPlan:
    if backend not in {"embedded", "elasticsearch"}:
        raise InvalidInput(f"unknown backend {backend!r}; choose embedded or elasticsearch")
    worker = contextualizer.build()
    config = {
        "backend": backend,
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
            "doc_sha": [chunk.doc_sha for chunk in chunks],
            "heading": [chunk.heading for chunk in chunks],
            "content": [chunk.content for chunk in chunks],
            "context": contexts,
        }
    )
    build_key = sha256_hex(repr(sorted(config.items())), *(f"{chunk.chunk_id}|{chunk.key}" for chunk in chunks), *contexts)
    return IndexPlan(config, build_key, rows)


@task(retries=2, retry_delay_seconds=[10, 60], retry_condition_fn=_retry_unless_bad_input, cache_policy=NONE)
def publish_index(name: str, home: Path, plan: IndexPlan, vectors: np.ndarray, source: str, live: bool = True) -> str:
    """Build the BM25 and vector indexes (embedded, or a new Elasticsearch version) and make them the live version
    of ``name`` — or, with ``live=False``, only stage them for a quality gate. Returns the version id. A failed
    build leaves the live version as it was; inside a transaction, a rollback discards the staged version."""
    texts = [indexed_text(context, content) for context, content in zip(plan.rows["context"].to_pylist(), plan.rows["content"].to_pylist())]
    elasticsearch = None
    if plan.config["backend"] == "elasticsearch":
        from storage.elasticsearch import EsIndex, connect

        elasticsearch = {"alias": name, "index": EsIndex(connect(), name).build(plan.rows, vectors, switch=live)}
    manifest = {
        "config": plan.config,
        "build_key": plan.build_key,
        "source": source,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "counts": {"chunks": plan.rows.num_rows, "documents": len(set(plan.rows["doc_id"].to_pylist()))},
        "elasticsearch": elasticsearch,
    }
    if elasticsearch:
        version = IndexStore(home).publish(name, manifest, plan.rows, live=live)
    else:
        version = IndexStore(home).publish(name, manifest, plan.rows, Bm25Index.build(texts, **BM25_PARAMETERS), VectorIndex(vectors), live=live)
    transaction = get_transaction()
    if transaction is not None:
        transaction.set("staged", {"name": name, "home": str(home), "version": version.name, "elasticsearch": elasticsearch})
    return version.name


@publish_index.on_rollback
def _discard_staged(transaction) -> None:  # type: ignore[no-untyped-def]
    """The quality gate refused the staged version: remove it (the live version never changed)."""
    staged = transaction.get("staged", None)
    if staged:
        discard_version(staged["name"], Path(staged["home"]), staged["version"])


def _staged_elasticsearch(store: IndexStore, name: str, version_id: str):  # type: ignore[no-untyped-def]
    """(EsIndex, physical index) of a version that lives in Elasticsearch, else None."""
    manifest = json.loads((store.root / name / "versions" / version_id / "manifest.json").read_text())
    if not manifest.get("elasticsearch"):
        return None
    from storage.elasticsearch import EsIndex, connect

    return EsIndex(connect(), name), manifest["elasticsearch"]["index"]


def discard_version(name: str, home: Path, version_id: str) -> None:
    store = IndexStore(home)
    if found := _staged_elasticsearch(store, name, version_id):
        found[0].drop(found[1])
    store.discard(name, version_id)


@task(cache_policy=NONE)
def promote_index(name: str, home: Path, version_id: str) -> None:
    """Make a staged version live: the Elasticsearch alias first (if any), then the local pointer."""
    store = IndexStore(home)
    if found := _staged_elasticsearch(store, name, version_id):
        found[0].switch_to(found[1])
    store.promote(name, version_id)


class GateRejected(UserError, RuntimeError):
    """The new index scored worse than the live one by more than the allowed drop; the live one stays."""

    retryable = False


@task(cache_policy=NONE)
def check_gate(
    name: str, home: Path, version_id: str, evalset: str, strategy: str, metric: str | None, max_drop: float, run_id: str = ""
) -> dict[str, object]:
    """Score the staged and the live version with one strategy; raise ``GateRejected`` if the drop is too large."""
    from tasks.evalset import EvalFormat, load_evalset
    from tasks.evaluate import evaluate
    from tasks.search import Searcher, Strategy

    questions = load_evalset(evalset)
    ks = questions.format.default_ks
    metric = metric or ("pass@10" if questions.format is EvalFormat.PASS_AT_K else f"recall@{ks[0]}")
    store = IndexStore(home)
    chosen = Strategy.from_str(strategy)
    paid = {"home": home, "ledger": Ledger(home).append, "run_id": run_id}  # query embeddings: stored, and in the ledger
    candidate = evaluate(Searcher(store.open(name, version_id), staged=True, **paid), questions, [chosen], ks).metrics[chosen.value]
    live = evaluate(Searcher(store.open(name), **paid), questions, [chosen], ks).metrics[chosen.value]
    if metric not in candidate:
        raise InvalidInput(f"gate metric {metric!r} is not computed for {evalset}; choose one of {sorted(candidate)}")
    report = {"metric": metric, "strategy": chosen.value, "live": live[metric], "candidate": candidate[metric], "max_drop": max_drop}
    if candidate[metric] < live[metric] - max_drop:
        raise GateRejected(
            f"quality gate: {chosen.value} {metric} would fall from {live[metric]:.4f} to {candidate[metric]:.4f} "
            f"(allowed drop {max_drop}); the live index is kept"
        )
    return report
