"""Rerankers: Cohere (simulator) and Claude (Anthropic simulator with scripted answers); the local cross-encoder: test_cross_encoder.py."""

from __future__ import annotations

import pytest

from ctxrag.storage.ledger import LedgerRow
from ctxrag.tasks.common.retry import RetryPolicy
from ctxrag.tasks.retrieval.rerank import ClaudeReranker, CohereReranker, RerankError, RerankSpec, parse_indices
from tests.equipment.anthropic_simulator import AnthropicSimulator
from tests.equipment.cohere_simulator import CohereSimulator

DOCUMENTS = ["the cat sat", "retry with exponential backoff", "backoff and retry limits", "unrelated text"]


@pytest.fixture
def cohere_sim(cohere_simulator: CohereSimulator) -> CohereSimulator:
    return cohere_simulator


@pytest.fixture
def claude_sim(anthropic_simulator: AnthropicSimulator) -> AnthropicSimulator:
    return anthropic_simulator


def test_cohere_order_is_the_providers_and_units_are_recorded(cohere_sim: CohereSimulator) -> None:
    rows: list[LedgerRow] = []
    order = CohereReranker(ledger=rows.extend).rerank("retry backoff", DOCUMENTS, 2)
    request = cohere_sim.requests[0]
    assert request.path == "/v2/rerank" and request.json["top_n"] == 2 and request.json["documents"] == DOCUMENTS
    assert order == [1, 2]  # both share both query words; the simulator breaks the tie by index
    assert rows[0].units == 1 and rows[0].cost_usd == pytest.approx(0.002)


def test_cohere_429_is_retried_and_400_is_not(cohere_sim: CohereSimulator) -> None:
    cohere_sim.fail_next(429, count=1, retry_after=0.2)
    assert CohereReranker().rerank("retry", DOCUMENTS, 1) == [1]
    assert [r.status for r in cohere_sim.requests] == [429, 200]
    cohere_sim.reset()
    with pytest.raises(RerankError, match="400"):
        CohereReranker(model="bogus-model", policy=RetryPolicy(attempts=5)).rerank("retry", DOCUMENTS, 1)
    assert [r.status for r in cohere_sim.requests] == [400]


def test_claude_reranker_applies_the_indices_claude_gives(claude_sim: AnthropicSimulator) -> None:
    claude_sim.reply_with(lambda prompt: "<relevant_indices>2, 1</relevant_indices>")
    reranker = ClaudeReranker()
    assert reranker.rerank("retry backoff", DOCUMENTS, 2) == [2, 1]
    assert reranker.fallbacks == 0
    prompt = claude_sim.requests[0].json["messages"][0]["content"]
    assert "[0] the cat sat" in prompt and "<relevant_indices>" in prompt


@pytest.mark.parametrize(
    "answer",
    ["I cannot decide.", "<relevant_indices>9, x, 9</relevant_indices>", "<relevant_indices>3</relevant_indices>"],
)
def test_claude_reranker_falls_back_to_the_original_order_and_counts_it(
    claude_sim: AnthropicSimulator, answer: str
) -> None:
    claude_sim.reply_with(lambda prompt: answer)
    reranker = ClaudeReranker()
    order = reranker.rerank("q", DOCUMENTS, 2)
    assert reranker.fallbacks == 1
    assert order == ([3, 0] if "3" in answer else [0, 1])  # valid picks first, then the original order


def test_parse_indices() -> None:
    assert parse_indices("<relevant_indices>4, 0, 4, 12, -1, a</relevant_indices>", 10) == [4, 0]
    assert parse_indices("1,2", 3) == [1, 2]
    assert parse_indices("", 3) == []


def test_specs_from_the_command_line() -> None:
    assert RerankSpec.from_str("none") is None
    assert RerankSpec.from_str("local:/models/ce") == RerankSpec("local", path="/models/ce")
    assert RerankSpec.from_str("cohere").label == "rerank-cohere"
    with pytest.raises(ValueError, match="cohere, claude, local:MODEL .a folder or id. or none"):
        RerankSpec.from_str("bing")


def test_missing_keys_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("CO_API_KEY", "COHERE_API_KEY", "ANTHROPIC_API_KEY", "PREFECT_API_URL"):
        monkeypatch.delenv(variable, raising=False)
    assert RerankSpec("cohere").missing_key() == "CO_API_KEY"
    assert RerankSpec("claude").missing_key() == "ANTHROPIC_API_KEY"
    assert RerankSpec("local", path="x").missing_key() is None


def test_cohere_requests_in_flight_are_bounded_by_the_runs_limit(
    cohere_sim: CohereSimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Evaluation's query threads rerank at once: at most CTXRAG_COHERE_CONCURRENCY requests are open."""
    import threading

    monkeypatch.setenv("CTXRAG_COHERE_CONCURRENCY", "2")
    cohere_sim.latency_seconds = 0.3
    rows: list[LedgerRow] = []
    threads = [
        threading.Thread(target=CohereReranker(ledger=rows.extend).rerank, args=("retry", DOCUMENTS, 2))
        for _ in range(5)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(rows) == 5 and cohere_sim.peak_in_flight == 2
    assert sum(row.waited_s > 0.2 for row in rows) >= 3
