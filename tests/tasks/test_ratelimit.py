"""Client-side rate limits: a token bucket per limit."""

from __future__ import annotations

import time

from tasks.ratelimit import RateLimiter


def test_requests_beyond_the_bucket_wait_for_the_refill() -> None:
    limiter = RateLimiter(requests_per_minute=600)  # 10 per second, bucket of 600
    for _ in range(600):
        assert limiter.acquire() == 0.0
    started = time.perf_counter()
    limiter.acquire()
    assert 0.05 <= time.perf_counter() - started < 1.0  # ~0.1 s for one more request


def test_token_limit_counts_tokens() -> None:
    limiter = RateLimiter(tokens_per_minute=60_000)  # 1,000 tokens a second
    limiter.acquire(60_000)
    started = time.perf_counter()
    limiter.acquire(200)
    assert 0.15 <= time.perf_counter() - started < 1.0


def test_no_limits_never_wait() -> None:
    limiter = RateLimiter()
    assert all(limiter.acquire(10**9) == 0.0 for _ in range(1000))
