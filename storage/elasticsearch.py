"""Elasticsearch as a ctxrag index backend: versioned physical indexes behind one alias.

Layout: every build writes a new physical index ``<name>-v<version>`` (``version`` an integer, by default the
build's ``time.time_ns()``), bulk-indexes the chunk rows into it, refreshes it and checks its document count; only
then is the alias ``<name>`` switched to it in one ``_aliases`` call (``remove`` from the old index, with
``must_exist``, and ``add`` to the new one, in the same ``actions`` list), and the old physical index is deleted.
Readers always query the alias, so they see the old version or the new one, never a half-built one. A failed
build deletes its own physical index and never touches the alias. Builds of one name must not run concurrently
(ctxrag holds its per-index build lock); ``must_exist`` makes the losing side of such a race fail, not double-alias.

Documents: ``_id`` is the chunk's content key (so re-sending a chunk upserts it); ``row`` is the chunk's row in
ctxrag's chunk table, which every search returns, so hits map back to rows. ``content`` is the chunk,
``contextualized_content`` its generated context (the cookbook's split), ``embedding`` its vector.

Analysis: both text fields use ``ctxrag_code_english``, an English analyzer rebuilt to match the embedded engine
(storage.tokenize): standard tokenizer; ``word_delimiter_graph`` splitting identifiers at case changes, digits
and ``_`` while keeping the whole word (``preserve_original``, no catenation); lowercase; the same 179 English stop
words as the embedded BM25 plus the single letters it drops; Snowball English stemming (``porter2``, which is
PyStemmer's "english"). The index-time analyzer adds ``flatten_graph`` (as Elasticsearch advises for graph filters
at index time); the search analyzer keeps the graph. Similarity is BM25 (k1 1.2, b 0.75, as the embedded index).

Client compatibility: the official 9.x Python client marks every request ``Accept`` / ``Content-Type:
application/vnd.elasticsearch+json; compatible-with=9`` (its own major version), which Elasticsearch 8.x servers
reject with ``media_type_header_exception``. The 9.x client has no switch for this: there is no
``ELASTIC_CLIENT_APIVERSIONING`` in it, and ``headers=`` given to the client or a call are overridden by each API's
own accept/content-type and then rewritten to ``compatible-with=9``. ``connect`` therefore pins
``compatible-with=8`` at the HTTP node (a ``node_class`` that rewrites the two headers just before sending), which
8.x servers take natively and 9.x servers accept through REST API compatibility. Supported servers: Elasticsearch
8.x from 8.4 (the ``knn`` search option) and 9.x; the server-side ``rrf`` retriever needs 8.14+ and a license that
includes it, else ``rrf_server_side`` raises ``ServerSideRrfUnavailable``. ``connect(compatible_with=None)`` sends
the client's own header instead (9.x servers only).

Secrets (API key, password, a password in the URL) are registered with ``tasks.secrets.remember`` and every
message this module writes goes through ``tasks.secrets.redact``.
"""

from __future__ import annotations

import logging
import os
import re
import string
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeAlias
from urllib.parse import unquote, urlsplit

import numpy as np
import pyarrow as pa
from bm25s.stopwords import STOPWORDS_EN_PLUS
from elastic_transport import HttpHeaders, TransportError, Urllib3HttpNode
from elastic_transport.client_utils import DEFAULT, DefaultType
from elasticsearch import ApiError, Elasticsearch, NotFoundError
from elasticsearch.helpers import streaming_bulk

from storage.errors import UserError
from storage.index_store import UnknownIndexError, validate_name
from tasks.secrets import redact, remember

logger = logging.getLogger(__name__)

ENV_URL = "ELASTICSEARCH_URL"
ENV_API_KEY = "ELASTICSEARCH_API_KEY"
ENV_USERNAME = "ELASTICSEARCH_USERNAME"
ENV_PASSWORD = "ELASTICSEARCH_PASSWORD"
ENV_CA_CERTS = "ELASTICSEARCH_CA_CERTS"

COMPATIBLE_WITH = 8  # see the module docstring
BULK_CHUNK_SIZE = 500
RRF_RANK_CONSTANT = 60  # tasks.search.RRF_K
RRF_WINDOW = 150  # tasks.search.WEIGHTED_CANDIDATES: how deep each retriever ranks before fusion
TEXT_FIELDS = ["content", "contextualized_content"]
VECTOR_FIELD = "embedding"
INDEX_ANALYZER = "ctxrag_code_english"
SEARCH_ANALYZER = "ctxrag_code_english_search"
STOPWORDS = sorted(set(STOPWORDS_EN_PLUS) | set(string.ascii_lowercase))
ROW_COLUMNS = ("key", "chunk_id", "doc_id", "chunk_index", "content", "context")

Rows: TypeAlias = "pa.Table | Sequence[Mapping[str, Any]]"  # ctxrag's chunk table (tasks.indexing.plan_index)
Vectors: TypeAlias = "np.ndarray | Sequence[Sequence[float]]"
Ranking: TypeAlias = list[tuple[int, float]]


class EsError(UserError, RuntimeError):
    """An Elasticsearch backend operation that failed; the message is redacted."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


class EsConfigError(UserError, ValueError):
    """The connection settings are missing or wrong (not worth retrying)."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


@dataclass(frozen=True)
class BulkFailure:
    """One document the bulk request did not index."""

    doc_id: str  # the document's _id (the chunk key)
    chunk_id: str
    status: int | None  # HTTP status of the item; None for a transport error
    reason: str


class EsBulkFailed(EsError):
    """Some documents were not indexed; ``failures`` lists every one of them with its reason."""

    MAX_LISTED = 50

    def __init__(self, index: str, total: int, failures: list[BulkFailure]) -> None:
        self.index = index
        self.failures = failures
        self.retryable = all(f.status is None or f.status == 429 or f.status >= 500 for f in failures)
        lines = [f"chunk {f.chunk_id!r} (_id {f.doc_id}): {f.reason}" for f in failures[: self.MAX_LISTED]]
        if len(failures) > self.MAX_LISTED:
            lines.append(f"... and {len(failures) - self.MAX_LISTED} more (see .failures)")
        super().__init__(f"{len(failures)} of {total} documents failed to index into {index!r}:\n  " + "\n  ".join(lines))


class ServerSideRrfUnavailable(EsError):
    """The cluster rejected the ``rrf`` retriever (too old, or not in its license); fuse client-side instead."""

    retryable = False


# --- connection ----------------------------------------------------------------------------------------------


@cache
def _compat_node_class(major: int) -> type[Urllib3HttpNode]:
    """A urllib3 node that sends ``compatible-with=<major>`` whatever the client's own major version is."""
    pattern = re.compile(r"compatible-with=\d+")

    class CompatNode(Urllib3HttpNode):
        def perform_request(
            self,
            method: str,
            target: str,
            body: bytes | None = None,
            headers: HttpHeaders | None = None,
            request_timeout: DefaultType | float | None = DEFAULT,
        ) -> Any:
            if headers is not None:
                headers = headers.copy()
                for name in ("accept", "content-type"):
                    if name in headers:
                        headers[name] = pattern.sub(f"compatible-with={major}", headers[name])
            return super().perform_request(method, target, body=body, headers=headers, request_timeout=request_timeout)

    CompatNode.__name__ = CompatNode.__qualname__ = f"CompatibleWith{major}Node"
    return CompatNode


def connect(
    url: str | None = None, *, compatible_with: int | None = COMPATIBLE_WITH, request_timeout: float = 30.0
) -> Elasticsearch:
    """A client for ``url`` (else ``$ELASTICSEARCH_URL``), authenticated from the environment.

    ``ELASTICSEARCH_API_KEY`` (encoded, or ``id:key``) wins over ``ELASTICSEARCH_USERNAME``/``_PASSWORD``;
    ``ELASTICSEARCH_CA_CERTS`` names a CA bundle for TLS. No request is sent until the client is used.
    """
    url = (url or os.environ.get(ENV_URL, "")).strip()
    if not url:
        raise EsConfigError(f"no Elasticsearch URL: set {ENV_URL} (e.g. https://localhost:9200) or pass one")
    parts = urlsplit(url)
    if parts.password:
        remember(parts.password)
        remember(unquote(parts.password))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EsConfigError(f"{ENV_URL} must be an http(s) URL with a host, got {url!r}")
    options: dict[str, Any] = {"request_timeout": request_timeout, "max_retries": 3, "retry_on_timeout": True}
    api_key = os.environ.get(ENV_API_KEY, "").strip()
    username = os.environ.get(ENV_USERNAME, "").strip()
    password = os.environ.get(ENV_PASSWORD, "")
    if api_key:
        remember(api_key)
        if ":" in api_key:
            key_id, _, key = api_key.partition(":")
            remember(key)
            options["api_key"] = (key_id, key)
        else:
            options["api_key"] = api_key
    elif username or password:
        remember(password)
        if not (username and password):
            raise EsConfigError(f"set both {ENV_USERNAME} and {ENV_PASSWORD} (or {ENV_API_KEY} instead)")
        options["basic_auth"] = (username, password)
    ca_certs = os.environ.get(ENV_CA_CERTS, "").strip()
    if ca_certs:
        if not os.path.isfile(ca_certs):
            raise EsConfigError(f"{ENV_CA_CERTS} names {ca_certs!r}, which is not a file")
        options["ca_certs"] = ca_certs
    if compatible_with is not None:
        options["node_class"] = _compat_node_class(compatible_with)
    return Elasticsearch(url, **options)


# --- request bodies (pinned by tests/storage/test_elasticsearch_contract.py) ---------------------------------


def index_body(dims: int) -> dict[str, Any]:
    """Settings and mappings of one physical index, for vectors of ``dims`` dimensions."""
    code_split = {
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
    }
    split, tail = "ctxrag_code_split", ["lowercase", "ctxrag_stop", "ctxrag_stemmer"]
    text = {"type": "text", "analyzer": INDEX_ANALYZER, "search_analyzer": SEARCH_ANALYZER}
    return {
        "settings": {
            "index": {"number_of_shards": 1, "queries": {"cache": {"enabled": False}}},
            "similarity": {"default": {"type": "BM25", "k1": 1.2, "b": 0.75}},
            "analysis": {
                "filter": {
                    split: code_split,
                    "ctxrag_stop": {"type": "stop", "stopwords": list(STOPWORDS)},
                    "ctxrag_stemmer": {"type": "stemmer", "language": "porter2"},
                },
                "analyzer": {
                    INDEX_ANALYZER: {"type": "custom", "tokenizer": "standard", "filter": [split, "flatten_graph", *tail]},
                    SEARCH_ANALYZER: {"type": "custom", "tokenizer": "standard", "filter": [split, *tail]},
                },
            },
        },
        "mappings": {
            "dynamic": "strict",
            "properties": {
                "content": dict(text),
                "contextualized_content": dict(text),
                "chunk_id": {"type": "keyword"},
                "doc_id": {"type": "keyword"},
                "chunk_index": {"type": "integer"},
                "row": {"type": "integer"},
                VECTOR_FIELD: {"type": "dense_vector", "dims": dims, "index": True, "similarity": "cosine"},
            },
        },
    }


def _row_dicts(rows: Rows) -> list[Mapping[str, Any]]:
    if isinstance(rows, pa.Table):
        missing = [column for column in ROW_COLUMNS if column not in rows.column_names]
        if missing:
            raise ValueError(f"the chunk table lacks columns {missing}")
        return rows.select(list(ROW_COLUMNS)).to_pylist()
    listed: list[Mapping[str, Any]] = list(rows)
    for number, row in enumerate(listed):
        missing = [column for column in ROW_COLUMNS if column not in row]
        if missing:
            raise ValueError(f"chunk row {number} lacks {missing}")
    return listed


def bulk_actions(index: str, rows: Rows, vectors: Vectors) -> Iterator[dict[str, Any]]:
    """One ``index`` action per chunk row: ``_id`` the chunk key, ``row`` its position in ``rows``."""
    listed = _row_dicts(rows)
    if len(vectors) != len(listed):
        raise ValueError(f"{len(listed)} chunk rows but {len(vectors)} vectors")
    for number, row in enumerate(listed):
        yield {
            "_op_type": "index",
            "_index": index,
            "_id": str(row["key"]),
            "_source": {
                "content": row["content"],
                "contextualized_content": row["context"] or "",
                "chunk_id": str(row["chunk_id"]),
                "doc_id": str(row["doc_id"]),
                "chunk_index": int(row["chunk_index"]),
                "row": number,
                VECTOR_FIELD: [float(x) for x in vectors[number]],
            },
        }


_RRF_REJECTION_WORDS = ("retriever", "rrf", "rank", "license", "unknown")
_ROW_ONLY = {"_source": False, "docvalue_fields": ["row"]}


def _multi_match(query: str) -> dict[str, Any]:
    return {"multi_match": {"query": query, "fields": list(TEXT_FIELDS), "type": "best_fields"}}


def default_num_candidates(k: int) -> int:
    """How many HNSW candidates each shard considers for the top ``k``."""
    return min(10_000, max(100, 2 * k))


def bm25_body(query: str, k: int) -> dict[str, Any]:
    """The cookbook's multi_match over both text fields; equal scores ordered by row on the server."""
    return {
        "query": _multi_match(query),
        "size": k,
        **_ROW_ONLY,
        "sort": [{"_score": {"order": "desc"}}, {"row": {"order": "asc"}}],
        "track_total_hits": False,
    }


def _knn_clause(vector: Sequence[float], k: int, num_candidates: int) -> dict[str, Any]:
    return {"field": VECTOR_FIELD, "query_vector": [float(x) for x in vector], "k": k, "num_candidates": num_candidates}


def knn_body(vector: Sequence[float], k: int, num_candidates: int | None = None) -> dict[str, Any]:
    """Approximate kNN (the ``knn`` search option) on ``embedding``."""
    return {"knn": _knn_clause(vector, k, num_candidates or default_num_candidates(k)), "size": k, **_ROW_ONLY}


def rrf_body(
    query: str, vector: Sequence[float], k: int, window: int = RRF_WINDOW, rank_constant: int = RRF_RANK_CONSTANT
) -> dict[str, Any]:
    """Server-side reciprocal rank fusion of the BM25 query and kNN, each ranked ``max(k, window)`` deep."""
    depth = max(k, window)
    retrievers = [
        {"standard": {"query": _multi_match(query)}},
        {"knn": _knn_clause(vector, depth, default_num_candidates(depth))},
    ]
    return {
        "retriever": {"rrf": {"retrievers": retrievers, "rank_window_size": depth, "rank_constant": rank_constant}},
        "size": k,
        **_ROW_ONLY,
    }


# --- the index -----------------------------------------------------------------------------------------------


def _reason(error: Any) -> str:
    """A one-line reason from a bulk item's or an API error's ``error`` value."""
    if isinstance(error, Mapping):
        text = f"{error.get('type', 'error')}: {error.get('reason', '')}".strip()
        cause = error.get("caused_by")
        if isinstance(cause, Mapping) and cause.get("reason") and str(cause["reason"]) not in str(error.get("reason", "")):
            text += f" (caused by {cause.get('type', 'error')}: {cause['reason']})"
        return redact(text)
    return redact(str(error))


def _api_reason(error: ApiError) -> str:
    body = error.body if isinstance(error.body, Mapping) else {}
    inner = body.get("error")
    return _reason(inner) if inner else redact(str(error.message or error))


def describe_error(error: ApiError | TransportError) -> str:
    """One redacted line for a failed Elasticsearch request (an API error, or the cluster unreachable)."""
    if isinstance(error, ApiError):
        return f"Elasticsearch answered {error.meta.status}: {_api_reason(error)}"
    return redact(f"Elasticsearch request failed: {' '.join(str(error).split())}")


def _ranking(response: Mapping[str, Any], transform: Callable[[float], float] | None = None) -> Ranking:
    """(row, score) pairs from a search response, best first, equal scores by row."""
    pairs = []
    for hit in response["hits"]["hits"]:
        score = float(hit["_score"]) if hit.get("_score") is not None else float(hit["sort"][0])
        pairs.append((int(hit["fields"]["row"][0]), transform(score) if transform else score))
    pairs.sort(key=lambda pair: (-pair[1], pair[0]))
    return pairs


class EsIndex:
    """One ctxrag index in Elasticsearch: the alias ``name`` and its versioned physical indexes."""

    def __init__(self, client: Elasticsearch, name: str, target: str | None = None) -> None:
        """``target``: search this physical index instead of the alias (a staged version under evaluation)."""
        self.client = client
        self.name = validate_name(name)
        self._physical = re.compile(re.escape(self.name) + r"-v\d+")
        self.target = target or self.name

    def physical_name(self, version: int) -> str:
        return f"{self.name}-v{int(version)}"

    # ------------------------------------------------------------------ versions
    def live_index(self) -> str | None:
        """The physical index the alias points to, or None when there is no such alias."""
        targets = self._alias_targets()
        if len(targets) > 1:
            raise EsError(f"alias {self.name!r} points to several indexes {targets}; run delete() and rebuild")
        return targets[0] if targets else None

    def _alias_targets(self) -> list[str]:
        try:
            return sorted(self.client.indices.get_alias(name=self.name).body)
        except NotFoundError:
            return []

    def _versions(self) -> list[str]:
        """Every physical index of this name, live or left over."""
        found = self.client.indices.get(index=f"{self.name}-v*", expand_wildcards="open,closed", allow_no_indices=True)
        return sorted(index for index in found.body if self._physical.fullmatch(index))

    def build(
        self, rows: Rows, vectors: Vectors, *, version: int | None = None, dims: int | None = None,
        chunk_size: int = BULK_CHUNK_SIZE, switch: bool = True,
    ) -> str:
        """Index ``rows`` with their ``vectors`` into a new version and (``switch``) make it live; returns its
        physical name. With ``switch=False`` the version is only staged: ``switch_to`` or ``drop`` it later.

        Raises ``EsBulkFailed`` (every failed document with its reason) or ``EsError``; the alias is then unchanged.
        """
        listed = _row_dicts(rows)
        duplicates = sorted(key for key, seen in Counter(str(row["key"]) for row in listed).items() if seen > 1)
        if duplicates:
            raise ValueError(f"duplicate chunk keys would collapse into one document: {duplicates[:5]}")
        if dims is None:
            if len(vectors) == 0:
                raise ValueError("no vectors to take the dimension from: pass dims")
            dims = len(vectors[0])
        if self.client.indices.exists(index=self.name) and not self.client.indices.exists_alias(name=self.name):
            raise EsError(f"{self.name!r} is a concrete Elasticsearch index, not a ctxrag alias; delete or rename it")
        physical = self.physical_name(time.time_ns() if version is None else version)
        if self.client.indices.exists(index=physical):
            raise EsError(f"index {physical!r} already exists; build with another version")
        self.client.indices.create(index=physical, body=index_body(dims))
        try:
            self._bulk(physical, listed, vectors, chunk_size)
            self.client.indices.refresh(index=physical)
            count = int(self.client.count(index=physical)["count"])
            if count != len(listed):
                raise EsError(f"index {physical!r} holds {count} documents after the build, expected {len(listed)}")
            if switch:
                self.switch_to(physical)
        except BaseException:
            self._drop([physical])
            raise
        return physical

    def switch_to(self, physical: str) -> None:
        """Point the alias at ``physical`` in one ``_aliases`` call, then delete the versions it pointed to."""
        previous = self._alias_targets()
        actions: list[dict[str, Any]] = [
            {"remove": {"index": old, "alias": self.name, "must_exist": True}} for old in previous if old != physical
        ]
        actions.append({"add": {"index": physical, "alias": self.name}})
        self.client.indices.update_aliases(actions=actions)
        logger.info("%s", redact(f"Elasticsearch alias {self.name!r} -> {physical!r}"))
        self._drop([old for old in previous if old != physical])

    def drop(self, physical: str) -> None:
        """Delete a staged version that will not go live (never the one the alias points to)."""
        if physical in self._alias_targets():
            raise EsError(f"{physical!r} is live behind {self.name!r}; switch the alias first")
        self._drop([physical])

    def _bulk(self, physical: str, rows: list[Mapping[str, Any]], vectors: Vectors, chunk_size: int) -> None:
        """Send the documents in chunks; collect every rejected document, then raise ``EsBulkFailed`` listing them.

        A rejected document (bad vector, mapping conflict) does not stop the others; a transport failure (the cluster
        unreachable) raises at once, and the build is abandoned.
        """
        chunk_ids = {str(row["key"]): str(row["chunk_id"]) for row in rows}
        failures: list[BulkFailure] = []
        for ok, item in streaming_bulk(
            self.client, bulk_actions(physical, rows, vectors), chunk_size=chunk_size,
            raise_on_error=False, max_retries=3, initial_backoff=1,
        ):
            if ok:
                continue
            result = next(iter(item.values()))
            doc_id = str(result.get("_id", "?"))
            status = result.get("status")
            status = status if isinstance(status, int) else None
            failures.append(BulkFailure(doc_id, chunk_ids.get(doc_id, "?"), status, _reason(result.get("error"))))
        if failures:
            raise EsBulkFailed(physical, len(rows), failures)

    def _drop(self, indexes: Iterable[str]) -> None:
        """Delete physical indexes, best effort (a failure is logged, never raised)."""
        for index in indexes:
            try:
                self.client.indices.delete(index=index, ignore_unavailable=True)
            except Exception as error:  # noqa: BLE001 - cleanup must not mask the outcome
                logger.warning("%s", redact(f"could not delete Elasticsearch index {index!r}: {error}"))

    def delete(self, also: Iterable[str] = ()) -> list[str]:
        """Remove the alias and every physical index of this name; returns the deleted indexes.

        ``also``: physical indexes known to be this name's (e.g. from kept versions' manifests), deleted too; only
        names of this index's form (``<name>-v<version>``) are taken.
        """
        targets = self._alias_targets()
        if targets:
            self.client.indices.update_aliases(actions=[{"remove": {"index": index, "alias": self.name}} for index in targets])
        known = {index for index in also if self._physical.fullmatch(index)}
        doomed = sorted(set(self._versions()) | set(targets) | known)
        for index in doomed:
            self.client.indices.delete(index=index, ignore_unavailable=True)
        return doomed

    # ------------------------------------------------------------------ search
    def _search(self, body: dict[str, Any]) -> Mapping[str, Any]:
        try:
            return self.client.search(index=self.target, body=body).body
        except NotFoundError as error:
            if "index_not_found" in str(error.error):
                raise UnknownIndexError(f"no Elasticsearch index named {self.name!r}; build one first") from None
            raise

    def bm25(self, query: str, k: int) -> Ranking:
        """(row, BM25 score) of the best ``k`` matching chunks, best first, ties by row."""
        if k <= 0 or not query.strip():
            return []
        return _ranking(self._search(bm25_body(query, k)))

    def knn(self, vector: Sequence[float], k: int, num_candidates: int | None = None) -> Ranking:
        """(row, cosine similarity) of the ``k`` nearest chunks, best first, ties by row.

        Elasticsearch scores cosine as ``(1 + cos) / 2``; it is turned back into the cosine, as the embedded index gives.
        """
        if k <= 0:
            return []
        return _ranking(self._search(knn_body(vector, k, num_candidates)), lambda score: 2.0 * score - 1.0)

    def rrf_server_side(self, query: str, vector: Sequence[float], k: int, window: int = RRF_WINDOW) -> Ranking:
        """(row, RRF score) from the cluster's ``rrf`` retriever; ``ServerSideRrfUnavailable`` if it has none."""
        if k <= 0:
            return []
        try:
            return _ranking(self._search(rrf_body(query, vector, k, window)))
        except ApiError as error:
            reason = _api_reason(error)
            text = reason.lower()
            if error.meta.status in (400, 403) and any(word in text for word in _RRF_REJECTION_WORDS):
                raise ServerSideRrfUnavailable(
                    f"the Elasticsearch cluster{self._version_note()} does not support the rrf retriever: {reason}; "
                    "use client-side fusion"
                ) from None
            raise

    def _version_note(self) -> str:
        try:
            return f" (version {self.client.info()['version']['number']})"
        except Exception:  # noqa: BLE001 - only decorates a message
            return ""
