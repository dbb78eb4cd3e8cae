"""Voyage contextualized chunk embeddings (voyage-context-3) against the Voyage simulator (test equipment): the
request shape (a document's chunks together, in order), long documents split into consecutive groups, queries."""

from __future__ import annotations

import numpy as np
import pytest

from ctxrag.storage.ledger import LedgerRow
from ctxrag.tasks.common.retry import RetryPolicy
from ctxrag.tasks.embedding.embed import EmbedderSpec
from ctxrag.tasks.embedding.embedders import make_embedder
from ctxrag.tasks.embedding.voyage_context import (
    CONTEXT_LENGTH,
    REQUEST_TOKENS,
    ContextualizedOnly,
    VoyageContextEmbedder,
)
from tests.equipment.voyage_simulator import VoyageSimulator, simulated_tokens

SPEC = EmbedderSpec("voyage-context", "voyage-context-3", 0)


def embedder(rows: list | None = None) -> VoyageContextEmbedder:
    return VoyageContextEmbedder(SPEC, RetryPolicy(attempts=2), ledger=rows.extend if rows is not None else None)


def test_the_spec_builds_the_contextualized_embedder_which_refuses_chunks_without_documents() -> None:
    assert isinstance(make_embedder(SPEC), VoyageContextEmbedder)
    with pytest.raises(ContextualizedOnly, match="embed_documents"):
        embedder().embed(["a chunk"], "document")
    assert SPEC.cache_key("text", "document") != EmbedderSpec.choose("voyage", "voyage-3.5", 0, None).cache_key(
        "text", "document"
    )


def test_each_documents_chunks_are_one_input_in_order_with_input_type_document(
    voyage_simulator: VoyageSimulator,
) -> None:
    rows: list[LedgerRow] = []
    documents = [["alpha one", "alpha two", "alpha three"], ["beta one"]]
    vectors = embedder(rows).embed_documents(documents)
    (request,) = voyage_simulator.requests
    assert request.path == "/v1/contextualizedembeddings"
    assert request.json["inputs"] == documents and request.json["input_type"] == "document"
    assert request.json["model"] == "voyage-context-3"
    assert [array.shape for array in vectors] == [(3, 1024), (1, 1024)]
    assert len(rows) == 1 and rows[0].units == 4 and rows[0].input_tokens > 0 and rows[0].cost_usd > 0


def test_a_chunks_vector_depends_on_its_document(voyage_simulator: VoyageSimulator) -> None:
    first, second = embedder().embed_documents([["shared text", "about retries"], ["shared text", "about cooking"]])
    assert not np.allclose(first[0], second[0])  # same chunk text, different documents


def test_a_document_over_the_context_length_is_split_into_consecutive_groups(voyage_simulator: VoyageSimulator) -> None:
    chunk = "word " * 6_000  # ~7,500 simulated tokens, ~10,000 estimated
    document = [f"{i} {chunk}" for i in range(8)]
    (vectors,) = embedder().embed_documents([document])
    inputs = [group for request in voyage_simulator.requests for group in request.json["inputs"]]
    assert len(inputs) > 1 and [text for group in inputs for text in group] == document  # order kept, nothing lost
    assert all(sum(simulated_tokens(text) for text in group) <= CONTEXT_LENGTH for group in inputs)
    assert all(
        sum(simulated_tokens(t) for group in r.json["inputs"] for t in group) <= REQUEST_TOKENS
        for r in voyage_simulator.requests
    )
    alone = embedder().embed_documents([inputs[1]])[0]  # the second group's vectors, asked for alone
    assert np.allclose(vectors[len(inputs[0]) : len(inputs[0]) + len(inputs[1])], alone, atol=1e-6)


def test_queries_are_one_to_an_input_with_input_type_query(voyage_simulator: VoyageSimulator) -> None:
    vectors = embedder().embed(["how do retries work", "what is a queue"], "query")
    (request,) = voyage_simulator.requests
    assert (
        request.json["inputs"] == [["how do retries work"], ["what is a queue"]]
        and request.json["input_type"] == "query"
    )
    assert vectors.shape == (2, 1024)


def test_an_api_error_names_the_model_and_hides_the_key(
    voyage_simulator: VoyageSimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxrag.tasks.embedding.voyage import VoyageCallError

    bad = VoyageContextEmbedder(EmbedderSpec("voyage-context", "voyage-context-9", 0), RetryPolicy(attempts=1))
    with pytest.raises(VoyageCallError, match="voyage-context-9") as raised:
        bad.embed_documents([["text"]])
    assert "pa-test-key" not in str(raised.value)
