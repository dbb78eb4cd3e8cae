"""Who does a piece of work: the offline local model, or a paid API (the name the ledger and the manifests record)."""

from __future__ import annotations

import os
from enum import StrEnum

from ctxrag.storage.errors import InvalidInput


class Provider(StrEnum):
    LOCAL = "local"  # the embedder shipped in a package: offline, unpaid
    VOYAGE = "voyage"
    VOYAGE_CONTEXT = "voyage-context"  # voyage-context-3's contextualized chunk embeddings
    ANTHROPIC = "anthropic"
    COHERE = "cohere"


EMBEDDERS = frozenset({Provider.LOCAL, Provider.VOYAGE, Provider.VOYAGE_CONTEXT})

DEFAULT_IN_FLIGHT = (
    4  # a provider's calls open at once across a run, when nothing else is set (Claude's: --concurrency)
)


def limits_from_environment(provider: Provider) -> tuple[int, float | None]:
    """Voyage's and Cohere's calls in flight across a run (``CTXRAG_VOYAGE_CONCURRENCY``, default 4) and tokens per
    minute (``CTXRAG_VOYAGE_TOKENS_PER_MINUTE``, default none: the API's 429s are waited out), likewise COHERE. Read
    where the calls are made (a Dask worker: its own environment), since no command option reaches there."""
    name = "VOYAGE" if provider in (Provider.VOYAGE, Provider.VOYAGE_CONTEXT) else provider.name
    in_flight, per_minute = (
        os.environ.get(f"CTXRAG_{name}_{what}", "").strip() for what in ("CONCURRENCY", "TOKENS_PER_MINUTE")
    )
    try:
        limit = int(in_flight) if in_flight else DEFAULT_IN_FLIGHT
        tokens = float(per_minute) if per_minute else None
    except ValueError:
        raise InvalidInput(
            f"CTXRAG_{name}_CONCURRENCY ({in_flight!r}) must be a whole number and CTXRAG_{name}_TOKENS_PER_MINUTE "
            f"({per_minute!r}) a number"
        ) from None
    if limit < 1 or (tokens is not None and tokens <= 0):
        raise InvalidInput(f"CTXRAG_{name}_CONCURRENCY must be 1 or more and CTXRAG_{name}_TOKENS_PER_MINUTE above 0")
    return limit, tokens
