"""ctxrag's Python API: ``index``, ``search``, ``evaluate`` and ``open``, the ``ctxrag`` command's work as functions.

Options and defaults are the command's (``ctxrag.tasks.options``): ``ctxrag.index("docs/", contextualizer="none")``
is ``ctxrag index docs/ --contextualizer none``. ``index`` and ``evaluate`` run the same Prefect flows the command
runs, in this process, reporting to ``PREFECT_API_URL`` when configured, else to a temporary Prefect server that ends
with the program (``server="background"``: the command's local server, left running); indexes live under
``$CTXRAG_HOME``. Errors are raised: one the user can fix is a ``UserError`` (``str(error)`` is the whole story),
anything else is a bug. Every call leaves the program's environment, root logger, warnings filters and signal
handlers as it found them (``ctxrag.host_state``).
"""

from __future__ import annotations

import os
import uuid
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from ctxrag.hits import Hit, Location
from ctxrag.host_state import keeps_host_state
from ctxrag.keywords import EvaluateKeywords, IndexKeywords, SearchKeywords
from ctxrag.results import EvaluateResult, IndexReport, TuneResult
from ctxrag.runs import run_evaluate, run_index
from ctxrag.storage.errors import UserError
from ctxrag.storage.settings import settings
from ctxrag.tasks.options import DEFAULT_NAME, EvaluateOptions, IndexOptions, SearchOptions, from_flat

if TYPE_CHECKING:
    from ctxrag.prefect_commands.server_mode import ServerMode
    from ctxrag.storage.ledger import LedgerRow
    from ctxrag.tasks.retrieval.rerank import Reranker, RerankSpec

__all__ = [
    "EvaluateResult",
    "Hit",
    "Index",
    "IndexReport",
    "Location",
    "TuneResult",
    "UserError",
    "evaluate",
    "index",
    "open",
    "search",
    "tune",
]

_SEARCH = SearchOptions()
LONG_LIVED_QUERIES = 10_000  # query vectors an Index(long_lived=True) keeps in memory: ~15 MB with the local model


class Index:
    """An open index for many searches in one process (``ctxrag.open(name)``): its version, embedder and the query
    vectors already computed stay loaded between searches. Paid calls (Voyage queries, reranks) are written to the
    ledger under one run id per open index. ``long_lived``: for a process that searches for hours (a service): the
    10,000 most recently embedded query vectors stay in memory, and the local model's are not stored for later processes."""

    @keeps_host_state
    def __init__(
        self, name: str = DEFAULT_NAME, *, server_rrf: bool = _SEARCH.server_rrf, long_lived: bool = False
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

    @property
    def version(self) -> str:
        """The index version this object searches (a later ``index`` run does not change it)."""
        return str(self._searcher.index.manifest["version"])

    @keeps_host_state
    def search(
        self,
        query: str,
        k: int = _SEARCH.k,
        strategy: str | None = None,
        rerank: str = _SEARCH.rerank,
        rerank_model: str = _SEARCH.rerank_model,
    ) -> list[Hit]:
        """The top ``k`` chunks for ``query`` by ``strategy`` (None: the index's, ``self.strategy``; a name such as
        ``hybrid`` or one with parameters, ``hybrid-score(vector_weight=0.3)``), reordered by a reranker if one is
        named (cohere, claude, local:MODEL; default: CTXRAG_RERANK, else none)."""
        return self._search_all([query], k, strategy, rerank, rerank_model)[0]

    @keeps_host_state
    def search_many(
        self,
        queries: Sequence[str],
        k: int = _SEARCH.k,
        strategy: str | None = None,
        rerank: str = _SEARCH.rerank,
        rerank_model: str = _SEARCH.rerank_model,
    ) -> list[list[Hit]]:
        """``search`` for each of ``queries``, with their vectors computed first in one batch (the local model's
        batches, or few paid requests) and stored once: one list of hits per query, in order, each equal to what
        ``search(query, ...)`` returns."""
        return self._search_all(list(queries), k, strategy, rerank, rerank_model)

    def _search_all(
        self, queries: list[str], k: int, strategy: str | None, rerank: str, rerank_model: str
    ) -> list[list[Hit]]:
        from ctxrag.hits import hits_of
        from ctxrag.storage.errors import InvalidInput
        from ctxrag.tasks.retrieval.search import Strategy, StrategyConfig

        if k < 1:
            raise InvalidInput(f"k must be at least 1, got {k}")
        chosen = StrategyConfig.from_str(strategy or self.strategy)
        reranker = self._reranker(rerank, rerank_model)
        if chosen.strategy is not Strategy.BM25:  # BM25 alone reads no vector
            self._searcher.prefetch(queries)
        chunks = self._searcher.index.chunks
        return [hits_of(chunks, self._searcher.search(query, chosen, k, reranker), self._locator) for query in queries]

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
    return settings().rerank


@keeps_host_state
def open(name: str = DEFAULT_NAME, *, server_rrf: bool = _SEARCH.server_rrf, long_lived: bool = False) -> Index:
    """Open index NAME for many searches (``server_rrf``: an Elasticsearch index's hybrid fused by the cluster;
    ``long_lived``: a service's index, its query vectors kept in bounded memory, as ``Index`` says)."""
    return Index(name, server_rrf=server_rrf, long_lived=long_lived)


@keeps_host_state
def search(
    query: str,
    name: str = DEFAULT_NAME,
    k: int = _SEARCH.k,
    strategy: str | None = None,
    **options: Unpack[SearchKeywords],
) -> list[Hit]:
    """One search of index NAME, as ``ctxrag search``; ``options``: ``rerank``, ``rerank_model``, ``server_rrf``.
    For many searches, ``open`` the index once."""
    chosen = from_flat(SearchOptions, {"k": k, "strategy": strategy, **options}, "ctxrag.search")
    rerank_spec(chosen.rerank, chosen.rerank_model)  # a bad reranker fails before the index is loaded
    return Index(name, server_rrf=chosen.server_rrf).search(
        query, chosen.k, chosen.strategy, chosen.rerank, chosen.rerank_model
    )


@keeps_host_state
def index(
    source: str | os.PathLike[str],
    name: str = DEFAULT_NAME,
    *,
    server: ServerMode | None = None,
    **options: Unpack[IndexKeywords],
) -> IndexReport:
    """Load, contextualize, embed and index SOURCE (a JSON corpus or a folder) under NAME, as ``ctxrag index``; the
    new version goes live only when complete. ``options``: ``IndexOptions``' fields (``IndexKeywords``). Returns the
    run's report (``status``, ``version``, counts, costs, ``warnings``).

    The flow runs in this process and reports to a Prefect server: ``PREFECT_API_URL`` (or the active profile's)
    when set; else ``server``: ``"temporary"`` (Prefect's temporary server, started on first use and stopped when
    the program exits) or ``"background"`` (ctxrag's local server, reused or started; it outlives the program until
    ``ctxrag server stop``). ``server=None``: ``$CTXRAG_PREFECT_SERVER``, else temporary."""
    chosen = from_flat(IndexOptions, options, "ctxrag.index")
    return IndexReport.from_dict(run_index(os.fspath(source), name, chosen, _server(server)))


@keeps_host_state
def evaluate(
    evalset: str | os.PathLike[str],
    name: str = DEFAULT_NAME,
    *,
    server: ServerMode | None = None,
    **options: Unpack[EvaluateKeywords],
) -> EvaluateResult:
    """Score index NAME's strategies on EVALSET, as ``ctxrag evaluate``. ``options``: ``EvaluateOptions``' fields
    (``k`` and ``strategy`` take one value or a list). Returns ``metrics`` ({strategy: {metric: value}}), ``run_dir``,
    ``chart``, ``unavailable`` rows and the run's paid calls; the set's warnings are issued as ``UserWarning``s.
    ``server``: the Prefect server the flow reports to, as ``index``'s (default: a temporary one)."""
    chosen = from_flat(EvaluateOptions, options, "ctxrag.evaluate")

    def warn(
        message: str,
    ) -> None:  # stacklevel: the caller's line (warn, check_evaluate_input, run_evaluate, evaluate, kept)
        warnings.warn(message, UserWarning, stacklevel=6)

    return EvaluateResult.from_dict(run_evaluate(os.fspath(evalset), name, chosen, warn, _server(server)))


def _server(server: str | None) -> ServerMode:
    """The server a flow of the API uses when none is configured: ``server``, else $CTXRAG_PREFECT_SERVER, else a
    temporary one (a program leaves no Prefect process behind unless it asks)."""
    from ctxrag.prefect_commands.server_mode import server_mode

    return server_mode(server, default="temporary")


@keeps_host_state
def tune(
    name: str, evalset: str | os.PathLike[str] | None = None, *, metric: str | None = None, reset: bool = False
) -> TuneResult | None:
    """Choose index NAME's search strategy on your questions in EVALSET, as ``ctxrag tune NAME EVALSET``: each
    strategy and parameter is scored by cross-validation grouped by document, the index keeps the choice (``search``,
    ``evaluate`` and the quality gate use it), and fewer than 30 questions keep the default (``reason`` says why).
    ``metric``: e.g. pass@10 (default for Pass@k sets) or mrr@10 (docs sets). Returns what the index keeps:
    ``strategy`` (None: the default), ``reason``, ``cv``, ``default``, ``scores``. ``reset=True`` (no EVALSET)
    forgets the index's choice instead, and returns None."""
    from ctxrag.storage.environment import ctxrag_home
    from ctxrag.storage.errors import InvalidInput
    from ctxrag.storage.index_store import IndexStore
    from ctxrag.tasks.evaluation.evalset import load_evalset
    from ctxrag.tasks.evaluation.evaluate import require_golden_chunks
    from ctxrag.tasks.evaluation.tune import tune as choose

    store = IndexStore(ctxrag_home())
    if reset:
        forget_tuning(name)
        return None
    if evalset is None:
        raise InvalidInput("tune needs an evaluation set (or reset=True to forget the index's choice)")
    questions = load_evalset(os.fspath(evalset))
    index = Index(name)
    require_golden_chunks(index._searcher, questions, name)
    record = choose(index._searcher, questions, metric).record(os.fspath(evalset), index.version)
    store.save_tuning(name, record)
    return TuneResult.from_dict(record)


def forget_tuning(name: str) -> bool:
    """Forget index NAME's tuned strategy (``ctxrag tune NAME --reset``); True if it had one. An unknown index is a
    ``UserError``."""
    from ctxrag.storage.environment import ctxrag_home
    from ctxrag.storage.index_store import IndexStore

    store = IndexStore(ctxrag_home())
    if store.live_version(name) is None:
        store.open(name)  # raises UnknownIndexError, naming the indexes there are
    return store.forget_tuning(name)
