"""Search in the Python API: ``ctxrag.search`` for one query, ``ctxrag.open`` (an ``Index``) for many. Every door
(the command, the resident search, MCP, HTTP) comes here with a ``SearchRequest`` and leaves with a ``SearchAnswer``
(``Index.answer``); the keywords are the request's fields (``ctxrag.tasks.common.search_request``)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from ctxrag.host_state import keeps_host_state
from ctxrag.storage.errors import InvalidInput
from ctxrag.storage.names import DEFAULT_NAME
from ctxrag.tasks.common.hits import SearchAnswer
from ctxrag.tasks.common.search_request import SearchKeywords, SearchRequest

if TYPE_CHECKING:
    from ctxrag.storage.ledger import LedgerRow
    from ctxrag.tasks.retrieval.fusion import RankedRow
    from ctxrag.tasks.retrieval.rerank import Reranker, RerankSpec
    from ctxrag.tasks.retrieval.source_lines import SourceLines

_DEFAULTS = SearchRequest(query="-")
LONG_LIVED_QUERIES = 10_000  # query vectors an Index(long_lived=True) keeps in memory: ~15 MB with the local model
PER_FILE_CHUNKS = 150  # chunks ranked for a per_file search, grouped into files (each retriever's fusion depth)
PER_FILE_ALSO = 3  # a file's other chunks are named when they rank among the first 3 x k chunks


class Index:
    """An open index for many searches in one process (``ctxrag.open(name)``): its version, embedder and the query
    vectors already computed stay loaded between searches. Paid calls (Voyage queries, reranks) are written to the
    ledger under one run id per open index. ``long_lived``: for a process that searches for hours (a service): the
    10,000 most recently embedded query vectors stay in memory, and the local model's are not stored for later processes."""

    @keeps_host_state
    def __init__(
        self, name: str = DEFAULT_NAME, *, server_rrf: bool = _DEFAULTS.server_rrf, long_lived: bool = False
    ) -> None:
        from ctxrag.storage.environment import ctxrag_home
        from ctxrag.storage.index_store import IndexStore
        from ctxrag.tasks.retrieval.locate import Locator
        from ctxrag.tasks.retrieval.search import Searcher, strategy_of

        home = ctxrag_home()
        store = IndexStore(home)
        self.name = name
        self.run_id = f"search-{uuid.uuid4().hex[:12]}"
        self._ledger = _ledger_of(home)
        self._searcher = Searcher(
            store.open(name),
            server_rrf=server_rrf,
            home=home,
            ledger=self._ledger,
            run_id=self.run_id,
            remember=LONG_LIVED_QUERIES if long_lived else None,
        )
        self.strategy = strategy_of(store, name).label
        """The strategy a search uses when none is named: what ``ctxrag.tune`` chose for the index, else the default."""
        self._rerankers: dict[tuple[str, str], Reranker] = {}
        self._locator = Locator(self._searcher.index.chunks)
        if long_lived:
            self._locator.warm()  # a small index's locations now: a service's memory does not grow with its first searches
            self._warm_lines()

    @property
    def version(self) -> str:
        """The index version this object searches (a later ``index`` run does not change it)."""
        return str(self._searcher.index.manifest["version"])

    @keeps_host_state
    def search(
        self, query: str, k: int = _DEFAULTS.k, strategy: str | None = None, **options: Unpack[SearchKeywords]
    ) -> SearchAnswer:
        """The top ``k`` chunks for ``query`` by ``strategy`` (None: the index's, ``self.strategy``; a name such as
        ``hybrid`` or one with parameters, ``hybrid-score(vector_weight=0.3)``). ``options``: the other fields of a
        ``SearchRequest``: ``path`` and ``language`` keep only matching sources, ``rerank`` (cohere, claude,
        local:MODEL; default: CTXRAG_RERANK, else none) and ``rerank_model`` reorder the hits. The answer reads as
        its list of hits."""
        return self.answer(self.request(query, k, strategy, **options))

    @keeps_host_state
    def search_many(
        self,
        queries: Sequence[str],
        k: int = _DEFAULTS.k,
        strategy: str | None = None,
        **options: Unpack[SearchKeywords],
    ) -> list[SearchAnswer]:
        """``search`` for each of ``queries``, with their vectors computed first in one batch (the local model's
        batches, or few paid requests) and stored once: one answer per query, in order, each equal to what
        ``search(query, ...)`` returns."""
        return self.answer_many([self.request(query, k, strategy, **options) for query in queries])

    def request(
        self, query: str, k: int = _DEFAULTS.k, strategy: str | None = None, **options: Unpack[SearchKeywords]
    ) -> SearchRequest:
        """The checked request for ``query`` on this index (an unknown keyword names the field meant)."""
        return SearchRequest.from_dict({"query": query, "index": self.name, "k": k, "strategy": strategy, **options})

    def answer(self, request: SearchRequest) -> SearchAnswer:
        """What every door asks: the answer to ``request`` (whose index must be this one)."""
        return self.answer_many([request])[0]

    def answer_many(self, requests: list[SearchRequest]) -> list[SearchAnswer]:
        from ctxrag.hits import hits_of
        from ctxrag.tasks.retrieval.filters import SourceFilter
        from ctxrag.tasks.retrieval.search import Strategy, StrategyConfig

        answers = []
        vectors_needed = []
        for request in requests:
            if request.index != self.name:
                raise InvalidInput(f"a request for index {request.index!r} asked of index {self.name!r}")
            if StrategyConfig.from_str(request.strategy or self.strategy).strategy is not Strategy.BM25:
                vectors_needed.append(request.query)  # BM25 alone reads no vector
        if vectors_needed:
            self._searcher.prefetch(vectors_needed)
        chunks = self._searcher.index.chunks
        for request in requests:
            chosen = StrategyConfig.from_str(request.strategy or self.strategy)
            reranker = self._reranker(request.rerank, request.rerank_model)
            allowed = self._searcher.rows_kept(SourceFilter(request.path, request.language))
            depth = max(request.k, PER_FILE_CHUNKS) if request.per_file else request.k
            ranked = self._searcher.search(request.query, chosen, depth, reranker, allowed, request.server_rrf)
            also: list[tuple[tuple[int, int], ...]] = []
            if request.per_file:
                ranked, also = self._per_file(ranked, request.k)
            hits = hits_of(chunks, ranked, self._locator, request.query, self._nearest(request.query))
            if request.per_file:
                hits = [dataclasses.replace(hit, also=lines) for hit, lines in zip(hits, also)]
            answers.append(SearchAnswer(self.name, self.version, chosen.label, hits))
        return answers

    def lines(self, source: str, first: int = 1, last: int | None = None) -> SourceLines:
        """Lines ``first`` to ``last`` (None: to the end) of ``source`` (a hit's ``source``) as this version holds
        it: the file as indexed, joined from its chunks, never read from the disk (a ``UserError`` for a source this
        index does not hold as a file's lines, or a range that is not one)."""
        from ctxrag.tasks.retrieval.source_lines import source_lines

        return source_lines(self._searcher.index.chunks, source, first, last)

    def _per_file(self, ranked: list[RankedRow], k: int) -> tuple[list[RankedRow], list[tuple[tuple[int, int], ...]]]:
        """The first ``k`` files of ``ranked``, each at its best chunk's place, with the line ranges (in line order) of
        its other chunks among the first ``PER_FILE_ALSO`` x ``k`` chunks: its other matching chunks, not every chunk
        a deep ranking reaches."""
        documents = self._searcher.index.chunks.values("doc_id", [hit.row for hit in ranked])
        best: dict[str, RankedRow] = {}
        others: dict[str, list[int]] = {}
        for place, (hit, document) in enumerate(zip(ranked, documents)):
            if document not in best:
                if len(best) < k:
                    best[document] = hit
            elif place < PER_FILE_ALSO * k:
                others.setdefault(document, []).append(hit.row)
        spans = {
            document: tuple(sorted(lines for row in rows if (lines := self._locator.lines(row)) is not None))
            for document, rows in others.items()
        }
        return list(best.values()), [spans.get(document, ()) for document in best]

    def _warm_lines(self) -> None:
        """A small index's chunks read now for their matched lines (``ctxrag.tasks.retrieval.matches.warm``), as its
        locations are: the cookbook's 737 chunks take ~0.15 s at the service's start, and its first searches cost what
        its later ones do (docs/decisions.md, "Matched lines, read once")."""
        from ctxrag.tasks.retrieval.locate import KEPT_ROWS
        from ctxrag.tasks.retrieval.matches import warm
        from ctxrag.tasks.retrieval.word_vectors import KEPT_TEXTS, packaged_word_vectors

        chunks = self._searcher.index.chunks
        if chunks.num_rows <= KEPT_ROWS:
            vectors = packaged_word_vectors()
            contents = chunks.values("content", list(range(chunks.num_rows)))  # not the whole column kept
            warm(contents, vectors.pieces if vectors else None, KEPT_TEXTS)

    def _nearest(self, query: str) -> Callable[[list[str]], list[float]] | None:
        """How near in meaning to ``query`` each of some texts is, by word-piece vectors (any index: a line is worth
        neither a model run nor a paid request); None where the packaged model's files are not on this machine."""
        from ctxrag.tasks.retrieval.word_vectors import packaged_word_vectors

        vectors = packaged_word_vectors()
        return None if vectors is None else lambda texts: vectors.similarity(query, texts)

    def _reranker(self, rerank: str, model: str) -> Reranker | None:
        if (rerank, model) not in self._rerankers:
            spec = rerank_spec(rerank, model)
            if spec is None:
                return None
            self._rerankers[(rerank, model)] = spec.build(self._ledger, self.run_id)
        return self._rerankers[(rerank, model)]

    def __repr__(self) -> str:
        return f"<ctxrag.Index {self.name!r} version {self.version}>"


def _ledger_of(home: Path) -> Callable[[list[LedgerRow]], None]:
    """Where an open index's paid calls are written: the home's ledger, opened at the first paid call (a local
    search makes none, and skips the ledger's imports)."""

    def append(rows: list[LedgerRow]) -> None:
        from ctxrag.storage.ledger import Ledger

        Ledger(home).append(rows)

    return append


def rerank_spec(rerank: str, model: str = "") -> RerankSpec | None:
    """The reranker named (None for ``none``; "" is the one ``CTXRAG_RERANK`` configures, else none); an unknown one,
    one whose key is not set, or a local model that is not a cross-encoder is a ``UserError``."""
    rerank = rerank or configured_reranker()
    if rerank in {"", "none"}:
        return None  # without importing the rerankers (and their ledger)
    from ctxrag.storage.secrets import MissingKey
    from ctxrag.tasks.retrieval.rerank import RerankSpec

    spec = RerankSpec.from_str(rerank, model)
    if spec and (variable := spec.missing_key()):
        raise MissingKey(f"rerank {rerank} needs {variable}")
    if spec and spec.provider == "local":
        from ctxrag.tasks.embedding.model_sources import resolve_model

        resolve_model(spec.path, want="cross-encoder")  # a missing or wrong model fails before the index is read
    return spec


def configured_reranker() -> str:
    """The reranker every search uses unless it names one: ``CTXRAG_RERANK`` (e.g. ``local:/models/ms-marco``), else none."""
    from ctxrag.storage.settings import settings

    return settings().rerank


@keeps_host_state
def open(name: str = DEFAULT_NAME, *, server_rrf: bool = _DEFAULTS.server_rrf, long_lived: bool = False) -> Index:
    """Open index NAME for many searches (``server_rrf``: an Elasticsearch index's hybrid fused by the cluster;
    ``long_lived``: a service's index, its query vectors kept in bounded memory, as ``Index`` says)."""
    return Index(name, server_rrf=server_rrf, long_lived=long_lived)


@keeps_host_state
def search(
    query: str,
    name: str = DEFAULT_NAME,
    k: int = _DEFAULTS.k,
    strategy: str | None = None,
    **options: Unpack[SearchKeywords],
) -> SearchAnswer:
    """One search of index NAME, as ``ctxrag search``; ``options``: the other fields of a ``SearchRequest`` (``path``,
    ``language``, ``rerank``, ``rerank_model``, ``server_rrf``). For many searches, ``open`` the index once."""
    return answer(SearchRequest.from_dict({"query": query, "index": name, "k": k, "strategy": strategy, **options}))


@keeps_host_state
def answer(request: SearchRequest) -> SearchAnswer:
    """The answer to one checked request, in this process (``ctxrag search`` when no resident search answers)."""
    rerank_spec(request.rerank, request.rerank_model)  # a bad reranker fails before the index is loaded
    return Index(request.index, server_rrf=request.server_rrf).answer(request)
