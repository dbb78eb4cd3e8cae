"""ctxrag.storage.elasticsearch against a real Elasticsearch cluster (8.x from 8.4, or 9.x): the same basics as the emulator tests.

Set ``CTXRAG_TEST_ES_CLUSTER_URL`` (its own variable, so the emulator tests never reach a cluster by accident); the
credentials come from the usual ``ELASTICSEARCH_API_KEY`` or ``ELASTICSEARCH_USERNAME``/``ELASTICSEARCH_PASSWORD``
and ``ELASTICSEARCH_CA_CERTS``. Every index made here is named ``ctxrag-test-<random>`` and deleted afterwards.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator

import numpy as np
import pytest
from elasticsearch import Elasticsearch

from ctxrag.storage.elasticsearch import EsBulkFailed, EsIndex, ServerSideRrfUnavailable, connect
from tests.helpers import CHUNKS, chunk_table, chunk_vectors, row_of

CLUSTER_URL = os.environ.get("CTXRAG_TEST_ES_CLUSTER_URL", "").strip()

pytestmark = pytest.mark.skipif(
    not CLUSTER_URL, reason="set CTXRAG_TEST_ES_CLUSTER_URL to run the tests against a real Elasticsearch cluster"
)


@pytest.fixture(scope="module")
def client() -> Iterator[Elasticsearch]:
    es = connect(CLUSTER_URL)
    yield es
    es.close()


@pytest.fixture(scope="module")
def index(client: Elasticsearch) -> Iterator[EsIndex]:
    made = EsIndex(client, f"ctxrag-test-{uuid.uuid4().hex[:8]}")
    made.build(chunk_table(), chunk_vectors(), version=1)
    yield made
    made.delete()


def test_build_and_count(client: Elasticsearch, index: EsIndex) -> None:
    assert index.live_index() == f"{index.name}-v1"
    assert client.count(index=index.name)["count"] == len(CHUNKS)


def test_bm25_and_code_aware_analysis(index: EsIndex) -> None:
    assert index.bm25("pasta with tomatoes", 5)[0][0] == row_of("pasta")
    assert index.bm25("concerts", 3)[0][0] == row_of("violin")
    assert index.bm25("diff executor", 3)[0][0] == row_of("DiffExecutor")
    assert index.bm25("retry policy", 3)[0][0] == row_of("RetryPolicy")
    assert index.bm25("zeppelin", 3) == []


def test_knn_returns_the_nearest_vector(index: EsIndex) -> None:
    vectors = chunk_vectors()
    hits = index.knn(vectors[row_of("Saturn")], 3)
    assert hits[0][0] == row_of("Saturn") and hits[0][1] == pytest.approx(1.0, abs=0.03)


def test_server_side_rrf_fuses_or_says_it_cannot(index: EsIndex) -> None:
    target = row_of("Espresso")
    try:
        hits = index.rrf_server_side("espresso coffee", chunk_vectors()[target], 5)
    except ServerSideRrfUnavailable as error:
        assert "does not support the rrf retriever" in str(error)
        return
    assert hits[0][0] == target


def test_alias_switch_is_atomic_and_a_failed_build_keeps_it(client: Elasticsearch, index: EsIndex) -> None:
    reader_client = connect(CLUSTER_URL)
    reader = EsIndex(reader_client, index.name)
    problems: list[str] = []
    done = threading.Event()

    def read() -> None:
        deadline = time.monotonic() + 60
        for _ in range(2000):  # bounded; stops by itself
            if done.is_set() or time.monotonic() > deadline:
                return
            try:
                if not reader.bm25("glaciers valleys", 3):
                    problems.append("empty result")
            except Exception as error:
                problems.append(repr(error))

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    try:
        index.build(chunk_table("-2"), chunk_vectors(), version=2)
    finally:
        done.set()
        thread.join(timeout=70)
        reader_client.close()
    assert problems == []
    assert index.live_index() == f"{index.name}-v2"
    assert not client.indices.exists(index=f"{index.name}-v1")

    vectors = [list(vector) for vector in chunk_vectors()]
    vectors[3] = vectors[3][:5]
    with pytest.raises(EsBulkFailed) as caught:
        index.build(chunk_table("-3"), vectors, version=3)
    assert [failure.chunk_id for failure in caught.value.failures] == ["doc0-c3-3"]
    assert index.live_index() == f"{index.name}-v2"
    assert not client.indices.exists(index=f"{index.name}-v3")
    assert np.isfinite(index.bm25("pasta", 1)[0][1])
