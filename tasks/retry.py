"""One retry layer for every paid API (the SDKs' own retries are set to 0 so attempts don't multiply).

Retried: 408, 409, 429, 5xx (529 "overloaded" included) and connection errors, with exponential backoff and full
jitter, honouring the server's ``retry-after``. Any other 4xx fails at once with the API's own message.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

T = TypeVar("T")

RETRYABLE_STATUSES = frozenset({408, 409, 429})
MAX_RETRY_AFTER_SECONDS = 120.0


def status_of(error: BaseException) -> int | None:
    """The HTTP status an SDK error carries (anthropic, cohere, voyageai name it differently)."""
    for attribute in ("status_code", "http_status", "status"):
        value = getattr(error, attribute, None)
        if isinstance(value, int):
            return value
    response = getattr(error, "response", None)
    value = getattr(response, "status_code", None)
    return value if isinstance(value, int) else None


def retry_after_of(error: BaseException) -> float | None:
    """Seconds from the error's ``retry-after`` header, if the server sent one."""
    headers = getattr(getattr(error, "response", None), "headers", None) or getattr(error, "headers", None) or {}
    try:
        value = headers.get("retry-after") if hasattr(headers, "get") else None
    except Exception:  # noqa: BLE001 - exotic header containers
        value = None
    try:
        return min(max(float(value), 0.0), MAX_RETRY_AFTER_SECONDS) if value is not None else None
    except (TypeError, ValueError):
        return None


def is_connection_error(error: BaseException) -> bool:
    """Network-level failures: the request may not have reached the API."""
    names = {cls.__name__ for cls in type(error).__mro__}
    return bool(names & {"APIConnectionError", "APITimeoutError", "ConnectError", "ConnectionError", "TimeoutException",
                         "ReadTimeout", "ServiceUnavailableError", "Timeout", "ClientConnectionError"})


def is_retryable(error: BaseException) -> bool:
    status = status_of(error)
    if status is not None:
        return status in RETRYABLE_STATUSES or status >= 500
    return is_connection_error(error)


@dataclass(frozen=True)
class RetryPolicy:
    """How many attempts, and the backoff between them (seconds)."""

    attempts: int = 6
    initial_delay: float = 1.0
    max_delay: float = 60.0

    def wait(self, state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        server_says = retry_after_of(error) if error else None
        if server_says is not None:
            return server_says
        ceiling = min(self.max_delay, self.initial_delay * 2 ** (state.attempt_number - 1))
        return random.uniform(0, ceiling)  # full jitter

    def call(self, function: Callable[[], T], on_retry: Callable[[BaseException, float], None] | None = None) -> T:
        """Run ``function`` with retries; the last error is raised unchanged."""

        def before_sleep(state: RetryCallState) -> None:
            if on_retry and state.outcome and state.next_action:
                on_retry(state.outcome.exception(), state.next_action.sleep)

        retrying = Retrying(
            retry=retry_if_exception(is_retryable),
            wait=self.wait,
            stop=stop_after_attempt(self.attempts),
            before_sleep=before_sleep,
            reraise=True,
        )
        return retrying(function)
