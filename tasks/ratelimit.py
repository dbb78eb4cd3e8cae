"""Client-side rate limits (requests per minute, tokens per minute), shared by a stage's worker threads.

A token bucket per limit: a call waits until the bucket holds what it needs. (Prefect's server-side concurrency
limits cost about 2 s per acquisition on the default SQLite server, too slow for per-call limiting.)
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field


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


class RateLimiter:
    """``acquire(tokens)`` blocks until both limits allow the call. ``None`` limits are off."""

    def __init__(self, requests_per_minute: float | None = None, tokens_per_minute: float | None = None) -> None:
        self._requests = _Bucket(requests_per_minute) if requests_per_minute else None
        self._tokens = _Bucket(tokens_per_minute) if tokens_per_minute else None
        self._lock = threading.Lock()

    def acquire(self, tokens: int = 0) -> float:
        """Wait for capacity; returns the seconds waited."""
        waited = 0.0
        while True:
            with self._lock:
                now = time.monotonic()
                delay = max(
                    self._requests.wait_for(1, now) if self._requests else 0.0,
                    self._tokens.wait_for(tokens, now) if self._tokens and tokens else 0.0,
                )
                if delay == 0.0:
                    if self._requests:
                        self._requests.level -= 1
                    if self._tokens and tokens:
                        self._tokens.level -= min(tokens, self._tokens.per_minute)
                    return waited
            time.sleep(delay)
            waited += delay
