"""The indexes under a home, as ``ctxrag list`` prints them and the services' ``list_indexes`` returns them."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def index_listing(home: Path) -> list[dict[str, Any]]:
    """One entry per index: name, documents, chunks, contextualizer, strategy (and whether ``ctxrag tune`` chose it),
    version, created_at, source. A corrupt manifest or tuning file raises its ``UserError``, naming the file."""
    from ctxrag.storage.index_store import IndexStore
    from ctxrag.tasks.retrieval.search import tuned_strategy

    store = IndexStore(home)
    listed = []
    for name in store.names():
        manifest, tuning = store.manifest(name) or {}, store.tuning(name)
        counts, config = manifest.get("counts", {}), manifest.get("config", {})
        listed.append(
            {
                "name": name,
                "documents": counts.get("documents"),
                "chunks": counts.get("chunks"),
                "contextualizer": config.get("contextualizer", {}).get("name"),
                "strategy": tuned_strategy(tuning, name).label,
                "tuned": bool(tuning and tuning.get("strategy")),
                "version": manifest.get("version"),
                "created_at": manifest.get("created_at"),
                "source": manifest.get("source"),
            }
        )
    return listed
