"""Who does a piece of work: the offline local model, or a paid API (the name the ledger and the manifests record)."""

from __future__ import annotations

from enum import StrEnum


class Provider(StrEnum):
    LOCAL = "local"  # the embedder shipped in a package: offline, unpaid
    VOYAGE = "voyage"
    VOYAGE_CONTEXT = "voyage-context"  # voyage-context-3's contextualized chunk embeddings
    ANTHROPIC = "anthropic"
    COHERE = "cohere"


EMBEDDERS = frozenset({Provider.LOCAL, Provider.VOYAGE, Provider.VOYAGE_CONTEXT})
