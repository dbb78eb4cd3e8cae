"""Stage 2: a context for every chunk, from the store or from the contextualizer (Message Batches, or tasks that
each take a batch of whole documents, sized by their pending chunks: tens of task runs for 10,000 documents).

Each chunk's context key is computed once per run (``context_keys``) and handed to the tasks with the chunks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from prefect import task
from prefect.cache_policies import NONE
from prefect.futures import as_completed
from prefect.runtime import task_run

from ctxrag.storage.artifacts import KEY, contexts_cache
from ctxrag.storage.errors import UserError
from ctxrag.storage.ledger import Ledger
from ctxrag.tasks.common.batching import packed
from ctxrag.tasks.common.models import Chunk, Corpus, Document
from ctxrag.tasks.common.progress import stage_progress
from ctxrag.tasks.common.retry import may_pass, retry_only_io
from ctxrag.tasks.context.spec import ContextualizerSpec
from ctxrag.tasks.stages.costs import paid_calls
from ctxrag.tasks.stages.run import IndexRun
from ctxrag.tasks.stored import Keyed, context_keys, pending_chunks

if TYPE_CHECKING:
    from ctxrag.tasks.context.claude.contextualizer import ClaudeContextualizer

CHUNKS_PER_TASK = 512  # offline contextualizers: ~20 task runs per 10,000 chunks (one task run costs ~75 ms)
PAID_CHUNKS_PER_TASK = 32


def context_row(key: str, doc_id: str, context: str, paid: bool) -> dict[str, object]:
    """A stored context: ``paid`` ones are never removed by gc unless the user asks (see ctxrag.tasks.gc)."""
    return {KEY: key, "doc_id": doc_id, "context": context, "paid": paid, "created_at": time.time()}


class DocumentFailures(RuntimeError):
    """Some documents of a task failed (the others' contexts are saved); ``failures``: doc_id -> error."""

    def __init__(self, failures: dict[str, str]) -> None:
        super().__init__("; ".join(f"{doc_id}: {error}" for doc_id, error in sorted(failures.items())))
        self.failures = failures

    def __reduce__(self):  # type: ignore[no-untyped-def]  # keeps ``failures`` across processes, e.g. Dask
        return (type(self), (self.failures,))


class BatchFailed(UserError, DocumentFailures):
    """At least one of them failed for good: the task is not retried."""


class BatchToRetry(DocumentFailures):
    """Each met an error that may pass (I/O, an unexpected error): the task is retried, and a retry does only what
    is not saved yet."""

    retryable = True  # read by ``retry_only_io``


def document_batches(
    pending: dict[str, Keyed], documents: dict[str, Document], chunks_per_task: int
) -> list[list[tuple[Document, Keyed]]]:
    """Whole documents grouped into tasks of about ``chunks_per_task`` pending chunks (a larger document alone)."""
    return packed(
        [(documents[doc_id], keyed) for doc_id, keyed in pending.items()], lambda item: len(item[1]), chunks_per_task
    )


def chunks_per_task(spec: ContextualizerSpec) -> int:
    """Paid contextualizers work through a task's documents one after the other: smaller tasks keep documents
    overlapping across the task threads (each document's calls still fan out under the run-wide bound)."""
    return PAID_CHUNKS_PER_TASK if spec.paid else CHUNKS_PER_TASK


@task(
    retries=2,
    retry_delay_seconds=[5, 30],
    retry_condition_fn=retry_only_io,
    cache_policy=NONE,
    task_run_name="contextualize-{label}",
)
def contextualize_documents(
    batch: list[tuple[Document, Keyed]], spec: ContextualizerSpec, home: Path, run_id: str, label: str = ""
) -> int:
    """Write the contexts of a batch of documents' pending chunks, each saved as soon as it exists.

    Returns how many contexts were written. A document that fails does not stop the others. If any failed for good,
    the task ends failed (as the Prefect UI shows it) with ``BatchFailed`` naming each failed document; if the errors
    may pass (I/O, or unexpected), with ``BatchToRetry``, which Prefect retries. A document that failed for good is
    never retried by the task: its paid calls spent their own retries (one budget per call).
    A task retry skips every context already saved: a retry (or a call outside a Prefect task run)
    reads the stored keys again; a first attempt does not, since the flow handed it only chunks that had none when
    the run began (one read of the store per task made the stage quadratic: the journal grows with every task).
    """
    first_attempt = task_run.run_count == 1
    stored = set() if first_attempt else contexts_cache(home).stored(key for _, keyed in batch for _, key in keyed)
    cache = contexts_cache(home)
    worker = spec.build(run_id)
    ledger = Ledger(home).append
    failures: dict[str, str] = {}
    to_retry: dict[str, str] = {}
    written = 0
    for document, keyed in batch:
        todo = {chunk.chunk_id: (chunk, key) for chunk, key in keyed if key not in stored}
        if not todo:
            continue

        def save(pairs: list[tuple[Chunk, str]]) -> None:
            cache.append_rows(
                [context_row(todo[chunk.chunk_id][1], chunk.doc_id, text, spec.paid) for chunk, text in pairs]
            )

        try:
            worker.run(document, [chunk for chunk, _ in todo.values()], save, ledger)
        except Exception as error:
            said = str(error) if isinstance(error, UserError) else f"{type(error).__name__}: {error}"
            (to_retry if may_pass(error) else failures)[document.doc_id] = said
        written += len(todo)
    if failures:  # not retried: that would run the documents that failed for good again
        raise BatchFailed({**to_retry, **failures})
    if to_retry:
        raise BatchToRetry(to_retry)
    return written


@task(retries=1, retry_delay_seconds=[30], retry_condition_fn=retry_only_io, cache_policy=NONE)
def contextualize_in_batches(
    corpus: Corpus,
    pending: dict[str, Keyed],
    spec: ContextualizerSpec,
    home: Path,
    run_id: str,
    poll_seconds: float = 30.0,
) -> dict[str, int]:
    """Message Batches mode: resume open batches, then submit what is still missing (see ctxrag.tasks.context.claude.batches)."""
    from ctxrag.tasks.context.claude.batches import BatchState, run_batches

    cache = contexts_cache(home)
    documents = {document.doc_id: document for document in corpus.documents}
    done = contexts_cache(home).stored(key for keyed in pending.values() for _, key in keyed)

    def save(rows: list[tuple[str, str, str]]) -> None:
        cache.append_rows([context_row(key, doc_id, text, paid=True) for key, doc_id, text in rows])
        done.update(key for key, _, _ in rows)

    return run_batches(
        cast("ClaudeContextualizer", spec.build(run_id)),
        [(documents[doc_id], [chunk for chunk, _ in keyed]) for doc_id, keyed in pending.items()],
        save,
        Ledger(home).append,
        BatchState(home),
        poll_seconds,
        is_done=lambda key: key in done,
    )


def stored_contexts(corpus: Corpus, keys: list[str], home: Path) -> list[str]:
    """Every chunk's context, in chunk order, from the store (all must be there)."""
    found = contexts_cache(home).lookup(keys, "context")
    missing = [chunk.chunk_id for chunk, key in zip(corpus.chunks, keys) if key not in found]
    if missing:
        raise RuntimeError(f"{len(missing)} chunks have no stored context (first: {missing[0]})")
    return [found[key] for key in keys]


class DocumentsFailed(UserError, RuntimeError):
    """Some documents could not be contextualized; the others' results are stored and reused by the next run."""


@dataclass(frozen=True)
class Contexts:
    """The stage's outcome: every chunk's context and its key (chunk order), what was done, and its paid calls."""

    texts: list[str]
    keys: list[str]
    documents_contextualized: int
    chunks_contextualized: int
    costs: dict[str, object]


def contextualize_corpus(corpus: Corpus, run: IndexRun) -> Contexts:
    """A context for every chunk: the stored ones read, the others written by Message Batches or by tasks of whole
    documents (run at once by the flow's task runner). A document that fails does not stop the others: their
    contexts are saved, and the stage then fails with ``DocumentsFailed`` naming each failed document."""
    spec, home = run.contextualizer, run.home
    keys = context_keys(corpus, spec)  # each chunk's context key, once per run
    pending = pending_chunks(corpus, keys, home)
    if pending and spec.claude is not None and spec.claude.batched:
        outcome = contextualize_in_batches(corpus, pending, spec, home, run.run_id, spec.claude.batch_poll_seconds)
        failed = {"(batch)": f"{outcome['failed']} batch items failed"} if outcome["failed"] else {}
    else:
        failed = _contextualize_in_tasks(corpus, pending, spec, home, run.run_id)
    contexts_cache(home).compact(min_parts=2)  # the stage's journal folded into Parquet
    costs = paid_calls(home, run.run_id, "contextualize")
    if failed:
        listing = "; ".join(f"{doc_id}: {message}" for doc_id, message in sorted(failed.items()))
        raise DocumentsFailed(f"{len(failed)} of {len(pending)} documents failed (the rest are saved): {listing}")
    chunks = sum(len(keyed) for keyed in pending.values())
    return Contexts(stored_contexts(corpus, keys, home), keys, len(pending), chunks, costs)


def _contextualize_in_tasks(
    corpus: Corpus, pending: dict[str, Keyed], spec: ContextualizerSpec, home: Path, run_id: str
) -> dict[str, str]:
    """Submit the pending documents in batches, report progress, and collect the failures: doc_id -> error."""
    by_document = {document.doc_id: document for document in corpus.documents}
    batches = document_batches(pending, by_document, chunks_per_task(spec))
    futures = [
        contextualize_documents.submit(batch, spec, home, run_id, label=f"{number}-of-{len(batches)}")
        for number, batch in enumerate(batches, start=1)
    ]
    sizes = {id(future): sum(len(keyed) for _, keyed in batch) for future, batch in zip(futures, batches)}
    to_do = sum(sizes.values())
    with stage_progress("contextualizing", "chunks", stored=len(corpus.chunks) - to_do) as update:
        finished = 0
        for future in as_completed(futures):
            finished += sizes[id(future)]
            update(finished, to_do)
    failed: dict[str, str] = {}
    for batch, future in zip(batches, futures):
        result = future.result(raise_on_failure=False)
        if isinstance(result, DocumentFailures):  # some of the task's documents failed; the others are saved
            failed.update(result.failures)
        elif isinstance(result, BaseException):  # the whole task failed (after its retries)
            failed.update({document.doc_id: str(result) for document, _ in batch})
    return failed
