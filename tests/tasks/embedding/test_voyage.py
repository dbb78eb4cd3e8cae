"""Voyage embeddings against the Voyage simulator (test equipment): batching limits, retries, ledger rows."""

from __future__ import annotations

import time
from dataclasses import asdict

import numpy as np
import pytest

from ctxrag.storage.ledger import LedgerRow, summarize
from ctxrag.tasks.common.retry import RetryPolicy
from ctxrag.tasks.embedding.embed import EmbedderSpec
from ctxrag.tasks.embedding.voyage import MAX_TEXTS_PER_REQUEST, VoyageCallError, VoyageEmbedder, batches
from tests.equipment.voyage_simulator import VoyageSimulator, simulated_tokens


@pytest.fixture
def simulator(voyage_simulator: VoyageSimulator) -> VoyageSimulator:
    return voyage_simulator


def embedder(
    model: str = "voyage-2", rows: list | None = None, attempts: int = 4, dimension: int | None = None
) -> VoyageEmbedder:
    return VoyageEmbedder(
        EmbedderSpec("voyage", model, 0, dimension),
        RetryPolicy(attempts=attempts),
        ledger=(rows.extend if rows is not None else None),
    )


@pytest.mark.slow  # 2,500 texts through the simulator
def test_no_request_exceeds_the_text_count_limit(simulator: VoyageSimulator) -> None:
    texts = [f"short text number {i}" for i in range(2_500)]
    vectors = embedder().embed(texts)
    assert vectors.shape == (2_500, 1024)
    sizes = [len(request.json["input"]) for request in simulator.requests]
    assert sizes == [1_000, 1_000, 500] and max(sizes) <= MAX_TEXTS_PER_REQUEST


def test_no_request_exceeds_the_models_token_limit(simulator: VoyageSimulator) -> None:
    texts = ["token " * 6_000] * 40  # ~9,000 simulated tokens each; voyage-code-3 allows 120,000 per request
    embedder("voyage-code-3").embed(texts)
    per_request = [sum(simulated_tokens(text) for text in request.json["input"]) for request in simulator.requests]
    assert len(per_request) > 1 and max(per_request) <= 120_000
    assert all(request.status == 200 for request in simulator.requests)


def test_batches_follow_the_estimate() -> None:
    assert batches([], "voyage-2") == []
    assert [len(group) for group in batches(["x" * 30] * 2_001, "voyage-2")] == [1_000, 1_000, 1]


def test_input_type_and_dimension_are_sent(simulator: VoyageSimulator) -> None:
    document = embedder("voyage-3.5", dimension=256).embed(["retry with backoff"], input_type="document")
    query = embedder("voyage-3.5", dimension=256).embed(["retry with backoff"], input_type="query")
    assert document.shape == query.shape == (1, 256) and not np.allclose(document, query)
    assert [r.json["input_type"] for r in simulator.requests] == ["document", "query"]
    assert {r.json["output_dimension"] for r in simulator.requests} == {256}


def test_429_is_retried_after_retry_after_and_400_is_not(simulator: VoyageSimulator) -> None:
    simulator.fail_next(429, count=1, retry_after=0.4)
    started = time.perf_counter()
    embedder().embed(["a", "b"])
    assert time.perf_counter() - started >= 0.4
    assert [r.status for r in simulator.requests] == [429, 200]

    simulator.reset()
    with pytest.raises(VoyageCallError, match="output_dimension"):
        embedder("voyage-2", dimension=256).embed(["a"])  # voyage-2 has no output_dimension: the API says 400
    assert [r.status for r in simulator.requests] == [400]


def test_every_request_gets_a_ledger_row_with_tokens_and_cost(simulator: VoyageSimulator) -> None:
    rows: list[LedgerRow] = []
    embedder("voyage-2", rows).embed([f"text {i}" for i in range(1_200)])
    assert len(rows) == 2 and all(row.stage == "embed" and row.status == "ok" for row in rows)
    summary = summarize([asdict(row) for row in rows])
    assert summary["input_tokens"] == sum(simulated_tokens(f"text {i}") for i in range(1_200))
    assert summary["cost_usd"] == pytest.approx(summary["input_tokens"] * 0.10 / 1_000_000)


def test_cache_keys_differ_by_dimension_and_input_type() -> None:
    a, b = EmbedderSpec("voyage", "voyage-3.5", 0, 256), EmbedderSpec("voyage", "voyage-3.5", 0, 512)
    assert a.cache_key("t", "document") != b.cache_key("t", "document") != b.cache_key("t", "query")


@pytest.mark.parametrize("setting, allowed", [(None, 4), ("2", 2)])
def test_voyage_requests_in_flight_are_bounded_by_the_runs_limit(
    simulator: VoyageSimulator, monkeypatch: pytest.MonkeyPatch, setting: str | None, allowed: int
) -> None:
    """Six task threads embedding at once: at most CTXRAG_VOYAGE_CONCURRENCY (default 4) requests are open, and the
    time each waited for a slot is in its ledger row."""
    import threading

    if setting is None:
        monkeypatch.delenv("CTXRAG_VOYAGE_CONCURRENCY", raising=False)
    else:
        monkeypatch.setenv("CTXRAG_VOYAGE_CONCURRENCY", setting)
    simulator.latency_seconds = 0.3
    rows: list[LedgerRow] = []
    threads = [
        threading.Thread(target=embedder("voyage-2", rows).embed, args=([f"thread {i} text"],)) for i in range(6)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(rows) == 6 and all(row.status == "ok" for row in rows)
    assert simulator.peak_in_flight == allowed
    assert sum(row.waited_s > 0.2 for row in rows) >= 6 - allowed  # those beyond the limit waited for a slot
