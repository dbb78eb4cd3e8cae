"""Which embedder a spec names: the local model, Voyage or Voyage contextualized (above both modules; neither imports this one)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ctxrag.tasks.common.providers import Provider
from ctxrag.tasks.embedding.embed import Embedder, EmbedderSpec, LocalEmbedder

if TYPE_CHECKING:
    from ctxrag.storage.ledger import SaveLedger


def make_embedder(
    spec: EmbedderSpec, ledger: SaveLedger | None = None, run_id: str = "", models_dir: Path | None = None
) -> Embedder:
    """The embedder for a spec (Voyage's client is built lazily: no key is needed until something is embedded).
    ``models_dir``: the local embedder's ONNX query model is kept there (ctxrag.tasks.embedding.onnx_queries)."""
    if spec.provider == Provider.VOYAGE:
        from ctxrag.tasks.embedding.voyage import VoyageEmbedder  # its SDK and retry layer: not for a local index

        return VoyageEmbedder(spec, ledger=ledger, run_id=run_id)
    if spec.provider == Provider.VOYAGE_CONTEXT:
        from ctxrag.tasks.embedding.voyage_context import VoyageContextEmbedder

        return VoyageContextEmbedder(spec, ledger=ledger, run_id=run_id)
    if spec.source:  # a model from a folder or a Hugging Face id
        from ctxrag.tasks.embedding.model_embedder import ModelEmbedder

        return ModelEmbedder(spec)
    return LocalEmbedder(spec, models_dir=models_dir)
