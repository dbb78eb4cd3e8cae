"""One ctxrag index in Elasticsearch: versioned physical indexes ``<name>-v<version>`` behind the alias ``<name>``.

A build bulk-indexes into a new physical index, refreshes it and checks its count; only then is the alias switched
in one ``_aliases`` call (``remove`` with ``must_exist``, and ``add``), and the old index deleted. Readers query the
alias: they see the old version or the new one, never a half-built one. A failed build deletes its own index and
never touches the alias. ctxrag's per-index build lock keeps builds of one name apart.
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from elasticsearch import ApiError, Elasticsearch, NotFoundError
from elasticsearch.helpers import streaming_bulk

from ctxrag.storage.elasticsearch.bodies import (
    Rows,
    Vectors,
    _row_dicts,
    bm25_body,
    bulk_actions,
    index_body,
    knn_body,
    rrf_body,
)
from ctxrag.storage.elasticsearch.connection import EsError, _api_reason, _reason
from ctxrag.storage.errors import UnknownIndexError
from ctxrag.storage.fusion import FUSION_DEPTH
from ctxrag.storage.names import validate_name
from ctxrag.storage.secrets import redact

logger = logging.getLogger(__name__)

BULK_CHUNK_SIZE = 500
Ranking: TypeAlias = list[tuple[int, float]]
_RRF_REJECTION_WORDS = ("retriever", "rrf", "rank", "license", "unknown")


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
        super().__init__(
            f"{len(failures)} of {total} documents failed to index into {index!r}:\n  " + "\n  ".join(lines)
        )


class ServerSideRrfUnavailable(EsError):
    """The cluster rejected the ``rrf`` retriever (too old, or not in its license); fuse client-side instead."""

    retryable = False


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
        self,
        rows: Rows,
        vectors: Vectors,
        *,
        version: int | None = None,
        dims: int | None = None,
        chunk_size: int = BULK_CHUNK_SIZE,
        switch: bool = True,
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
            self.client,
            bulk_actions(physical, rows, vectors),
            chunk_size=chunk_size,
            raise_on_error=False,
            max_retries=3,
            initial_backoff=1,
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
            except Exception as error:
                logger.warning("%s", redact(f"could not delete Elasticsearch index {index!r}: {error}"))

    def delete(self, also: Iterable[str] = ()) -> list[str]:
        """Remove the alias and every physical index of this name; returns the deleted indexes.

        ``also``: physical indexes known to be this name's (e.g. from kept versions' manifests), deleted too; only
        names of this index's form (``<name>-v<version>``) are taken.
        """
        targets = self._alias_targets()
        if targets:
            self.client.indices.update_aliases(
                actions=[{"remove": {"index": index, "alias": self.name}} for index in targets]
            )
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

    def bm25(self, query: str, k: int, documents: Sequence[str] | None = None) -> Ranking:
        """(row, BM25 score) of the best ``k`` matching chunks (of ``documents``, when given), best first, ties by row."""
        if k <= 0 or not query.strip():
            return []
        return _ranking(self._search(bm25_body(query, k, documents)))

    def knn(
        self, vector: Sequence[float], k: int, num_candidates: int | None = None, documents: Sequence[str] | None = None
    ) -> Ranking:
        """(row, cosine similarity) of the ``k`` nearest chunks (of ``documents``, when given), best first, ties by row.

        Elasticsearch scores cosine as ``(1 + cos) / 2``; it is turned back into the cosine, as the embedded index gives.
        """
        if k <= 0:
            return []
        body = knn_body(vector, k, num_candidates, documents)
        return _ranking(self._search(body), lambda score: 2.0 * score - 1.0)

    def rrf_server_side(
        self,
        query: str,
        vector: Sequence[float],
        k: int,
        window: int = FUSION_DEPTH,
        documents: Sequence[str] | None = None,
    ) -> Ranking:
        """(row, RRF score) from the cluster's ``rrf`` retriever; ``ServerSideRrfUnavailable`` if it has none."""
        if k <= 0:
            return []
        try:
            return _ranking(self._search(rrf_body(query, vector, k, window, documents=documents)))
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
        except Exception:
            return ""
