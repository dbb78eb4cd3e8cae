"""Rank fusion's constants, owned here so the embedded search and Elasticsearch's server-side ``rrf`` agree."""

from __future__ import annotations

RRF_K = 60  # reciprocal rank fusion: score = sum of 1 / (RRF_K + rank)
FUSION_DEPTH = 150  # how deep each retriever ranks before the fusion
