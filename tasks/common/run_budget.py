"""One paid budget for a run across every worker and process: Prefect's global concurrency limits, kept by the server.

A provider's requests in flight are a concurrency limit, ``ctxrag-<provider>-in-flight`` (the limit: ``--concurrency``);
its requests and tokens per minute are rate limits (``ctxrag-<provider>-requests-per-minute`` / ``-tokens-per-minute``,
whose slots decay at the limit / 60 per second). A call takes its rate slots, then leases one in-flight slot for its
HTTP request only. The lease outlasts the request's own timeout, so it never ends under a live call, and a worker
killed while holding one gives it back when the lease ends (the server's repossessor looks every 15 s). A round trip
costs ~15 ms on the local SQLite server against calls of seconds (docs/decisions.md), so slots are leased one call at
a time. Limits are named per provider, not per run: runs on one server share their key's budget, at the latest run's
setting. Only Dask workers use it: a run on threads is one process, whose own limiter is the run's budget.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from uuid import UUID

from httpx import HTTPStatusError

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient

LEASE_MARGIN_S = 30.0  # a lease lasts the request's timeout plus this
MIN_LEASE_S = 60.0  # the server's shortest lease
FIRST_POLL_S, LAST_POLL_S = 0.05, 1.0  # the wait between tries at a full limit, doubling

_clients: dict[str, SyncPrefectClient] = {}
_ensured: set[tuple[str, int, float]] = set()
_lock = threading.Lock()
_ensuring = threading.Lock()


@dataclass(frozen=True)
class Lease:
    name: str  # the limit's
    id: UUID
    ends: float  # time.monotonic()


@dataclass
class _Pool:
    """One limit's leases this process holds idle for its waiting calls."""

    ready: threading.Condition = field(default_factory=threading.Condition)
    idle: list[Lease] = field(default_factory=list)
    waiting: int = 0


_pools: dict[tuple[str, str], _Pool] = {}


def _pool(key: tuple[str, str]) -> _Pool:
    with _lock:
        return _pools.setdefault(key, _Pool())


@dataclass(frozen=True)
class RunBudget:
    """The limits of one provider's calls, held by the Prefect server at ``api_url``."""

    api_url: str
    provider: str
    in_flight: int | None = None
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None

    @classmethod
    def on_server(
        cls,
        provider: str,
        in_flight: int | None,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
    ) -> RunBudget | None:
        """The budget on the Prefect server this process talks to; None when none is configured (one process)."""
        from prefect.settings import get_current_settings

        url = get_current_settings().api.url
        return cls(str(url), provider, in_flight, requests_per_minute, tokens_per_minute) if url else None

    @classmethod
    def for_workers(
        cls,
        provider: str,
        in_flight: int | None,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
    ) -> RunBudget | None:
        """``on_server`` in a Dask worker, where other processes share the run's limits; None in the flow's own process
        (threads: its limiter already bounds the whole run, at no round trip per call)."""
        return cls.on_server(provider, in_flight, requests_per_minute, tokens_per_minute) if in_dask_worker() else None

    def name(self, limit: str) -> str:
        return f"ctxrag-{self.provider}-{limit}"

    def take(self, tokens: int, lease_s: float) -> tuple[Lease | None, float]:
        """Wait for the rate limits and a free in-flight slot; the slot's lease (None: no in-flight limit) and the
        seconds waited. A lease this process's last call gave back goes to a waiting call at once."""
        client = self._client()
        started = time.monotonic()
        for limit, per_minute, slots in (
            ("requests-per-minute", self.requests_per_minute, 1),
            ("tokens-per-minute", self.tokens_per_minute, tokens),
        ):
            if per_minute and slots:
                name = self._ensure(client, limit, int(per_minute), per_minute / 60.0)
                _until_granted(
                    lambda: client.increment_concurrency_slots(
                        names=[name], slots=min(slots, int(per_minute)), mode="rate_limit"
                    )
                )
        lease = (
            self._lease(client, self._ensure(client, "in-flight", self.in_flight, 0.0), lease_s)
            if self.in_flight
            else None
        )
        return lease, time.monotonic() - started

    def _lease(self, client: SyncPrefectClient, name: str, lease_s: float) -> Lease:
        """An idle lease of this process (renewed if it would end before ``lease_s``), else a new one from the server,
        waiting at a full limit until either comes (a local give-back wakes the wait at once)."""
        pool, duration = _pool((self.api_url, name)), max(MIN_LEASE_S, lease_s + LEASE_MARGIN_S)
        with pool.ready:
            pool.waiting += 1
        try:
            pause = FIRST_POLL_S
            while True:
                with pool.ready:
                    lease = pool.idle.pop() if pool.idle else None
                if lease is not None:
                    if lease.ends - time.monotonic() < lease_s + 5:
                        client.renew_concurrency_lease(lease.id, duration)
                        lease = Lease(name, lease.id, time.monotonic() + duration)
                    return lease
                try:
                    granted = client.increment_concurrency_slots_with_lease(
                        names=[name], slots=1, mode="concurrency", lease_duration=duration
                    )
                    return Lease(name, UUID(granted.json()["lease_id"]), time.monotonic() + duration)
                except HTTPStatusError as error:
                    if error.response.status_code != 423:
                        raise
                with pool.ready:
                    if not pool.idle:
                        pool.ready.wait(timeout=pause)
                pause = min(pause * 2, LAST_POLL_S)
        finally:
            with pool.ready:
                pool.waiting -= 1
                stale, pool.idle = (pool.idle, []) if not pool.waiting else ([], pool.idle)
            for lease in stale:  # given back for a caller that got a slot of its own meanwhile
                self._release(lease)

    def give_back(self, lease: Lease | None) -> None:
        """Free an in-flight slot: to a call of this process that waits for one, else to the server (one that cannot
        be freed now is freed by its lease's end)."""
        if lease is None:
            return
        pool = _pool((self.api_url, lease.name))
        with pool.ready:
            if pool.waiting:
                pool.idle.append(lease)
                pool.ready.notify()
                return
        self._release(lease)

    def _release(self, lease: Lease) -> None:
        try:
            self._client().release_concurrency_slots_with_lease(lease.id)
        except Exception:
            pass

    def _client(self) -> SyncPrefectClient:
        """One client per server for the process (httpx's client is safe across threads)."""
        with _lock:
            if self.api_url not in _clients:
                from prefect.client.orchestration import get_client
                from prefect.settings import PREFECT_API_URL, temporary_settings

                with temporary_settings(updates={PREFECT_API_URL: self.api_url}):
                    _clients[self.api_url] = get_client(sync_client=True).__enter__()
            return _clients[self.api_url]

    def _ensure(self, client: SyncPrefectClient, limit: str, slots: int, decay: float) -> str:
        """The limit named for ``limit``, created or set to ``slots`` (once per process and setting)."""
        from prefect.exceptions import ObjectAlreadyExists

        name = self.name(limit)
        with _ensuring:  # one thread of the process creates it; the others find it done
            if (name, slots, decay) not in _ensured:
                try:
                    client.upsert_global_concurrency_limit_by_name(name, max(1, slots), slot_decay_per_second=decay)
                except (
                    ObjectAlreadyExists,
                    HTTPStatusError,
                ):  # another process created it first (SQLite: a 500): set it
                    client.upsert_global_concurrency_limit_by_name(name, max(1, slots), slot_decay_per_second=decay)
                _ensured.add((name, slots, decay))
        return name


def in_dask_worker() -> bool:
    """Whether this thread runs a task of a Dask worker (another process than the flow's)."""
    if "distributed" not in sys.modules:
        return False
    from distributed import get_worker

    try:
        get_worker()
    except ValueError:
        return False
    return True


def _until_granted(request: Callable[[], Any]) -> Any:
    """``request`` until the server grants it: a full limit answers 423, tried again after a growing pause (the
    server's Retry-After, when shorter)."""
    pause = FIRST_POLL_S
    while True:
        try:
            return request()
        except HTTPStatusError as error:
            if error.response.status_code != 423:
                raise
            try:
                suggested = float(error.response.headers.get("retry-after") or LAST_POLL_S)
            except ValueError:
                suggested = LAST_POLL_S
            time.sleep(max(FIRST_POLL_S, min(pause, suggested)))
            pause = min(pause * 2, LAST_POLL_S)
