"""ctxrag.storage.elasticsearch's wire contract, without a server: the exact index body, bulk actions and search bodies,
and what the client sends (headers, request order) as captured by a recording stub on 127.0.0.1."""

from __future__ import annotations

import base64
import json
import string
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import elasticsearch
import numpy as np
import pyarrow as pa
import pytest
from bm25s.stopwords import STOPWORDS_EN_PLUS
from elasticsearch import ApiError, BadRequestError

import ctxrag.storage.tokenize
from ctxrag.storage.elasticsearch import (
    STOPWORDS,
    EsBulkFailed,
    EsConfigError,
    EsError,
    EsIndex,
    ServerSideRrfUnavailable,
    bm25_body,
    bulk_actions,
    connect,
    index_body,
    knn_body,
    rrf_body,
)
from ctxrag.storage.errors import UnknownIndexError

ES_ENV = [
    "ELASTICSEARCH_URL",
    "ELASTICSEARCH_API_KEY",
    "ELASTICSEARCH_USERNAME",
    "ELASTICSEARCH_PASSWORD",
    "ELASTICSEARCH_CA_CERTS",
]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ES_ENV:
        monkeypatch.delenv(name, raising=False)


# --- bodies ------------------------------------------------------------------------------------------------------

TEXT = {"type": "text", "analyzer": "ctxrag_code_english", "search_analyzer": "ctxrag_code_english_search"}
EXPECTED_INDEX_BODY = {
    "settings": {
        "index": {"number_of_shards": 1, "queries": {"cache": {"enabled": False}}},
        "similarity": {"default": {"type": "BM25", "k1": 1.2, "b": 0.75}},
        "analysis": {
            "filter": {
                "ctxrag_code_split": {
                    "type": "word_delimiter_graph",
                    "split_on_case_change": True,
                    "split_on_numerics": True,
                    "generate_word_parts": True,
                    "generate_number_parts": True,
                    "preserve_original": True,
                    "catenate_words": False,
                    "catenate_numbers": False,
                    "catenate_all": False,
                    "stem_english_possessive": True,
                },
                "ctxrag_stop": {"type": "stop", "stopwords": STOPWORDS},
                "ctxrag_stemmer": {"type": "stemmer", "language": "porter2"},
            },
            "analyzer": {
                "ctxrag_code_english": {
                    "type": "custom",
                    "tokenizer": "standard",
                    "filter": ["ctxrag_code_split", "flatten_graph", "lowercase", "ctxrag_stop", "ctxrag_stemmer"],
                },
                "ctxrag_code_english_search": {
                    "type": "custom",
                    "tokenizer": "standard",
                    "filter": ["ctxrag_code_split", "lowercase", "ctxrag_stop", "ctxrag_stemmer"],
                },
            },
        },
    },
    "mappings": {
        "dynamic": "strict",
        "properties": {
            "content": TEXT,
            "contextualized_content": TEXT,
            "chunk_id": {"type": "keyword"},
            "doc_id": {"type": "keyword"},
            "chunk_index": {"type": "integer"},
            "row": {"type": "integer"},
            "embedding": {"type": "dense_vector", "dims": 4, "index": True, "similarity": "cosine"},
        },
    },
}


def test_index_body_is_pinned() -> None:
    assert index_body(4) == EXPECTED_INDEX_BODY
    assert json.loads(json.dumps(index_body(4))) == EXPECTED_INDEX_BODY  # plain JSON


def test_stop_words_are_the_embedded_engines_plus_single_letters() -> None:
    assert STOPWORDS == sorted(set(STOPWORDS_EN_PLUS) | set(string.ascii_lowercase))
    assert len(STOPWORDS_EN_PLUS) == 179
    assert set(ctxrag.storage.tokenize.stopwords()) <= set(STOPWORDS)


def rows_table() -> pa.Table:
    return pa.table(
        {
            "chunk_id": ["a-0", "a-1"],
            "doc_id": ["a", "a"],
            "chunk_index": pa.array([0, 1], type=pa.int64()),
            "key": ["k0", "k1"],
            "heading": ["", "Intro"],
            "content": ["first chunk", "second chunk"],
            "context": ["about a", ""],
        }
    )


VECTORS = np.array([[1.0, 0.0, 0.0, 0.5], [0.0, 1.0, 0.25, 0.0]], dtype=np.float32)
EXPECTED_ACTIONS = [
    {
        "_op_type": "index",
        "_index": "ctx-v5",
        "_id": "k0",
        "_source": {
            "content": "first chunk",
            "contextualized_content": "about a",
            "chunk_id": "a-0",
            "doc_id": "a",
            "chunk_index": 0,
            "row": 0,
            "embedding": [1.0, 0.0, 0.0, 0.5],
        },
    },
    {
        "_op_type": "index",
        "_index": "ctx-v5",
        "_id": "k1",
        "_source": {
            "content": "second chunk",
            "contextualized_content": "",
            "chunk_id": "a-1",
            "doc_id": "a",
            "chunk_index": 1,
            "row": 1,
            "embedding": [0.0, 1.0, 0.25, 0.0],
        },
    },
]


def test_bulk_actions_are_pinned() -> None:
    assert list(bulk_actions("ctx-v5", rows_table(), VECTORS)) == EXPECTED_ACTIONS
    assert list(bulk_actions("ctx-v5", rows_table().to_pylist(), VECTORS.tolist())) == EXPECTED_ACTIONS


def test_bulk_actions_refuse_mismatched_input() -> None:
    with pytest.raises(ValueError, match="2 chunk rows but 1 vectors"):
        list(bulk_actions("ctx-v5", rows_table(), VECTORS[:1]))
    with pytest.raises(ValueError, match="lacks columns \\['context'\\]"):
        list(bulk_actions("ctx-v5", rows_table().drop_columns(["context"]), VECTORS))


def test_search_bodies_are_pinned() -> None:
    fields = ["content", "contextualized_content"]
    multi_match = {"multi_match": {"query": "diff executor", "fields": fields, "type": "best_fields"}}
    assert bm25_body("diff executor", 10) == {
        "query": multi_match,
        "size": 10,
        "_source": False,
        "docvalue_fields": ["row"],
        "sort": [{"_score": {"order": "desc"}}, {"row": {"order": "asc"}}],
        "track_total_hits": False,
    }
    assert knn_body([1, 0.5], 10) == {
        "knn": {"field": "embedding", "query_vector": [1.0, 0.5], "k": 10, "num_candidates": 100},
        "size": 10,
        "_source": False,
        "docvalue_fields": ["row"],
    }
    assert knn_body([1, 0.5], 80, num_candidates=500)["knn"]["num_candidates"] == 500
    assert knn_body([1, 0.5], 80)["knn"]["num_candidates"] == 160
    assert rrf_body("diff executor", [1, 0.5], 10) == {
        "retriever": {
            "rrf": {
                "retrievers": [
                    {"standard": {"query": multi_match}},
                    {"knn": {"field": "embedding", "query_vector": [1.0, 0.5], "k": 150, "num_candidates": 300}},
                ],
                "rank_window_size": 150,
                "rank_constant": 60,
            }
        },
        "size": 10,
        "_source": False,
        "docvalue_fields": ["row"],
    }
    assert rrf_body("q", [1.0], 200)["retriever"]["rrf"]["rank_window_size"] == 200


# --- a recording stub --------------------------------------------------------------------------------------------


@dataclass
class Sent:
    method: str
    path: str  # with the query string
    headers: dict[str, str]  # lowercase keys
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def ndjson(self) -> list[Any]:
        return [json.loads(line) for line in self.body.decode().splitlines() if line.strip()]

    @property
    def route(self) -> tuple[str, str]:
        return self.method, self.path.split("?")[0]


Handler = Callable[[Sent], tuple[int, Any]]


class RecordingStub:
    """Answers like Elasticsearch (product header included) from a handler, and records every request."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.sent: list[Sent] = []
        stub = self

        class Handle(BaseHTTPRequestHandler):
            def _any(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                request = Sent(
                    self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, self.rfile.read(length)
                )
                stub.sent.append(request)
                status, body = stub.handler(request)
                payload = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("X-Elastic-Product", "Elasticsearch")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _any

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handle)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def routes(self) -> list[tuple[str, str]]:
        return [request.route for request in self.sent]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub() -> Iterator[RecordingStub]:
    server = RecordingStub(lambda request: (200, {}))
    yield server
    server.close()


def error(status: int, kind: str, reason: str) -> tuple[int, Any]:
    return status, {
        "error": {"root_cause": [{"type": kind, "reason": reason}], "type": kind, "reason": reason},
        "status": status,
    }


INFO = {"version": {"number": "8.15.3"}, "tagline": "You Know, for Search"}


def test_connect_pins_compatible_with_8_and_sends_the_api_key(
    stub: RecordingStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ELASTICSEARCH_URL", stub.url)
    monkeypatch.setenv("ELASTICSEARCH_API_KEY", "key-id:key-secret")
    stub.handler = lambda request: (200, {"errors": False, "items": []} if "_bulk" in request.path else INFO)
    client = connect()
    client.info()
    client.bulk(operations=[{"index": {"_index": "x", "_id": "1"}}, {"a": 1}])
    info, bulk = stub.sent
    assert info.headers["accept"] == "application/vnd.elasticsearch+json; compatible-with=8"
    assert bulk.headers["accept"] == "application/vnd.elasticsearch+json; compatible-with=8"
    assert bulk.headers["content-type"] == "application/vnd.elasticsearch+x-ndjson; compatible-with=8"
    assert info.headers["authorization"] == "ApiKey " + base64.b64encode(b"key-id:key-secret").decode()


def test_connect_can_send_the_clients_own_compatibility(stub: RecordingStub) -> None:
    stub.handler = lambda request: (200, INFO)
    connect(stub.url, compatible_with=None).info()
    major = elasticsearch.__versionstr__.split(".")[0]
    assert stub.sent[0].headers["accept"] == f"application/vnd.elasticsearch+json; compatible-with={major}"


def test_connect_basic_auth_and_explicit_url_wins(stub: RecordingStub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELASTICSEARCH_URL", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("ELASTICSEARCH_USERNAME", "elastic")
    monkeypatch.setenv("ELASTICSEARCH_PASSWORD", "pw-4711-secret")
    stub.handler = lambda request: (200, INFO)
    connect(stub.url).info()
    assert stub.sent[0].headers["authorization"] == "Basic " + base64.b64encode(b"elastic:pw-4711-secret").decode()


def test_connect_configuration_errors_are_clear_and_redacted(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    with pytest.raises(EsConfigError, match="set ELASTICSEARCH_URL"):
        connect()
    with pytest.raises(EsConfigError, match="http\\(s\\) URL") as caught:
        connect("ftp://user:Hunter2-pw@example.invalid")
    assert "Hunter2-pw" not in str(caught.value) and "***" in str(caught.value)
    monkeypatch.setenv("ELASTICSEARCH_PASSWORD", "only-a-password")
    with pytest.raises(EsConfigError, match="set both ELASTICSEARCH_USERNAME and ELASTICSEARCH_PASSWORD"):
        connect("http://127.0.0.1:9")
    monkeypatch.delenv("ELASTICSEARCH_PASSWORD")
    monkeypatch.setenv("ELASTICSEARCH_CA_CERTS", str(tmp_path / "missing.pem"))
    with pytest.raises(EsConfigError, match="not a file"):
        connect("https://127.0.0.1:9")


# --- the build sequence ------------------------------------------------------------------------------------------


def build_handler(count: int = 2, bulk_errors: dict[str, tuple[int, Any]] | None = None) -> Handler:
    """A cluster where alias ``ctx`` points at ``ctx-v4``; ``bulk_errors`` maps an _id to (status, error)."""

    def handle(request: Sent) -> tuple[int, Any]:
        method, path = request.route
        if method == "HEAD":
            return (200, None) if path in ("/ctx", "/_alias/ctx") else (404, None)
        if (method, path) == ("PUT", "/ctx-v5"):
            return 200, {"acknowledged": True, "index": "ctx-v5", "shards_acknowledged": True}
        if path == "/_bulk":
            items = []
            for line in request.ndjson()[::2]:
                doc_id = line["index"]["_id"]
                if bulk_errors and doc_id in bulk_errors:
                    status, reason = bulk_errors[doc_id]
                    items.append({"index": {"_index": "ctx-v5", "_id": doc_id, "status": status, "error": reason}})
                else:
                    items.append({"index": {"_index": "ctx-v5", "_id": doc_id, "status": 201, "result": "created"}})
            return 200, {"errors": bool(bulk_errors), "took": 1, "items": items}
        if path == "/ctx-v5/_refresh":
            return 200, {"_shards": {"total": 1, "successful": 1, "failed": 0}}
        if path == "/ctx-v5/_count":
            return 200, {"count": count}
        if (method, path) == ("GET", "/_alias/ctx"):
            return 200, {"ctx-v4": {"aliases": {"ctx": {}}}}
        if path in ("/_aliases", "/ctx-v4", "/ctx-v5"):
            return 200, {"acknowledged": True}
        return error(400, "unexpected", f"{method} {path}")

    return handle


def test_build_creates_bulks_refreshes_counts_then_switches_the_alias_in_one_call(stub: RecordingStub) -> None:
    stub.handler = build_handler()
    assert EsIndex(connect(stub.url), "ctx").build(rows_table(), VECTORS, version=5) == "ctx-v5"
    assert stub.routes() == [
        ("HEAD", "/ctx"),
        ("HEAD", "/_alias/ctx"),
        ("HEAD", "/ctx-v5"),
        ("PUT", "/ctx-v5"),
        ("PUT", "/_bulk"),
        ("POST", "/ctx-v5/_refresh"),
        ("POST", "/ctx-v5/_count"),
        ("GET", "/_alias/ctx"),
        ("POST", "/_aliases"),
        ("DELETE", "/ctx-v4"),
    ]
    by_route = {request.route: request for request in stub.sent}
    assert by_route[("PUT", "/ctx-v5")].json() == index_body(4)
    lines = by_route[("PUT", "/_bulk")].ndjson()
    assert lines[0::2] == [{"index": {"_index": "ctx-v5", "_id": "k0"}}, {"index": {"_index": "ctx-v5", "_id": "k1"}}]
    assert lines[1::2] == [action["_source"] for action in EXPECTED_ACTIONS]
    assert by_route[("POST", "/_aliases")].json() == {
        "actions": [
            {"remove": {"index": "ctx-v4", "alias": "ctx", "must_exist": True}},
            {"add": {"index": "ctx-v5", "alias": "ctx"}},
        ]
    }


def test_bulk_is_sent_in_chunks(stub: RecordingStub) -> None:
    stub.handler = build_handler()
    EsIndex(connect(stub.url), "ctx").build(rows_table(), VECTORS, version=5, chunk_size=1)
    assert stub.routes().count(("PUT", "/_bulk")) == 2


def test_failed_documents_are_listed_the_new_index_dropped_and_the_alias_untouched(stub: RecordingStub) -> None:
    stub.handler = build_handler(
        bulk_errors={"k1": (400, {"type": "document_parsing_exception", "reason": "bad vector"})}
    )
    with pytest.raises(EsBulkFailed) as caught:
        EsIndex(connect(stub.url), "ctx").build(rows_table(), VECTORS, version=5)
    [failure] = caught.value.failures
    assert (failure.doc_id, failure.chunk_id, failure.status) == ("k1", "a-1", 400)
    assert failure.reason == "document_parsing_exception: bad vector"
    assert "1 of 2 documents failed to index into 'ctx-v5'" in str(caught.value)
    assert "chunk 'a-1' (_id k1): document_parsing_exception: bad vector" in str(caught.value)
    assert caught.value.retryable is False
    routes = stub.routes()
    assert routes[-1] == ("DELETE", "/ctx-v5")
    assert ("POST", "/_aliases") not in routes and ("DELETE", "/ctx-v4") not in routes


def test_rejected_by_overload_is_retryable(stub: RecordingStub) -> None:
    stub.handler = build_handler(bulk_errors={"k0": (503, {"type": "unavailable_shards_exception", "reason": "busy"})})
    with pytest.raises(EsBulkFailed) as caught:
        EsIndex(connect(stub.url), "ctx").build(rows_table(), VECTORS, version=5)
    assert caught.value.retryable is True


def test_a_failed_bulk_request_abandons_the_build(stub: RecordingStub) -> None:
    handle = build_handler()
    stub.handler = lambda request: error(500, "internal_error", "boom") if request.path == "/_bulk" else handle(request)
    with pytest.raises(ApiError):
        EsIndex(connect(stub.url), "ctx").build(rows_table(), VECTORS, version=5, chunk_size=1)
    routes = stub.routes()
    assert routes.count(("PUT", "/_bulk")) == 1  # the first chunk's failure stops the build
    assert routes[-1] == ("DELETE", "/ctx-v5") and ("POST", "/_aliases") not in routes


def test_a_count_mismatch_fails_the_build(stub: RecordingStub) -> None:
    stub.handler = build_handler(count=1)
    with pytest.raises(EsError, match="holds 1 documents after the build, expected 2"):
        EsIndex(connect(stub.url), "ctx").build(rows_table(), VECTORS, version=5)
    assert stub.routes()[-1] == ("DELETE", "/ctx-v5")
    assert ("POST", "/_aliases") not in stub.routes()


def test_duplicate_keys_are_refused_before_any_request(stub: RecordingStub) -> None:
    rows = rows_table().to_pylist()
    rows[1]["key"] = "k0"
    with pytest.raises(ValueError, match="duplicate chunk keys"):
        EsIndex(connect(stub.url), "ctx").build(rows, VECTORS, version=5)
    assert stub.sent == []


def test_invalid_names_are_refused() -> None:
    with pytest.raises(ValueError, match="invalid index name"):
        EsIndex(connect("http://127.0.0.1:9"), "Bad Name")


# --- searches ----------------------------------------------------------------------------------------------------


def hits(*pairs: tuple[int, float]) -> dict[str, Any]:
    return {"hits": {"hits": [{"_id": f"k{row}", "_score": score, "fields": {"row": [row]}} for row, score in pairs]}}


def test_bm25_sends_the_pinned_body_to_the_alias_and_orders_ties_by_row(stub: RecordingStub) -> None:
    stub.handler = lambda request: (200, hits((7, 2.5), (9, 1.0), (3, 1.0)))
    assert EsIndex(connect(stub.url), "ctx").bm25("diff executor", 3) == [(7, 2.5), (3, 1.0), (9, 1.0)]
    [request] = stub.sent
    assert request.route == ("POST", "/ctx/_search")
    assert request.json() == bm25_body("diff executor", 3)


def test_knn_sends_the_pinned_body_and_returns_cosine(stub: RecordingStub) -> None:
    stub.handler = lambda request: (200, hits((4, 1.0), (2, 0.75), (8, 0.5)))
    assert EsIndex(connect(stub.url), "ctx").knn([0.5, 0.5], 3, num_candidates=50) == [(4, 1.0), (2, 0.5), (8, 0.0)]
    assert stub.sent[0].json() == knn_body([0.5, 0.5], 3, 50)


def test_rrf_sends_the_retriever(stub: RecordingStub) -> None:
    stub.handler = lambda request: (200, hits((1, 2 / 61), (5, 1 / 61)))
    assert EsIndex(connect(stub.url), "ctx").rrf_server_side("q", [1.0, 0.0], 2) == [(1, 2 / 61), (5, 1 / 61)]
    assert stub.sent[0].json() == rrf_body("q", [1.0, 0.0], 2)


@pytest.mark.parametrize(
    "reply",
    [
        error(400, "x_content_parse_exception", "[1:2] unknown field [retriever]"),
        error(403, "security_exception", "current license is non-compliant for [Reciprocal Rank Fusion (RRF)]"),
    ],
)
def test_rrf_rejected_by_the_cluster_is_a_clear_error(stub: RecordingStub, reply: tuple[int, Any]) -> None:
    stub.handler = lambda request: reply if request.path.startswith("/ctx/_search") else (200, INFO)
    with pytest.raises(ServerSideRrfUnavailable) as caught:
        EsIndex(connect(stub.url), "ctx").rrf_server_side("q", [1.0], 3)
    message = str(caught.value)
    assert "cluster (version 8.15.3) does not support the rrf retriever" in message
    assert reply[1]["error"]["reason"] in message


def test_other_search_errors_are_not_taken_for_a_missing_rrf(stub: RecordingStub) -> None:
    stub.handler = lambda request: error(400, "search_phase_execution_exception", "all shards failed")
    with pytest.raises(BadRequestError):
        EsIndex(connect(stub.url), "ctx").rrf_server_side("q", [1.0], 3)


def test_searching_a_missing_index_names_it(stub: RecordingStub) -> None:
    stub.handler = lambda request: error(404, "index_not_found_exception", "no such index [ctx]")
    with pytest.raises(UnknownIndexError, match="no Elasticsearch index named 'ctx'"):
        EsIndex(connect(stub.url), "ctx").bm25("q", 3)


def test_empty_requests_send_nothing(stub: RecordingStub) -> None:
    index = EsIndex(connect(stub.url), "ctx")
    assert index.bm25("  ", 5) == [] and index.bm25("q", 0) == []
    assert index.knn([1.0], 0) == [] and index.rrf_server_side("q", [1.0], 0) == []
    assert stub.sent == []
