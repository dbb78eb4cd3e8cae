"""gc keeps what kept index versions reference and drops the rest; it never runs beside a build."""

from __future__ import annotations

import pytest

from flows.index import index_corpus
from storage.index_store import IndexStore
from tasks.gc import artifact_lock, collect_garbage
from tasks.indexing import contexts_cache, embeddings_cache
from tests.conftest import SAMPLE_CORPUS

pytestmark = pytest.mark.usefixtures("prefect_harness")


def test_gc_drops_only_what_no_index_references(home) -> None:  # type: ignore[no-untyped-def]
    index_corpus(source=str(SAMPLE_CORPUS), name="structural", home=str(home))
    index_corpus(source=str(SAMPLE_CORPUS), name="plain", home=str(home), contextualizer="none")
    chunks = IndexStore(home).open("plain").chunks.num_rows
    before = collect_garbage(home)
    assert before["contexts_removed"] == before["embeddings_removed"] == 0
    assert before["contexts_kept"] == before["embeddings_kept"] == 2 * chunks

    IndexStore(home).delete("plain")
    after = collect_garbage(home)
    assert after == {"contexts_kept": chunks, "contexts_removed": chunks, "embeddings_kept": chunks, "embeddings_removed": chunks}
    report = index_corpus(source=str(SAMPLE_CORPUS), name="structural", home=str(home))
    assert report["chunks_embedded"] == 0 and report["documents_contextualized"] == 0  # what stayed is still used
    assert contexts_cache(home).read().num_rows == embeddings_cache(home).read().num_rows == chunks


def test_gc_refuses_to_run_during_a_build(home) -> None:  # type: ignore[no-untyped-def]
    with artifact_lock(home, exclusive=False):
        with pytest.raises(RuntimeError, match="an index build is running"):
            collect_garbage(home)
