"""Which embedder a spec names: the local model or Voyage (above both modules; neither imports this one)."""

from __future__ import annotations

from storage.ledger import SaveLedger
from tasks.embed import Embedder, EmbedderSpec, LocalEmbedder
from tasks.voyage import VoyageEmbedder


def make_embedder(spec: EmbedderSpec, ledger: SaveLedger | None = None, run_id: str = "") -> Embedder:
    """The embedder for a spec (Voyage's client is built lazily: no key is needed until something is embedded)."""
    if spec.provider == "voyage":
        return VoyageEmbedder(spec, ledger=ledger, run_id=run_id)
    return LocalEmbedder(spec)
