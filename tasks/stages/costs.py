"""A run's paid calls of one stage, summed from the ledger (for the run report and the costs artifact)."""

from __future__ import annotations

from pathlib import Path

from ctxrag.storage.ledger import Ledger, summarize


def paid_calls(home: Path, run_id: str, stage: str) -> dict[str, object]:
    """Calls, tokens, cache-read share, cost and cost without caching of this run's ``stage``."""
    ledger = Ledger(home)
    ledger.compact()
    return summarize([row for row in ledger.rows(run_id) if row["stage"] == stage])
