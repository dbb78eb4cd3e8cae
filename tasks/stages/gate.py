"""Stage 5 (optional): score the staged version against the live one before it may replace it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NONE

from ctxrag.storage.errors import InvalidInput, UserError
from ctxrag.storage.index_store import IndexStore
from ctxrag.storage.ledger import Ledger
from ctxrag.tasks.evaluation.evalset import EvalFormat, load_evalset
from ctxrag.tasks.evaluation.evaluate import evaluate
from ctxrag.tasks.retrieval.search import Searcher, strategy_of


class GateRejected(UserError, RuntimeError):
    """The new index scored worse than the live one by more than the allowed drop; the live one stays."""

    retryable = False


@task(cache_policy=NONE)
def check_gate(
    name: str,
    home: Path,
    version_id: str,
    evalset: str,
    strategy: str | None,
    metric: str | None,
    max_drop: float,
    run_id: str = "",
) -> dict[str, object]:
    """Score the staged and the live version with one strategy (None: the index's, tuned or the default); raise
    ``GateRejected`` if the drop is too large."""
    questions = load_evalset(evalset)
    ks = questions.format.default_ks
    metric = metric or ("pass@10" if questions.format is EvalFormat.PASS_AT_K else f"recall@{ks[0]}")
    store = IndexStore(home)
    chosen = strategy_of(store, name, strategy)
    paid: dict[str, Any] = {
        "home": home,
        "ledger": Ledger(home).append,
        "run_id": run_id,
    }  # query embeddings: stored, and in the ledger
    candidate = evaluate(Searcher(store.open(name, version_id, staged=True), **paid), questions, [chosen], ks).metrics[
        chosen.label
    ]
    live = evaluate(Searcher(store.open(name), **paid), questions, [chosen], ks).metrics[chosen.label]
    if metric not in candidate:
        raise InvalidInput(f"gate metric {metric!r} is not computed for {evalset}; choose one of {sorted(candidate)}")
    report = {
        "metric": metric,
        "strategy": chosen.label,
        "live": live[metric],
        "candidate": candidate[metric],
        "max_drop": max_drop,
    }
    if candidate[metric] < live[metric] - max_drop:
        raise GateRejected(
            f"quality gate: {chosen.label} {metric} would fall from {live[metric]:.4f} to {candidate[metric]:.4f} "
            f"(allowed drop {max_drop}); the live index is kept"
        )
    return report
