"""The ``index`` flow: load -> contextualize (mapped per document) -> embed -> publish, idempotent and atomic."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import ctxrag.storage.environment  # noqa: F401  (before Prefect)
from prefect import flow, get_run_logger
from prefect.artifacts import create_table_artifact
from prefect.futures import as_completed
from prefect.runtime import flow_run
from prefect.transactions import transaction

from ctxrag.flows.options import DEFAULT_NAME, IndexOptions
from ctxrag.flows.runners import make_task_runner, run_name, spreads_tasks
from ctxrag.storage.backends import backend_for
from ctxrag.storage.environment import ctxrag_home
from ctxrag.storage.errors import UserError
from ctxrag.storage.index_store import IndexStore
from ctxrag.storage.names import validate_name
from ctxrag.tasks.context.claude.settings import ClaudeSettings
from ctxrag.tasks.context.contextualizers import ContextualizerSpec
from ctxrag.tasks.embedding.embedder_spec import EmbedderSpec
from ctxrag.tasks.embedding.precision import with_index_precision
from ctxrag.tasks.gc import artifact_lock
from ctxrag.tasks.stages.contextualize import (
    DocumentFailures,
    chunks_per_task,
    chunks_to_contextualize,
    context_keys,
    contextualize_documents,
    document_batches,
    contextualize_in_batches,
    finish_contextualization,
    stored_contexts,
)
from ctxrag.tasks.stages.costs import paid_calls
from ctxrag.tasks.stages.embed import embed_batch, prepare_query_encoder, read_vectors, text_batches, texts_to_embed
from ctxrag.tasks.stages.embed_documents import embed_whole_documents
from ctxrag.tasks.stages.gate import check_gate
from ctxrag.tasks.stages.load import compare_with_live, load_corpus
from ctxrag.tasks.stages.publish import plan_index, promote_index, publish_index
from ctxrag.tasks.common.display import figure, readable_rows
from ctxrag.tasks.common.progress import stage_progress


DEFAULTS = IndexOptions()
SUMMARY_PARTS = {"contextualizer_calls": ("calls", "cost_usd"), "embedding_calls": ("calls", "cost_usd")}  # the rest: costs artifact


def summary_rows(report: dict[str, object]) -> list[dict[str, str]]:
    """The run report as (item, value) rows for people: nested values flattened (``seconds.embed``), figures rounded
    (``figure``), nothing left as ``None``."""
    rows = []
    for key, value in report.items():
        if value is None or isinstance(value, list):
            continue
        if isinstance(value, dict):
            wanted = SUMMARY_PARTS.get(key, tuple(value))
            rows += [{"item": f"{key}.{inner}", "value": figure(value[inner], f"{key}.{inner}")} for inner in wanted if inner in value]
        else:
            rows.append({"item": key, "value": figure(value, key)})
    return rows


class DocumentsFailed(UserError, RuntimeError):
    """Some documents could not be contextualized; the others' results are stored and reused by the next run."""


@flow(name="ctxrag-index", flow_run_name=run_name("index"), task_runner=make_task_runner())
def index_corpus(
    source: str,
    name: str = DEFAULT_NAME,
    contextualizer: str = DEFAULTS.contextualizer,
    max_seq_length: int = DEFAULTS.max_seq_length,
    window_tokens: int = DEFAULTS.window_tokens,
    context_tokens: int = DEFAULTS.context_tokens,
    home: str | None = None,
    claude: dict[str, Any] | None = None,
    batch_poll_seconds: float = 30.0,
    embedder: str = DEFAULTS.embedder,
    embedding_model: str | None = DEFAULTS.embedding_model,
    output_dimension: int | None = DEFAULTS.output_dimension,
    backend: str = DEFAULTS.backend,
    gate_evalset: str | None = DEFAULTS.gate,
    gate_strategy: str | None = DEFAULTS.gate_strategy,
    gate_metric: str | None = DEFAULTS.gate_metric,
    gate_max_drop: float = DEFAULTS.gate_max_drop,
    include: list[str] | None = DEFAULTS.include,
    exclude: list[str] | None = DEFAULTS.exclude,
    max_file_bytes: int = DEFAULTS.max_file_bytes,
) -> dict[str, object]:
    """Index SOURCE (a JSON corpus or a folder) under NAME; returns a report of what was done and reused.

    ``claude`` holds ClaudeSettings fields (model, mode, cache_ttl, concurrency, ...) for the Claude contextualizers.
    ``window_tokens``: the local model embeds a chunk as windows of this many word pieces, pooled (0: whole texts).
    ``context_tokens``: each window's context is cut to this many word pieces (0: whole; BM25 reads it whole).
    ``embedder`` "local" (MiniLM, offline) or "voyage" (``embedding_model`` default voyage-2, ``output_dimension``).
    ``backend`` "embedded" (bm25s + exact cosine, files under CTXRAG_HOME) or "elasticsearch" (``ELASTICSEARCH_URL``).
    ``gate_evalset``: before a new version replaces a live one, score both on it (``gate_strategy``, ``gate_metric``,
    default pass@10 or recall@3); if the new one is worse by more than ``gate_max_drop``, it is discarded (a
    transaction rollback) and the run fails with ``GateRejected``, the live index untouched.
    A folder SOURCE honours its ``.gitignore`` files, ``include``/``exclude`` (gitignore-style patterns relative to
    it) and skips files over ``max_file_bytes`` (0: no limit), generated or minified files and symlinks.
    """
    validate_name(name)
    backend_for(backend)  # an unknown backend fails before any work
    spec_of_contexts = ContextualizerSpec(contextualizer, ClaudeSettings(**(claude or {})) if contextualizer.startswith("claude") else None)
    run_id = str(flow_run.id or uuid.uuid4())
    root = Path(home) if home else ctxrag_home()
    spec = EmbedderSpec.choose(embedder, embedding_model, max_seq_length, output_dimension, window_tokens, context_tokens)
    store = IndexStore(root)
    seconds: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        seconds[stage] = round(now - clock, 3)
        clock = now

    with store.lock(name), artifact_lock(root, exclusive=False):
        corpus = load_corpus(source, include, exclude, max_file_bytes)
        documents = compare_with_live(corpus, name, root)
        spec, why = with_index_precision(spec, store.manifest(name))  # one precision per index, kept across runs
        if why:
            get_run_logger().info("local embedder precision for %r: %s, %s", name, spec.precision, why)
        lap("load")
        keys = context_keys(corpus, spec_of_contexts)  # each chunk's context key, once per run
        pending = chunks_to_contextualize(corpus, keys, root)
        by_document = {document.doc_id: document for document in corpus.documents}
        failed: dict[str, str] = {}
        if pending and spec_of_contexts.claude is not None and spec_of_contexts.claude.batched:
            outcome = contextualize_in_batches(corpus, pending, spec_of_contexts, root, run_id, batch_poll_seconds)
            if outcome["failed"]:
                failed["(batch)"] = f"{outcome['failed']} batch items failed"
        else:
            batches = document_batches(pending, by_document, chunks_per_task(spec_of_contexts))
            futures = [
                contextualize_documents.submit(batch, spec_of_contexts, root, run_id, label=f"{number}-of-{len(batches)}")
                for number, batch in enumerate(batches, start=1)
            ]
            sizes = {id(future): sum(len(keyed) for _, keyed in batch) for future, batch in zip(futures, batches)}
            to_do = sum(sizes.values())
            with stage_progress("contextualizing", "chunks", stored=len(corpus.chunks) - to_do) as update:
                finished = 0
                for future in as_completed(futures):
                    finished += sizes[id(future)]
                    update(finished, to_do)
            for batch, future in zip(batches, futures):
                result = future.result(raise_on_failure=False)
                if isinstance(result, DocumentFailures):  # some of the task's documents failed; the others are saved
                    failed.update(result.failures)
                elif isinstance(result, BaseException):  # the whole task failed (after its retries)
                    failed.update({document.doc_id: str(outcome) for document, _ in batch})
        finish_contextualization(root)
        costs = paid_calls(root, run_id, "contextualize")
        if failed:
            listing = "; ".join(f"{doc_id}: {message}" for doc_id, message in sorted(failed.items()))
            raise DocumentsFailed(f"{len(failed)} of {len(pending)} documents failed (the rest are saved): {listing}")
        contexts = stored_contexts(corpus, keys, root)
        lap("contextualize")
        plan = plan_index(corpus, contexts, keys, spec, spec_of_contexts, backend)  # the indexed texts, derived once
        embedded_texts = plan.embedded_texts  # what the embedder reads, materialized once
        doc_ids = plan.rows["doc_id"].to_pylist() if spec.embeds_documents else None  # voyage-context-3: per document
        batches_to_embed = [] if doc_ids is not None else text_batches(texts_to_embed(embedded_texts, spec, root))
        labels = [f"{number}-of-{len(batches_to_embed)}" for number in range(1, len(batches_to_embed) + 1)]
        if spreads_tasks():  # Dask: the batches run on the cluster's workers at once
            futures = [embed_batch.submit(batch, spec, root, run_id, label) for batch, label in zip(batches_to_embed, labels)]
            embedded = sum(future.result() for future in futures)
        else:  # threads: one batch after the other (one model in this process, using both cores)
            embedded = sum(embed_batch(batch, spec, root, run_id, label) for batch, label in zip(batches_to_embed, labels))
            if embedded and spec.provider == "local":  # torch is loaded here now: the query export costs ~2 s, once
                prepare_query_encoder(spec)
        if doc_ids is not None:  # each chunk read with its whole document: documents embedded whole, in batches
            embedded += embed_whole_documents(embedded_texts, doc_ids, spec, root, run_id)
        vectors = read_vectors(embedded_texts, spec, root, doc_ids)
        embedding_costs = paid_calls(root, run_id, "embed")
        lap("embed")
        live = store.manifest(name)
        up_to_date = live is not None and live.get("build_key") == plan.build_key
        gate = None
        if up_to_date and live is not None:
            version = live["version"]
        elif gate_evalset and live is not None:
            with transaction():  # a rejected gate rolls back: publish_index's hook discards the staged version
                version = publish_index(name, root, plan, vectors, source, live=False)
                gate = check_gate(name, root, version, gate_evalset, gate_strategy, gate_metric, gate_max_drop, run_id)
            promote_index(name, root, version)
        else:
            version = publish_index(name, root, plan, vectors, source)
        lap("publish")
    report = {
        "index": name,
        "version": version,
        "status": "unchanged" if up_to_date else "published",
        "documents": len(corpus.documents),
        "documents_new": documents["new"],
        "documents_changed": documents["changed"],
        "documents_unchanged": documents["unchanged"],
        "documents_removed": documents["removed"],
        "chunks": len(corpus.chunks),
        "documents_contextualized": len(pending),
        "chunks_contextualized": sum(len(keyed) for keyed in pending.values()),
        "chunks_embedded": embedded,
        "chunks_embedding_reused": plan.rows.num_rows - embedded,
        "contextualizer_calls": costs,
        "embedding_calls": embedding_costs,
        "gate": gate,
        "seconds": seconds,
        "warnings": corpus.warnings,
    }
    create_table_artifact(
        key=f"ctxrag-index-{name}".replace("_", "-"),
        table=summary_rows(report),
        description=f"ctxrag index run for {name!r}",
    )
    get_run_logger().info(
        "ctxrag index %r: %s, version %s; %d documents, %d chunks (%d contextualized, %d embedded); %s",
        name, report["status"], version, len(corpus.documents), len(corpus.chunks), report["chunks_contextualized"],
        embedded, ", ".join(f"{stage} {figure(value, 'seconds')} s" for stage, value in seconds.items()),
    )
    if costs["calls"]:
        create_table_artifact(
            key=f"ctxrag-costs-{name}".replace("_", "-"),
            table=readable_rows({"item": key, "value": value} for key, value in costs.items()),
            description=f"paid contextualizer calls of this run ({spec_of_contexts.kind})",
        )
    return report
