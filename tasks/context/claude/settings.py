"""What shapes the Claude calls: the settings and their modes (plain values, importable without the SDK)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ctxrag.storage.errors import InvalidInput

DEFAULT_CONCURRENCY = 2  # a Tier-1 key: 50 requests a minute; the API's headers pace the rest
MODES = ("per-chunk", "per-document", "batch", "per-document-batch")
BATCH_MODES = frozenset({"batch", "per-document-batch"})  # sent through the Message Batches API (half price)
PER_DOCUMENT_MODES = frozenset({"per-document", "per-document-batch"})  # one call answers up to 20 chunks
FIXED = {"internal": True}  # shapes of the calls a user does not choose: not command-line options


@dataclass(frozen=True)
class ClaudeSettings:
    """Everything that shapes the calls (plain values: safe as task parameters and in the index manifest). The
    fields with a description are ``ctxrag index`` options (``flag``: the command's name when not the field's)."""

    __pydantic_config__ = {"title": "Claude"}

    model: str = field(default="claude-haiku-4-5", metadata={"description": "Claude model (claude contextualizers)."})
    mode: str = field(
        default="per-chunk",
        metadata={
            "flag": "claude-mode",
            "description": (
                "per-chunk (the cookbook's), per-document (one call, many contexts), batch (per-chunk via Message Batches, "
                "half price), per-document-batch (per-document via Message Batches)."
            ),
        },
    )
    cache_ttl: str = field(default="5m", metadata={"description": "Prompt-cache TTL: 5m or 1h."})
    concurrency: int = field(
        default=DEFAULT_CONCURRENCY,
        metadata={
            "min": 1,
            "description": ("Claude requests open at once in the whole run (all documents, every Dask worker)."),
        },
    )
    requests_per_minute: float | None = field(
        default=None, metadata={"flag": "rpm", "description": "Client-side limit: Claude requests per minute."}
    )
    tokens_per_minute: float | None = field(
        default=None,
        metadata={
            "flag": "tpm",
            "description": (
                "Client-side limit: Claude input tokens per minute (estimated; as in the API's limit, cache reads do not count)."
            ),
        },
    )
    corpus_description: str = field(
        default="a document collection", metadata={"description": "What the corpus is (summary prompt)."}
    )
    max_tokens: int = field(default=400, metadata=FIXED)
    chunks_per_call: int = field(default=20, metadata=FIXED)  # per-document mode: chunks answered by one call
    window_tokens: int = field(default=150_000, metadata=FIXED)  # the document's part in a prompt
    retry_attempts: int = field(
        default=6,
        metadata={
            "flag": "claude-retries",
            "min": 1,
            "description": (
                "Claude: attempts per call for 529s, 5xx and lost connections, 1 for none (429s wait as the API's "
                "retry-after says, up to 15 minutes a call); one budget per call."
            ),
        },
    )
    batch_poll_seconds: float = field(default=30.0, metadata=FIXED)  # how often open Message Batches are polled

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
