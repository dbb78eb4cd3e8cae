"""Request bodies of the Elasticsearch backend (pinned by tests/storage/test_elasticsearch_contract.py).

Documents: ``_id`` is the chunk's content key (re-sending a chunk upserts it); ``row`` is the chunk's row in ctxrag's
chunk table, which every search returns, so hits map back to rows; ``content`` is the chunk, ``contextualized_content``
its context (the cookbook's split), ``embedding`` its vector. Both text fields use an English analyzer rebuilt to match
the embedded engine (ctxrag.storage.tokenize; see docs/decisions.md), with BM25's k1 and b from ctxrag.storage.bm25.
"""

from __future__ import annotations

import string
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
from bm25s.stopwords import STOPWORDS_EN_PLUS

from ctxrag.storage.bm25 import BM25_B, BM25_K1
from ctxrag.storage.errors import InvalidInput
from ctxrag.storage.fusion import FUSION_DEPTH, RRF_K

TEXT_FIELDS = ["content", "contextualized_content"]
VECTOR_FIELD = "embedding"
INDEX_ANALYZER = "ctxrag_code_english"
SEARCH_ANALYZER = "ctxrag_code_english_search"
STOPWORDS = sorted(set(STOPWORDS_EN_PLUS) | set(string.ascii_lowercase))
ROW_COLUMNS = ("key", "chunk_id", "doc_id", "chunk_index", "content", "context")

Rows: TypeAlias = (
    "pa.Table | Sequence[Mapping[str, Any]]"  # ctxrag's chunk table (ctxrag.tasks.stages.publish.build_plan)
)
Vectors: TypeAlias = "np.ndarray | Sequence[Sequence[float]]"


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
            "similarity": {"default": {"type": "BM25", "k1": BM25_K1, "b": BM25_B}},
            "analysis": {
                "filter": {
                    split: code_split,
                    "ctxrag_stop": {"type": "stop", "stopwords": list(STOPWORDS)},
                    "ctxrag_stemmer": {"type": "stemmer", "language": "porter2"},
                },
                "analyzer": {
                    INDEX_ANALYZER: {
                        "type": "custom",
                        "tokenizer": "standard",
                        "filter": [split, "flatten_graph", *tail],
                    },
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


_ROW_ONLY = {"_source": False, "docvalue_fields": ["row"]}


def _multi_match(query: str) -> dict[str, Any]:
    return {"multi_match": {"query": query, "fields": list(TEXT_FIELDS), "type": "best_fields"}}


def default_num_candidates(k: int) -> int:
    """How many HNSW candidates each shard considers for the top ``k``."""
    return min(10_000, max(100, 2 * k))


MAX_TERMS = 65_536  # Elasticsearch's default index.max_terms_count: the most documents a terms filter names


def documents_filter(documents: Sequence[str]) -> dict[str, Any]:
    """A source filter's documents as a ``terms`` filter on ``doc_id``; more than ``MAX_TERMS`` is an ``InvalidInput``."""
    if len(documents) > MAX_TERMS:
        raise InvalidInput(
            f"the path and language filters keep {len(documents):,} documents; the Elasticsearch backend filters by at "
            f"most {MAX_TERMS:,}: narrow the filter"
        )
    return {"terms": {"doc_id": list(documents)}}


def _filtered(query: dict[str, Any], documents: Sequence[str] | None) -> dict[str, Any]:
    return query if documents is None else {"bool": {"must": query, "filter": documents_filter(documents)}}


def bm25_body(query: str, k: int, documents: Sequence[str] | None = None) -> dict[str, Any]:
    """The cookbook's multi_match over both text fields (only ``documents``' chunks, when given); equal scores
    ordered by row on the server."""
    return {
        "query": _filtered(_multi_match(query), documents),
        "size": k,
        **_ROW_ONLY,
        "sort": [{"_score": {"order": "desc"}}, {"row": {"order": "asc"}}],
        "track_total_hits": False,
    }


def _knn_clause(
    vector: Sequence[float], k: int, num_candidates: int, documents: Sequence[str] | None = None
) -> dict[str, Any]:
    clause = {
        "field": VECTOR_FIELD,
        "query_vector": [float(x) for x in vector],
        "k": k,
        "num_candidates": num_candidates,
    }
    return clause if documents is None else {**clause, "filter": documents_filter(documents)}


def knn_body(
    vector: Sequence[float], k: int, num_candidates: int | None = None, documents: Sequence[str] | None = None
) -> dict[str, Any]:
    """Approximate kNN (the ``knn`` search option) on ``embedding`` (only ``documents``' chunks, when given)."""
    clause = _knn_clause(vector, k, num_candidates or default_num_candidates(k), documents)
    return {"knn": clause, "size": k, **_ROW_ONLY}


def rrf_body(
    query: str,
    vector: Sequence[float],
    k: int,
    window: int = FUSION_DEPTH,
    rank_constant: int = RRF_K,
    documents: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Server-side reciprocal rank fusion of the BM25 query and kNN, each ranked ``max(k, window)`` deep (only
    ``documents``' chunks, when given)."""
    depth = max(k, window)
    retrievers = [
        {"standard": {"query": _filtered(_multi_match(query), documents)}},
        {"knn": _knn_clause(vector, depth, default_num_candidates(depth), documents)},
    ]
    return {
        "retriever": {"rrf": {"retrievers": retrievers, "rank_window_size": depth, "rank_constant": rank_constant}},
        "size": k,
        **_ROW_ONLY,
    }
