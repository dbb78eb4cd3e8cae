"""Paid contextualization on a real 2-worker Dask cluster (prefect-dask's LocalCluster), against the Anthropic simulator
(test equipment, not the API): the run ends in bounded time, with and without a 429 burst (issue 35, "No hang"), and
``--concurrency 4`` bounds the calls in flight across both workers (one budget for the run: the server's limits).

The run is a subprocess with a deadline, so a hang fails the test (with the simulator's count so far) instead of hanging
CI; its whole process group (the Dask nanny and workers) is killed whatever happens.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.equipment.anthropic_simulator import AnthropicSimulator
from tests.helpers import REPO, write_corpus

pytestmark = pytest.mark.usefixtures("prefect_harness")

DEADLINE_S = 240.0  # a run takes 30-60 s on a busy 2-core machine, cluster start-up most of it; a hang was minutes
RUN = """
import json, sys
from ctxrag.flows.index import index_corpus
from ctxrag.tasks.runners import make_task_runner
from tests.helpers import index_options
flow = index_corpus.with_options(task_runner=make_task_runner("dask"))
report = flow(source=sys.argv[1], name="dask-paid", home=sys.argv[2], options=index_options(
                contextualizer="claude", concurrency=4, embedder="voyage"))
calls = report["contextualizer_calls"]
print(json.dumps({"status": report["status"], "calls": calls["calls"], "waited": calls["waited_for_budget_s"]}))
"""


def run_on_dask(corpus: Path, home: Path, simulator: AnthropicSimulator) -> dict:
    """The index flow on a LocalCluster of 2 worker processes, in a subprocess killed (with its group) at the deadline."""
    from prefect.settings import get_current_settings

    env = {
        **os.environ,
        "PREFECT_API_URL": str(get_current_settings().api.url),
    }  # the harness's API, for the workers too
    process = subprocess.Popen(
        [sys.executable, "-c", RUN, str(corpus), str(home)],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        answered = sum(1 for r in list(simulator.requests) if r.path == "/v1/messages" and r.status == 200)
        pytest.fail(f"the paid run on Dask did not finish in {DEADLINE_S:g} s (hung after {answered} answers)")
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # the Dask workers too, whatever happened
        except ProcessLookupError:
            pass
        process.wait()
    assert process.returncode == 0, stderr[-3000:]
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("burst", [0, 60], ids=["plain", "429-burst"])
@pytest.mark.usefixtures("voyage_simulator")  # embeddings from the Voyage simulator: no local model in each worker
def test_paid_contextualization_on_two_dask_workers_finishes(
    anthropic_simulator: AnthropicSimulator, tmp_path: Path, home: Path, burst: int
) -> None:
    pytest.importorskip("prefect_dask")
    corpus = tmp_path / "corpus.json"
    texts = write_corpus(
        corpus, big_docs=12, chunks_per_doc=8, words_per_chunk=300
    )  # 13 documents, 104 chunks: 4 tasks
    anthropic_simulator.latency_seconds = 0.05
    if burst:
        anthropic_simulator.fail_next(429, count=burst, retry_after=0.2)
    started = time.monotonic()
    report = run_on_dask(corpus, home, anthropic_simulator)
    statuses = [r.status for r in list(anthropic_simulator.requests) if r.path == "/v1/messages"]
    assert report["status"] == "published" and report["calls"] == len(texts)
    assert statuses.count(200) == len(texts) and statuses.count(429) == burst  # each context paid once
    assert anthropic_simulator.peak_in_flight <= 4  # across both workers (8 before one budget per run)
    assert report["waited"] > 0  # 2 workers x 2 task threads x 4 calls each asked for more than 4 slots
    assert time.monotonic() - started < DEADLINE_S
