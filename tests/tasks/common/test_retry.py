"""The retry classification and back-off, without any server."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ctxrag.tasks.common.retry import RetryPolicy, is_retryable, retry_after_of, status_of


class StatusError(Exception):
    def __init__(self, status: int, retry_after: str | None = None) -> None:
        super().__init__(f"status {status}")
        self.status_code = status
        self.response = SimpleNamespace(status_code=status, headers={"retry-after": retry_after} if retry_after else {})


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (408, True),
        (409, True),
        (429, True),
        (500, True),
        (529, True),
        (400, False),
        (401, False),
        (404, False),
        (422, False),
    ],
)
def test_which_statuses_are_retried(status: int, retryable: bool) -> None:
    assert is_retryable(StatusError(status)) is retryable


def test_connection_errors_are_retried_other_errors_not() -> None:
    class APIConnectionError(Exception):
        pass

    assert is_retryable(APIConnectionError()) and not is_retryable(KeyError("x"))


def test_status_and_retry_after_are_read_from_the_error() -> None:
    error = StatusError(429, "7")
    assert status_of(error) == 429 and retry_after_of(error) == 7.0
    assert retry_after_of(StatusError(429, "soon")) is None
    assert retry_after_of(SimpleNamespace(headers={"retry-after": "9999"})) == 120.0  # capped


def test_policy_stops_after_the_attempts_and_reraises() -> None:
    calls = []

    def failing() -> None:
        calls.append(1)
        raise StatusError(503, "0")

    with pytest.raises(StatusError):
        RetryPolicy(attempts=3).call(failing)
    assert len(calls) == 3


def test_policy_does_not_retry_a_client_error() -> None:
    calls = []

    def failing() -> None:
        calls.append(1)
        raise StatusError(400)

    with pytest.raises(StatusError):
        RetryPolicy(attempts=5).call(failing)
    assert len(calls) == 1
