"""Retry policies: how many times a failing task is tried again, and when."""

from __future__ import annotations

import random
from dataclasses import dataclass


class PermanentError(Exception):
    """Raise this from a task to fail it at once, without any retry.

    Use it for errors that another attempt cannot fix, such as a malformed
    payload or a record that no longer exists.
    """


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter.

    The delay before attempt ``n`` (counting from 1 for the first retry) is
    ``base_delay * factor ** (n - 1)``, capped at ``max_delay``, then moved by a
    random amount of up to ``jitter`` (a fraction of the delay) either way.
    """

    max_attempts: int = 5
    base_delay: float = 0.5
    factor: float = 2.0
    max_delay: float = 60.0
    jitter: float = 0.1

    def delay_for(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``attempt``."""
        if attempt < 1:
            raise ValueError("attempt counts from 1")
        delay = min(self.base_delay * self.factor ** (attempt - 1), self.max_delay)
        spread = delay * self.jitter
        return max(0.0, delay + (rng or random).uniform(-spread, spread))

    def should_retry(self, error: BaseException, attempts: int) -> bool:
        """True when a task that failed with ``error`` after ``attempts`` tries deserves another one."""
        if isinstance(error, PermanentError):
            return False
        return attempts < self.max_attempts


NO_RETRY = RetryPolicy(max_attempts=1)
"""A policy for tasks that must run at most once."""

PATIENT = RetryPolicy(max_attempts=12, base_delay=2.0, max_delay=900.0)
"""A policy for calls to slow external services: up to 12 tries over about an hour."""


def describe(policy: RetryPolicy) -> str:
    """A one-line human summary of a policy, for logs."""
    if policy.max_attempts <= 1:
        return "no retries"
    delays = [policy.base_delay * policy.factor**n for n in range(policy.max_attempts - 1)]
    total = sum(min(d, policy.max_delay) for d in delays)
    return f"up to {policy.max_attempts} attempts over about {total:.0f}s"
