"""The index and evaluate flows on the Elasticsearch backend, against the noida-db EMULATOR (not a real cluster)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ctxrag.flows.evaluate import evaluate_index
from ctxrag.flows.index import index_corpus
from ctxrag.storage.elasticsearch import EsIndex, connect
from ctxrag.storage.index_store import IndexStore
from ctxrag.tasks.options import EvaluateOptions
from ctxrag.tasks.retrieval.filters import SourceFilter
from ctxrag.tasks.retrieval.search import Searcher, Strategy
from tests.helpers import SAMPLE_CORPUS, SAMPLE_QUESTIONS, index_options

pytestmark = pytest.mark.usefixtures("prefect_harness")


@pytest.fixture
def emulator(es_emulator_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("ELASTICSEARCH_URL", es_emulator_url)
    return es_emulator_url


def test_index_search_and_reindex_on_elasticsearch(emulator: str, tmp_path: Path, home: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE_CORPUS, corpus)
    name = "sample-es"
    first = index_corpus(source=str(corpus), name=name, home=str(home), options=index_options(backend="elasticsearch"))
    manifest = IndexStore(home).manifest(name)
    assert manifest["config"]["backend"] == "elasticsearch"
    physical = manifest["elasticsearch"]["index"]
    es = EsIndex(connect(), name)
    assert es.live_index() == physical
    assert not (IndexStore(home).live_version(name) / "bm25").exists()  # the index lives in Elasticsearch

    searcher = Searcher(IndexStore(home).open(name))
    question = "How long does a retry wait before the next attempt?"
    for strategy in Strategy:
        hits = searcher.search(question, strategy, 5)
        assert hits and len({hit.row for hit in hits}) == len(hits)
    markdown = searcher.rows_kept(SourceFilter(language="markdown"))  # a filter the cluster applies (terms on doc_id)
    documents = searcher.index.chunks["doc_id"].to_pylist()
    for strategy in (Strategy.BM25, Strategy.VECTOR, Strategy.HYBRID_SCORE):
        kept = searcher.search(question, strategy, 4, allowed=markdown)
        assert len(kept) == 4 and all(documents[hit.row].endswith(".md") for hit in kept), strategy
    assert (
        index_corpus(source=str(corpus), name=name, home=str(home), options=index_options(backend="elasticsearch"))[
            "status"
        ]
        == "unchanged"
    )

    (corpus / "CHANGELOG.txt").write_text((corpus / "CHANGELOG.txt").read_text() + "\n0.9.2 - quasar support.\n")
    second = index_corpus(source=str(corpus), name=name, home=str(home), options=index_options(backend="elasticsearch"))
    assert second["chunks_embedded"] <= 2 and second["version"] != first["version"]
    new_physical = IndexStore(home).manifest(name)["elasticsearch"]["index"]
    assert es.live_index() == new_physical != physical
    assert not connect().indices.exists(index=physical)  # the old version was deleted after the switch
    top = Searcher(IndexStore(home).open(name)).search("quasar", Strategy.BM25, 1)
    assert "quasar" in IndexStore(home).open(name).chunks["content"][top[0].row].as_py()


def test_evaluation_on_elasticsearch_matches_the_embedded_backend(emulator: str, home: Path) -> None:
    index_corpus(
        source=str(SAMPLE_CORPUS), name="on-es", home=str(home), options=index_options(backend="elasticsearch")
    )
    index_corpus(source=str(SAMPLE_CORPUS), name="embedded", home=str(home))
    on_es = evaluate_index(
        evalset=str(SAMPLE_QUESTIONS), name="on-es", home=str(home), options=EvaluateOptions(k=[10])
    )["metrics"]
    embedded = evaluate_index(
        evalset=str(SAMPLE_QUESTIONS), name="embedded", home=str(home), options=EvaluateOptions(k=[10])
    )["metrics"]
    assert on_es["vector"]["pass@10"] == pytest.approx(embedded["vector"]["pass@10"], abs=0.07)  # int8 HNSW vs exact
    for strategy in ("bm25", "hybrid"):
        assert abs(on_es[strategy]["pass@10"] - embedded[strategy]["pass@10"]) <= 0.07  # one question of 16 at most


def test_server_side_rrf_is_tried_on_request(emulator: str, home: Path) -> None:
    index_corpus(source=str(SAMPLE_CORPUS), name="rrf", home=str(home), options=index_options(backend="elasticsearch"))
    hits = Searcher(IndexStore(home).open("rrf"), server_rrf=True).search("retry backoff", Strategy.HYBRID, 3)
    assert [hit.found_by for hit in hits] == [["rrf-server"]] * 3
    with pytest.raises(ValueError, match="needs an index on the Elasticsearch backend"):
        index_corpus(source=str(SAMPLE_CORPUS), name="plain", home=str(home))
        Searcher(IndexStore(home).open("plain"), server_rrf=True)


def test_a_rejected_gate_leaves_the_alias_and_drops_the_staged_index(emulator: str, tmp_path: Path, home: Path) -> None:
    from ctxrag.tasks.stages.gate import GateRejected

    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE_CORPUS, corpus)
    index_corpus(source=str(corpus), name="gated", home=str(home), options=index_options(backend="elasticsearch"))
    es = EsIndex(connect(), "gated")
    live = es.live_index()
    for path in corpus.rglob("*.py"):
        path.write_text("# moved elsewhere\n")
    with pytest.raises(GateRejected):
        index_corpus(
            source=str(corpus),
            name="gated",
            home=str(home),
            options=index_options(backend="elasticsearch", gate=str(SAMPLE_QUESTIONS), gate_strategy="bm25"),
        )
    assert es.live_index() == live
    assert es._versions() == [live]  # the staged physical index was dropped on rollback
