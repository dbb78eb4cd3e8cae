"""What contextualizing pending chunks would cost in each Claude mode, without a paid call.

The requests are the run's own (``ClaudeContextualizer._chunk_params`` / ``_group_params`` over the same windows and
groups), so requests and prompt tokens follow the run's shape: per document window, the first request writes the
cached prefix (tools + document block) and the others read it, unless the prefix is below the model's cache minimum,
where every token is plain input. Batch modes cost half and assume the same cache reads (on the API a batch's cache
hits are best effort, so ``worst_case_cost_usd`` prices every request as a cache write). Output tokens and latency
are assumptions (``ASSUMED_*``), stated in every plan.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ctxrag.tasks.common.models import Chunk, Document
from ctxrag.tasks.context.claude.contextualizer import (
    ClaudeContextualizer,
    chunk_groups,
    document_windows,
    estimate_tokens,
)
from ctxrag.tasks.context.claude.pricing import Usage, cost_usd, cost_without_caching_usd, priced_facts
from ctxrag.tasks.context.claude.prompts import RECORD_CONTEXTS_TOOL
from ctxrag.tasks.context.claude.token_count import TokenCounter

ASSUMED_CONTEXT_TOKENS = 75  # output per context: the Contextual Retrieval guide's contexts run 50-100 tokens
ASSUMED_TOOL_ENTRY_TOKENS = 10  # per-document modes: the tool call's JSON around each context
ASSUMED_FIRST_TOKEN_S = 0.5  # a request's latency: this, plus its output at ASSUMED_OUTPUT_TOKENS_PER_S
ASSUMED_OUTPUT_TOKENS_PER_S = 100.0
BATCH_WALL_TIME = "set by the Message Batches API: most batches end within an hour, all within 24 hours"
Pending = list[tuple[Document, list[Chunk]]]


@dataclass(frozen=True)
class Limits:
    """The key's limits a run would observe: ``--concurrency``, ``--rpm`` and ``--tpm``."""

    concurrency: int
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None


@dataclass
class ModeEstimate:
    """One mode's pending work and its price."""

    mode: str
    documents: int = 0
    chunks: int = 0
    requests: int = 0
    input_tokens: int = 0  # uncached
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cost_without_cache_usd: float = 0.0
    worst_case_cost_usd: float = 0.0  # every cache read missed (batch modes: cache hits are best effort)
    wall_time_s: float | None = 0.0  # None: a batch (the API decides)
    wall_time_bound: str = ""  # concurrency | rpm | tpm | batch
    documents_below_cache_minimum: list[str] = field(default_factory=list)
    latency_sum_s: float = field(default=0.0, repr=False)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("latency_sum_s")
        for name in ("cost_usd", "cost_without_cache_usd", "worst_case_cost_usd"):
            data[name] = round(data[name], 6)
        return data


def estimate_mode(
    worker: ClaudeContextualizer,
    pending: Pending,
    counter: TokenCounter,
    limits: Limits,
    context_tokens: int = ASSUMED_CONTEXT_TOKENS,
) -> ModeEstimate:
    """The requests, tokens, cost and wall time of contextualizing ``pending`` with ``worker``'s mode (each context
    assumed ``context_tokens`` long)."""
    settings = worker.settings
    minimum = priced_facts(settings.model).min_cacheable_tokens
    estimate = ModeEstimate(settings.mode, documents=len(pending), chunks=sum(len(chunks) for _, chunks in pending))
    windows = [
        (document, text, window)
        for document, chunks in pending
        for text, window in document_windows(document, chunks, settings.window_tokens)
    ]
    requests = [_requests(worker, text, window) for _, text, window in windows]
    blocks = [params[0]["messages"][0]["content"][0] for params in requests]
    prefixes = counter.documents(settings.model, blocks)
    tools = (
        counter.tools(settings.model, [RECORD_CONTEXTS_TOOL], requests[0][0]["tool_choice"])
        if settings.per_document and requests
        else 0
    )
    below: set[str] = set()
    for (document, _, window), params, block, counted in zip(windows, requests, blocks, prefixes):
        ratio = counted / max(1, estimate_tokens(block["text"]))
        prefix = tools + counted
        suffixes = [round(estimate_tokens(request["messages"][0]["content"][1]["text"]) * ratio) for request in params]
        outputs = _outputs(worker, window, context_tokens)
        if prefix >= minimum:
            estimate.cache_write_tokens += prefix
            estimate.cache_read_tokens += prefix * (len(params) - 1)
            estimate.input_tokens += sum(suffixes)
        else:
            below.add(document.doc_id)
            estimate.input_tokens += prefix * len(params) + sum(suffixes)
        estimate.requests += len(params)
        estimate.output_tokens += sum(outputs)
        estimate.latency_sum_s += sum(ASSUMED_FIRST_TOKEN_S + out / ASSUMED_OUTPUT_TOKENS_PER_S for out in outputs)
    estimate.documents_below_cache_minimum = sorted(below)
    _price(estimate, settings.model, settings.cache_ttl, settings.batched)
    _wall_time(estimate, limits, settings.batched)
    return estimate


def _requests(worker: ClaudeContextualizer, text: str, window: list[Chunk]) -> list[dict[str, Any]]:
    """The window's requests, built exactly as the run builds them."""
    if worker.settings.per_document:
        return [worker._group_params(text, group) for group in chunk_groups(window, worker.settings.chunks_per_call)]
    return [worker._chunk_params(text, chunk) for chunk in window]


def _outputs(worker: ClaudeContextualizer, window: list[Chunk], context_tokens: int) -> list[int]:
    """Assumed output tokens of each request of a window."""
    if worker.settings.per_document:
        entry = context_tokens + ASSUMED_TOOL_ENTRY_TOKENS
        return [entry * len(group) for group in chunk_groups(window, worker.settings.chunks_per_call)]
    return [context_tokens for _ in window]


def _price(estimate: ModeEstimate, model: str, ttl: str, batch: bool) -> None:
    usage = Usage(
        estimate.input_tokens, estimate.output_tokens, estimate.cache_write_tokens, estimate.cache_read_tokens
    )
    missed = Usage(
        estimate.input_tokens, estimate.output_tokens, estimate.cache_write_tokens + estimate.cache_read_tokens, 0
    )
    estimate.cost_usd = cost_usd(model, usage, ttl, batch)
    estimate.cost_without_cache_usd = cost_without_caching_usd(model, usage, batch)
    estimate.worst_case_cost_usd = cost_usd(model, missed, ttl, batch)


def _wall_time(estimate: ModeEstimate, limits: Limits, batch: bool) -> None:
    """The longest of: the requests' latency spread over ``concurrency``, requests at ``rpm``, prompt tokens at ``tpm``."""
    if batch:
        estimate.wall_time_s, estimate.wall_time_bound = None, "batch"
        return
    prompt = estimate.input_tokens + estimate.cache_write_tokens + estimate.cache_read_tokens
    bounds = {"concurrency": estimate.latency_sum_s / max(1, limits.concurrency)}
    if limits.requests_per_minute:
        bounds["rpm"] = estimate.requests / limits.requests_per_minute * 60.0
    if limits.tokens_per_minute:
        bounds["tpm"] = prompt / limits.tokens_per_minute * 60.0
    estimate.wall_time_bound = max(bounds, key=lambda name: bounds[name])
    estimate.wall_time_s = round(bounds[estimate.wall_time_bound], 1)


def assumptions(context_tokens: int = ASSUMED_CONTEXT_TOKENS) -> dict[str, object]:
    """What a plan assumes, said with its figures."""
    return {
        "output_tokens_per_context": context_tokens,
        "tool_json_tokens_per_context": ASSUMED_TOOL_ENTRY_TOKENS,
        "latency_per_request": f"{ASSUMED_FIRST_TOKEN_S} s + output tokens / {ASSUMED_OUTPUT_TOKENS_PER_S:g} per s",
        "missing_chunk_retries": "none (per-document modes ask again alone for chunks an answer leaves out)",
        "batch_cache_hits": "as call by call (best effort on the API; worst_case_cost_usd if none hit)",
        "batch_wall_time": BATCH_WALL_TIME,
    }
