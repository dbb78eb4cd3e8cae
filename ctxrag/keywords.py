"""The Python API's option keywords, typed: ``ctxrag.index(source, rpm=50)`` is checked as ``ctxrag index --rpm 50``
would be. They are ``ctxrag.tasks.options``' flat options (tests/ctxrag/test_keywords.py holds the two equal)."""

from __future__ import annotations

from typing import TypedDict


class IndexKeywords(TypedDict, total=False):
    """``ctxrag.index``'s options: ``IndexOptions``' fields, flat, as ``ctxrag index``'s flags name them."""

    contextualizer: str
    model: str
    claude_mode: str
    cache_ttl: str
    concurrency: int
    rpm: float | None
    tpm: float | None
    corpus_description: str
    claude_retries: int
    embedder: str
    embedding_model: str | None
    output_dimension: int | None
    max_seq_length: int
    window_tokens: int
    context_tokens: int
    backend: str
    include: list[str] | None
    exclude: list[str] | None
    max_file_bytes: int
    gate: str | None
    gate_strategy: str | None
    gate_metric: str | None
    gate_max_drop: float
    task_runner: str | None


class EvaluateKeywords(TypedDict, total=False):
    """``ctxrag.evaluate``'s options: ``EvaluateOptions``' fields (``k`` and ``strategy``: one value or a list)."""

    k: int | list[int] | None
    strategy: str | list[str] | None
    rerank: str
    rerank_model: str
    end_to_end: bool
    answer_model: str
    judge_model: str
    subject: str
    server_rrf: bool
