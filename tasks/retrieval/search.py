"""Search strategies over a stored index: vector, BM25 and their fusions (``ctxrag.tasks.retrieval.fusion``), each
with its parameters (``StrategyConfig``), run by a ``Searcher`` over any backend.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ctxrag.storage.artifacts import embeddings_cache, queries_cache
from ctxrag.storage.backends import Ranking, RowSet
from ctxrag.storage.environment import models_dir
from ctxrag.storage.errors import CorruptIndexError, InvalidInput
from ctxrag.storage.fusion import FUSION_DEPTH, RRF_K
from ctxrag.storage.index_store import IndexStore, StoredIndex
from ctxrag.tasks.common.providers import Provider
from ctxrag.tasks.common.strategies import DEFAULT_STRATEGY, Strategy, StrategyConfig
from ctxrag.tasks.context.structure import defined_names, mentioned_names
from ctxrag.tasks.embedding.embed import EmbedderSpec, embed_with_cache, vector_rows
from ctxrag.tasks.embedding.embedders import make_embedder
from ctxrag.tasks.retrieval.filters import DocumentRows, SourceFilter
from ctxrag.tasks.retrieval.fusion import (
    DOC_FUSION_DOCUMENT_WEIGHTS,
    DOC_FUSION_WEIGHTS,
    WEIGHTED_BM25_WEIGHT,
    WEIGHTED_VECTOR_WEIGHT,
    RankedRow,
    document_fusion,
    reciprocal_rank_fusion,
    score_fusion,
    weighted_fusion,
)

if TYPE_CHECKING:
    from ctxrag.storage.ledger import SaveLedger
    from ctxrag.tasks.retrieval.rerank import Reranker

DEFINES = "defines"  # the index's column of the names each chunk defines (ctxrag.tasks.context.structure.defined_names)


def strategy_of(store: IndexStore, name: str, given: str | None = None) -> StrategyConfig:
    """The strategy a search of index ``name`` uses: ``given`` if named, else what ``ctxrag tune`` chose for the
    index, else the default."""
    return StrategyConfig.from_str(given) if given else tuned_strategy(store.tuning(name), name)


def tuned_strategy(tuning: Mapping[str, Any] | None, name: str) -> StrategyConfig:
    """The strategy index ``name``'s saved tuning names (none saved, or the default kept: the default)."""
    chosen = (tuning or {}).get("strategy")
    if not chosen:
        return StrategyConfig.from_str(DEFAULT_STRATEGY)
    try:
        return StrategyConfig.from_dict(chosen)
    except (InvalidInput, AttributeError) as error:
        raise CorruptIndexError(
            f"index {name!r}: its tuning.json names no strategy ctxrag knows ({error}); run ctxrag tune again"
        ) from None


class Searcher:
    """Runs any strategy over one index version, whatever its backend (its ``Ranker`` answers BM25 and vector
    rankings); embeds queries with the index's own embedder; fuses here, or on the server where asked and offered."""

    _remember: int | None = None  # the most query vectors kept in memory (None: all); see __init__
    _document_rows: DocumentRows | None = None  # each row's document, read on the first filtered search
    server_rrf: bool = False  # hybrid fused by the cluster (the Elasticsearch backend), unless a search says

    def __init__(
        self,
        index: StoredIndex,
        candidates: int = FUSION_DEPTH,
        server_rrf: bool = False,
        home: Path | None = None,
        ledger: SaveLedger | None = None,
        run_id: str = "",
        remember: int | None = None,
    ) -> None:
        """``home``, ``ledger``, ``run_id``: query vectors are stored under ``home`` (a re-run pays nothing and loads no
        local model for queries it has seen) and each paid request gets a ledger row. ``remember``: for a long-lived
        process (a service), the most query vectors kept in memory, and a local model's are not stored (embedding one
        costs milliseconds once loaded; a stored part per query costs more); None: all kept, all stored."""
        if server_rrf and not index.ranker.server_fusion:
            raise InvalidInput(
                f"server-side RRF needs an index on the Elasticsearch backend (this one is {index.config.get('backend')})"
            )
        self.index = index
        self.spec = EmbedderSpec.from_dict(index.config["embedder"])
        self.embedder = make_embedder(self.spec, ledger, run_id, models_dir=models_dir())
        self._home = home
        stored = home is not None and (remember is None or self.spec.provider != Provider.LOCAL)
        self._query_store = queries_cache(home) if stored and home is not None else None
        self._query_vectors: dict[str, np.ndarray] = {}
        self._remember = remember
        self.candidates = candidates
        self.server_rrf = server_rrf
        self._defined_by_row: dict[int, list[str]] = {}

    def prefetch(self, queries: list[str]) -> None:
        """Embed many queries at once (one stored part, few paid requests) before they are searched."""
        unique = [query for query in dict.fromkeys(queries) if query not in self._query_vectors]
        if unique:
            self._query_vectors.update(zip(unique, self._embed_queries(unique)))
            self._forget_oldest(keep=queries)

    def query_vector(self, query: str) -> np.ndarray:
        """The query's vector; each query is embedded once per searcher (and once ever with a paid embedder)."""
        if query not in self._query_vectors:
            self._query_vectors[query] = self._embed_queries([query])[0]
            self._forget_oldest(keep=[query])
        return self._query_vectors[query]

    def _forget_oldest(self, keep: list[str]) -> None:
        """Past ``remember`` vectors, drop the oldest (never one of ``keep``, about to be searched)."""
        if self._remember is None:
            return
        excess, kept = len(self._query_vectors) - max(self._remember, len(keep)), set(keep)
        oldest: list[str] = []
        for query in self._query_vectors:  # in the order they were added
            if len(oldest) >= excess:
                break
            if query not in kept:
                oldest.append(query)
        for query in oldest:
            del self._query_vectors[query]

    def _embed_queries(self, queries: list[str]) -> np.ndarray:
        if self._query_store is None:
            return self.embedder.embed(queries, input_type="query")
        if self.spec.provider != Provider.LOCAL and self._home is not None:
            self._adopt_paid_queries(queries, self._home)
        return embed_with_cache(queries, self.spec, self._query_store, "query", embedder=self.embedder)[0]

    def _adopt_paid_queries(self, queries: list[str], home: Path) -> None:
        """Copy paid query vectors stored with the chunks' (before queries had a table of their own) into the queries'
        table, so none is paid for again; only queries missing there are looked for."""
        assert self._query_store is not None
        keys = list(dict.fromkeys(self.spec.cache_key(query, "query") for query in queries))
        stored = self._query_store.stored(keys)
        missing = [key for key in keys if key not in stored]
        if missing:
            vectors, found = embeddings_cache(home).matrix(missing)
            if found.any():
                self._query_store.append(
                    vector_rows([key for key, kept in zip(missing, found) if kept], vectors[found], paid=True)
                )

    def rank_vector(self, query: str, depth: int, allowed: RowSet | None = None) -> Ranking:
        return self.index.ranker.rank_vector(self.query_vector(query), depth, allowed)

    def rank_bm25(self, query: str, depth: int, allowed: RowSet | None = None) -> Ranking:
        return self.index.ranker.rank_bm25(query, depth, allowed)

    def rows_kept(self, wanted: SourceFilter) -> RowSet | None:
        """The rows a source filter keeps (None: no filter, every row)."""
        if not wanted:
            return None
        if self._document_rows is None:
            self._document_rows = DocumentRows(self.index.chunks)
        return self._document_rows.rows(wanted)

    def rows_defining(self, names: set[str], rows: list[int]) -> set[int]:
        """The rows among ``rows`` whose chunk defines one of ``names`` (the index's ``defines`` column; an index
        built before that column existed has its chunks read once per searcher instead)."""
        if not names or not rows:
            return set()
        if DEFINES in self.index.chunks.column_names:
            defined = self.index.chunks.values(DEFINES, rows)
        else:
            defined = [
                self._defined_by_row.setdefault(row, defined_names(self.index.chunks.value("content", row)))
                for row in rows
            ]
        return {row for row, found in zip(rows, defined) if names.intersection(found)}

    def candidate_text(self, row: int) -> str:
        """What a reranker reads: the chunk with its context."""
        content = self.index.chunks.value("content", row)
        context = self.index.chunks.value("context", row)
        return f"{content}\n\nContext: {context}" if context else content

    def search(
        self,
        query: str,
        strategy: Strategy | StrategyConfig,
        k: int,
        reranker: Reranker | None = None,
        allowed: RowSet | None = None,
        server_rrf: bool | None = None,
    ) -> list[RankedRow]:
        """The top ``k`` for ``query`` among the ``allowed`` rows (None: all); with a reranker, its order over the
        strategy's over-retrieved candidates. ``server_rrf`` (None: the searcher's): hybrid fused by the cluster."""
        config = StrategyConfig.of(strategy)
        on_server = self.server_rrf if server_rrf is None else server_rrf
        if on_server and config.strategy is Strategy.HYBRID and config.rrf_k != RRF_K:
            raise InvalidInput(f"server-side RRF uses k={RRF_K}; {config.label} fuses here (leave out --server-rrf)")
        if on_server and not self.index.ranker.server_fusion:
            raise InvalidInput(
                f"server-side RRF needs an index on the Elasticsearch backend (this one is {self.index.config.get('backend')})"
            )
        if reranker is not None:
            candidates = self.search(query, config, reranker.depth(k), allowed=allowed, server_rrf=on_server)
            order = reranker.rerank(query, [self.candidate_text(hit.row) for hit in candidates], k)
            return [
                RankedRow(candidates[index].row, 1.0 / rank, {**candidates[index].ranks, "rerank": rank})
                for rank, index in enumerate(order, start=1)
            ]
        if config.strategy is Strategy.BM25:
            return _single("bm25", self.rank_bm25(query, k, allowed))
        if config.strategy is Strategy.VECTOR:
            return _single("vector", self.rank_vector(query, k, allowed))
        depth = max(k, self.candidates)
        if config.strategy is Strategy.HYBRID and on_server:
            fused = self.index.ranker.fuse(query, self.query_vector(query), k, depth, allowed)
            return _single("rrf-server", fused)
        return self.fuse(query, config, self.rankings(query, depth, allowed), k)

    def rankings(self, query: str, depth: int, allowed: RowSet | None = None) -> dict[str, Ranking]:
        """Both retrievers' scored rankings, ``depth`` deep (of the ``allowed`` rows): what every fusion reads."""
        return {"vector": self.rank_vector(query, depth, allowed), "bm25": self.rank_bm25(query, depth, allowed)}

    def fuse(
        self, query: str, strategy: Strategy | StrategyConfig, scored: Mapping[str, Ranking], k: int
    ) -> list[RankedRow]:
        """The top ``k`` of ``strategy`` over the given ``rankings`` (``ctxrag tune`` scores many configurations
        on one query's rankings): ``fuse_rankings`` with this index's documents and definitions."""
        return fuse_rankings(strategy, scored, k, lambda rows: self.evidence(query, rows))

    def evidence(self, query: str, rows: list[int]) -> tuple[dict[int, str], set[int]]:
        """What ``hybrid-doc`` reads of the index for ``rows``: each row's document, and the rows whose chunk defines
        a name the query mentions."""
        documents = dict(zip(rows, self.index.chunks.values("doc_id", rows)))
        return documents, self.rows_defining(mentioned_names(query), rows)


Evidence = Callable[[list[int]], tuple[Mapping[int, Any], set[int]]]


def fuse_rankings(
    strategy: Strategy | StrategyConfig, scored: Mapping[str, Ranking], k: int, evidence: Evidence | None = None
) -> list[RankedRow]:
    """The top ``k`` of ``strategy`` over both retrievers' scored rankings: every fusion a search, ``ctxrag tune`` and
    the evaluation suite (benchmarks/suite_sets.py) run. ``evidence(rows)``: each ranked row's document and the rows
    whose chunk defines a name the query mentions, read only by ``hybrid-doc``. Single-retriever strategies take their
    ranking's first ``k``."""
    config = StrategyConfig.of(strategy)
    if config.strategy in (Strategy.BM25, Strategy.VECTOR):
        return _single(config.strategy.value, scored[config.strategy.value][:k])
    if config.strategy is Strategy.HYBRID_SCORE:
        return score_fusion(scored["bm25"], scored["vector"], k, config.vector_weight)
    rankings = {name: [row for row, _ in ranking] for name, ranking in scored.items()}
    if config.strategy is Strategy.HYBRID:
        return reciprocal_rank_fusion(rankings, k, config.rrf_k)
    if config.strategy is Strategy.HYBRID_DOC:
        if evidence is None:
            raise ValueError("hybrid-doc needs the rows' documents and definitions (evidence)")
        documents, defining = evidence(sorted({row for ranking in rankings.values() for row in ranking}))
        return document_fusion(rankings, documents, DOC_FUSION_WEIGHTS, DOC_FUSION_DOCUMENT_WEIGHTS, k, defining)
    return weighted_fusion(rankings, {"vector": WEIGHTED_VECTOR_WEIGHT, "bm25": WEIGHTED_BM25_WEIGHT}, k)


def _single(name: str, ranking: list[tuple[int, float]]) -> list[RankedRow]:
    return [RankedRow(row, score, {name: rank}) for rank, (row, score) in enumerate(ranking, start=1)]
