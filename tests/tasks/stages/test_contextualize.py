"""Stage 2 without Prefect (the tasks' functions called directly): batches, keys computed once, the store, failures."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from ctxrag.storage.artifacts import RowCache, contexts_cache
from ctxrag.tasks.common.models import Chunk, Corpus, Document
from ctxrag.tasks.common.retry import ApiCallFailed, may_pass
from ctxrag.tasks.context.offline import StructuralContextualizer
from ctxrag.tasks.context.spec import ContextualizerSpec
from ctxrag.tasks.stages.contextualize import (
    BatchFailed,
    BatchToRetry,
    context_keys,
    contextualize_documents,
    document_batches,
    pending_chunks,
    stored_contexts,
)


def corpus(sizes: dict[str, int]) -> Corpus:
    documents, chunks = [], []
    for doc_id, size in sizes.items():
        texts = [f"def {doc_id}_{index}(): return {index}" for index in range(size)]
        document = Document(doc_id, f"{doc_id}.py", "\n".join(texts), "code", f"{doc_id}.py")
        documents.append(document)
        chunks += [
            Chunk(f"{doc_id}#{index}", doc_id, index, text, document.doc_sha) for index, text in enumerate(texts)
        ]
    return Corpus("test", documents, chunks)


def test_batches_keep_documents_whole_and_hold_about_the_budget() -> None:
    pending = {
        doc_id: [(None, f"{doc_id}{i}") for i in range(size)]
        for doc_id, size in {"a": 3, "b": 2, "c": 6, "d": 1}.items()
    }
    documents = {doc_id: doc_id for doc_id in pending}
    batches = document_batches(pending, documents, chunks_per_task=5)  # type: ignore[arg-type]
    assert [[document for document, _ in batch] for batch in batches] == [["a", "b"], ["c"], ["d"]]  # c alone: too big
    assert document_batches({}, {}, 5) == []


def test_pending_chunks_are_contextualized_stored_and_then_found(tmp_path: Path) -> None:
    data = corpus({"a": 2, "b": 3})
    spec = ContextualizerSpec("structural")
    keys = context_keys(data, spec)
    pending = pending_chunks(data, keys, tmp_path)
    assert {doc_id: len(keyed) for doc_id, keyed in pending.items()} == {"a": 2, "b": 3}
    batch = [(document, pending[document.doc_id]) for document in data.documents]
    assert contextualize_documents.fn(batch, spec, tmp_path, "run") == 5
    assert pending_chunks(data, keys, tmp_path) == {}
    assert contextualize_documents.fn(batch, spec, tmp_path, "run") == 0  # a retry writes nothing twice
    expected = [
        context
        for document in data.documents
        for context in StructuralContextualizer().contextualize(
            document, [chunk for chunk in data.chunks if chunk.doc_id == document.doc_id]
        )
    ]
    assert stored_contexts(data, keys, tmp_path) == expected
    rows = contexts_cache(tmp_path).read().to_pylist()
    assert all(row["paid"] is False for row in rows)


FOR_GOOD, MAY_PASS = ApiCallFailed("400 invalid_request_error: no"), OSError("disk full")


@pytest.mark.parametrize(
    ("errors", "raised", "said"),
    [
        ({"b": FOR_GOOD}, BatchFailed, {"b": "400 invalid_request_error: no"}),
        ({"a": MAY_PASS}, BatchToRetry, {"a": "OSError: disk full"}),
        (
            {"a": MAY_PASS, "c": FOR_GOOD},
            BatchFailed,
            {"a": "OSError: disk full", "c": "400 invalid_request_error: no"},
        ),
    ],
    ids=["for-good", "may-pass", "both"],
)
def test_a_failing_document_does_not_stop_the_others_and_the_task_is_retried_only_if_all_may_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, errors: dict[str, Exception], raised: type, said: dict[str, str]
) -> None:
    class Failing(StructuralContextualizer):
        def run(self, document, chunks, save, ledger):  # type: ignore[no-untyped-def]
            if document.doc_id in errors:
                raise errors[document.doc_id]
            super().run(document, chunks, save, ledger)

    monkeypatch.setattr(ContextualizerSpec, "build", lambda self, run_id="": Failing())
    data = corpus({"a": 1, "b": 1, "c": 1})
    keys = context_keys(data, ContextualizerSpec("structural"))
    pending = pending_chunks(data, keys, tmp_path)
    with pytest.raises(raised) as failed:
        contextualize_documents.fn(
            [(d, pending[d.doc_id]) for d in data.documents], ContextualizerSpec("structural"), tmp_path, "run"
        )
    assert failed.value.failures == said
    assert set(pending_chunks(data, keys, tmp_path)) == set(errors)  # the others are saved
    assert may_pass(failed.value) is (
        raised is BatchToRetry
    )  # retried only when nothing failed for good (one budget per call)
    assert pickle.loads(pickle.dumps(failed.value)).failures == failed.value.failures  # crosses a Dask worker


def test_a_missing_context_is_named(tmp_path: Path) -> None:
    data = corpus({"a": 1})
    with pytest.raises(RuntimeError, match=r"1 chunks have no stored context \(first: a#0\)"):
        stored_contexts(data, context_keys(data, ContextualizerSpec("none")), tmp_path)


@pytest.mark.usefixtures("prefect_harness")
def test_a_first_attempt_reads_no_store_and_a_retry_skips_what_it_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prefect import flow

    calls: list[str] = []

    class DiskFailsOnceAfterA(StructuralContextualizer):
        def run(self, document, chunks, save, ledger):  # type: ignore[no-untyped-def]
            calls.append(document.doc_id)
            if document.doc_id == "b" and calls.count("b") == 1:
                raise OSError("disk full")  # an I/O error: Prefect retries the task
            super().run(document, chunks, save, ledger)

    reads: list[int] = []
    real_stored = RowCache.stored
    monkeypatch.setattr(
        RowCache, "stored", lambda self, keys: reads.append(len(keys := list(keys))) or real_stored(self, keys)
    )
    monkeypatch.setattr(ContextualizerSpec, "build", lambda self, run_id="": DiskFailsOnceAfterA())
    data = corpus({"a": 2, "b": 1})
    keys = context_keys(data, ContextualizerSpec("structural"))
    pending = pending_chunks(data, keys, tmp_path)
    batch = [(document, pending[document.doc_id]) for document in data.documents]
    task = contextualize_documents.with_options(retry_delay_seconds=0)

    @flow
    def one_batch() -> int:
        return task(batch, ContextualizerSpec("structural"), tmp_path, "run")

    reads.clear()
    assert one_batch() == 1  # the retry wrote only b's context
    assert calls == ["a", "b", "b"]  # a was not asked again
    assert reads == [3]  # the first attempt read no store; the retry read the batch's keys once
    assert sorted(row["key"] for row in contexts_cache(tmp_path).read().to_pylist()) == sorted(keys)  # each once
