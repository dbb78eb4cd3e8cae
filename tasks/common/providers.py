"""Who does a piece of work: the offline local model, or a paid API (the name the ledger and the manifests record)."""

from __future__ import annotations

from enum import StrEnum

from ctxrag.storage.settings import settings


class Provider(StrEnum):
    LOCAL = "local"  # the embedder shipped in a package: offline, unpaid
    VOYAGE = "voyage"
    VOYAGE_CONTEXT = "voyage-context"  # voyage-context-3's contextualized chunk embeddings
    ANTHROPIC = "anthropic"
    COHERE = "cohere"


EMBEDDERS = frozenset({Provider.LOCAL, Provider.VOYAGE, Provider.VOYAGE_CONTEXT})


def limits_from_environment(provider: Provider) -> tuple[int, float | None]:
    """Voyage's and Cohere's calls in flight across a run (``CTXRAG_VOYAGE_CONCURRENCY``, default 4) and tokens per
    minute (``CTXRAG_VOYAGE_TOKENS_PER_MINUTE``, default none: the API's 429s are waited out), likewise COHERE. Read
    where the calls are made (a Dask worker: its own environment), since no command option reaches there."""
    chosen = settings()  # checked there: a bad value is an InvalidInput naming the variable
    if provider in (Provider.VOYAGE, Provider.VOYAGE_CONTEXT):
        return chosen.voyage_concurrency, chosen.voyage_tokens_per_minute
    return chosen.cohere_concurrency, chosen.cohere_tokens_per_minute
