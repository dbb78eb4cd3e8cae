"""Stage 3: a vector for every indexed text (stored ones reused; the rest embedded and stored batch by batch)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from prefect import task
from prefect.cache_policies import NONE

from storage.artifacts import embeddings_cache
from storage.ledger import Ledger
from tasks.embed import EmbedderSpec, embed_with_cache
from tasks.embedders import make_embedder
from tasks.progress import stage_progress
from tasks.retry import retry_only_io


@task(retries=2, retry_delay_seconds=[10, 60], retry_condition_fn=retry_only_io, cache_policy=NONE)
def embed_chunks(texts: list[str], spec: EmbedderSpec, home: Path, run_id: str = "") -> tuple[np.ndarray, int]:
    """Vectors for the texts, and how many had to be embedded."""
    embedder = make_embedder(spec, Ledger(home).append, run_id)
    with stage_progress("embedding") as update:
        return embed_with_cache(texts, spec, embeddings_cache(home), progress=update, embedder=embedder)
