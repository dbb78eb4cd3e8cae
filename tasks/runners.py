"""Task runners: threads by default (API-bound stages overlap, local inference stays in one process), or Dask
(``prefect-dask``) to spread per-document contextualization and the other tasks over a cluster's workers.

``CTXRAG_TASK_RUNNER=dask`` picks Dask for flows started from deployments; ``CTXRAG_DASK_ADDRESS`` names an
existing scheduler (``tcp://host:8786``), else a local cluster is started for the run.

Threads are bounded: Prefect's ``ThreadPoolTaskRunner()`` has no worker bound by default, so a corpus of N documents
would run N tasks at once. ``CTXRAG_TASK_WORKERS`` (default 4) sets the bound. Paid calls have their own, run-wide
bound (``--concurrency``: Prefect global concurrency limits across every process, ``tasks/common/run_budget.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from ctxrag.storage.errors import InvalidInput
from ctxrag.storage.names import DEFAULT_NAME
from ctxrag.storage.settings import settings

# Each worker process of the local cluster (the Nanny hands it this Dask config): no statistical profiler. Dask's
# profiler calls sys._current_frames() every 10 ms in the worker's main thread; on CPython 3.11 that call holds the
# runtime's thread-list lock while it allocates, so a garbage collection run there that frees a threading.local (as
# every paid call's tenacity Retrying leaves one in cyclic garbage) takes that lock again: the main thread waits
# forever holding the GIL, and every other thread of the worker (its call slots) waits for the GIL (hang 2, issue
# 35). The profile only feeds Dask's dashboard, which a ctxrag cluster does not serve.
WORKER_CONFIG = {"distributed.worker.profile.enabled": False}


def task_workers() -> int:
    """Task threads of a run: ``CTXRAG_TASK_WORKERS``, else 4 (tasks wait on I/O and APIs; 2 cores do the rest)."""
    return settings().task_workers  # checked there: a whole number, 1 or more


def make_task_runner(kind: str | None = None, address: str | None = None) -> TaskRunner[Any]:
    kind = (kind or settings().task_runner).lower()
    if kind == "threads":
        return ThreadPoolTaskRunner(max_workers=task_workers())
    if kind == "dask":
        try:
            from prefect_dask import DaskTaskRunner
        except ImportError:
            raise InvalidInput("the dask task runner needs prefect-dask: pip install 'ctxrag[dask]'") from None

        address = address or settings().dask_address
        if address:
            return DaskTaskRunner(address=address)
        return DaskTaskRunner(
            cluster_kwargs={
                "n_workers": 2,
                "threads_per_worker": 2,
                "processes": True,
                "dashboard_address": None,
                "scheduler_kwargs": {"dashboard_address": ":0"},
                "config": WORKER_CONFIG,
            }
        )
    raise InvalidInput(f"unknown task runner {kind!r}; choose threads or dask")


def spreads_tasks() -> bool:
    """Whether the running flow's task runner spreads tasks over other processes (Dask), not this process's threads."""
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    return context is not None and not isinstance(context.task_runner, ThreadPoolTaskRunner)


def run_name(command: str) -> Callable[[], str]:
    """A flow's ``flow_run_name``: the command, the index's name and a unique slug, e.g. ``index-docs-brave-otter``,
    so a run list in the Prefect UI says what each run did and to which index."""

    def name() -> str:
        from prefect.runtime import flow_run
        from prefect.utilities.names import generate_slug

        return f"{command}-{flow_run.parameters.get('name') or DEFAULT_NAME}-{generate_slug(2)}"

    return name
