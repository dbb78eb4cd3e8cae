"""Paid query embeddings: stored like document embeddings and in the ledger, in evaluate, search and the gate.

Against the Voyage simulator (test equipment, not the API).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxrag.flows.evaluate import evaluate_index
from ctxrag.flows.index import index_corpus
from ctxrag.storage.index_store import IndexStore
from ctxrag.storage.ledger import Ledger
from ctxrag.tasks.options import EvaluateOptions
from ctxrag.tasks.retrieval.search import Searcher, Strategy
from tests.helpers import SAMPLE_CORPUS, SAMPLE_QUESTIONS, index_options

pytestmark = pytest.mark.usefixtures("prefect_harness")


def embed_requests(simulator) -> int:  # type: ignore[no-untyped-def]
    return sum(1 for request in simulator.requests if request.path.endswith("/embeddings"))


def ledger_embed_requests(home: Path) -> int:
    return sum(row["attempts"] or 1 for row in Ledger(home).rows() if row["stage"] == "embed")


def test_query_embeddings_are_paid_once_and_every_request_is_in_the_ledger(voyage_simulator, home: Path) -> None:  # type: ignore[no-untyped-def]
    index_corpus(source=str(SAMPLE_CORPUS), name="paid", home=str(home), options=index_options(embedder="voyage"))
    after_index = embed_requests(voyage_simulator)
    assert after_index > 0 and ledger_embed_requests(home) == after_index

    first = evaluate_index(
        evalset=str(SAMPLE_QUESTIONS),
        name="paid",
        home=str(home),
        options=EvaluateOptions(strategy=["vector", "hybrid"]),
    )
    after_first = embed_requests(voyage_simulator)
    assert after_first > after_index  # the queries were embedded (in few requests: prefetched together)
    assert after_first - after_index <= 2
    second = evaluate_index(
        evalset=str(SAMPLE_QUESTIONS),
        name="paid",
        home=str(home),
        options=EvaluateOptions(strategy=["vector", "hybrid"]),
    )
    assert embed_requests(voyage_simulator) == after_first  # a re-run pays nothing new
    assert second["metrics"] == first["metrics"]

    searcher = Searcher(IndexStore(home).open("paid"), home=home, ledger=Ledger(home).append, run_id="search-test")
    searcher.search("a question nobody asked before", Strategy.VECTOR, 3)
    Searcher(IndexStore(home).open("paid"), home=home, ledger=Ledger(home).append).search(
        "a question nobody asked before", Strategy.VECTOR, 3
    )
    assert embed_requests(voyage_simulator) == after_first + 1
    assert ledger_embed_requests(home) == embed_requests(voyage_simulator)
