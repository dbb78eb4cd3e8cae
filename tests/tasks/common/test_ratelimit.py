"""Client-side rate limits: a token bucket per limit."""

from __future__ import annotations

import time
from datetime import UTC

from ctxrag.tasks.common.ratelimit import RateLimiter


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


def test_slots_bound_the_calls_open_at_once_across_threads() -> None:
    import threading

    limiter = RateLimiter(max_in_flight=3)
    barrier_hits = []

    def call() -> None:
        with limiter.slot():
            barrier_hits.append(limiter.in_flight)
            time.sleep(0.02)

    threads = [threading.Thread(target=call) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert limiter.peak_in_flight == 3 and max(barrier_hits) == 3 and limiter.in_flight == 0


def test_a_pause_holds_every_caller() -> None:
    limiter = RateLimiter()
    limiter.pause_for(0.2)
    started = time.perf_counter()
    limiter.acquire()
    assert time.perf_counter() - started >= 0.18


def _headers(remaining: int, reset_in_s: float) -> dict[str, str]:
    from datetime import datetime, timedelta

    reset = (datetime.now(UTC) + timedelta(seconds=reset_in_s)).isoformat().replace("+00:00", "Z")
    return {"anthropic-ratelimit-requests-remaining": str(remaining), "anthropic-ratelimit-requests-reset": reset}


def test_the_apis_remaining_requests_are_spent_then_calls_wait_for_the_reset() -> None:
    limiter = RateLimiter()
    limiter.observe(_headers(remaining=2, reset_in_s=0.3))
    assert limiter.acquire() == 0.0 and limiter.acquire() == 0.0  # the two that remain
    started = time.perf_counter()
    limiter.acquire()  # the third waits for the announced reset
    assert 0.25 <= time.perf_counter() - started < 1.0


def test_calls_still_open_count_against_what_remains() -> None:
    limiter = RateLimiter()
    with limiter.slot():  # one call open while another's answer says 1 remains: that one is spoken for
        limiter.observe(_headers(remaining=1, reset_in_s=0.3))
    started = time.perf_counter()
    limiter.acquire()
    assert time.perf_counter() - started >= 0.25


def test_unreadable_headers_change_nothing() -> None:
    limiter = RateLimiter()
    limiter.observe({"anthropic-ratelimit-requests-remaining": "0", "anthropic-ratelimit-requests-reset": "soon"})
    limiter.observe(None)
    assert limiter.acquire() == 0.0
