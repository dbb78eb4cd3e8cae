"""The index flow with the Claude contextualizer, against the Anthropic simulator (test equipment, not the API).

Covers: cache write then reads per document and the below-minimum report, the ledger summary, re-runs that pay
nothing, an edit that pays only for its document, Message Batches resumed without re-submitting, a SIGKILLed run
resumed without repeating a saved call, and the key never written anywhere.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctxrag.storage.artifacts import contexts_cache
from ctxrag.storage.index_store import IndexStore
from ctxrag.storage.ledger import Ledger
from ctxrag.tasks.stages.contextualize import DocumentsFailed
from tests.equipment.anthropic_simulator import AnthropicSimulator
from tests.helpers import ANTHROPIC_TEST_KEY as KEY
from tests.helpers import requested_chunks, run, write_corpus

pytestmark = pytest.mark.usefixtures("prefect_harness")


@pytest.fixture
def simulator(anthropic_simulator: AnthropicSimulator) -> AnthropicSimulator:
    return anthropic_simulator


def test_per_chunk_run_caches_per_document_and_reports_costs(
    simulator: AnthropicSimulator, tmp_path: Path, home: Path
) -> None:
    corpus = tmp_path / "corpus.json"
    write_corpus(corpus)
    report = run(corpus, home)
    calls = report["contextualizer_calls"]
    assert calls["calls"] == 12 and calls["failed_calls"] == 0
    # per big document: one write, three reads; the small document is below 4,096 tokens and is reported
    writes = [r for r in simulator.requests if r.usage and r.usage["cache_creation_input_tokens"]]
    reads = [r for r in simulator.requests if r.usage and r.usage["cache_read_input_tokens"]]
    assert len(writes) == 2 and len(reads) == 6
    assert calls["documents_without_caching"] == ["uuid-2"]
    assert 0 < calls["cache_read_share"] < 1 and calls["cost_usd"] < calls["cost_without_cache_usd"]
    manifest = IndexStore(home).manifest("paid")
    assert manifest["config"]["contextualizer"] == {"name": "claude", "version": "claude-haiku-4-5/doc-v1+chunk-v1"}
    contexts = IndexStore(home).open("paid").chunks["context"].to_pylist()
    assert all(context.startswith("This chunk is from") for context in contexts)


def test_rerun_pays_nothing_and_an_edit_pays_only_for_its_document(
    simulator: AnthropicSimulator, tmp_path: Path, home: Path
) -> None:
    corpus = tmp_path / "corpus.json"
    write_corpus(corpus)
    run(corpus, home)
    before = len(simulator.requests)
    assert run(corpus, home)["contextualizer_calls"]["calls"] == 0
    assert len(simulator.requests) == before

    texts = write_corpus(corpus, edit=" an edited sentence")
    report = run(corpus, home)
    # the document's sha changed, so its chunks' keys changed: doc0's four chunks are redone, nothing else
    assert sorted(requested_chunks(simulator, texts, since=before)) == [f"doc0_chunk{c}" for c in range(4)]
    assert report["documents_contextualized"] == 1 and report["status"] == "published"


@pytest.mark.parametrize("mode, calls", [("batch", 12), ("per-document-batch", 3)])
def test_batches_are_resumed_by_polling_not_resubmitted(
    simulator: AnthropicSimulator, tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch, mode: str, calls: int
) -> None:
    import ctxrag.tasks.context.claude.batches as batches

    corpus = tmp_path / "corpus.json"
    write_corpus(corpus)
    real_collect = batches._collect

    def crash_after_submit(*args, **kwargs):  # the run dies while the batch is processing
        raise KeyboardInterrupt("killed while polling")

    monkeypatch.setattr(batches, "_collect", crash_after_submit)
    with pytest.raises(BaseException, match="killed while polling"):
        run(corpus, home, mode=mode)
    assert simulator.batch_creations == 1
    assert len(list((home / "artifacts" / "batches").glob("*.json"))) == 1  # the batch id was saved first

    monkeypatch.setattr(batches, "_collect", real_collect)
    polls = simulator.batch_polls
    report = run(corpus, home, mode=mode)
    assert simulator.batch_creations == 1 and simulator.batch_polls > polls  # resumed: polled, not submitted again
    assert report["status"] == "published" and report["contextualizer_calls"]["calls"] == calls
    assert not list((home / "artifacts" / "batches").glob("*.json"))
    rows = report["contextualizer_calls"]
    assert rows["cost_usd"] > 0


@pytest.mark.parametrize("gc_between", [False, True], ids=["resume", "gc-then-resume"])
def test_a_sigkilled_run_resumes_without_repeating_a_saved_call(
    simulator: AnthropicSimulator, tmp_path: Path, home: Path, gc_between: bool
) -> None:
    from prefect.settings import PREFECT_API_URL

    corpus = tmp_path / "corpus.json"
    texts = write_corpus(corpus, big_docs=3, chunks_per_doc=6)
    simulator.latency_seconds = 0.25
    env = {**os.environ, "CTXRAG_HOME": str(home), "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    command = [
        sys.executable,
        "-c",
        "from ctxrag.cli import main; main()",
        "index",
        str(corpus),
        "--name",
        "paid",
        "--contextualizer",
        "claude",
        "--concurrency",
        "2",
    ]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while sum(1 for r in simulator.requests if r.usage) < 6 and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    first_run = requested_chunks(simulator, texts)
    saved = contexts_cache(home).read(columns=["doc_id"])
    saved_count = 0 if saved is None else saved.num_rows
    assert 0 < saved_count < len(texts)

    if gc_between:  # the contexts no index references yet were paid for: gc keeps them
        from ctxrag.tasks.gc import collect_garbage

        assert collect_garbage(home)["contexts_kept_paid"] == saved_count
    since = len(simulator.requests)
    simulator.latency_seconds = 0.0
    report = run(corpus, home, concurrency=2)
    second_run = requested_chunks(simulator, texts, since=since)
    repeated = set(first_run) & set(second_run)
    assert report["status"] == "published"
    assert set(first_run) | set(second_run) == set(texts.values())  # every chunk got its context
    assert len(second_run) == len(texts) - saved_count  # exactly the chunks without a saved context
    assert len(repeated) == len(first_run) - saved_count  # repeated: only calls whose result was not saved (in flight)
    assert len(repeated) <= 2  # at most the requests open at once: --concurrency 2, whole run


def test_a_bad_request_fails_its_document_at_once_and_the_key_is_written_nowhere(
    simulator: AnthropicSimulator, tmp_path: Path, home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    corpus = tmp_path / "corpus.json"
    write_corpus(corpus)
    simulator.fail_next(400, count=1, message=f"bad request for key {KEY}")  # even an echoing server
    with pytest.raises(
        DocumentsFailed, match=r"1 of 3 documents failed .*400 invalid_request_error: bad request for key \*\*\*"
    ):
        run(corpus, home, concurrency=1)
    # the fault was injected once: had Prefect retried the task, the document would have succeeded
    assert sum(1 for r in simulator.requests if r.status == 400) == 1
    ledger = Ledger(home).rows()
    assert [row["status"] for row in ledger].count("error") == 1 and len(ledger) == 12

    report = run(corpus, home)
    assert report["contextualizer_calls"]["calls"] == 1  # only the chunk that failed
    leaks = [path for path in home.rglob("*") if path.is_file() and KEY.encode() in path.read_bytes()]
    assert leaks == []
    assert KEY not in caplog.text
