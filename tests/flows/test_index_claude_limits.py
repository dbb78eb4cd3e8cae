"""Paid runs at the API's limits, against the Anthropic simulator (test equipment, not the API).

What the simulator measures: requests open at once never exceed ``--concurrency`` across all documents; a 429 storm
is ridden out with attempts = calls + 429s; the API's rate-limit headers are obeyed before any 429; a call whose
retries are spent is not retried again by Prefect; every request the simulator saw is in the ledger.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxrag.storage.ledger import Ledger
from ctxrag.tasks.stages.contextualize import DocumentsFailed
from tests.equipment.anthropic_simulator import AnthropicSimulator
from tests.helpers import run, write_corpus

pytestmark = pytest.mark.usefixtures("prefect_harness")


def messages(simulator: AnthropicSimulator) -> list:
    return [request for request in simulator.requests if request.path == "/v1/messages"]


def ledger_requests(home: Path) -> int:
    return sum(row["attempts"] or 1 for row in Ledger(home).rows())


def test_requests_in_flight_never_exceed_the_run_wide_concurrency(
    anthropic_simulator: AnthropicSimulator, tmp_path: Path, home: Path
) -> None:
    corpus = tmp_path / "corpus.json"
    texts = write_corpus(corpus, big_docs=6, chunks_per_doc=4)  # 7 documents run as parallel tasks
    anthropic_simulator.latency_seconds = 0.1
    report = run(corpus, home, concurrency=3)
    assert report["status"] == "published" and report["contextualizer_calls"]["calls"] == len(texts)
    assert anthropic_simulator.peak_in_flight <= 3  # measured at the simulator, over every document's calls
    assert anthropic_simulator.peak_in_flight >= 2  # and the calls do overlap
    assert ledger_requests(home) == len(messages(anthropic_simulator))


def test_a_429_storm_is_ridden_out_with_one_attempt_per_429(
    anthropic_simulator: AnthropicSimulator, tmp_path: Path, home: Path
) -> None:
    corpus = tmp_path / "corpus.json"
    texts = write_corpus(corpus, big_docs=3, chunks_per_doc=4)
    anthropic_simulator.fail_next(429, count=150, retry_after=0.1)
    report = run(corpus, home, concurrency=8)
    statuses = [request.status for request in messages(anthropic_simulator)]
    assert report["status"] == "published"
    assert statuses.count(429) == 150 and statuses.count(200) == len(texts)  # every context stored, each paid once
    assert len(statuses) == len(texts) + 150  # attempts = calls + 429s: no other layer added any
    assert ledger_requests(home) == len(statuses)


def test_the_apis_rate_limit_headers_are_obeyed_before_any_429(
    anthropic_simulator: AnthropicSimulator, tmp_path: Path, home: Path
) -> None:
    corpus = tmp_path / "corpus.json"
    texts = write_corpus(corpus, big_docs=3, chunks_per_doc=4)  # 16 calls
    anthropic_simulator.limit_requests(5, window_seconds=0.5)
    report = run(corpus, home, concurrency=4)
    statuses = [request.status for request in messages(anthropic_simulator)]
    assert report["status"] == "published"
    assert statuses.count(429) == 0 and statuses.count(200) == len(texts)


def test_a_call_whose_retries_are_spent_is_not_retried_by_prefect(
    anthropic_simulator: AnthropicSimulator, tmp_path: Path, home: Path
) -> None:
    corpus = tmp_path / "corpus.json"
    write_corpus(corpus, big_docs=1, chunks_per_doc=1)  # two documents of one chunk
    anthropic_simulator.fail_next(500, count=1000, retry_after=0)
    with pytest.raises(DocumentsFailed, match="2 of 2 documents failed"):
        run(corpus, home, concurrency=1, retry_attempts=3)
    assert len(messages(anthropic_simulator)) == 2 * 3  # 3 attempts per call; Prefect's task retries add none
    rows = Ledger(home).rows()
    assert [row["status"] for row in rows] == ["error", "error"] and ledger_requests(home) == 6
