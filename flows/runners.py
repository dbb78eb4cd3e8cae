"""Task runners: threads by default (API-bound stages overlap, local inference stays in one process), or Dask
(``prefect-dask``) to spread per-document contextualization and the other tasks over a cluster's workers.

``CTXRAG_TASK_RUNNER=dask`` picks Dask for flows started from deployments; ``CTXRAG_DASK_ADDRESS`` names an
existing scheduler (``tcp://host:8786``), else a local cluster is started for the run.
"""

from __future__ import annotations

import os

from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner


def make_task_runner(kind: str | None = None, address: str | None = None) -> TaskRunner:
    kind = (kind or os.environ.get("CTXRAG_TASK_RUNNER") or "threads").lower()
    if kind == "threads":
        return ThreadPoolTaskRunner()
    if kind == "dask":
        try:
            from prefect_dask import DaskTaskRunner
        except ImportError:
            raise ValueError("the dask task runner needs prefect-dask: pip install 'ctxrag[dask]'") from None

        address = address or os.environ.get("CTXRAG_DASK_ADDRESS")
        if address:
            return DaskTaskRunner(address=address)
        return DaskTaskRunner(cluster_kwargs={"n_workers": 2, "threads_per_worker": 2, "processes": True, "dashboard_address": None})
    raise ValueError(f"unknown task runner {kind!r}; choose threads or dask")
