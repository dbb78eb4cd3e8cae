"""One paid budget for a run across processes: Prefect global concurrency limits held by a real Prefect server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from ctxrag.tasks.common.ratelimit import RateLimiter
from ctxrag.tasks.common.run_budget import RunBudget
from tests.helpers import REPO


def _budget(**limits: float) -> RunBudget:
    budget = RunBudget.on_server(f"test-{uuid.uuid4().hex[:8]}", **limits)  # type: ignore[arg-type]
    assert budget is not None, "the harness's server is configured"
    return budget


@pytest.mark.usefixtures("prefect_harness")
def test_calls_in_flight_are_bounded_by_the_servers_limit_and_waits_are_counted() -> None:
    limiter = RateLimiter(max_in_flight=4, budget=_budget(in_flight=2))  # the process allows 4; the run's budget 2
    open_now, peak, waits = 0, 0, []
    lock, two_open = threading.Lock(), threading.Event()

    def call() -> None:
        nonlocal open_now, peak
        with limiter.slot(lease_s=1.0) as waited:
            with lock:
                open_now += 1
                peak = max(peak, open_now)
                waits.append(waited)
                if open_now == 2:
                    two_open.set()
            two_open.wait(
                timeout=20
            )  # the first call holds its slot until a second is granted (a loaded server is slow)
            time.sleep(0.4)
            with lock:
                open_now -= 1

    threads = [threading.Thread(target=call) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(waits) == 6 and peak == 2
    assert sorted(waits)[-1] >= 0.4 and limiter.waited_s == pytest.approx(sum(waits))  # the last waited for two rounds


@pytest.mark.usefixtures("prefect_harness")
def test_tokens_per_minute_hold_on_the_server() -> None:
    budget = _budget(in_flight=None, tokens_per_minute=120)  # 2 tokens a second
    assert budget.take(120, 1.0)[1] < 1.0  # the whole minute's tokens at once
    lease, waited = budget.take(4, 1.0)  # then 4 more take about 2 s
    assert lease is None and 1.0 < waited < 20.0


HOLD = """
import sys, time
from ctxrag.tasks.common.run_budget import RunBudget
budget = RunBudget.on_server(sys.argv[1], 2)
for _ in range(2):
    budget.take(0, 0.0)
print("held", flush=True)
time.sleep(600)
"""


@pytest.mark.server
def test_a_killed_workers_slots_come_back_when_their_leases_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process holding every slot is killed: its leases end (60 s, the server's shortest) and the server's
    repossessor frees them; the limit held meanwhile. Needs a full local server (Prefect's temporary one runs no
    repossessor: under it the whole server ends with the command)."""
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

    from ctxrag.prefect_commands.local_server import ensure_server
    from tests.equipment.local_server import home_auth, stopped_afterwards

    prefect_home = tmp_path / "prefect"
    monkeypatch.setenv("PREFECT_SERVER_SERVICES_REPOSSESSOR_LOOP_SECONDS", "1")
    with stopped_afterwards(prefect_home):
        server, _ = ensure_server(prefect_home)
        provider = f"killed-{uuid.uuid4().hex[:8]}"
        auth = home_auth(prefect_home)  # the local server answers its owner's commands only
        env = {
            **os.environ,
            "PREFECT_API_URL": server.api_url,
            "PREFECT_API_AUTH_STRING": auth,
            "PYTHONPATH": str(REPO),
        }
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD, provider], env=env, stdout=subprocess.PIPE, text=True, start_new_session=True
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        finally:
            os.killpg(holder.pid, signal.SIGKILL)
            holder.wait()
        killed_at = time.monotonic()
        with temporary_settings(updates={PREFECT_API_URL: server.api_url, PREFECT_API_AUTH_STRING: auth}):
            lease, waited = RunBudget.on_server(provider, 2).take(0, 0.0)  # type: ignore[union-attr]
        assert lease is not None
        assert 50.0 < time.monotonic() - killed_at < 120.0, "the slot came back before the lease ended, or never"


def test_a_server_that_cannot_keep_the_budget_leaves_the_process_limits_in_charge(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from prefect.settings import PREFECT_CLIENT_MAX_RETRIES, temporary_settings

    limiter = RateLimiter(max_in_flight=1, budget=RunBudget("http://127.0.0.1:9/api", "nowhere", 1))  # nothing listens
    with temporary_settings(updates={PREFECT_CLIENT_MAX_RETRIES: 0}), limiter.slot() as waited:
        assert waited < 5.0
    assert limiter.budget is None and "the run-wide budget of nowhere calls is off" in caplog.text


@pytest.mark.usefixtures("prefect_harness")
def test_voyage_calls_of_a_dask_worker_take_the_runs_budget_on_the_server(
    voyage_simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a Dask worker Voyage's limiter leases its slots from the server's ``ctxrag-voyage-in-flight`` limit (set
    from CTXRAG_VOYAGE_CONCURRENCY), so every worker's calls together stay within it."""
    from prefect.client.orchestration import get_client

    from ctxrag.tasks.common import ratelimit, run_budget
    from ctxrag.tasks.common.providers import Provider
    from ctxrag.tasks.embedding.embed import EmbedderSpec
    from ctxrag.tasks.embedding.voyage import VoyageEmbedder

    monkeypatch.setattr(run_budget, "in_dask_worker", lambda: True)
    monkeypatch.setattr(ratelimit, "_shared", {})
    monkeypatch.setenv("CTXRAG_VOYAGE_CONCURRENCY", "2")
    voyage_simulator.latency_seconds = 0.3
    threads = [
        threading.Thread(target=VoyageEmbedder(EmbedderSpec("voyage", "voyage-2", 0)).embed, args=([f"text {i}"],))
        for i in range(5)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(voyage_simulator.requests) == 5 and voyage_simulator.peak_in_flight <= 2
    (limiter,) = ratelimit._shared.values()
    assert limiter.budget is not None and limiter.budget.provider == Provider.VOYAGE
    with get_client(sync_client=True) as client:
        assert client.read_global_concurrency_limit_by_name("ctxrag-voyage-in-flight").limit == 2
