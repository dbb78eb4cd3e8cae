"""ctxrag.storage.elasticsearch against the noida-db Elasticsearch emulator: build, search, alias switch, failures.

The emulator answers the Elasticsearch REST API with Lucene-style BM25; see tests/equipment/es_emulator.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest
from elasticsearch import Elasticsearch

from ctxrag.storage.elasticsearch import EsBulkFailed, EsError, EsIndex, ServerSideRrfUnavailable, connect
from ctxrag.storage.errors import UnknownIndexError
from tests.helpers import CHUNKS, DIMS, chunk_table, chunk_vectors, row_of


@pytest.fixture(scope="module")
def client(es_emulator_url: str) -> Iterator[Elasticsearch]:
    es = connect(es_emulator_url, request_timeout=10)
    yield es
    es.close()


@pytest.fixture(scope="module")
def built(client: Elasticsearch) -> EsIndex:
    index = EsIndex(client, "emu-basics")
    index.delete()
    index.build(chunk_table(), chunk_vectors(), version=1)
    return index


def test_build_points_the_alias_at_the_new_version(client: Elasticsearch, built: EsIndex) -> None:
    assert built.live_index() == "emu-basics-v1"
    assert client.count(index="emu-basics")["count"] == len(CHUNKS)
    mapping = client.indices.get_mapping(index="emu-basics-v1")["emu-basics-v1"]["mappings"]["properties"]
    assert mapping["embedding"]["dims"] == DIMS and mapping["row"] == {"type": "integer"}


def test_bm25_finds_the_obvious_chunk(built: EsIndex) -> None:
    hits = built.bm25("pasta with tomatoes", 5)
    assert hits[0][0] == row_of("pasta")
    assert all(score > 0 for _, score in hits)
    assert [score for _, score in hits] == sorted((score for _, score in hits), reverse=True)


def test_bm25_searches_the_context_field_and_stems(built: EsIndex) -> None:
    assert built.bm25("concerts", 3)[0][0] == row_of("violin")  # "Concert" is only in the context
    assert built.bm25("eruption", 3)[0][0] == row_of("Volcanic")  # eruptions -> eruption


def test_bm25_without_a_match_is_empty(built: EsIndex) -> None:
    assert built.bm25("zeppelin", 5) == []
    assert built.bm25("the and of", 5) == []  # stop words only
    assert built.bm25("   ", 5) == []


def test_code_aware_analysis_splits_identifiers(built: EsIndex) -> None:
    # The chunk has only "DiffExecutor": word_delimiter_graph splits it at the case change, and keeps it whole.
    assert built.bm25("diff executor", 3)[0][0] == row_of("DiffExecutor")
    assert built.bm25("DiffExecutor", 3)[0][0] == row_of("DiffExecutor")
    assert built.bm25("http request parsing", 3)[0][0] == row_of("parse_http_request")
    assert built.bm25("retry policy", 3)[0][0] == row_of("RetryPolicy")


def test_knn_returns_the_nearest_vector(built: EsIndex) -> None:
    vectors = chunk_vectors()
    target = row_of("Saturn")
    query = vectors[target] + 0.05 * vectors[0]
    hits = built.knn(query, 3)
    assert hits[0][0] == target
    assert len(hits) == 3
    assert hits[0][1] == pytest.approx(float(query @ vectors[target] / np.linalg.norm(query)), abs=0.03)  # cosine


def test_server_side_rrf_fuses_or_says_it_cannot(built: EsIndex) -> None:
    vectors = chunk_vectors()
    target = row_of("Espresso")
    try:
        hits = built.rrf_server_side("espresso coffee", vectors[target], 5)
    except ServerSideRrfUnavailable as error:  # a cluster without the rrf retriever
        assert "does not support the rrf retriever" in str(error)
        return
    assert hits[0][0] == target  # first in both rankings
    assert hits[0][1] == pytest.approx(2 / 61, rel=1e-3)
    assert len(hits) == 5


def test_alias_switch_is_atomic_for_a_reader(client: Elasticsearch, es_emulator_url: str) -> None:
    index = EsIndex(client, "emu-switch")
    index.delete()
    index.build(chunk_table(), chunk_vectors(), version=1)
    reader_client = connect(es_emulator_url, request_timeout=10)
    reader = EsIndex(reader_client, "emu-switch")
    problems: list[str] = []
    during_builds = 0
    writing = threading.Event()
    writing.set()

    def read() -> None:
        nonlocal during_builds
        deadline = time.monotonic() + 20
        for _ in range(5000):  # bounded in count and time; stops by itself once the writer is done
            if not writing.is_set() or time.monotonic() > deadline:
                return
            try:
                hits = reader.bm25("glaciers valleys", 3)
            except Exception as error:
                problems.append(repr(error))
                continue
            during_builds += 1
            if not hits or hits[0][0] != row_of("Glaciers"):
                problems.append(f"unexpected result {hits}")

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    try:
        for version in range(2, 8):
            index.build(chunk_table(f"-{version}"), chunk_vectors(), version=version)
    finally:
        writing.clear()
        thread.join(timeout=30)
        reader_client.close()
    assert not thread.is_alive()
    assert problems == []
    assert during_builds >= 10, during_builds  # the reader really overlapped the switches
    assert index.live_index() == "emu-switch-v7"
    assert not any(client.indices.exists(index=f"emu-switch-v{version}") for version in range(1, 7))
    assert index.delete() == ["emu-switch-v7"]


def test_failed_bulk_names_each_document_and_keeps_the_alias(client: Elasticsearch, built: EsIndex) -> None:
    vectors = [list(vector) for vector in chunk_vectors()]
    vectors[3] = vectors[3][:5]  # wrong dimension
    vectors[11] = vectors[11] + [0.0]
    with pytest.raises(EsBulkFailed) as caught:
        built.build(chunk_table("-bad"), vectors, version=99)
    failed = caught.value.failures
    assert [(f.doc_id, f.chunk_id, f.status) for f in failed] == [
        ("key03-bad", "doc0-c3-bad", 400),
        ("key11-bad", "doc2-c1-bad", 400),
    ]
    assert all("dimension" in f.reason for f in failed)
    assert "2 of 20 documents failed" in str(caught.value) and "doc2-c1-bad" in str(caught.value)
    assert caught.value.retryable is False
    assert built.live_index() == "emu-basics-v1"
    assert not client.indices.exists(index="emu-basics-v99")
    assert built.bm25("pasta", 1)[0][0] == row_of("pasta")


def test_rebuild_under_a_concrete_index_of_the_same_name_is_refused(client: Elasticsearch) -> None:
    client.indices.create(index="emu-concrete")
    try:
        with pytest.raises(EsError, match="concrete Elasticsearch index"):
            EsIndex(client, "emu-concrete").build(chunk_table(), chunk_vectors(), version=1)
        assert not client.indices.exists(index="emu-concrete-v1")
    finally:
        client.indices.delete(index="emu-concrete")


def test_delete_removes_alias_and_versions_and_search_then_names_the_index(client: Elasticsearch) -> None:
    index = EsIndex(client, "emu-delete")
    index.delete()
    index.build(chunk_table(), chunk_vectors(), version=1)
    client.indices.create(index="emu-delete-v7")  # a leftover of a build that died
    assert index.delete() == ["emu-delete-v1", "emu-delete-v7"]
    assert index.live_index() is None
    assert index.delete() == []
    with pytest.raises(UnknownIndexError, match="emu-delete"):
        index.bm25("pasta", 3)
