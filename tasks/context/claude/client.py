"""A thin Claude client: the official SDK with its own retries off, our retry layer, a rate limiter, redaction."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from ctxrag.storage.secrets import redact, resolve_key
from ctxrag.tasks.common.ratelimit import RateLimiter
from ctxrag.tasks.common.retry import (
    ApiCallFailed,
    RetryPolicy,
    headers_of,
    is_rate_limited,
    is_retryable,
    retry_after_of,
)

API_KEY_ENV = "ANTHROPIC_API_KEY"
SECRET_BLOCK = "anthropic-api-key"

ANSWER_WAIT_S = 60.0  # a request's answer starts within a minute, plus its output's time at ...
OUTPUT_TOKENS_PER_S = 50.0  # ... a slow generation speed (Haiku writes several times faster)


def request_timeout(max_tokens: object) -> float:
    """Seconds one Messages request may wait for its answer: a request lost on the way (its answer never comes) is
    then retried, instead of holding its call slot and its task for the SDK's 10 minutes (issue 35: a paid run on
    Dask sat with every call slot of a worker on a request that was never answered)."""
    tokens = max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else 4096
    return ANSWER_WAIT_S + tokens / OUTPUT_TOKENS_PER_S


class _KeepFailed(Exception):
    """Saving an answer failed (not the API): never retried, re-raised as the original error."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class ClaudeCallError(ApiCallFailed):
    """A call that failed for good (after retries, or a 4xx that retrying cannot fix); the message is redacted.

    ``retryable`` says whether trying again later may help (rate limits, overload, outages) or not (a 4xx).
    """

    def __init__(self, message: str, retryable: bool = False, attempts: int = 1) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.attempts = attempts


@dataclass
class Reply:
    message: Any
    latency_s: float
    attempts: int = 1  # HTTP requests this call took (1 + retries)
    waited_s: float = 0.0  # of ``latency_s``: waiting for a call slot and the rate limits (the run's budget)


class ClaudeClient:
    """``messages.create`` and the batch endpoints, with one retry layer (the SDK's ``max_retries`` is 0).

    The key comes from ``ANTHROPIC_API_KEY`` or the Prefect Secret block ``anthropic-api-key``; the base URL from
    ``ANTHROPIC_BASE_URL``, which the SDK reads itself (gateways and proxies use it).
    """

    def __init__(
        self, policy: RetryPolicy | None = None, limiter: RateLimiter | None = None, timeout_s: float = 600.0
    ) -> None:
        import anthropic

        self._sdk = anthropic.Anthropic(
            api_key=resolve_key(API_KEY_ENV, SECRET_BLOCK), max_retries=0, timeout=timeout_s
        )
        self._policy = policy or RetryPolicy()
        self._limiter = limiter or RateLimiter()

    def create(self, estimated_tokens: int = 0, keep: Callable[[Reply], None] | None = None, **params: Any) -> Reply:
        """One message; waits for the limiter, retries what can succeed, raises ``ClaudeCallError`` otherwise.

        ``keep(reply)`` runs before the request's slot is freed: a result saved there is never lost to a kill
        while a newer request is open, so a killed run repeats at most the requests open at once.
        """
        started = time.perf_counter()
        retries: list[float] = []
        waits: list[float] = []
        timeout = request_timeout(params.get("max_tokens"))

        def attempt() -> Reply:
            try:
                with self._limiter.slot(estimated_tokens, lease_s=timeout) as waited:
                    waits.append(waited)
                    raw = self._sdk.messages.with_raw_response.create(timeout=timeout, **params)
                    self._limiter.observe(raw.headers)
                    reply = Reply(raw.parse(), time.perf_counter() - started, len(retries) + 1, sum(waits))
                    if keep is not None:
                        try:
                            keep(reply)
                        except Exception as error:
                            raise _KeepFailed(error) from error
                    return reply
            except _KeepFailed:
                raise
            except Exception as error:
                self._limiter.observe(headers_of(error))
                if is_rate_limited(error):
                    wait = retry_after_of(error)
                    self._limiter.pause_for(1.0 if wait is None else wait)
                raise

        try:
            return self._policy.call(attempt, on_retry=lambda error, wait: retries.append(wait))
        except _KeepFailed as failed:
            raise failed.error from None
        except Exception as error:
            raise ClaudeCallError(
                redact(_describe(error)), retryable=is_retryable(error), attempts=len(retries) + 1
            ) from None

    def count_tokens(self, **params: Any) -> int:
        """The API's free token count of a request's prompt (``messages.count_tokens``; no message is created)."""
        return int(self._timed(lambda: self._sdk.messages.count_tokens(**params)).message.input_tokens)

    def create_batch(self, requests: list[dict[str, Any]]) -> Any:
        return self._timed(lambda: self._sdk.messages.batches.create(requests=cast(Any, requests))).message

    def retrieve_batch(self, batch_id: str) -> Any:
        return self._timed(lambda: self._sdk.messages.batches.retrieve(batch_id)).message

    def batch_results(self, batch_id: str) -> list[Any]:
        return self._timed(lambda: list(self._sdk.messages.batches.results(batch_id))).message

    def _timed(self, attempt: Any) -> Reply:
        started = time.perf_counter()
        retries: list[float] = []
        try:
            message = self._policy.call(attempt, on_retry=lambda error, wait: retries.append(wait))
        except Exception as error:
            raise ClaudeCallError(
                redact(_describe(error)), retryable=is_retryable(error), attempts=len(retries) + 1
            ) from None
        return Reply(message, time.perf_counter() - started, attempts=len(retries) + 1)


def message_text(message: Any) -> str:
    """The text blocks of a Messages API answer, joined."""
    return " ".join(block.text for block in message.content if getattr(block, "type", "") == "text").strip()


def _describe(error: BaseException) -> str:
    """The API's own message when there is one (``error.message`` in the JSON body), else the exception text."""
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        detail = body.get("error", {}) if isinstance(body.get("error"), dict) else {}
        if detail.get("message"):
            status = getattr(error, "status_code", "")
            return f"{status} {detail.get('type', '')}: {detail['message']}".strip()
    return f"{type(error).__name__}: {error}"
