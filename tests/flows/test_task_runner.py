"""Scale-out: the index flow on a local Dask cluster (prefect-dask) gives the same index as on threads."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxrag.flows.index import index_corpus
from ctxrag.storage.index_store import IndexStore
from ctxrag.tasks.runners import make_task_runner
from tests.helpers import SAMPLE_CORPUS

pytestmark = pytest.mark.usefixtures("prefect_harness")


def test_an_index_run_on_a_local_dask_cluster(home: Path, tmp_path: Path) -> None:
    pytest.importorskip("prefect_dask")
    on_dask = index_corpus.with_options(task_runner=make_task_runner("dask"))
    report = on_dask(source=str(SAMPLE_CORPUS), name="dask", home=str(home))
    assert report["status"] == "published" and report["documents_contextualized"] == 8
    threads_home = tmp_path / "threads"
    index_corpus(source=str(SAMPLE_CORPUS), name="threads", home=str(threads_home))
    on_dask_rows = IndexStore(home).open("dask").chunks.read()
    on_threads_rows = IndexStore(threads_home).open("threads").chunks.read()
    assert on_dask_rows.select(["key", "context"]).equals(on_threads_rows.select(["key", "context"]))


def test_unknown_runner_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="choose threads or dask"):
        make_task_runner("ray")


def test_the_local_clusters_workers_run_no_profiler() -> None:
    """Hang 2 (issue 35): Dask's statistical profiler calls sys._current_frames() every 10 ms in a worker's main thread;
    on CPython 3.11 a garbage collection inside that call which frees a threading.local (every paid call's tenacity
    Retrying leaves one) deadlocks the main thread holding the GIL, and with it every call thread of the worker."""
    pytest.importorskip("prefect_dask")
    from distributed import Client, LocalCluster

    runner = make_task_runner("dask")
    with LocalCluster(**runner.cluster_kwargs) as cluster, Client(cluster) as client:
        profiled = client.run(lambda dask_worker: "profile" in dask_worker.periodic_callbacks)
    assert len(profiled) == 2 and not any(profiled.values())
