"""The Message Batches modes against the Anthropic simulator (test equipment, not the API): per-chunk ``batch`` and
``per-document-batch`` (the per-document prompt, half price, missing chunks asked again alone)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ctxrag.storage.ledger import LedgerRow
from ctxrag.tasks.context.claude.batches import BatchState, run_batches
from ctxrag.tasks.context.claude.contextualizer import ClaudeContextualizer, ClaudeSettings
from ctxrag.tasks.context.claude.pricing import Usage, cost_usd
from ctxrag.tasks.context.offline import context_key
from tests.equipment.anthropic_simulator import AnthropicSimulator
from tests.tasks.context.claude.test_contextualizer import BIG, SMALL, make_document

CHUNK_TAG = re.compile(r'<chunk index="(\d+)">')


def run(
    worker: ClaudeContextualizer, pending: list, home: Path
) -> tuple[dict[str, str], list[LedgerRow], dict[str, int]]:
    saved: dict[str, str] = {}
    rows: list[LedgerRow] = []

    def save(items: list[tuple[str, str, str]]) -> None:
        saved.update({key: text for key, _, text in items})

    counts = run_batches(
        worker, pending, save, rows.extend, BatchState(home), poll_seconds=0.01, is_done=lambda key: key in saved
    )
    return saved, rows, counts


def batch_items(simulator: AnthropicSimulator) -> list[list[dict]]:
    return [request.json["requests"] for request in simulator.requests if request.path == "/v1/messages/batches"]


def test_per_document_batch_sends_the_per_document_prompt_at_half_price(
    simulator: AnthropicSimulator, tmp_path: Path
) -> None:
    big, big_chunks = make_document(BIG, 25, "big")
    small, small_chunks = make_document(SMALL, 3, "small")
    worker = ClaudeContextualizer(ClaudeSettings(mode="per-document-batch"), run_id="r")
    saved, rows, counts = run(worker, [(big, big_chunks), (small, small_chunks)], tmp_path)

    (items,) = batch_items(simulator)  # one batch, no per-call request
    assert not [request for request in simulator.requests if request.path == "/v1/messages"]
    assert [len(CHUNK_TAG.findall(item["params"]["messages"][0]["content"][1]["text"])) for item in items] == [20, 5, 3]
    assert all(item["params"]["tool_choice"] == {"type": "tool", "name": "record_contexts"} for item in items)
    assert all(item["params"]["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"} for item in items)
    keys = {
        context_key(chunk, worker, document)
        for document, chunks in ((big, big_chunks), (small, small_chunks))
        for chunk in chunks
    }
    assert set(saved) == keys and counts == {"resumed_batches": 0, "submitted_batches": 1, "succeeded": 28, "failed": 0}
    assert [len(row.chunk_ids) for row in rows] == [20, 5, 3] and {row.mode for row in rows} == {"per-document-batch"}
    for row in rows:  # half the price of the same tokens sent call by call
        usage = Usage(row.input_tokens, row.output_tokens, row.cache_write_tokens, row.cache_read_tokens)
        assert row.cost_usd == pytest.approx(cost_usd(worker.settings.model, usage) / 2)
    assert worker.version.endswith("doc-contexts-v1")  # the per-document prompt's contexts: shared with per-document


def test_per_document_batch_asks_for_a_left_out_chunk_alone_in_one_more_batch(
    simulator: AnthropicSimulator, tmp_path: Path
) -> None:
    document, chunks = make_document(BIG, 5)
    simulator.omit_contexts_for({3})
    worker = ClaudeContextualizer(ClaudeSettings(mode="per-document-batch"))
    saved, rows, counts = run(worker, [(document, chunks)], tmp_path)

    first, second = batch_items(simulator)
    assert len(first) == 1 and len(second) == 1
    assert CHUNK_TAG.findall(second[0]["params"]["messages"][0]["content"][1]["text"]) == ["3"]
    assert len(saved) == 5 and counts["submitted_batches"] == 2 and counts["failed"] == 0
    assert [row.mode for row in rows] == ["per-document-batch", "per-document-batch/missing"]
    assert not list((tmp_path / "artifacts" / "batches").glob("*.json"))  # both batches closed


def test_a_chunk_left_out_even_alone_counts_as_failed(
    simulator: AnthropicSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ctxrag.tasks.context.claude.batches as batches

    document, chunks = make_document(BIG, 4)
    real = batches._tool_contexts
    monkeypatch.setattr(batches, "_tool_contexts", lambda message: {k: v for k, v in real(message).items() if k != 2})
    saved, _, counts = run(
        ClaudeContextualizer(ClaudeSettings(mode="per-document-batch")), [(document, chunks)], tmp_path
    )
    assert len(saved) == 3 and counts["failed"] == 1 and counts["submitted_batches"] == 2


def test_per_chunk_batch_keeps_one_request_per_chunk(simulator: AnthropicSimulator, tmp_path: Path) -> None:
    document, chunks = make_document(BIG, 4)
    saved, rows, _ = run(ClaudeContextualizer(ClaudeSettings(mode="batch")), [(document, chunks)], tmp_path)
    (items,) = batch_items(simulator)
    assert len(items) == 4 and "tools" not in items[0]["params"] and len(saved) == 4
    assert {row.mode for row in rows} == {"batch"} and all(len(row.chunk_ids) == 1 for row in rows)
