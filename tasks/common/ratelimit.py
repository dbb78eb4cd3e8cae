"""Client-side pacing of a paid API, shared by every thread of a process that calls it.

Three things bound the calls:
- ``max_in_flight``: at most this many requests are open at once (a slot is held for the HTTP request only);
- hard caps, ``requests_per_minute`` / ``tokens_per_minute``: a token bucket each;
- what the API says: ``observe`` reads the ``anthropic-ratelimit-*`` response headers (requests and input tokens
  remaining, and when they reset) and new calls wait for the reset once the remainder is spent, before a 429;
  ``pause_for`` stops every thread after a 429's ``retry-after``, not only the one that got it.

Across processes (Dask workers), ``budget`` (``run_budget.RunBudget``: Prefect's global concurrency limits) bounds
the whole run's calls in flight and per minute as well; this limiter still reads the API's headers for its process.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ctxrag.storage.secrets import redact

if TYPE_CHECKING:
    from ctxrag.tasks.common.run_budget import RunBudget

HEADER_PREFIX = "anthropic-ratelimit-"
RESET_MARGIN_S = 0.05  # clocks and rounding: wait a little past the announced reset
MAX_HEADER_WAIT_S = 60.0
SAME_WINDOW_S = 1.0  # resets announced this close together describe the same window  # never trust a reset further away than a minute (clock skew)


@dataclass
class _Bucket:
    per_minute: float
    level: float = field(init=False)
    stamp: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.level = self.per_minute

    def wait_for(self, amount: float, now: float) -> float:
        """Seconds until ``amount`` is available (0 if it is now); refills as time passes."""
        self.level = min(self.per_minute, self.level + (now - self.stamp) * self.per_minute / 60.0)
        self.stamp = now
        amount = min(amount, self.per_minute)  # a single call larger than the limit waits for a full bucket only
        return 0.0 if self.level >= amount else (amount - self.level) * 60.0 / self.per_minute


@dataclass
class _Allowance:
    """What the API last said remains of one limit, less what was spent since; unknown (None) after its reset."""

    remaining: float | None = None
    reset_at: float = 0.0  # time.monotonic()

    def wait_for(self, amount: float, now: float) -> float:
        if self.remaining is None or now >= self.reset_at:
            self.remaining = None
            return 0.0
        return 0.0 if self.remaining >= amount else self.reset_at - now

    def spend(self, amount: float) -> None:
        if self.remaining is not None:
            self.remaining -= amount

    def update(self, remaining: float, reset_in_s: float, now: float) -> None:
        """Answers arrive out of order: within one window keep the lowest remainder (what was spent since is
        already taken off); a later window replaces it."""
        reset_at = now + min(max(reset_in_s, 0.0), MAX_HEADER_WAIT_S) + RESET_MARGIN_S
        if self.remaining is not None and now < self.reset_at and reset_at <= self.reset_at + SAME_WINDOW_S:
            self.remaining, self.reset_at = min(self.remaining, remaining), max(self.reset_at, reset_at)
        else:
            self.remaining, self.reset_at = remaining, reset_at


def seconds_until(timestamp: str, now: float | None = None) -> float | None:
    """Seconds from now until an RFC 3339 timestamp (the API's ``*-reset`` headers); None if unreadable."""
    try:
        moment = datetime.fromisoformat(timestamp.strip().replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        return None
    if moment.tzinfo is None:
        return None
    return moment.timestamp() - (time.time() if now is None else now)


class RateLimiter:
    """``slot(tokens)`` holds one of ``max_in_flight`` places once every limit allows the call. ``None``: off."""

    def __init__(
        self,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        max_in_flight: int | None = None,
        budget: RunBudget | None = None,
    ) -> None:
        self._requests = _Bucket(requests_per_minute) if requests_per_minute else None
        self._tokens = _Bucket(tokens_per_minute) if tokens_per_minute else None
        self._slots = threading.BoundedSemaphore(max_in_flight) if max_in_flight else None
        self.max_in_flight = max_in_flight
        self._api_requests = _Allowance()
        self._api_tokens = _Allowance()
        self._paused_until = 0.0
        self._lock = threading.Lock()
        self.in_flight = 0
        self.peak_in_flight = 0
        self._tokens_in_flight = 0
        self.budget = budget
        self.waited_s = 0.0  # seconds spent waiting for capacity, all threads together

    @contextmanager
    def slot(self, tokens: int = 0, lease_s: float = 0.0) -> Iterator[float]:
        """Wait for a free place and for every limit (the run's ``budget`` too: its in-flight slot is leased for
        ``lease_s`` plus a margin), then hold the place while the request is open. Yields the seconds waited."""
        started = time.monotonic()
        if self._slots:
            self._slots.acquire()
        try:
            self.acquire(tokens)
            lease = self._lease(tokens, lease_s)
            waited = time.monotonic() - started
            with self._lock:
                self.in_flight += 1
                self._tokens_in_flight += tokens
                self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
                self.waited_s += waited
            try:
                yield waited
            finally:
                with self._lock:
                    self.in_flight -= 1
                    self._tokens_in_flight -= tokens
                if self.budget is not None:
                    self.budget.give_back(lease)
        finally:
            if self._slots:
                self._slots.release()

    def _lease(self, tokens: int, lease_s: float) -> Any:
        """A slot of the run's budget; a server that cannot keep one (too old, unreachable) leaves this process's
        limits alone in charge, with one warning."""
        budget = self.budget
        if budget is None:
            return None
        try:
            return budget.take(tokens, lease_s)[0]
        except Exception as error:
            with self._lock:
                if self.budget is not None:
                    self.budget = None
                    logging.getLogger(__name__).warning(
                        "the run-wide budget of %s calls is off (Prefect's concurrency limits at %s: %s); each process "
                        "keeps its own limits",
                        budget.provider,
                        budget.api_url,
                        redact(str(error))[:200],
                    )
            return None

    def acquire(self, tokens: int = 0) -> float:
        """Wait until every limit allows one more call of ``tokens`` (estimated); returns the seconds waited."""
        waited = 0.0
        while True:
            with self._lock:
                now = time.monotonic()
                delay = max(
                    self._paused_until - now,
                    self._api_requests.wait_for(1, now),
                    self._api_tokens.wait_for(tokens, now) if tokens else 0.0,
                    self._requests.wait_for(1, now) if self._requests else 0.0,
                    self._tokens.wait_for(tokens, now) if self._tokens and tokens else 0.0,
                )
                if delay <= 0.0:
                    self._api_requests.spend(1)
                    self._api_tokens.spend(tokens)
                    if self._requests:
                        self._requests.level -= 1
                    if self._tokens and tokens:
                        self._tokens.level -= min(tokens, self._tokens.per_minute)
                    return waited
            time.sleep(delay)
            waited += delay

    def pause_for(self, seconds: float) -> None:
        """Every thread waits ``seconds`` before its next call (a 429's ``retry-after`` applies to the whole key)."""
        with self._lock:
            self._paused_until = max(self._paused_until, time.monotonic() + max(0.0, seconds))

    def observe(self, headers: Any) -> None:
        """Read the API's ``anthropic-ratelimit-*`` headers: once the remainder (less the calls still open) is
        spent, new calls wait for the announced reset."""
        if not hasattr(headers, "get"):
            return
        requests = _remaining_and_reset(headers, "requests")
        tokens = _remaining_and_reset(headers, "input-tokens") or _remaining_and_reset(headers, "tokens")
        with self._lock:
            now = time.monotonic()
            if requests:
                self._api_requests.update(requests[0] - self.in_flight, requests[1], now)
            if tokens:
                self._api_tokens.update(tokens[0] - self._tokens_in_flight, tokens[1], now)


def _remaining_and_reset(headers: Any, limit: str) -> tuple[float, float] | None:
    """(remaining, seconds until reset) of one ``anthropic-ratelimit-<limit>-*`` pair, if both are readable."""
    try:
        remaining = float(headers.get(f"{HEADER_PREFIX}{limit}-remaining"))
    except (TypeError, ValueError):
        return None
    reset = seconds_until(str(headers.get(f"{HEADER_PREFIX}{limit}-reset") or ""))
    return None if reset is None else (remaining, reset)


_shared: dict[tuple[object, ...], RateLimiter] = {}
_shared_lock = threading.Lock()


def shared_limiter(
    provider: str,
    max_in_flight: int | None,
    requests_per_minute: float | None = None,
    tokens_per_minute: float | None = None,
) -> RateLimiter:
    """One limiter per provider and setting in this process, shared by every task thread that calls the provider:
    ``max_in_flight`` bounds the process's open requests; in a Dask worker the run's budget (``run_budget``: Prefect's
    global limits) bounds those of every worker together."""
    from ctxrag.tasks.common.run_budget import RunBudget

    budget = RunBudget.for_workers(provider, max_in_flight, requests_per_minute, tokens_per_minute)
    key = (provider, max_in_flight, requests_per_minute, tokens_per_minute, budget)
    with _shared_lock:
        if key not in _shared:
            _shared[key] = RateLimiter(requests_per_minute, tokens_per_minute, max_in_flight, budget)
        return _shared[key]
