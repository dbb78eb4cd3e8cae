"""Elasticsearch as a ctxrag index backend: the connection (``connection``), the request bodies (``bodies``) and
one index's versions behind an alias (``index``). Supported servers: 8.x from 8.4 and 9.x (see docs/decisions.md)."""

from ctxrag.storage.elasticsearch.bodies import (
    STOPWORDS,
    bm25_body,
    bulk_actions,
    default_num_candidates,
    index_body,
    knn_body,
    rrf_body,
)
from ctxrag.storage.elasticsearch.connection import EsConfigError, EsError, connect, describe_error
from ctxrag.storage.elasticsearch.index import BulkFailure, EsBulkFailed, EsIndex, ServerSideRrfUnavailable

__all__ = [
    "STOPWORDS",
    "BulkFailure",
    "EsBulkFailed",
    "EsConfigError",
    "EsError",
    "EsIndex",
    "ServerSideRrfUnavailable",
    "bm25_body",
    "bulk_actions",
    "connect",
    "default_num_candidates",
    "describe_error",
    "index_body",
    "knn_body",
    "rrf_body",
]
