"""Reranking as a search stage: Cohere's reranker, Claude as a reranker, or a local cross-encoder.

A reranker reorders a strategy's over-retrieved candidates and keeps the top k. Cohere gets k x 10
candidates (the cookbook's over-retrieval), Claude 20 (the RAG guide's initial_k), a local cross-encoder 30
(``ctxrag.tasks.retrieval.cross_encoder``). Each candidate is
the chunk's text with its context.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from ctxrag.storage.errors import InvalidInput
from ctxrag.storage.ledger import LedgerRow, SaveLedger
from ctxrag.storage.secrets import MissingKey, redact, resolve_key
from ctxrag.tasks.common.providers import Provider, limits_from_environment
from ctxrag.tasks.common.ratelimit import shared_limiter
from ctxrag.tasks.common.retry import ApiCallFailed, RetryPolicy
from ctxrag.tasks.context.claude.client import ClaudeClient, message_text
from ctxrag.tasks.context.claude.pricing import Usage, charge

COHERE_PRICE_PER_SEARCH_UNIT = 0.002  # US dollars (rerank-english-v3.0 and rerank-v3.5: $2 per 1,000 searches)
COHERE_TIMEOUT_S = 60.0  # one rerank request's answer
CLAUDE_INITIAL_K = 20
RELEVANT = re.compile(r"<relevant_indices>(.*?)(?:</relevant_indices>|$)", re.S)


class RerankError(ApiCallFailed):
    """A rerank call that failed for good; the message is redacted."""


class Reranker(Protocol):
    label: str  # "rerank-cohere", ...

    def depth(self, k: int) -> int: ...

    def rerank(self, query: str, documents: list[str], k: int) -> list[int]: ...


@dataclass(frozen=True)
class RerankSpec:
    """``cohere``, ``claude`` or ``local:MODEL`` (a cross-encoder's folder or Hugging Face id), with an optional model name."""

    provider: str
    model: str = ""
    path: str = ""

    @classmethod
    def from_str(cls, value: str, model: str = "") -> RerankSpec | None:
        if value in {"", "none"}:
            return None
        if value.startswith("local:"):
            if not value.split(":", 1)[1].strip():
                raise InvalidInput(
                    "rerank local:MODEL needs a cross-encoder's folder or Hugging Face id after 'local:'"
                )
            return cls("local", path=value.split(":", 1)[1])
        if value in {"cohere", "claude"}:
            return cls(value, model)
        raise InvalidInput(f"unknown reranker {value!r}; choose cohere, claude, local:MODEL (a folder or id) or none")

    @property
    def label(self) -> str:
        return f"rerank-{self.provider}"

    def missing_key(self) -> str | None:
        """The variable to set when this reranker's key is not configured (None when it needs none or has one)."""
        variable = {"cohere": "CO_API_KEY", "claude": "ANTHROPIC_API_KEY"}.get(self.provider)
        if variable is None:
            return None
        try:
            _key_for(self.provider)
        except MissingKey:
            return variable
        return None

    def build(self, ledger: SaveLedger | None = None, run_id: str = "") -> Reranker:
        if self.provider == "cohere":
            return CohereReranker(self.model or "rerank-english-v3.0", ledger, run_id)
        if self.provider == "claude":
            return ClaudeReranker(self.model or "claude-haiku-4-5", ledger, run_id)
        from ctxrag.tasks.retrieval.cross_encoder import CrossEncoderReranker

        return CrossEncoderReranker(self.path)


def _key_for(provider: str) -> str:
    if provider == "cohere":
        for variable in ("CO_API_KEY", "COHERE_API_KEY"):
            if os.environ.get(variable):
                return resolve_key(variable, "cohere-api-key")
        return resolve_key("CO_API_KEY", "cohere-api-key")
    return resolve_key("ANTHROPIC_API_KEY", "anthropic-api-key")


@dataclass
class CohereReranker:
    """Cohere ``/v2/rerank`` through ``cohere.ClientV2`` (``CO_API_URL`` sets the base URL; SDK retries off)."""

    model: str = "rerank-english-v3.0"
    ledger: SaveLedger | None = None
    run_id: str = ""
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    label: str = "rerank-cohere"
    _client: Any = None

    def depth(self, k: int) -> int:
        return k * 10

    def client(self) -> Any:
        if self._client is None:
            import cohere

            base_url = os.environ.get("CO_API_URL") or "https://api.cohere.com"  # read here: the SDK reads it at import
            self._client = cohere.ClientV2(
                api_key=_key_for("cohere"), base_url=base_url, max_retries=0, timeout=COHERE_TIMEOUT_S
            )
        return self._client

    def rerank(self, query: str, documents: list[str], k: int) -> list[int]:
        if not documents:
            return []
        row = LedgerRow(self.run_id, "rerank", Provider.COHERE, self.model, "", "rerank", "", [], "ok")
        started = time.perf_counter()
        retries: list[float] = []
        waits: list[float] = []
        limiter = shared_limiter(Provider.COHERE, *limits_from_environment(Provider.COHERE))
        tokens = sum(len(text.encode("utf-8")) for text in (query, *documents)) // 3  # an estimate, as Voyage's

        def attempt() -> Any:
            with limiter.slot(tokens, lease_s=COHERE_TIMEOUT_S) as waited:  # the run's budget, held per request
                waits.append(waited)
                return self.client().rerank(model=self.model, query=query, documents=documents, top_n=k)

        try:
            response = self.policy.call(attempt, on_retry=lambda error, wait: retries.append(wait))
        except Exception as error:
            row.attempts, row.waited_s = len(retries) + 1, sum(waits)
            row.status, row.error = (
                "error",
                redact(f"{getattr(error, 'status_code', '')} {getattr(error, 'body', error)}"),
            )
            _record(self.ledger, row, started)
            raise RerankError(f"Cohere rerank ({self.model}): {row.error}") from None
        row.attempts, row.waited_s = len(retries) + 1, sum(waits)
        units = getattr(getattr(getattr(response, "meta", None), "billed_units", None), "search_units", None) or 1
        row.units = int(units)
        row.cost_usd = row.cost_without_cache_usd = row.units * COHERE_PRICE_PER_SEARCH_UNIT
        _record(self.ledger, row, started)
        return [result.index for result in response.results][:k]


RERANK_PROMPT = """Query: {query}
You are about to be given a group of documents, each preceded by its index number in square brackets. Your task is to select the only {k} most relevant documents from the list to help us answer the query.

{documents}

Output only the indices of {k} most relevant documents in order of relevance, separated by commas, enclosed in XML tags here:
<relevant_indices>put the numbers of your indices here, separated by commas</relevant_indices>"""


@dataclass
class ClaudeReranker:
    """The RAG guide's level 3: Claude picks the k most relevant of 20 candidates, answering indices in XML tags.

    Invalid, duplicate or out-of-range indices are dropped; when fewer than k remain, the rest is filled in the
    original order and the query is counted in ``fallbacks``.
    """

    model: str = "claude-haiku-4-5"
    ledger: SaveLedger | None = None
    run_id: str = ""
    label: str = "rerank-claude"
    fallbacks: int = 0
    _client: ClaudeClient | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def depth(self, k: int) -> int:
        return max(k, CLAUDE_INITIAL_K)

    def rerank(self, query: str, documents: list[str], k: int) -> list[int]:
        if not documents:
            return []
        listing = "\n".join(f"[{index}] {text[:2000]}" for index, text in enumerate(documents))
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": 100,
            "messages": [{"role": "user", "content": RERANK_PROMPT.format(query=query, k=k, documents=listing)}],
        }
        row = LedgerRow(self.run_id, "rerank", Provider.ANTHROPIC, self.model, "rerank-v1", "rerank", "", [], "ok")
        started = time.perf_counter()
        if self._client is None:
            self._client = ClaudeClient()
        try:
            reply = self._client.create(**params)
        except Exception as error:
            row.status, row.error, row.attempts = "error", str(error), getattr(error, "attempts", 1)
            _record(self.ledger, row, started)
            raise RerankError(f"Claude rerank: {error}") from None
        row.attempts = reply.attempts
        charge(row, self.model, Usage.from_api(reply.message.usage))
        _record(self.ledger, row, started)
        chosen = parse_indices(message_text(reply.message), len(documents))[:k]
        if len(chosen) < min(k, len(documents)):
            with self._lock:
                self.fallbacks += 1
            chosen += [index for index in range(len(documents)) if index not in chosen][: k - len(chosen)]
        return chosen


def parse_indices(text: str, count: int) -> list[int]:
    """Valid, distinct indices from the ``<relevant_indices>`` tag (or the bare text), in the order given."""
    match = RELEVANT.search(text)
    body = match.group(1) if match else text
    chosen: list[int] = []
    for piece in body.split(","):
        piece = piece.strip()
        if piece.isdigit() and int(piece) < count and int(piece) not in chosen:
            chosen.append(int(piece))
    return chosen


def _record(ledger: SaveLedger | None, row: LedgerRow, started: float) -> None:
    row.latency_s = time.perf_counter() - started
    if ledger:
        ledger([row])
