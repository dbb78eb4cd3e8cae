"""Claude contextualizers against the Anthropic simulator: caching order, modes, windows, ledger rows."""

from __future__ import annotations

import re

import pytest

from ctxrag.storage.ledger import LedgerRow, summarize
from ctxrag.tasks.common.models import Chunk, Document
from ctxrag.tasks.common.ratelimit import RateLimiter
from ctxrag.tasks.context.claude.client import ClaudeClient
from ctxrag.tasks.context.claude.contextualizer import (
    ClaudeContextualizer,
    ClaudeSettings,
    ClaudeSummarizer,
    ContextualizationFailed,
    document_windows,
)
from tests.equipment.anthropic_simulator import AnthropicSimulator

BIG = " ".join(f"word{i}" for i in range(5000))  # ~ 5,500 simulated tokens: above Haiku 4.5's 4,096 minimum
SMALL = " ".join(f"word{i}" for i in range(600))  # ~ 700 simulated tokens: below every minimum


def make_document(text: str, pieces: int, doc_id: str = "doc") -> tuple[Document, list[Chunk]]:
    document = Document(doc_id, doc_id, text, "text", "test")
    step = len(text) // pieces
    chunks = [
        Chunk(f"{doc_id}#{i}", doc_id, i, text[i * step : (i + 1) * step], document.doc_sha) for i in range(pieces)
    ]
    return document, chunks


class Collector:
    def __init__(self) -> None:
        self.contexts: dict[str, str] = {}
        self.rows: list[LedgerRow] = []

    def save(self, pairs: list[tuple[Chunk, str]]) -> None:
        self.contexts.update({chunk.chunk_id: text for chunk, text in pairs})

    def ledger(self, rows: list[LedgerRow]) -> None:
        self.rows.extend(rows)


def message_requests(simulator: AnthropicSimulator) -> list:
    return [request for request in simulator.requests if request.path == "/v1/messages"]


def test_first_call_writes_the_cache_before_the_others_read_it(simulator: AnthropicSimulator) -> None:
    simulator.latency_seconds = 0.05
    document, chunks = make_document(BIG, 6)
    out = Collector()
    ClaudeContextualizer(ClaudeSettings(concurrency=4), run_id="r1").run(document, chunks, out.save, out.ledger)

    assert set(out.contexts) == {chunk.chunk_id for chunk in chunks}
    requests = message_requests(simulator)
    first, rest = requests[0], requests[1:]
    assert first.usage["cache_creation_input_tokens"] > 4096 and first.usage["cache_read_input_tokens"] == 0
    assert all(request.received_at >= first.responded_at for request in rest)  # fan-out only after the write
    assert all(r.usage["cache_read_input_tokens"] == first.usage["cache_creation_input_tokens"] for r in rest)
    assert all(r.usage["cache_creation_input_tokens"] == 0 for r in rest)
    body = first.json
    assert "temperature" not in body
    assert body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    summary = summarize([row_dict(row) for row in out.rows])
    assert summary["calls"] == 6 and summary["documents_without_caching"] == []
    assert 0.7 < summary["cache_read_share"] < 1.0
    assert summary["cost_usd"] < summary["cost_without_cache_usd"]


class RecordingLimiter(RateLimiter):
    """A limiter with no limits that keeps every call's token estimate (what a --tpm bucket is charged)."""

    def __init__(self) -> None:
        super().__init__()
        self.estimates: list[int] = []

    def acquire(self, tokens: int = 0) -> float:
        self.estimates.append(tokens)
        return super().acquire(tokens)


def rate_limited_tokens(simulator: AnthropicSimulator) -> int:
    """What the API's input-token rate limit counts: uncached input and cache writes, not cache reads."""
    return sum(r.usage["input_tokens"] + r.usage["cache_creation_input_tokens"] for r in message_requests(simulator))


def test_rate_limit_estimates_count_the_cached_document_only_where_a_call_writes_it(
    simulator: AnthropicSimulator,
) -> None:
    limiter = RecordingLimiter()
    worker = ClaudeContextualizer(ClaudeSettings(concurrency=4), client=ClaudeClient(limiter=limiter))
    out = Collector()
    for doc_id, text in [("one", BIG), ("two", BIG.replace("word", "term"))]:
        document, chunks = make_document(text, 6, doc_id)
        worker.run(document, chunks, out.save, out.ledger)

    requests = message_requests(simulator)
    assert len(limiter.estimates) == len(requests) == 12
    assert sum(r.usage["cache_creation_input_tokens"] > 0 for r in requests) == 2  # one write per document
    counted = rate_limited_tokens(simulator)
    every_prompt_token = counted + sum(r.usage["cache_read_input_tokens"] for r in requests)
    assert every_prompt_token > 2.5 * counted  # what the estimate summed before: each call's whole document
    # The estimate (characters / 3) is conservative next to the simulator's count (bytes / 4): about 4/3 of it.
    assert counted <= sum(limiter.estimates) <= 1.5 * counted


def test_rate_limit_estimates_count_a_document_below_the_cache_minimum_on_every_call(
    simulator: AnthropicSimulator,
) -> None:
    limiter = RecordingLimiter()
    document, chunks = make_document(SMALL, 4, "small")
    out = Collector()
    ClaudeContextualizer(ClaudeSettings(), client=ClaudeClient(limiter=limiter)).run(
        document, chunks, out.save, out.ledger
    )
    assert all(r.usage["cache_read_input_tokens"] == 0 for r in message_requests(simulator))  # nothing cached
    document_tokens = len(SMALL) / 3
    assert len(limiter.estimates) == 4 and all(estimate > document_tokens for estimate in limiter.estimates)
    assert rate_limited_tokens(simulator) <= sum(limiter.estimates)


def test_a_document_below_the_minimum_is_reported_not_cached(simulator: AnthropicSimulator) -> None:
    document, chunks = make_document(SMALL, 3, "small")
    out = Collector()
    ClaudeContextualizer(ClaudeSettings(model="claude-haiku-4-5")).run(document, chunks, out.save, out.ledger)
    assert all(
        r.usage["cache_creation_input_tokens"] == r.usage["cache_read_input_tokens"] == 0
        for r in message_requests(simulator)
    )
    assert summarize([row_dict(row) for row in out.rows])["documents_without_caching"] == ["small"]


def test_one_hour_ttl_is_requested_when_asked(simulator: AnthropicSimulator) -> None:
    document, chunks = make_document(BIG, 2)
    ClaudeContextualizer(ClaudeSettings(cache_ttl="1h")).run(document, chunks, Collector().save, Collector().ledger)
    block = message_requests(simulator)[0].json["messages"][0]["content"][0]
    assert block["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert message_requests(simulator)[0].usage["cache_creation"]["ephemeral_1h_input_tokens"] > 0


def test_per_document_mode_answers_many_chunks_per_call_and_retries_missing_ones_alone(
    simulator: AnthropicSimulator,
) -> None:
    document, chunks = make_document(BIG, 5)
    simulator.omit_contexts_for({3})
    out = Collector()
    worker = ClaudeContextualizer(ClaudeSettings(mode="per-document", chunks_per_call=20))
    worker.run(document, chunks, out.save, out.ledger)
    assert set(out.contexts) == {chunk.chunk_id for chunk in chunks}
    requests = message_requests(simulator)
    assert len(requests) == 2  # one call for all five, one for the chunk the answer left out
    assert requests[0].json["tool_choice"] == {"type": "tool", "name": "record_contexts"}
    assert len(re.findall(r'<chunk index="\d+">', requests[1].json["messages"][0]["content"][1]["text"])) == 1
    assert '<chunk index="3">' in requests[1].json["messages"][0]["content"][1]["text"]
    assert requests[1].usage["cache_read_input_tokens"] > 0  # the retry reads the document from cache
    assert [row.mode for row in out.rows] == ["per-document", "per-document/missing"]
    assert worker.version.endswith("doc-contexts-v1")


def test_per_document_mode_splits_large_documents_into_groups(simulator: AnthropicSimulator) -> None:
    document, chunks = make_document(BIG, 7)
    out = Collector()
    ClaudeContextualizer(ClaudeSettings(mode="per-document", chunks_per_call=3)).run(
        document, chunks, out.save, out.ledger
    )
    assert len(message_requests(simulator)) == 3 and len(out.contexts) == 7


def test_long_documents_are_split_into_windows_not_truncated() -> None:
    document, chunks = make_document(" ".join(f"w{i:05d}" for i in range(5_000)), 10)  # 30,000 characters
    windows = document_windows(document, chunks, window_tokens=3_000)  # ~9,000 characters a window
    assert len(windows) == 4
    assert [c.chunk_id for _, group in windows for c in group] == [c.chunk_id for c in chunks]
    for text, group in windows:
        assert all(chunk.content in text for chunk in group)


def test_a_failing_chunk_fails_the_document_and_keeps_the_others(simulator: AnthropicSimulator) -> None:
    document, chunks = make_document(BIG, 3)
    simulator.fail_next(400, count=1, message="chunk too strange")
    out = Collector()
    with pytest.raises(ContextualizationFailed, match="1 of 3 chunks failed.*chunk too strange"):
        ClaudeContextualizer(ClaudeSettings(concurrency=1)).run(document, chunks, out.save, out.ledger)
    assert len(out.contexts) == 2
    assert [row.status for row in out.rows].count("error") == 1


def test_a_document_whose_save_fails_ends_only_after_all_its_calls(simulator: AnthropicSimulator) -> None:
    """An unexpected error (saving failed) ends the document only once its other calls are over: none is left running
    in the shared pool, paying for a document given up and saving through the next document's ``save``."""
    import time

    simulator.latency_seconds = 0.2
    document, chunks = make_document(BIG, 6)
    out = Collector()

    def save(pairs: list[tuple[Chunk, str]]) -> None:
        if any(chunk.chunk_index == 1 for chunk, _ in pairs):
            raise OSError("disk full")
        out.save(pairs)

    with pytest.raises(OSError, match="disk full"):
        ClaudeContextualizer(ClaudeSettings(concurrency=4)).run(document, chunks, save, out.ledger)
    answered = len(out.contexts)
    time.sleep(0.5)  # a call still running would save now
    assert len(out.contexts) == answered == 5 and len(message_requests(simulator)) == 6


def test_summary_indexing_writes_heading_and_summary(simulator: AnthropicSimulator) -> None:
    document, chunks = make_document(SMALL, 2)
    chunks = [Chunk(c.chunk_id, c.doc_id, c.chunk_index, c.content, c.doc_sha, heading="Retries") for c in chunks]
    out = Collector()
    worker = ClaudeSummarizer(ClaudeSettings(corpus_description="the tinyq docs"))
    worker.run(document, chunks, out.save, out.ledger)
    assert all(context.startswith("Retries\n") for context in out.contexts.values())
    prompt = message_requests(simulator)[0].json["messages"][0]["content"][0]["text"]
    assert "the tinyq docs" in prompt and "2-3 sentences" in prompt
    assert all(row.cache_applied is None for row in out.rows)  # no caching asked: not reported as a miss


def row_dict(row: LedgerRow) -> dict:
    from dataclasses import asdict

    return asdict(row)
