"""A thin Claude client: the official SDK with its own retries off, our retry layer, a rate limiter, redaction."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from tasks.ratelimit import RateLimiter
from tasks.retry import RetryPolicy, is_retryable
from tasks.secrets import redact, resolve_key

API_KEY_ENV = "ANTHROPIC_API_KEY"
SECRET_BLOCK = "anthropic-api-key"

_limiters: dict[tuple[float | None, float | None], RateLimiter] = {}
_limiters_lock = threading.Lock()


def shared_limiter(requests_per_minute: float | None, tokens_per_minute: float | None) -> RateLimiter:
    """One limiter per setting in this process, shared by every task thread that calls Claude."""
    with _limiters_lock:
        key = (requests_per_minute, tokens_per_minute)
        if key not in _limiters:
            _limiters[key] = RateLimiter(requests_per_minute, tokens_per_minute)
        return _limiters[key]


class ClaudeCallError(RuntimeError):
    """A call that failed for good (after retries, or a 4xx that retrying cannot fix); the message is redacted.

    ``retryable`` says whether trying again later may help (rate limits, overload, outages) or not (a 4xx).
    """

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclass
class Reply:
    message: Any
    latency_s: float


class ClaudeClient:
    """``messages.create`` and the batch endpoints, with one retry layer (the SDK's ``max_retries`` is 0).

    The key comes from ``ANTHROPIC_API_KEY`` or the Prefect Secret block ``anthropic-api-key``; the base URL from
    ``ANTHROPIC_BASE_URL``, which the SDK reads itself (gateways and proxies use it).
    """

    def __init__(self, policy: RetryPolicy | None = None, limiter: RateLimiter | None = None, timeout_s: float = 600.0) -> None:
        import anthropic

        self._sdk = anthropic.Anthropic(api_key=resolve_key(API_KEY_ENV, SECRET_BLOCK), max_retries=0, timeout=timeout_s)
        self._policy = policy or RetryPolicy()
        self._limiter = limiter or RateLimiter()

    def create(self, estimated_tokens: int = 0, **params: Any) -> Reply:
        """One message; waits for the rate limiter, retries what can succeed, raises ``ClaudeCallError`` otherwise."""

        def attempt() -> Any:
            self._limiter.acquire(estimated_tokens)
            return self._sdk.messages.create(**params)

        return self._timed(attempt)

    def create_batch(self, requests: list[dict[str, Any]]) -> Any:
        return self._timed(lambda: self._sdk.messages.batches.create(requests=requests)).message

    def retrieve_batch(self, batch_id: str) -> Any:
        return self._timed(lambda: self._sdk.messages.batches.retrieve(batch_id)).message

    def batch_results(self, batch_id: str) -> list[Any]:
        return self._timed(lambda: list(self._sdk.messages.batches.results(batch_id))).message

    def _timed(self, attempt: Any) -> Reply:
        started = time.perf_counter()
        try:
            message = self._policy.call(attempt)
        except Exception as error:  # noqa: BLE001 - every SDK error becomes one redacted, typed error
            raise ClaudeCallError(redact(_describe(error)), retryable=is_retryable(error)) from None
        return Reply(message, time.perf_counter() - started)


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
