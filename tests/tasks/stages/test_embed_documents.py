"""Stage 3 with contextualized embeddings (``voyage-context-3``) against the Voyage simulator (test equipment): whole
documents are kept as each request returns, so a run killed mid-way repeats only the request in flight."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxrag.storage.artifacts import embeddings_cache
from ctxrag.tasks.embedding import voyage_context
from ctxrag.tasks.embedding.embedder_spec import EmbedderSpec
from ctxrag.tasks.stages.embed_documents import documents_to_embed, embed_documents_batch
from tests.equipment.voyage_simulator import VoyageSimulator

SPEC = EmbedderSpec(provider="voyage-context", model="voyage-context-3")
TEXTS = [f"document {d} chunk {c} says something about topic {d}{c}" for d in range(4) for c in range(3)]
DOC_IDS = [f"doc{d}" for d in range(4) for _ in range(3)]


def contextualized_requests(simulator: VoyageSimulator) -> list[list[list[str]]]:
    return [request.json["inputs"] for request in simulator.requests if request.path == "/v1/contextualizedembeddings"]


def test_a_run_killed_mid_way_repeats_only_the_request_in_flight(
    voyage_simulator: VoyageSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(voyage_context, "MAX_INPUTS", 1)  # one document per request: four requests in one task
    sent = voyage_context.VoyageContextEmbedder._request

    def killed_on_the_third(self, inputs, input_type):  # type: ignore[no-untyped-def]
        if len(contextualized_requests(voyage_simulator)) == 2:
            raise KeyboardInterrupt("killed")
        return sent(self, inputs, input_type)

    documents = documents_to_embed(TEXTS, DOC_IDS, SPEC, tmp_path)
    assert len(documents) == 4
    monkeypatch.setattr(voyage_context.VoyageContextEmbedder, "_request", killed_on_the_third)
    with pytest.raises(KeyboardInterrupt):
        embed_documents_batch.fn(documents, SPEC, tmp_path)
    assert len(contextualized_requests(voyage_simulator)) == 2
    assert embeddings_cache(tmp_path).read().num_rows == 6  # the two documents whose requests returned are kept

    monkeypatch.setattr(voyage_context.VoyageContextEmbedder, "_request", sent)
    left = documents_to_embed(TEXTS, DOC_IDS, SPEC, tmp_path)
    assert [texts for texts, _ in left] == [TEXTS[6:9], TEXTS[9:12]]
    assert embed_documents_batch.fn(left, SPEC, tmp_path) == 6
    assert contextualized_requests(voyage_simulator)[2:] == [
        [TEXTS[6:9]],
        [TEXTS[9:12]],
    ]  # the killed request, then the last
    assert documents_to_embed(TEXTS, DOC_IDS, SPEC, tmp_path) == []
