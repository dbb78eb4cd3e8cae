"""Index backends: where a version's BM25 and vector indexes live, chosen once from the index manifest.

A backend builds a version from its rows, texts and vectors, stages, promotes, discards and deletes versions, and
opens a version as a ``Ranker`` (rank by BM25, rank by vector, and server-side fusion where it has one). Adding a
backend (OpenSearch, PostgreSQL, ...) is one module with a class of this shape, named in ``BACKENDS``.
"""

from __future__ import annotations

from ctxrag.storage.backends.base import IndexBackend, Ranker, Ranking, RowSet
from ctxrag.storage.errors import InvalidInput

BACKENDS = ("embedded", "elasticsearch")


def backend_for(name: str) -> IndexBackend:
    """The backend called ``name`` (an index manifest's ``config.backend``, or the ``--backend`` option)."""
    if name == "embedded":
        from ctxrag.storage.backends.embedded import EmbeddedBackend

        return EmbeddedBackend()
    if name == "elasticsearch":
        from ctxrag.storage.extras import require

        require("elasticsearch", "elasticsearch", "the elasticsearch backend")
        from ctxrag.storage.backends.elasticsearch import ElasticsearchBackend

        return ElasticsearchBackend()
    raise InvalidInput(f"unknown backend {name!r}; choose one of: {', '.join(BACKENDS)}")


__all__ = ["BACKENDS", "IndexBackend", "Ranker", "Ranking", "RowSet", "backend_for"]
