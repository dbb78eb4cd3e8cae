"""The index flow end to end on the project's small sample corpus: build, reuse, incremental edit, failures."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ctxrag.flows.index import index_corpus
from ctxrag.storage.artifacts import contexts_cache
from ctxrag.storage.index_store import IndexStore
from ctxrag.tasks.common.models import CorpusError
from ctxrag.tasks.context.offline import StructuralContextualizer
from ctxrag.tasks.embedding.embedder_spec import EmbedderSpec
from ctxrag.tasks.embedding.windows import local_word_pieces
from ctxrag.tasks.stages.contextualize import DocumentsFailed, contextualize_documents
from tests.helpers import SAMPLE_CORPUS, index_options

pytestmark = pytest.mark.usefixtures("prefect_harness")


@pytest.fixture
def corpus_dir(tmp_path: Path) -> Path:
    target = tmp_path / "corpus"
    shutil.copytree(SAMPLE_CORPUS, target)
    return target


def run(source: Path, home: Path, **options) -> dict:
    return index_corpus(source=str(source), name="sample", home=str(home), options=index_options(**options))


def test_first_run_builds_and_second_run_reuses_every_stage(corpus_dir: Path, home: Path) -> None:
    first = run(corpus_dir, home)
    assert first["status"] == "published"
    assert first["documents"] == 8 and first["documents_new"] == 8
    assert first["documents_contextualized"] == 8
    assert first["chunks_embedded"] == first["chunks"] > 8
    by_language = first["chunks_by_language"]  # the sample: tinyq/*.py, README.md and docs/*.md, CHANGELOG.txt
    assert set(by_language) == {"python", "markdown", "text"} and sum(by_language.values()) == first["chunks"]
    assert first["read_as_plain_text"] == {"files": 0, "first": []}  # the changelog is prose (.txt), not a fallback
    assert first["chunked_by_regex"] == {"files": 0, "first": []}  # Python has a grammar

    second = run(corpus_dir, home)
    assert second["status"] == "unchanged"
    assert second["version"] == first["version"]
    assert second["documents_contextualized"] == 0
    assert second["chunks_embedded"] == 0
    assert second["chunks_embedding_reused"] == first["chunks"]


def test_editing_one_document_reprocesses_only_it(corpus_dir: Path, home: Path) -> None:
    first = run(corpus_dir, home)
    changelog = corpus_dir / "CHANGELOG.txt"
    changelog.write_text(changelog.read_text() + "\n0.9.1 - Added the quasar flux capacitor.\n")
    (corpus_dir / "docs" / "configuration.md").unlink()

    second = run(corpus_dir, home)
    assert second["status"] == "published" and second["version"] != first["version"]
    assert second["documents"] == 7
    assert (
        second["documents_new"],
        second["documents_changed"],
        second["documents_unchanged"],
        second["documents_removed"],
    ) == (0, 1, 6, 1)
    assert second["documents_contextualized"] == 1
    assert 1 <= second["chunks_embedded"] <= 2  # only the changelog's changed chunk(s)
    index = IndexStore(home).open("sample")
    assert "docs/configuration.md" not in set(index.chunks["doc_id"].to_pylist())
    assert any("quasar" in text for text in index.chunks["content"].to_pylist())


def test_bad_source_fails_and_leaves_the_live_index_untouched(corpus_dir: Path, home: Path, tmp_path: Path) -> None:
    first = run(corpus_dir, home)
    broken = tmp_path / "broken.json"
    broken.write_text('[{"doc_id": "d1", "original_uuid": "u1", "content": "x", "chunks": [')
    with pytest.raises(CorpusError, match="broken.json"):
        run(broken, home)
    store = IndexStore(home)
    assert store.manifest("sample")["version"] == first["version"]
    assert store.open("sample").chunks.num_rows == first["chunks"]
    assert not list((home / "indexes" / "sample").glob(".staging-*"))


def test_a_failed_document_keeps_the_others_work(corpus_dir: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original = StructuralContextualizer.contextualize
    attempts: list[str] = []

    def fail_on_changelog(self, document, chunks):  # type: ignore[no-untyped-def]
        if document.doc_id == "CHANGELOG.txt":  # the first document of the run's one task
            attempts.append(document.doc_id)
            raise RuntimeError("simulated failure")
        return original(self, document, chunks)

    monkeypatch.setattr(StructuralContextualizer, "contextualize", fail_on_changelog)
    monkeypatch.setattr(contextualize_documents, "retry_delay_seconds", [0, 0])  # the task's own 5 s and 30 s
    with pytest.raises(DocumentsFailed) as failed:
        run(corpus_dir, home)
    assert str(failed.value).startswith(
        "1 of 8 documents failed (the rest are saved): CHANGELOG.txt: RuntimeError: simulated failure"
    )
    assert attempts == ["CHANGELOG.txt"] * 3  # an error that may pass: the task and its two retries
    assert IndexStore(home).manifest("sample") is None  # nothing half-built went live
    stored = contexts_cache(home).read(columns=["doc_id"])
    assert set(stored["doc_id"].to_pylist()) == {
        "README.md",
        "docs/configuration.md",
        "docs/guide.md",
        "tinyq/queue.py",
        "tinyq/retry.py",
        "tinyq/storage.py",
        "tinyq/worker.py",
    }

    monkeypatch.setattr(StructuralContextualizer, "contextualize", original)
    report = run(corpus_dir, home)
    assert report["documents_contextualized"] == 1  # only the one that failed
    assert report["status"] == "published"


def test_contextualizer_none_indexes_without_context(corpus_dir: Path, home: Path) -> None:
    report = run(corpus_dir, home, contextualizer="none")
    manifest = IndexStore(home).manifest("sample")
    assert manifest["config"]["contextualizer"]["name"] == "none"
    assert set(IndexStore(home).open("sample").chunks["context"].to_pylist()) == {""}
    assert json.loads(json.dumps(report))["chunks"] == manifest["counts"]["chunks"]


def test_whole_text_vectors_on_request_and_windows_again_reembed_without_recontextualizing(
    corpus_dir: Path, home: Path
) -> None:
    whole = run(corpus_dir, home, window_tokens=0)
    assert "window_tokens" not in IndexStore(home).manifest("sample")["config"]["embedder"]  # whole texts
    windowed = run(corpus_dir, home)
    assert windowed["status"] == "published" and windowed["version"] != whole["version"]
    assert IndexStore(home).manifest("sample")["config"]["embedder"]["window_tokens"] == 256
    assert windowed["chunks_embedded"] == windowed["chunks"]  # their own vectors
    assert windowed["documents_contextualized"] == 0  # the contexts are reused


def test_a_context_cap_is_saved_and_lifting_it_reembeds_only_the_chunks_it_cut(corpus_dir: Path, home: Path) -> None:
    capped = run(corpus_dir, home, context_tokens=12)
    assert IndexStore(home).manifest("sample")["config"]["embedder"]["context_tokens"] == 12
    contexts = IndexStore(home).open("sample").chunks["context"].to_pylist()
    assert max(local_word_pieces(contexts)) > 12  # the index keeps them whole (BM25 reads them so)
    capped_spec, whole_spec = (EmbedderSpec.choose("local", None, 512, None, context_tokens=cap) for cap in (12, 0))
    cut = sum(capped_spec.embedded_text(context, "") != whole_spec.embedded_text(context, "") for context in contexts)
    assert 0 < cut < capped["chunks"]
    whole = run(corpus_dir, home, context_tokens=0)
    assert "context_tokens" not in IndexStore(home).manifest("sample")["config"]["embedder"]
    assert whole["status"] == "published" and whole["chunks_embedded"] == cut and whole["documents_contextualized"] == 0


def test_invalid_name_is_rejected_before_any_work(corpus_dir: Path, home: Path) -> None:
    with pytest.raises(ValueError, match="invalid index name"):
        index_corpus(source=str(corpus_dir), name="Bad Name", home=str(home))


def test_a_run_failing_in_its_last_stage_is_retried_without_recomputing_earlier_stages(
    corpus_dir: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ctxrag.storage.index_store as index_store
    from ctxrag.tasks.stages.publish import publish_index

    original = index_store.IndexStore.publish
    attempts: list[str] = []

    def disk_full(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        attempts.append("publish")
        raise OSError("disk full")

    monkeypatch.setattr(index_store.IndexStore, "publish", disk_full)
    monkeypatch.setattr(publish_index, "retry_delay_seconds", [0, 0])  # the task's own 10 s and 60 s, not waited here
    with pytest.raises(OSError, match="disk full"):
        run(corpus_dir, home)
    assert attempts == ["publish"] * 3  # an I/O error is retried twice, then the run fails
    assert IndexStore(home).manifest("sample") is None
    monkeypatch.setattr(index_store.IndexStore, "publish", original)

    retried = run(corpus_dir, home)  # what `prefect flow-run retry` or Retry in the UI runs again
    assert retried["status"] == "published"
    assert retried["documents_contextualized"] == 0  # contexts came from the store
    assert retried["chunks_embedded"] == 0  # so did every vector: no model work at all


def test_the_quality_gate_keeps_the_live_index_when_the_new_one_is_worse(corpus_dir: Path, home: Path) -> None:
    from ctxrag.tasks.stages.gate import GateRejected
    from tests.helpers import SAMPLE_QUESTIONS

    first = run(corpus_dir, home)
    for path in corpus_dir.rglob("*.py"):  # the code that answers most questions disappears
        path.write_text("# moved elsewhere\n")
    with pytest.raises(GateRejected, match="would fall from"):
        run(corpus_dir, home, gate=str(SAMPLE_QUESTIONS), gate_strategy="bm25", gate_max_drop=0.02)
    store = IndexStore(home)
    assert store.manifest("sample")["version"] == first["version"]  # the live index was never replaced
    assert [path.name for path in (home / "indexes" / "sample" / "versions").iterdir()] == [
        first["version"]
    ]  # rolled back

    shutil.rmtree(corpus_dir)  # back to the real corpus, plus a harmless edit: that passes the gate
    shutil.copytree(SAMPLE_CORPUS, corpus_dir)
    (corpus_dir / "CHANGELOG.txt").write_text((corpus_dir / "CHANGELOG.txt").read_text() + "\n0.9.3 - docs.\n")
    store.save_tuning("sample", {"strategy": {"strategy": "bm25"}})  # no --gate-strategy: the index's own is scored
    passed = run(corpus_dir, home, gate=str(SAMPLE_QUESTIONS))
    assert (
        passed["status"] == "published"
        and passed["gate"]["metric"] == "pass@10"
        and passed["gate"]["strategy"] == "bm25"
    )
    assert passed["gate"]["candidate"] >= passed["gate"]["live"] - 0.02
    assert store.manifest("sample")["version"] == passed["version"]


def test_a_run_that_embeds_locally_makes_the_query_export_and_a_run_that_embeds_nothing_does_not(
    corpus_dir: Path, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxrag.tasks.embedding.onnx_queries import export_path

    monkeypatch.setenv("CTXRAG_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("CTXRAG_EMBED_PRECISION", "fp32")  # an int8 index's queries run on its int8 file: no export
    export = export_path(tmp_path / "models", "all-MiniLM-L6-v2")
    run(corpus_dir, home)
    assert export.is_file()  # made while torch was loaded for the documents: the first search loads no torch

    export.unlink()
    assert run(corpus_dir, home)["chunks_embedded"] == 0
    assert not export.exists()  # nothing embedded: no torch, no export


def test_a_docs_corpus_indexed_with_and_without_summaries_gets_each_its_own_contexts(
    home: Path, tmp_path: Path
) -> None:
    records = [
        {
            "chunk_link": "https://docs.example/start#install",
            "chunk_heading": "Install",
            "text": "Run pip install tinyq.",
        },
        {"chunk_link": "https://docs.example/start#use", "chunk_heading": "Use", "text": "Call tinyq.push(task)."},
    ]
    summarized = tmp_path / "summarized.json"
    summarized.write_text(
        json.dumps([{**record, "summary": f"A summary of {record['chunk_heading']}."} for record in records])
    )
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(records))
    index_corpus(source=str(summarized), name="summarized", home=str(home))
    report = index_corpus(source=str(plain), name="plain", home=str(home))
    assert report["chunks_contextualized"] == 2  # same chunk keys, but not the same contexts: none is reused
    store = IndexStore(home)
    assert all("A summary of" in context for context in store.open("summarized").chunks["context"].to_pylist())
    assert not any("A summary of" in context for context in store.open("plain").chunks["context"].to_pylist())


def test_an_index_keeps_its_embedding_precision_and_a_forced_change_reembeds_every_chunk(
    corpus_dir: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One index never mixes int8, bf16 and fp32 vectors: its manifest records the precision, a re-index keeps it even where
    this machine would now pick the other, and CTXRAG_EMBED_PRECISION changing it embeds every chunk again."""
    import ctxrag.tasks.embedding.precision as precision

    def recorded() -> str:
        return IndexStore(home).manifest("sample")["config"]["embedder"]["precision"]

    monkeypatch.setenv("CTXRAG_EMBED_PRECISION", "fp32")
    first = run(corpus_dir, home)
    assert recorded() == "fp32"

    monkeypatch.delenv("CTXRAG_EMBED_PRECISION")
    monkeypatch.setattr(precision, "machine_precision", lambda: ("bf16", "auto: as if bf16 were faster here"))
    changelog = corpus_dir / "CHANGELOG.txt"
    changelog.write_text(changelog.read_text() + "\n0.9.1 - Added the quasar flux capacitor.\n")
    edited = run(corpus_dir, home)
    assert recorded() == "fp32"  # kept: the new document's chunks are embedded as the others were
    assert 0 < edited["chunks_embedded"] < first["chunks"] and edited["chunks_embedding_reused"] > 0

    monkeypatch.setenv("CTXRAG_EMBED_PRECISION", "bf16")
    forced = run(corpus_dir, home)
    assert recorded() == "bf16" and forced["chunks_embedded"] == forced["chunks"]  # every chunk again, none mixed
    monkeypatch.setenv("CTXRAG_EMBED_PRECISION", "int8")
    forced = run(corpus_dir, home)
    assert recorded() == "int8" and forced["chunks_embedded"] == forced["chunks"]
