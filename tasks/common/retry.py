"""One retry layer for every paid API (the SDKs' own retries are set to 0 so attempts don't multiply).

Retried: 408, 409, 429, 5xx (529 "overloaded" included) and connection errors, with exponential backoff and full
jitter, honouring the server's ``retry-after``. Any other 4xx fails at once with the API's own message.

The budget is per call. A 429 is the API saying "not now", not "this call is broken": 429s are waited out for as
long as ``rate_limited_wait_s`` allows (so a rate-limit storm is ridden out), while every other failure counts
against ``attempts``. A call that fails for good raises an ``ApiCallFailed``, which no outer layer (Prefect task
retries included) retries again: one budget per call.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception

from ctxrag.storage.errors import UserError

T = TypeVar("T")

RETRYABLE_STATUSES = frozenset({408, 409, 429})
RATE_LIMITED = 429
MAX_RETRY_AFTER_SECONDS = 120.0


class ApiCallFailed(UserError, RuntimeError):
    """A paid API call failed for good: its retries are spent, or retrying cannot help (a 4xx, a missing key).

    Outer layers (Prefect task retries) must not retry it: that would stack attempts on an exhausted budget.
    """


def status_of(error: BaseException) -> int | None:
    """The HTTP status an SDK error carries (anthropic, cohere, voyageai name it differently)."""
    for attribute in ("status_code", "http_status", "status"):
        value = getattr(error, attribute, None)
        if isinstance(value, int):
            return value
    response = getattr(error, "response", None)
    value = getattr(response, "status_code", None)
    return value if isinstance(value, int) else None


def headers_of(error: BaseException) -> object:
    """The response headers an SDK error carries (``{}`` when none)."""
    return getattr(getattr(error, "response", None), "headers", None) or getattr(error, "headers", None) or {}


def retry_after_of(error: BaseException) -> float | None:
    """Seconds from the error's ``retry-after`` header, if the server sent one."""
    headers = headers_of(error)
    try:
        value = headers.get("retry-after") if hasattr(headers, "get") else None
    except Exception:
        value = None
    try:
        return min(max(float(value), 0.0), MAX_RETRY_AFTER_SECONDS) if value is not None else None
    except (TypeError, ValueError):
        return None


def is_connection_error(error: BaseException) -> bool:
    """Network-level failures: the request may not have reached the API."""
    names = {cls.__name__ for cls in type(error).__mro__}
    return bool(
        names
        & {
            "APIConnectionError",
            "APITimeoutError",
            "ConnectError",
            "ConnectionError",
            "TimeoutException",
            "ReadTimeout",
            "ServiceUnavailableError",
            "Timeout",
            "ClientConnectionError",
        }
    )


def is_retryable(error: BaseException) -> bool:
    status = status_of(error)
    if status is not None:
        return status in RETRYABLE_STATUSES or status >= 500
    return is_connection_error(error)


def is_rate_limited(error: BaseException | None) -> bool:
    return error is not None and status_of(error) == RATE_LIMITED


@dataclass(frozen=True)
class RetryPolicy:
    """A call's budget: ``attempts`` in all for failures other than 429, and up to ``rate_limited_wait_s`` seconds
    of waiting on 429s (each wait as long as the server's ``retry-after``)."""

    attempts: int = 6
    initial_delay: float = 1.0
    max_delay: float = 60.0
    rate_limited_wait_s: float = 900.0

    def wait(self, state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        server_says = retry_after_of(error) if error else None
        if server_says is not None:
            return server_says
        ceiling = min(self.max_delay, self.initial_delay * 2 ** (state.attempt_number - 1))
        return random.uniform(0, ceiling)  # full jitter

    def call(self, function: Callable[[], T], on_retry: Callable[[BaseException, float], None] | None = None) -> T:
        """Run ``function`` within the budget; the last error is raised unchanged."""
        spent = {"failures": 0, "rate_limited_s": 0.0}

        def stop(state: RetryCallState) -> bool:
            error = state.outcome.exception() if state.outcome else None
            if is_rate_limited(error):
                spent["rate_limited_s"] += state.upcoming_sleep
                return spent["rate_limited_s"] > self.rate_limited_wait_s
            spent["failures"] += 1
            return spent["failures"] >= self.attempts

        def before_sleep(state: RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome else None
            if on_retry and error is not None and state.next_action:
                on_retry(error, state.next_action.sleep)

        retrying = Retrying(
            retry=retry_if_exception(is_retryable), wait=self.wait, stop=stop, before_sleep=before_sleep, reraise=True
        )
        return retrying(function)


def may_pass(error: BaseException) -> bool:
    """Whether trying again could help: I/O hiccups and the unexpected may pass; bad input will not get better, and a
    paid call that failed for good has spent its own budget (one budget per call). An error's own ``retryable`` wins."""
    if isinstance(
        error, (UserError, ValueError)
    ):  # ApiCallFailed, CorpusError, MissingKey, InvalidInput are UserErrors
        return False
    return bool(getattr(error, "retryable", True))


def retry_only_io(task, task_run, state) -> bool:  # type: ignore[no-untyped-def]
    """Prefect's ``retry_condition_fn``: retry only what ``may_pass``."""
    try:
        state.result()
    except Exception as error:
        return may_pass(error)
    return False
