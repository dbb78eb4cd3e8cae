"""ctxrag's Python API: ``index``, ``search``, ``evaluate`` and ``open``, the ``ctxrag`` command's work as functions
(``search`` and ``open``: ``ctxrag.searching``).

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
import warnings
from typing import TYPE_CHECKING, Unpack

from ctxrag.hits import Hit, Location, SearchAnswer
from ctxrag.host_state import keeps_host_state
from ctxrag.keywords import EvaluateKeywords, IndexKeywords
from ctxrag.results import EvaluateResult, IndexReport, TuneResult
from ctxrag.runs import run_evaluate, run_index
from ctxrag.searching import Index, open, search
from ctxrag.storage.errors import UserError
from ctxrag.tasks.common.search_request import SearchRequest
from ctxrag.tasks.options import DEFAULT_NAME, EvaluateOptions, IndexOptions, from_flat

if TYPE_CHECKING:
    from ctxrag.prefect_commands.server_mode import ServerMode

__all__ = [
    "EvaluateResult",
    "Hit",
    "Index",
    "IndexReport",
    "Location",
    "SearchAnswer",
    "SearchRequest",
    "TuneResult",
    "UserError",
    "evaluate",
    "index",
    "open",
    "search",
    "tune",
]


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
