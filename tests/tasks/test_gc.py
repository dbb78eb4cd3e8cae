"""gc keeps what kept index versions reference and drops the rest; it never runs beside a build."""

from __future__ import annotations

import pytest

from ctxrag.flows.index import index_corpus
from ctxrag.storage.artifacts import contexts_cache, embeddings_cache, queries_cache
from ctxrag.storage.index_store import IndexStore
from ctxrag.tasks.gc import artifact_lock, collect_garbage
from tests.helpers import SAMPLE_CORPUS, index_options

pytestmark = pytest.mark.usefixtures("prefect_harness")


def test_gc_drops_only_what_no_index_references(home) -> None:  # type: ignore[no-untyped-def]
    index_corpus(source=str(SAMPLE_CORPUS), name="structural", home=str(home))
    index_corpus(source=str(SAMPLE_CORPUS), name="plain", home=str(home), options=index_options(contextualizer="none"))
    chunks = IndexStore(home).open("plain").chunks.num_rows
    before = collect_garbage(home)
    assert before["contexts_removed"] == before["embeddings_removed"] == 0
    assert before["contexts_kept"] == before["embeddings_kept"] == 2 * chunks

    IndexStore(home).delete("plain")
    after = collect_garbage(home)
    assert after.pop("bytes_freed") > 0  # the plain index's contexts and vectors are gone from disk
    assert after == {
        "contexts_kept": chunks,
        "contexts_kept_paid": 0,
        "contexts_removed": chunks,
        "embeddings_kept": chunks,
        "embeddings_kept_paid": 0,
        "embeddings_removed": chunks,
        "queries_kept": 0,
        "queries_kept_paid": 0,
        "queries_removed": 0,
    }
    report = index_corpus(source=str(SAMPLE_CORPUS), name="structural", home=str(home))
    assert report["chunks_embedded"] == 0 and report["documents_contextualized"] == 0  # what stayed is still used
    assert contexts_cache(home).read().num_rows == embeddings_cache(home).read().num_rows == chunks


def test_gc_refuses_to_run_during_a_build(home) -> None:  # type: ignore[no-untyped-def]
    with artifact_lock(home, exclusive=False):
        with pytest.raises(RuntimeError, match="an index build is running"):
            collect_garbage(home)


def test_paid_results_no_index_uses_stay_until_the_user_asks(home) -> None:  # type: ignore[no-untyped-def]
    import time

    import numpy as np

    from ctxrag.tasks.embedding.embed import vector_rows
    from ctxrag.tasks.stages.contextualize import context_row

    day = 86_400
    contexts_cache(home).append_rows(
        [
            context_row("paid-new", "doc", "a Claude context", paid=True),
            {
                **context_row("paid-old", "doc", "an old Claude context", paid=True),
                "created_at": time.time() - 40 * day,
            },
            context_row("free", "doc", "a structural context", paid=False),
        ]
    )
    embeddings_cache(home).append(vector_rows(["voyage", "local"], np.ones((2, 3), dtype=np.float32), paid=True))
    embeddings_cache(home).append(vector_rows(["local"], np.ones((1, 3), dtype=np.float32), paid=False))
    queries_cache(home).append(vector_rows(["a voyage query"], np.ones((1, 3), dtype=np.float32), paid=True))
    queries_cache(home).append(vector_rows(["a local query"], np.ones((1, 3), dtype=np.float32), paid=False))

    report = collect_garbage(home)
    assert report["contexts_kept_paid"] == 2 and report["contexts_removed"] == 1  # only the free one went
    assert contexts_cache(home).keys() == {"paid-new", "paid-old"}
    assert (
        embeddings_cache(home).keys() == {"voyage"} and report["embeddings_removed"] == 1
    )  # "local" was rewritten free
    assert (
        queries_cache(home).keys() == {"a voyage query"} and report["queries_kept_paid"] == 1
    )  # no version keeps a query

    assert collect_garbage(home, paid_older_than_days=30)["contexts_removed"] == 1
    assert contexts_cache(home).keys() == {"paid-new"}
    released = collect_garbage(home, include_paid=True)
    assert released.pop("bytes_freed") > 0
    assert released == {
        "contexts_kept": 0,
        "contexts_kept_paid": 0,
        "contexts_removed": 1,
        "embeddings_kept": 0,
        "embeddings_kept_paid": 0,
        "embeddings_removed": 1,
        "queries_kept": 0,
        "queries_kept_paid": 0,
        "queries_removed": 1,
    }


def test_rows_of_unknown_origin_count_as_paid(home) -> None:  # type: ignore[no-untyped-def]
    from ctxrag.storage.artifacts import KEY

    contexts_cache(home).append_rows(
        [{KEY: "old-row", "doc_id": "doc", "context": "written before ctxrag recorded it"}]
    )
    assert collect_garbage(home, paid_older_than_days=0)["contexts_kept_paid"] == 1  # no age: never "old"
    assert collect_garbage(home, include_paid=True)["contexts_removed"] == 1


def test_gc_keeps_the_vectors_of_shortened_texts(home, tmp_path) -> None:  # type: ignore[no-untyped-def]
    source = tmp_path / "repo"
    source.mkdir()
    (source / "handlers.py").write_text(
        "".join(f"def handler_number_{i}(request):\n    return {i}\n\n" for i in range(30))
    )
    index_corpus(source=str(source), name="repo", home=str(home))
    context = IndexStore(home).open("repo").chunks["context"][0].as_py()
    assert len(next(line for line in context.split("\n") if line.startswith("Defines: "))) > 100  # it was cut
    assert collect_garbage(home)["embeddings_removed"] == 0
    assert index_corpus(source=str(source), name="repo", home=str(home))["chunks_embedded"] == 0


def test_gc_keeps_the_contexts_of_a_version_built_before_rows_recorded_their_context_keys(home) -> None:  # type: ignore[no-untyped-def]
    import pyarrow.parquet as pq

    from ctxrag.tasks.context.offline import CONTEXT_KEY

    index_corpus(source=str(SAMPLE_CORPUS), name="old", options=index_options(contextualizer="none"), home=str(home))
    store = IndexStore(home)
    chunks_file = store.root / "old" / "versions" / store.manifest("old")["version"] / "chunks.parquet"
    table = pq.read_table(chunks_file)
    pq.write_table(table.drop_columns([CONTEXT_KEY]), chunks_file)  # as the previous release wrote it
    report = collect_garbage(home)
    assert report["contexts_removed"] == 0 and report["contexts_kept"] == table.num_rows
    assert contexts_cache(home).keys() == set(table[CONTEXT_KEY].to_pylist())  # the keys it computes are the same
