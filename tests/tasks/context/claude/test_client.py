"""One retry layer, against the simulator: 429/529 retried honouring retry-after, 400 failing at once."""

from __future__ import annotations

import time

import pytest

from ctxrag.storage.secrets import MissingKey
from ctxrag.tasks.common.retry import RetryPolicy
from ctxrag.tasks.context.claude.client import ClaudeCallError, ClaudeClient
from tests.equipment.anthropic_simulator import AnthropicSimulator
from tests.helpers import ANTHROPIC_TEST_KEY as TEST_KEY

PARAMS = {"model": "claude-haiku-4-5", "max_tokens": 50, "messages": [{"role": "user", "content": "hello"}]}


def messages(simulator: AnthropicSimulator) -> list:
    return [request for request in simulator.requests if request.path == "/v1/messages"]


@pytest.mark.parametrize("status", [429, 529, 500])
def test_retryable_errors_are_retried_after_the_servers_retry_after(simulator: AnthropicSimulator, status: int) -> None:
    simulator.fail_next(status, count=2, retry_after=0.3)
    started = time.perf_counter()
    reply = ClaudeClient(RetryPolicy(attempts=4)).create(**PARAMS)
    assert reply.message.content[0].text
    assert [request.status for request in messages(simulator)] == [status, status, 200]
    assert time.perf_counter() - started >= 0.6  # two waits of the server's 0.3 s


def test_the_sdk_itself_does_not_retry(simulator: AnthropicSimulator) -> None:
    simulator.fail_next(529, count=5, retry_after=0)
    with pytest.raises(ClaudeCallError, match="529"):
        ClaudeClient(RetryPolicy(attempts=2)).create(**PARAMS)
    assert len(messages(simulator)) == 2  # our two attempts, no SDK attempts on top


def test_429s_are_waited_out_within_the_time_budget_not_the_attempts(simulator: AnthropicSimulator) -> None:
    simulator.fail_next(429, count=8, retry_after=0.05)
    reply = ClaudeClient(RetryPolicy(attempts=2)).create(**PARAMS)
    assert reply.message.content[0].text
    assert [request.status for request in messages(simulator)] == [429] * 8 + [200]  # attempts = 1 + the 429s


def test_429s_past_the_time_budget_fail_with_the_apis_message(simulator: AnthropicSimulator) -> None:
    simulator.fail_next(429, count=20, retry_after=0.05)
    with pytest.raises(ClaudeCallError, match="429 rate_limit_error"):
        ClaudeClient(RetryPolicy(attempts=6, rate_limited_wait_s=0.12)).create(**PARAMS)
    assert len(messages(simulator)) == 3  # waits of 0.05 s: the third would pass 0.12 s


def test_a_400_fails_at_once_with_the_apis_message(simulator: AnthropicSimulator) -> None:
    with pytest.raises(ClaudeCallError, match="400 invalid_request_error: temperature"):
        ClaudeClient(RetryPolicy(attempts=5)).create(**PARAMS, extra_body={"temperature": 0})
    assert len(messages(simulator)) == 1


def test_a_missing_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(MissingKey, match="ANTHROPIC_API_KEY"):
        ClaudeClient()


def test_errors_never_carry_the_key(simulator: AnthropicSimulator, monkeypatch: pytest.MonkeyPatch) -> None:
    simulator.fail_next(401, count=1, message=f"invalid x-api-key {TEST_KEY}")  # even if a server echoed it
    with pytest.raises(ClaudeCallError) as raised:
        ClaudeClient(RetryPolicy(attempts=1)).create(**PARAMS)
    assert TEST_KEY not in str(raised.value) and "***" in str(raised.value)


def test_a_request_whose_answer_does_not_come_is_retried_not_waited_on(
    simulator: AnthropicSimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35: a worker's every call slot sat on requests never answered, for the SDK's 10 minutes."""
    import ctxrag.tasks.context.claude.client as client

    monkeypatch.setattr(client, "ANSWER_WAIT_S", 0.5)
    simulator.stall_next(1, seconds=4.0)
    started = time.perf_counter()
    reply = ClaudeClient(RetryPolicy(attempts=3, initial_delay=0.05)).create(**PARAMS)
    assert reply.message.content[0].text and reply.attempts == 2  # the stalled request timed out, the retry answered
    assert time.perf_counter() - started < 3.0


def test_a_requests_time_limit_grows_with_its_output() -> None:
    from ctxrag.tasks.context.claude.client import request_timeout

    assert 60 < request_timeout(400) < 70  # a per-chunk context
    assert request_timeout(32_000) > 600  # a long per-document answer keeps the time it needs
