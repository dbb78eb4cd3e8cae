"""The Anthropic simulator keeps the API contract, checked through the real ``anthropic`` SDK."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from tests.equipment.anthropic_simulator import (
    MESSAGE_OVERHEAD_TOKENS,
    AnthropicSimulator,
    min_cacheable_tokens,
    simulated_token_count,
)

HAIKU = "claude-haiku-4-5"
SONNET = "claude-sonnet-4-5"


@pytest.fixture
def sim() -> Iterator[AnthropicSimulator]:
    with AnthropicSimulator() as running:
        yield running


def client_for(sim: AnthropicSimulator, **kw: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=sim.url, api_key="sk-ant-test-123", max_retries=0, **kw)


def document_of(tokens: int) -> str:
    """A ``<document>`` text whose simulated size is exactly ``tokens``."""
    body = ("lorem ipsum dolor sit amet " * (tokens // 6 + 1))[: tokens * 4 - len("<document></document>")]
    text = f"<document>{body}</document>"
    assert simulated_token_count(text) == tokens
    return text


def chunk_message(doc: str, chunk: str, cache_control: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    doc_block: dict[str, Any] = {"type": "text", "text": doc}
    if cache_control is not None:
        doc_block["cache_control"] = cache_control
    question = f"Here is the chunk:\n<chunk>{chunk}</chunk>\nGive a short context."
    return [{"role": "user", "content": [doc_block, {"type": "text", "text": question}]}]


def ask(client: anthropic.Anthropic, model: str, messages: list[dict[str, Any]], **kw: Any) -> anthropic.types.Message:
    return client.messages.create(model=model, max_tokens=200, messages=messages, **kw)  # type: ignore[arg-type]


def test_plain_message_text_and_usage(sim: AnthropicSimulator) -> None:
    prompt = (
        "<document>The annual report of Acme Corp for 2023 covers revenue.</document>\n"
        "<chunk>Revenue grew 3% over the previous quarter.</chunk>"
    )
    msg = ask(client_for(sim), HAIKU, [{"role": "user", "content": prompt}])
    assert msg.type == "message" and msg.role == "assistant" and msg.model == HAIKU and msg.id.startswith("msg_")
    assert msg.stop_reason == "end_turn" and msg.stop_sequence is None
    text = msg.content[0].text  # type: ignore[union-attr]
    assert text == (
        "This chunk is from a document beginning 'The annual report of Acme Corp for 2023' "
        "and covers 'Revenue grew 3% over the previous quarter.'."
    )
    assert msg.usage.input_tokens == simulated_token_count(prompt) + MESSAGE_OVERHEAD_TOKENS
    assert msg.usage.output_tokens == simulated_token_count(text)
    assert msg.usage.cache_creation_input_tokens == 0 and msg.usage.cache_read_input_tokens == 0
    assert msg.usage.service_tier == "standard"
    recorded = sim.requests[-1]
    assert recorded.path == "/v1/messages" and recorded.status == 200
    assert recorded.json["model"] == HAIKU and recorded.usage["input_tokens"] == msg.usage.input_tokens
    assert recorded.headers["anthropic-version"]


def test_max_tokens_truncates_and_no_chunk_gives_simulated_answer(sim: AnthropicSimulator) -> None:
    client = client_for(sim)
    msg = client.messages.create(
        model=HAIKU, max_tokens=3, messages=[{"role": "user", "content": "<chunk>a b c d e f</chunk>"}]
    )
    assert msg.stop_reason == "max_tokens" and msg.usage.output_tokens <= 3
    plain = client.messages.create(model=HAIKU, max_tokens=50, messages=[{"role": "user", "content": "Summarize."}])
    assert plain.content[0].text == "Simulated answer."  # type: ignore[union-attr]


def test_temperature_and_bad_fields_are_rejected(sim: AnthropicSimulator) -> None:
    client = client_for(sim)
    with pytest.raises(anthropic.BadRequestError) as err:
        ask(client, HAIKU, [{"role": "user", "content": "hi"}], extra_body={"temperature": 0.0})
    assert "temperature" in str(err.value) and err.value.status_code == 400
    body = err.value.body
    assert isinstance(body, dict) and body["error"]["type"] == "invalid_request_error"
    assert err.value.response.headers["request-id"]
    with pytest.raises(anthropic.BadRequestError, match="messages"):
        ask(client, HAIKU, [])
    with pytest.raises(anthropic.BadRequestError, match="max_tokens"):
        client.messages.create(model=HAIKU, max_tokens=0, messages=[{"role": "user", "content": "hi"}])
    too_many = [{"type": "text", "text": f"part {i}", "cache_control": {"type": "ephemeral"}} for i in range(5)]
    with pytest.raises(anthropic.BadRequestError, match="maximum of 4"):
        ask(client, SONNET, [{"role": "user", "content": too_many}])
    assert ask(client, "claude-future-model-9", [{"role": "user", "content": "hi"}]).model == "claude-future-model-9"


def test_missing_api_key_is_an_authentication_error(sim: AnthropicSimulator) -> None:
    # SDK 2.x sends the key as "Authorization: Bearer ..."; omitting that header sends no key at all.
    no_key = client_for(sim, default_headers={"Authorization": anthropic.omit})
    with pytest.raises(anthropic.AuthenticationError) as err:
        ask(no_key, HAIKU, [{"role": "user", "content": "hi"}])
    assert err.value.status_code == 401 and sim.requests[-1].error_type == "authentication_error"
    assert "authorization" not in sim.requests[-1].headers and "x-api-key" not in sim.requests[-1].headers
    with_header = client_for(sim, default_headers={"Authorization": anthropic.omit, "x-api-key": "sk-ant-test-1"})
    assert ask(with_header, HAIKU, [{"role": "user", "content": "hi"}]).content


def test_prompt_cache_write_then_read_on_haiku(sim: AnthropicSimulator) -> None:
    client = client_for(sim)
    doc = document_of(5000)
    prefix = 5000 + MESSAGE_OVERHEAD_TOKENS
    first = ask(client, HAIKU, chunk_message(doc, "first chunk text", {"type": "ephemeral"}))
    tail_1 = simulated_token_count(chunk_message(doc, "first chunk text")[0]["content"][1]["text"])
    assert first.usage.cache_creation_input_tokens == prefix and first.usage.cache_read_input_tokens == 0
    assert first.usage.cache_creation.ephemeral_5m_input_tokens == prefix  # type: ignore[union-attr]
    assert first.usage.input_tokens == tail_1
    second = ask(client, HAIKU, chunk_message(doc, "a different second chunk", {"type": "ephemeral"}))
    tail_2 = simulated_token_count(chunk_message(doc, "a different second chunk")[0]["content"][1]["text"])
    assert second.usage.cache_read_input_tokens == prefix and second.usage.cache_creation_input_tokens == 0
    assert second.usage.input_tokens == tail_2
    other_model = ask(client, SONNET, chunk_message(doc, "x", {"type": "ephemeral"}))
    assert other_model.usage.cache_creation_input_tokens == prefix  # the cache is per model


def test_minimum_cacheable_length_depends_on_model(sim: AnthropicSimulator) -> None:
    assert min_cacheable_tokens(HAIKU) == 4096 and min_cacheable_tokens("claude-opus-4-6") == 4096
    assert min_cacheable_tokens("claude-sonnet-4-5-20250929") == 1024
    assert min_cacheable_tokens("claude-opus-4-1") == 1024
    assert min_cacheable_tokens("claude-3-5-haiku-latest") == 2048 and min_cacheable_tokens("claude-x") == 1024
    client = client_for(sim)
    doc = document_of(2000)
    for _ in range(2):
        small = ask(client, HAIKU, chunk_message(doc, "chunk", {"type": "ephemeral"}))
        assert small.usage.cache_creation_input_tokens == 0 and small.usage.cache_read_input_tokens == 0
        assert small.usage.input_tokens == simulated_token_count(doc) + MESSAGE_OVERHEAD_TOKENS + simulated_token_count(
            chunk_message(doc, "chunk")[0]["content"][1]["text"]
        )
    written = ask(client, SONNET, chunk_message(doc, "chunk", {"type": "ephemeral"}))
    assert written.usage.cache_creation_input_tokens == 2000 + MESSAGE_OVERHEAD_TOKENS


def test_cache_ttl_expiry_and_one_hour_ttl() -> None:
    with AnthropicSimulator(cache_ttl_seconds=0.2) as sim:
        client = client_for(sim)
        messages = chunk_message(document_of(1500), "c", {"type": "ephemeral"})
        assert ask(client, SONNET, messages).usage.cache_creation_input_tokens > 0
        assert ask(client, SONNET, messages).usage.cache_read_input_tokens > 0  # read refreshes the TTL
        time.sleep(0.3)
        again = ask(client, SONNET, messages)
        assert again.usage.cache_read_input_tokens == 0 and again.usage.cache_creation_input_tokens > 0
        hour = ask(client, SONNET, chunk_message(document_of(1600), "c", {"type": "ephemeral", "ttl": "1h"}))
        creation = hour.usage.cache_creation
        assert creation is not None and creation.ephemeral_5m_input_tokens == 0
        assert creation.ephemeral_1h_input_tokens == 1600 + MESSAGE_OVERHEAD_TOKENS
        sim.reset()
        assert sim.requests == [] and ask(client, SONNET, messages).usage.cache_read_input_tokens == 0


def test_injected_failures(sim: AnthropicSimulator) -> None:
    client = client_for(sim)
    sim.fail_next(429, retry_after=2)
    with pytest.raises(anthropic.RateLimitError) as rate:
        ask(client, HAIKU, [{"role": "user", "content": "hi"}])
    assert rate.value.response.headers["retry-after"] == "2"
    assert rate.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]
    sim.fail_next(529, count=2)
    for _ in range(2):
        with pytest.raises(anthropic.OverloadedError) as over:
            ask(client, HAIKU, [{"role": "user", "content": "hi"}])
        assert over.value.status_code == 529 and isinstance(over.value, anthropic.InternalServerError)
    sim.fail_next(500)
    with pytest.raises(anthropic.InternalServerError):
        ask(client, HAIKU, [{"role": "user", "content": "hi"}])
    assert ask(client, HAIKU, [{"role": "user", "content": "hi"}]).content
    assert [r.status for r in sim.requests] == [429, 529, 529, 500, 200]


def test_tool_mode_contexts_and_omission_once(sim: AnthropicSimulator) -> None:
    client = client_for(sim)
    tool = {
        "name": "record_contexts",
        "description": "Record one context per chunk.",
        "input_schema": {"type": "object", "properties": {"contexts": {"type": "array"}}, "required": ["contexts"]},
    }
    chunks = "".join(f'<chunk index="{i}">Chunk number {i} text.</chunk>\n' for i in range(4))
    messages = [{"role": "user", "content": f"<document>Doc about things.</document>\n{chunks}"}]

    def contexts() -> list[dict[str, Any]]:
        msg = client.messages.create(
            model=HAIKU,
            max_tokens=2000,
            messages=messages,  # type: ignore[arg-type]
            tools=[tool],
            tool_choice={"type": "tool", "name": "record_contexts"},
        )
        assert msg.stop_reason == "tool_use" and msg.content[0].type == "tool_use"
        assert msg.content[0].name == "record_contexts" and msg.content[0].id.startswith("toolu_")
        return msg.content[0].input["contexts"]  # type: ignore[index,return-value]

    full = contexts()
    assert [c["chunk_index"] for c in full] == [0, 1, 2, 3]
    assert "Chunk number 2 text." in full[2]["context"] and "Doc about things." in full[2]["context"]
    sim.omit_contexts_for({1, 3})
    assert [c["chunk_index"] for c in contexts()] == [0, 2]
    assert [c["chunk_index"] for c in contexts()] == [0, 1, 2, 3]


def test_count_tokens(sim: AnthropicSimulator) -> None:
    client = client_for(sim)
    count = client.messages.count_tokens(
        model=HAIKU, system="You are terse.", messages=[{"role": "user", "content": "hello there"}]
    )
    expected = simulated_token_count("You are terse.") + simulated_token_count("hello there") + MESSAGE_OVERHEAD_TOKENS
    assert count.input_tokens == expected
    with pytest.raises(anthropic.BadRequestError):
        client.messages.count_tokens(model=HAIKU, messages=[])


def test_message_batches_poll_then_results() -> None:
    with AnthropicSimulator(batch_polls_until_done=2) as sim:
        client = client_for(sim)
        doc = document_of(1200)
        good = {
            "model": SONNET,
            "max_tokens": 100,
            "messages": chunk_message(doc, "batch chunk", {"type": "ephemeral"}),
        }
        bad = {"model": SONNET, "max_tokens": 100, "temperature": 0.5, "messages": [{"role": "user", "content": "x"}]}
        batch = client.messages.batches.create(
            requests=[  # type: ignore[list-item]
                {"custom_id": "doc-1_chunk-0", "params": good},
                {"custom_id": "doc-1_chunk-1", "params": good},
                {"custom_id": "bad", "params": bad},
            ]
        )
        assert batch.id.startswith("msgbatch_") and batch.processing_status == "in_progress"
        assert batch.request_counts.processing == 3 and batch.results_url is None and sim.batch_creations == 1
        assert client.messages.batches.retrieve(batch.id).processing_status == "in_progress"
        done = client.messages.batches.retrieve(batch.id)
        assert done.processing_status == "ended" and done.ended_at is not None
        assert (done.request_counts.succeeded, done.request_counts.errored) == (2, 1)
        assert done.results_url == f"{sim.url}/v1/messages/batches/{batch.id}/results"
        results = {r.custom_id: r.result for r in client.messages.batches.results(batch.id)}
        first, second, errored = results["doc-1_chunk-0"], results["doc-1_chunk-1"], results["bad"]
        assert first.type == "succeeded" and second.type == "succeeded" and errored.type == "errored"
        assert first.message.usage.cache_creation_input_tokens == 1200 + MESSAGE_OVERHEAD_TOKENS
        assert second.message.usage.cache_read_input_tokens == 1200 + MESSAGE_OVERHEAD_TOKENS
        assert errored.error.error.type == "invalid_request_error" and "temperature" in errored.error.error.message
        with pytest.raises(anthropic.NotFoundError):
            client.messages.batches.retrieve("msgbatch_doesnotexist")
        with pytest.raises(anthropic.BadRequestError, match="custom_id"):
            client.messages.batches.create(requests=[{"custom_id": "a b", "params": good}])  # type: ignore[list-item]
        sim.reset()  # a "resumed" run polls the existing batch instead of creating a new one
        assert client.messages.batches.retrieve(batch.id).processing_status == "ended" and sim.batch_creations == 0


def test_concurrent_requests_are_well_formed(sim: AnthropicSimulator) -> None:
    client = client_for(sim)
    answers: dict[int, anthropic.types.Message] = {}

    def worker(i: int) -> None:
        answers[i] = ask(client, HAIKU, [{"role": "user", "content": f"<chunk>thread {i} chunk</chunk>"}])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(answers) == list(range(8)) and len(sim.requests) == 8
    for i, msg in answers.items():
        assert f"thread {i} chunk" in msg.content[0].text and msg.usage.output_tokens > 0  # type: ignore[union-attr]


def test_simultaneous_first_requests_both_write_the_cache() -> None:
    """As on the real API, the cache entry exists only once a response is done (hence: warm it first)."""
    with AnthropicSimulator(latency_seconds=0.2) as sim:
        client = client_for(sim)
        doc = document_of(1100)
        usages: list[Any] = []

        def call(chunk: str) -> None:
            usages.append(ask(client, SONNET, chunk_message(doc, chunk, {"type": "ephemeral"})).usage)

        threads = [threading.Thread(target=call, args=(f"chunk {i}",)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [u.cache_creation_input_tokens for u in usages] == [1100 + MESSAGE_OVERHEAD_TOKENS] * 2
        call("chunk after")
        assert usages[-1].cache_read_input_tokens == 1100 + MESSAGE_OVERHEAD_TOKENS
        assert math.isclose(sim.latency_seconds, 0.2)
