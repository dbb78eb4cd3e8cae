"""``ctxrag index --plan``: what indexing SOURCE would pay for, in plain Python: no Prefect, no paid call.

The source is loaded and chunked as the run would, and compared with the store the way the run does
(``ctxrag.tasks.stored``): chunks whose context is stored and texts whose vector is stored are named and not priced. For
``--contextualizer claude`` every mode is priced (``ctxrag.tasks.context.claude.plan``), with prompt tokens counted by the API's
free endpoint when a key is set, else estimated; for ``--embedder voyage`` the embedding tokens and cost.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from ctxrag.storage.artifacts import contexts_cache, embeddings_cache
from ctxrag.storage.errors import InvalidInput
from ctxrag.storage.secrets import MissingKey, redact
from ctxrag.tasks.common.models import Chunk, Corpus
from ctxrag.tasks.common.providers import Provider
from ctxrag.tasks.context.claude.contextualizer import MODES, ClaudeContextualizer, ClaudeSettings
from ctxrag.tasks.context.claude.plan import (
    ASSUMED_CONTEXT_TOKENS,
    Limits,
    Pending,
    assumptions,
    estimate_mode,
)
from ctxrag.tasks.context.claude.pricing import PRICES_AS_OF, PRICES_FILE, priced_facts
from ctxrag.tasks.context.claude.token_count import (
    ESTIMATE,
    CountedTokens,
    EstimatedCounts,
    TokenCounter,
)
from ctxrag.tasks.context.spec import ContextualizerSpec
from ctxrag.tasks.embedding.embedder_spec import EmbedderSpec
from ctxrag.tasks.load import DEFAULT_MAX_FILE_BYTES, load_source
from ctxrag.tasks.stored import context_keys, document_changes, pending_chunks, unstored_texts

VOYAGE_PRICES_FILE = "tasks/embedding/voyage.py"


def plan_costs(
    source: str,
    name: str,
    home: Path,
    contextualizer: str = "claude",
    claude: ClaudeSettings | None = None,
    embedder: EmbedderSpec | None = None,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    counter: TokenCounter | None = None,
    context_tokens: int = ASSUMED_CONTEXT_TOKENS,
) -> dict[str, Any]:
    """The plan as one dict (the CLI prints it as a table or as JSON); each new context assumed ``context_tokens``
    long (its output, and its share of the embedded text)."""
    if contextualizer == "claude-summary":
        raise InvalidInput(
            "--plan prices --contextualizer claude (its four modes) and embeddings; claude-summary is not planned"
        )
    claude = claude or ClaudeSettings()
    spec = ContextualizerSpec(contextualizer, claude if contextualizer == "claude" else None)
    facts = priced_facts(claude.model) if spec.paid else None  # an unknown model fails before any work
    embedder = embedder or EmbedderSpec()
    _voyage_price(embedder)
    corpus = load_source(source, include=include, exclude=exclude, max_file_bytes=max_file_bytes)
    plan: dict[str, Any] = {
        "source": source,
        "index": name,
        "documents": len(corpus.documents),
        "chunks": len(corpus.chunks),
        "documents_against_live_index": document_changes(corpus, name, home),
        "contextualizer": contextualizer,
        "warnings": corpus.warnings,
    }
    contexts: dict[str, str] = {}
    if facts is not None:
        plan.update(_claude_part(corpus, claude, home, counter, context_tokens))
        contexts = _stored_contexts(corpus, ContextualizerSpec("claude", claude), home)
    plan["embedding"] = _embedding_part(corpus, spec, embedder, contexts, home, context_tokens)
    return plan


def _claude_part(
    corpus: Corpus, claude: ClaudeSettings, home: Path, counter: TokenCounter | None, context_tokens: int
) -> dict[str, Any]:
    """Every mode's estimate, what is stored per prompt, the cheapest mode, and how tokens were counted."""
    from ctxrag.tasks.common.retry import ApiCallFailed

    facts = priced_facts(claude.model)
    limits = Limits(claude.concurrency, claude.requests_per_minute, claude.tokens_per_minute)
    counter = counter or _counter(home)
    count_error = ""
    try:
        modes = _modes(corpus, claude, home, counter, limits, context_tokens)
    except ApiCallFailed as error:  # a key is set but counting failed: the estimate, and the plan says why
        if isinstance(counter, EstimatedCounts):
            raise
        count_error, counter = redact(str(error)), _Estimating()
        modes = _modes(corpus, claude, home, counter, limits, context_tokens)
    chosen = modes[claude.mode]
    return {
        "model": claude.model,
        "prices": {
            "input_per_mtok": facts.input_per_mtok,
            "output_per_mtok": facts.output_per_mtok,
            "as_of": PRICES_AS_OF,
            "file": PRICES_FILE,
        },
        "cache_minimum_tokens": facts.min_cacheable_tokens,
        "cache_ttl": claude.cache_ttl,
        "limits": {
            "concurrency": limits.concurrency,
            "rpm": limits.requests_per_minute,
            "tpm": limits.tokens_per_minute,
        },
        "token_counts": counter.source + (f" (count_tokens failed: {count_error})" if count_error else ""),
        "token_count_calls": {
            "now": getattr(counter, "counted_now", 0),
            "reused_from_store": getattr(counter, "reused", 0),
        },
        "assumptions": assumptions(context_tokens),
        "modes": modes,
        "chosen_mode": claude.mode,
        "cheapest_mode": min(MODES, key=lambda mode: (modes[mode]["cost_usd"], MODES.index(mode))),
        "nothing_pending": all(mode["chunks"] == 0 for mode in modes.values()),
        "documents_below_cache_minimum": chosen["documents_below_cache_minimum"],
    }


def _modes(
    corpus: Corpus, claude: ClaudeSettings, home: Path, counter: TokenCounter, limits: Limits, context_tokens: int
) -> dict[str, dict[str, Any]]:
    """Each mode's estimate over the chunks its prompt has no stored context for (modes sharing a prompt share them)."""
    by_id = {document.doc_id: document for document in corpus.documents}
    pending_by_prompt: dict[str, Pending] = {}
    modes: dict[str, dict[str, Any]] = {}
    for mode in MODES:
        worker = ClaudeContextualizer(replace(claude, mode=mode))
        if worker.version not in pending_by_prompt:
            pending = pending_chunks(corpus, context_keys(corpus, ContextualizerSpec("claude", worker.settings)), home)
            pending_by_prompt[worker.version] = [
                (by_id[doc_id], [chunk for chunk, _ in keyed]) for doc_id, keyed in pending.items()
            ]
        modes[mode] = estimate_mode(
            worker, pending_by_prompt[worker.version], counter, limits, context_tokens
        ).to_dict()
        modes[mode]["prompt_version"] = worker.version
        modes[mode]["chunks_already_contextualized"] = len(corpus.chunks) - modes[mode]["chunks"]
    return modes


def _counter(home: Path) -> TokenCounter:
    """The API's count when a key is set, else the estimate. A Prefect Secret block is read only from a configured
    server (``PREFECT_API_URL``): without a key in the environment nothing imports Prefect or the SDK."""
    from ctxrag.tasks.context.claude.client import API_KEY_ENV

    if not os.environ.get(API_KEY_ENV, "").strip() and not os.environ.get("PREFECT_API_URL"):
        return EstimatedCounts()
    from ctxrag.tasks.common.retry import RetryPolicy
    from ctxrag.tasks.context.claude.client import ClaudeClient

    try:
        return CountedTokens(ClaudeClient(RetryPolicy(attempts=3), timeout_s=60.0), home)
    except MissingKey:
        return EstimatedCounts()


class _Estimating(EstimatedCounts):
    source = ESTIMATE.replace("no key to count with", "counting failed")


def _stored_contexts(corpus: Corpus, spec: ContextualizerSpec, home: Path) -> dict[str, str]:
    """chunk_id -> its stored context for ``spec`` (the chosen mode's prompt)."""
    keys = context_keys(corpus, spec)
    found = contexts_cache(home).lookup(keys, "context")
    return {chunk.chunk_id: found[key] for chunk, key in zip(corpus.chunks, keys) if key in found}


def _embedding_part(
    corpus: Corpus,
    spec: ContextualizerSpec,
    embedder: EmbedderSpec,
    contexts: dict[str, str],
    home: Path,
    context_tokens: int,
) -> dict[str, Any]:
    """Texts to embed (exact where the context is known, else the chunk plus an assumed context) and their price."""
    from ctxrag.tasks.embedding.voyage import estimate_tokens, pack

    if not spec.paid:  # offline contextualizers: the contexts are computed here, as the run would
        worker = spec.build()
        by_document: dict[str, list[Chunk]] = {}
        for chunk in corpus.chunks:
            by_document.setdefault(chunk.doc_id, []).append(chunk)
        for document in corpus.documents:
            chunks = by_document.get(document.doc_id, [])
            written = worker.contextualize(document, chunks)  # type: ignore[attr-defined]
            contexts.update({chunk.chunk_id: text for chunk, text in zip(chunks, written)})
    if embedder.embeds_documents:
        documents, reused, assumed = _document_sizes(corpus, embedder, contexts, home, context_tokens)
        sizes = [size for document in documents for size in document]
        requests = _contextualized_requests(documents)
    else:
        with_context = [chunk for chunk in corpus.chunks if chunk.chunk_id in contexts]
        known = embedder.embedded_texts(
            [contexts[chunk.chunk_id] for chunk in with_context], [chunk.content for chunk in with_context]
        )
        unknown = [chunk for chunk in corpus.chunks if chunk.chunk_id not in contexts]
        to_embed = unstored_texts(known, embedder, home)
        sizes = [estimate_tokens(text) for text in to_embed] + [
            estimate_tokens(embedder.embedded_text("", c.content)) + context_tokens for c in unknown
        ]
        reused, assumed = len(set(known)) - len(to_embed), len(unknown)
        requests = len(pack(sizes, embedder.model))
    part: dict[str, Any] = {
        "provider": embedder.provider,
        "model": embedder.model,
        "texts_to_embed": len(sizes),
        "texts_already_embedded": reused,
        "texts_with_assumed_context": assumed,
    }
    price = _voyage_prices().get(embedder.model) if embedder.provider != Provider.LOCAL else None
    if price is not None:
        part.update(
            {
                "tokens": sum(sizes),
                "requests": requests,
                "cost_usd": round(sum(sizes) * price / 1_000_000, 6),
                "token_counts": "estimated high (UTF-8 bytes / 3, as the run sizes its requests)",
                "price_per_mtok": price,
                "prices_file": "tasks/embedding/voyage_context.py" if embedder.embeds_documents else VOYAGE_PRICES_FILE,
            }
        )
    return part


def _contextualized_requests(documents: list[list[int]]) -> int:
    """Requests of whole documents (split where over the context length), as ``ctxrag.tasks.embedding.voyage_context`` sends them."""
    from ctxrag.tasks.embedding.voyage_context import requests_of, split_document

    groups = [[sizes[i] for i in group] for sizes in documents for group in split_document(sizes)]
    return len(requests_of(groups)) if groups else 0


def _document_sizes(
    corpus: Corpus, embedder: EmbedderSpec, contexts: dict[str, str], home: Path, context_tokens: int
) -> tuple[list[list[int]], int, int]:
    """An embedder that reads documents: every chunk of a document with a chunk to embed (or a context still to
    write) is embedded again; returns (each such document's text sizes, texts reused, texts with an assumed context)."""
    from ctxrag.tasks.embedding.voyage import estimate_tokens

    by_document: dict[str, list[Chunk]] = {}
    for chunk in corpus.chunks:
        by_document.setdefault(chunk.doc_id, []).append(chunk)
    known = [c for chunks in by_document.values() if all(c.chunk_id in contexts for c in chunks) for c in chunks]
    texts = embedder.embedded_texts([contexts[c.chunk_id] for c in known], [c.content for c in known])
    keys = embedder.document_keys(texts, [c.doc_id for c in known])
    stored = embeddings_cache(home).stored(keys)
    complete = {c.doc_id for c in known} - {c.doc_id for c, key in zip(known, keys) if key not in stored}
    documents: list[list[int]] = []
    assumed = 0
    for doc_id, chunks in by_document.items():
        if doc_id in complete:
            continue
        documents.append([])
        for chunk in chunks:
            if chunk.chunk_id in contexts:
                documents[-1].append(estimate_tokens(embedder.embedded_text(contexts[chunk.chunk_id], chunk.content)))
            else:
                documents[-1].append(estimate_tokens(embedder.embedded_text("", chunk.content)) + context_tokens)
                assumed += 1
    return documents, sum(len(by_document[doc_id]) for doc_id in complete), assumed


def _voyage_prices() -> dict[str, float]:
    from ctxrag.tasks.embedding.voyage import PRICE_PER_MTOK
    from ctxrag.tasks.embedding.voyage_context import CONTEXT_MODELS

    return {**PRICE_PER_MTOK, **CONTEXT_MODELS}


def _voyage_price(embedder: EmbedderSpec) -> None:
    prices = _voyage_prices()
    if embedder.provider != Provider.LOCAL and embedder.model not in prices:
        known = ", ".join(sorted(prices))
        raise InvalidInput(
            f"no known prices for Voyage model {embedder.model!r}: add it to PRICE_PER_MTOK in {VOYAGE_PRICES_FILE} (CONTEXT_MODELS in tasks/embedding/voyage_context.py for contextualized ones) (known: {known})"
        )
