"""What shapes the Claude calls: the settings and their modes (plain values, importable without the SDK)."""

from __future__ import annotations

from dataclasses import dataclass

from ctxrag.storage.errors import InvalidInput

DEFAULT_CONCURRENCY = 2  # a Tier-1 key: 50 requests a minute; the API's headers pace the rest
MODES = ("per-chunk", "per-document", "batch", "per-document-batch")
BATCH_MODES = frozenset({"batch", "per-document-batch"})  # sent through the Message Batches API (half price)
PER_DOCUMENT_MODES = frozenset({"per-document", "per-document-batch"})  # one call answers up to 20 chunks


@dataclass(frozen=True)
class ClaudeSettings:
    """Everything that shapes the calls (plain values: safe as task parameters and in the index manifest)."""

    model: str = "claude-haiku-4-5"
    mode: str = "per-chunk"  # per-chunk | per-document | batch | per-document-batch (MODES)
    cache_ttl: str = "5m"  # or "1h"
    concurrency: int = DEFAULT_CONCURRENCY  # Claude requests open at once in the whole run (per process)
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    max_tokens: int = 400
    chunks_per_call: int = 20  # per-document mode: chunks answered by one call
    window_tokens: int = 150_000
    retry_attempts: int = 6
    corpus_description: str = "a document collection"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise InvalidInput(f"unknown Claude mode {self.mode!r}; choose one of: {', '.join(MODES)}")
        if self.cache_ttl not in {"5m", "1h"}:
            raise InvalidInput(f"cache TTL must be 5m or 1h, got {self.cache_ttl!r}")

    @property
    def batched(self) -> bool:
        """Sent through the Message Batches API (``ctxrag.tasks.context.claude.batches``), not call by call."""
        return self.mode in BATCH_MODES

    @property
    def per_document(self) -> bool:
        """The per-document prompt: one call answers up to ``chunks_per_call`` chunks (a validated tool call)."""
        return self.mode in PER_DOCUMENT_MODES
