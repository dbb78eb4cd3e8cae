"""The index flow with ``--embedder voyage-context-3`` against the Voyage simulator (test equipment, not the API):
each document's chunks sent together in chunk order, an edited document re-embeds all its chunks and nothing else,
queries embedded with input_type=query, and gc keeps the vectors an index uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxrag.storage.index_store import IndexStore
from tests.equipment.voyage_simulator import VoyageSimulator
from tests.helpers import index_options, write_corpus

pytestmark = pytest.mark.usefixtures("prefect_harness")


def index(corpus: Path, home: Path) -> dict:
    from ctxrag.flows.index import index_corpus

    return index_corpus(
        source=str(corpus),
        name="ctx",
        home=str(home),
        options=index_options(contextualizer="none", embedder="voyage-context-3"),
    )


def sent_documents(simulator: VoyageSimulator, since: int = 0) -> list[list[str]]:
    return [
        group
        for request in simulator.requests[since:]
        if request.path == "/v1/contextualizedembeddings"
        for group in request.json["inputs"]
    ]


def test_documents_are_embedded_whole_and_an_edit_re_embeds_only_its_document(
    voyage_simulator: VoyageSimulator, tmp_path: Path
) -> None:
    corpus, home = tmp_path / "corpus.json", tmp_path / "home"
    texts = write_corpus(corpus, big_docs=2, chunks_per_doc=5, words_per_chunk=40)
    report = index(corpus, home)
    assert report["chunks_embedded"] == 15 and report["embedding_calls"]["calls"] == 1
    documents = sent_documents(voyage_simulator)
    assert [[texts[text] for text in document] for document in documents] == [
        [f"doc{d}_chunk{c}" for c in range(5)] for d in range(3)
    ]
    assert all(request.json["input_type"] == "document" for request in voyage_simulator.requests)
    assert IndexStore(home).manifest("ctx")["config"]["embedder"]["provider"] == "voyage-context"

    since = len(voyage_simulator.requests)
    assert index(corpus, home)["chunks_embedded"] == 0 and len(voyage_simulator.requests) == since  # nothing paid twice

    edited = write_corpus(corpus, big_docs=2, chunks_per_doc=5, words_per_chunk=40, edit=" an edited sentence")
    report = index(corpus, home)
    (document,) = sent_documents(voyage_simulator, since)  # the edited document, all five chunks, in order
    assert [edited[text] for text in document] == [f"doc0_chunk{c}" for c in range(5)]
    assert report["chunks_embedded"] == 5 and report["chunks_embedding_reused"] == 10


def test_queries_use_input_type_query_and_gc_keeps_the_vectors_in_use(
    voyage_simulator: VoyageSimulator, tmp_path: Path
) -> None:
    from ctxrag.tasks.gc import collect_garbage
    from ctxrag.tasks.retrieval.search import Searcher, Strategy

    corpus, home = tmp_path / "corpus.json", tmp_path / "home"
    write_corpus(corpus, big_docs=1, chunks_per_doc=3, words_per_chunk=40)
    index(corpus, home)
    report = collect_garbage(home, include_paid=True)
    assert report["embeddings_removed"] == 0  # every vector is the index's own (keys include its document)
    since = len(voyage_simulator.requests)
    assert index(corpus, home)["chunks_embedded"] == 0 and len(voyage_simulator.requests) == since

    hits = Searcher(IndexStore(home).open("ctx"), home=home).search("d0c1w3 d0c1w7", Strategy.from_str("vector"), 3)
    (query,) = voyage_simulator.requests[since:]
    assert query.json["inputs"] == [["d0c1w3 d0c1w7"]] and query.json["input_type"] == "query" and hits
