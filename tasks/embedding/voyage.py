"""Voyage AI embeddings through the official ``voyageai`` SDK: batched within the API's limits, one retry layer.

Limits per request: at most 1,000 texts and the model's batch token limit (``BATCH_TOKEN_LIMITS``). Tokens are
estimated from UTF-8 bytes (``estimate_tokens``, deliberately high) because the SDK's exact counter downloads a
tokenizer. The SDK retries nothing by default and ignores ``retry-after``; ctxrag's retry layer does both.
Key: ``VOYAGE_API_KEY`` or the Prefect Secret block ``voyage-api-key``. Base URL: ``VOYAGE_BASE_URL`` (the API root
with ``/v1``, e.g. ``https://host/v1``), since the SDK reads no such variable.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ctxrag.storage.ledger import LedgerRow
from ctxrag.storage.secrets import redact, resolve_key
from ctxrag.tasks.common.providers import Provider, limits_from_environment
from ctxrag.tasks.common.ratelimit import shared_limiter
from ctxrag.tasks.common.retry import ApiCallFailed, RetryPolicy
from ctxrag.tasks.embedding.embed import EmbedderSpec

MAX_TEXTS_PER_REQUEST = 1_000
BATCH_TOKEN_LIMITS = {  # per request, from Voyage's documentation
    "voyage-3.5-lite": 1_000_000,
    "voyage-4-lite": 1_000_000,
    "voyage-3-lite": 1_000_000,
    "voyage-3.5": 320_000,
    "voyage-4": 320_000,
    "voyage-2": 320_000,
    "voyage-3": 320_000,
    "voyage-3-large": 120_000,
    "voyage-4-large": 120_000,
    "voyage-code-3": 120_000,
    "voyage-finance-2": 120_000,
    "voyage-law-2": 120_000,
}
PRICE_PER_MTOK = {  # US dollars per million tokens
    "voyage-2": 0.10,
    "voyage-3.5": 0.06,
    "voyage-3.5-lite": 0.02,
    "voyage-3-large": 0.18,
    "voyage-code-3": 0.18,
    "voyage-4": 0.06,
    "voyage-4-lite": 0.02,
    "voyage-4-large": 0.12,
    "voyage-3": 0.06,
}
SAFETY = 0.9  # stay under the limit even when the estimate is low
REQUEST_TIMEOUT_S = 120.0  # one request's answer, of up to 1,000 texts


class VoyageCallError(ApiCallFailed):
    """An embedding request that failed for good; the message is the API's own ``detail``, redacted."""


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text.encode("utf-8")) / 3)


def batches(texts: list[str], model: str) -> list[list[int]]:
    """Indices of ``texts`` grouped into requests that respect the count and token limits."""
    return pack([estimate_tokens(text) for text in texts], model)


def pack(sizes: list[int], model: str) -> list[list[int]]:
    """Indices of texts of ``sizes`` tokens grouped into requests that respect the count and token limits."""
    limit = int(BATCH_TOKEN_LIMITS.get(model, 120_000) * SAFETY)
    groups: list[list[int]] = [[]]
    used = 0
    for index, tokens in enumerate(sizes):
        if groups[-1] and (len(groups[-1]) >= MAX_TEXTS_PER_REQUEST or used + tokens > limit):
            groups.append([])
            used = 0
        groups[-1].append(index)
        used += tokens
    return [group for group in groups if group]


class VoyageEmbedder:
    """``embed(texts, input_type)``: "document" for chunks, "query" for queries; one ledger row per request."""

    def __init__(
        self,
        spec: EmbedderSpec,
        policy: RetryPolicy | None = None,
        ledger: Callable[[list[LedgerRow]], None] | None = None,
        run_id: str = "",
    ) -> None:
        self.spec = spec
        self._policy = policy or RetryPolicy()
        self._ledger = ledger
        self._run_id = run_id
        self._client: Any = None

    def client(self) -> Any:
        if self._client is None:
            import voyageai

            self._client = voyageai.Client(
                api_key=resolve_key("VOYAGE_API_KEY", "voyage-api-key"),
                max_retries=0,  # the SDK counts attempts; 0 means one try: our layer retries
                timeout=REQUEST_TIMEOUT_S,  # a lost answer is retried, and the budget's lease outlasts a live one
                base_url=os.environ.get("VOYAGE_BASE_URL") or None,
            )
        return self._client

    def embed(self, texts: list[str], input_type: str = "document") -> np.ndarray:
        rows: list[np.ndarray] = [np.zeros(0)] * len(texts)
        for group in batches(texts, self.spec.model):
            vectors = self._request([texts[i] for i in group], input_type)
            for index, vector in zip(group, vectors):
                rows[index] = vector
        return np.asarray(rows, dtype=np.float32) if texts else np.zeros((0, 0), dtype=np.float32)

    def _request(self, texts: list[str], input_type: str) -> list[np.ndarray]:
        result = self._paid_call(
            input_type,
            len(texts),
            sum(map(estimate_tokens, texts)),
            "Voyage embeddings",
            PRICE_PER_MTOK.get(self.spec.model, 0.12),
            lambda: self.client().embed(
                texts, model=self.spec.model, input_type=input_type, output_dimension=self.spec.output_dimension
            ),
        )
        return [np.asarray(vector, dtype=np.float32) for vector in result.embeddings]

    def _paid_call(
        self, mode: str, units: int, tokens: int, what: str, price_per_mtok: float, call: Callable[[], Any]
    ) -> Any:
        """One SDK call of about ``tokens`` input tokens under the retry policy and the run's Voyage budget
        (``limits_from_environment``), with its ledger row (attempts, latency, time waited for the budget, tokens,
        cost); any SDK error becomes one redacted ``VoyageCallError`` naming ``what`` and the model."""
        started = time.perf_counter()
        row = LedgerRow(
            run_id=self._run_id,
            stage="embed",
            provider=Provider.VOYAGE,
            model=self.spec.model,
            prompt_version="",
            mode=mode,
            doc_id="",
            chunk_ids=[],
            status="ok",
        )
        retries: list[float] = []
        waits: list[float] = []
        limiter = shared_limiter(Provider.VOYAGE, *limits_from_environment(Provider.VOYAGE))

        def attempt() -> Any:
            with limiter.slot(tokens, lease_s=REQUEST_TIMEOUT_S) as waited:  # the run's budget, held per request
                waits.append(waited)
                return call()

        try:
            result = self._policy.call(attempt, on_retry=lambda error, wait: retries.append(wait))
        except Exception as error:
            row.attempts, row.waited_s = len(retries) + 1, sum(waits)
            row.status, row.error, row.latency_s = "error", redact(str(error)), time.perf_counter() - started
            self._record(row)
            raise VoyageCallError(f"{what} ({self.spec.model}): {row.error}") from None
        row.attempts, row.latency_s, row.waited_s = len(retries) + 1, time.perf_counter() - started, sum(waits)
        billed = int(getattr(result, "total_tokens", 0) or 0)
        row.input_tokens, row.units = billed, units
        row.cost_usd = row.cost_without_cache_usd = billed * price_per_mtok / 1_000_000
        self._record(row)
        return result

    def _record(self, row: LedgerRow) -> None:
        if self._ledger:
            self._ledger([row])
