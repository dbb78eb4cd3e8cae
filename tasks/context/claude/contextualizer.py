"""Claude contextualizers: per chunk (the cookbook's way), per document (one call, many contexts), and summaries.

Prompt caching: the document is a content block with ``cache_control``; per document, the first call writes the
cache and only then do the other calls fan out (bounded concurrency) to read it. Every call's result is saved the
moment it returns (``save``), and every call gets a ledger row, so a killed run loses at most the calls in flight.

A document longer than the window budget is split into consecutive windows; each chunk is situated in the window
that holds it (each window cached on its own). Nothing is truncated silently: the ledger's mode says "windowed".

A call's token estimate (``--tpm`` and the rate-limit headers' pacing) counts the cached document only when the call
writes it: cache reads do not count towards the API's input-token rate limit.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ctxrag.storage.ledger import LedgerRow, SaveLedger
from ctxrag.tasks.common.models import Chunk, Document
from ctxrag.tasks.common.providers import Provider
from ctxrag.tasks.common.ratelimit import shared_limiter
from ctxrag.tasks.common.retry import ApiCallFailed, RetryPolicy
from ctxrag.tasks.context.claude.client import ClaudeCallError, ClaudeClient, Reply, message_text
from ctxrag.tasks.context.claude.pricing import Usage, charge
from ctxrag.tasks.context.claude.prompts import (
    CHUNK_CONTEXT,
    DOCUMENT,
    DOCUMENT_CONTEXTS,
    RECORD_CONTEXTS_TOOL,
    SUMMARY,
    tagged_chunks,
)
from ctxrag.tasks.context.claude.settings import (  # noqa: F401  (re-exported)
    BATCH_MODES,
    DEFAULT_CONCURRENCY,
    MODES,
    PER_DOCUMENT_MODES,
    ClaudeSettings,
)
from ctxrag.tasks.context.offline import SaveContexts
from ctxrag.tasks.context.structure import chunk_offsets

T = TypeVar("T")
CHARS_PER_TOKEN_ESTIMATE = 3.0  # conservative for code; used only for windows and rate-limit estimates
CACHE_TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


class ContextualizationFailed(ApiCallFailed):
    """Some chunks of a document got no context after their calls' retries; the others' contexts are saved.

    Not retried by Prefect (one retry budget per call): the next run of the same command asks only for what is
    missing.
    """


_fan_out_pools: dict[int, ThreadPoolExecutor] = {}
_fan_out_lock = threading.Lock()


def fan_out_pool(size: int) -> ThreadPoolExecutor:
    """One pool per process for every document's fan-out: threads stay at ``size`` however many documents run."""
    with _fan_out_lock:
        if size not in _fan_out_pools:
            _fan_out_pools[size] = ThreadPoolExecutor(max_workers=size, thread_name_prefix="ctxrag-claude")
        return _fan_out_pools[size]


def estimate_tokens(text: str) -> int:
    return int(len(text) / CHARS_PER_TOKEN_ESTIMATE) + 1


def document_windows(document: Document, chunks: list[Chunk], window_tokens: int) -> list[tuple[str, list[Chunk]]]:
    """The document as one window, or consecutive windows of at most ``window_tokens`` (estimated) for long ones."""
    if estimate_tokens(document.content) <= window_tokens:
        return [(document.content, chunks)]
    size = int(window_tokens * CHARS_PER_TOKEN_ESTIMATE)
    windows: dict[int, list[Chunk]] = {}
    for chunk, position in zip(chunks, chunk_offsets(document.content, [chunk.content for chunk in chunks])):
        windows.setdefault(max(0, position) // size, []).append(chunk)
    return [
        (document.content[start * size : (start + 1) * size + len(group[-1].content)], group)
        for start, group in sorted(windows.items())
    ]


def chunk_groups(chunks: list[T], size: int) -> list[list[T]]:
    """The per-document prompt's requests: consecutive groups of at most ``size`` chunks."""
    size = max(1, size)
    return [chunks[start : start + size] for start in range(0, len(chunks), size)]


@dataclass
class ClaudeContextualizer:
    """Situates chunks in their document with Claude, saving each result as it arrives."""

    settings: ClaudeSettings = field(default_factory=ClaudeSettings)
    run_id: str = ""
    client: ClaudeClient | None = None
    name: str = "claude"
    # a cached block's digest -> when a call last wrote or read it (the API's cache lives ``cache_ttl`` past that)
    _cached_at: dict[str, float] = field(default_factory=dict, init=False, repr=False, compare=False)
    _cached_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    def key_inputs(self, document: Document, chunk: Chunk) -> tuple[str, ...]:
        """Nothing beyond the chunk key: the prompt reads the document and the chunk (a changed heading alone is not
        paid for again)."""
        return ()

    @property
    def version(self) -> str:
        prompt = DOCUMENT_CONTEXTS if self.settings.per_document else CHUNK_CONTEXT
        return f"{self.settings.model}/{DOCUMENT.version}+{prompt.version}"

    def _client(self) -> ClaudeClient:
        if self.client is None:
            settings = self.settings
            limiter = shared_limiter(
                Provider.ANTHROPIC, settings.concurrency, settings.requests_per_minute, settings.tokens_per_minute
            )
            self.client = ClaudeClient(RetryPolicy(attempts=self.settings.retry_attempts), limiter)
        return self.client

    def run(self, document: Document, chunks: list[Chunk], save: SaveContexts, ledger: SaveLedger) -> None:
        failed: list[str] = []
        errors: list[str] = []
        windows = document_windows(document, chunks, self.settings.window_tokens)
        for text, group in windows:
            mode = self.settings.mode if len(windows) == 1 else f"{self.settings.mode}/windowed"
            if self.settings.per_document:
                missing, error = self._per_document(document, text, group, save, ledger, mode)
            else:
                missing, error = self._per_chunk(document, text, group, save, ledger, mode)
            failed += [chunk.chunk_id for chunk in missing]
            errors += [error] if error else []
        if failed:
            raise ContextualizationFailed(
                f"{document.doc_id}: {len(failed)} of {len(chunks)} chunks failed ({errors[0] if errors else 'no answer'})"
            )

    # per chunk: the cookbook's prompt, one call per chunk, the document cached --------------------------------
    def _per_chunk(
        self, document: Document, text: str, chunks: list[Chunk], save: SaveContexts, ledger: SaveLedger, mode: str
    ) -> tuple[list[Chunk], str]:
        def one(chunk: Chunk) -> None:
            self._call(
                document,
                [chunk],
                ledger,
                mode,
                self._chunk_params(text, chunk),
                lambda reply: save([(chunk, message_text(reply.message))]),
            )

        return self._first_then_fan_out(chunks, one)

    def _chunk_params(self, text: str, chunk: Chunk) -> dict[str, Any]:
        return {
            "model": self.settings.model,
            "max_tokens": self.settings.max_tokens,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        self._document_block(text),
                        {"type": "text", "text": CHUNK_CONTEXT.render(chunk_content=chunk.content)},
                    ],
                }
            ],
        }

    # per document: one call answers many chunks (a tool call, validated); missing ones retried alone ---------
    def _per_document(
        self, document: Document, text: str, chunks: list[Chunk], save: SaveContexts, ledger: SaveLedger, mode: str
    ) -> tuple[list[Chunk], str]:
        groups = chunk_groups(chunks, self.settings.chunks_per_call)
        leftovers: list[Chunk] = []

        def keep(group: list[Chunk], reply: Reply) -> None:
            answered = _tool_contexts(reply.message)
            save(
                [(chunk, answered[chunk.chunk_index]) for chunk in group if answered.get(chunk.chunk_index, "").strip()]
            )
            leftovers.extend(chunk for chunk in group if not answered.get(chunk.chunk_index, "").strip())

        def one(group: list[Chunk], call_mode: str = mode) -> None:
            self._call(
                document, group, ledger, call_mode, self._group_params(text, group), lambda reply: keep(group, reply)
            )

        failed_groups, error = self._first_then_fan_out(groups, one)
        failed = [chunk for group in failed_groups for chunk in group]
        if leftovers:  # the answer skipped some chunks: ask for each alone, same tools and document (cache hit)
            retry = list(leftovers)
            leftovers.clear()
            failed_alone, retry_error = self._first_then_fan_out(
                [[chunk] for chunk in retry], lambda group: one(group, f"{mode}/missing")
            )
            failed += [chunk for group in failed_alone for chunk in group] + leftovers
            error = error or retry_error or (f"no context returned for {len(leftovers)} chunks" if leftovers else "")
        return failed, error

    def _group_params(self, text: str, group: list[Chunk]) -> dict[str, Any]:
        return {
            "model": self.settings.model,
            "max_tokens": min(32_000, self.settings.max_tokens * len(group) + 200),
            "tools": [RECORD_CONTEXTS_TOOL],
            "tool_choice": {"type": "tool", "name": RECORD_CONTEXTS_TOOL["name"]},
            "messages": [
                {
                    "role": "user",
                    "content": [
                        self._document_block(text),
                        {
                            "type": "text",
                            "text": DOCUMENT_CONTEXTS.render(
                                chunks=tagged_chunks([(c.chunk_index, c.content) for c in group])
                            ),
                        },
                    ],
                }
            ],
        }

    # shared ---------------------------------------------------------------------------------------------------
    def _document_block(self, text: str) -> dict[str, Any]:
        cache_control: dict[str, str] = {"type": "ephemeral"}
        if self.settings.cache_ttl == "1h":
            cache_control["ttl"] = "1h"
        return {"type": "text", "text": DOCUMENT.render(doc_content=text), "cache_control": cache_control}

    def _rate_limited_tokens(self, blocks: list[dict[str, Any]]) -> int:
        """The call's input tokens as the API's input-token rate limit counts them (estimated): every block, except a
        cached one an earlier call wrote or read within the cache's TTL (this call reads it: reads do not count)."""
        now = time.monotonic()
        ttl = CACHE_TTL_SECONDS[self.settings.cache_ttl]

        def read_from_cache(block: dict[str, Any]) -> bool:
            last = self._cached_at.get(_digest(block["text"])) if "cache_control" in block else None
            return last is not None and now - last < ttl

        with self._cached_lock:
            return sum(estimate_tokens(block["text"]) for block in blocks if not read_from_cache(block))

    def _mark_cached(self, blocks: list[dict[str, Any]]) -> None:
        """The API answered with a cache write or read: the call's cached blocks are in its cache for another TTL."""
        now = time.monotonic()
        with self._cached_lock:
            self._cached_at.update((_digest(block["text"]), now) for block in blocks if "cache_control" in block)

    def _first_then_fan_out(self, items: list[Any], work: Callable[[Any], Any]) -> tuple[list[Any], str]:
        """Run ``work`` on the first item (it writes the cache), then on the rest in the process's shared fan-out pool
        (the limiter's slots bound the requests open at once); returns the failures and the first error."""
        failed: list[Any] = []
        errors: list[str] = []

        def guarded(item: Any) -> None:
            try:
                work(item)
            except ClaudeCallError as error:
                failed.append(item)
                errors.append(str(error))

        if items:
            guarded(items[0])
            pending = [fan_out_pool(max(1, self.settings.concurrency)).submit(guarded, item) for item in items[1:]]
            wait(pending)  # every call ends before the document does: none is left running for a document given up
            for future in pending:
                future.result()  # an unexpected error (e.g. saving failed), raised once all the calls are over
        return failed, errors[0] if errors else ""

    def _call(
        self,
        document: Document,
        chunks: list[Chunk],
        ledger: SaveLedger,
        mode: str,
        params: dict[str, Any],
        keep: Callable[[Reply], None],
    ) -> None:
        """One paid call: its ledger row and ``keep`` (which saves the result) both run before its slot is freed."""
        row = LedgerRow(
            run_id=self.run_id,
            stage="contextualize",
            provider=Provider.ANTHROPIC,
            model=self.settings.model,
            prompt_version=self.version,
            mode=mode,
            doc_id=document.doc_id,
            chunk_ids=[c.chunk_id for c in chunks],
            status="ok",
        )
        started = time.perf_counter()
        blocks = params["messages"][0]["content"]
        estimated = self._rate_limited_tokens(blocks)
        asked_for_cache = any("cache_control" in block for block in blocks)

        def record_and_keep(reply: Reply) -> None:
            usage = Usage.from_api(reply.message.usage)
            row.latency_s, row.attempts, row.waited_s = reply.latency_s, reply.attempts, reply.waited_s
            charge(row, self.settings.model, usage, self.settings.cache_ttl)
            row.cache_applied = (usage.cache_write_tokens + usage.cache_read_tokens) > 0 if asked_for_cache else None
            if row.cache_applied:
                self._mark_cached(blocks)
            ledger([row])
            keep(reply)

        try:
            self._client().create(estimated_tokens=estimated, keep=record_and_keep, **params)
        except ClaudeCallError as error:
            row.status, row.error, row.latency_s, row.attempts = (
                "error",
                str(error),
                time.perf_counter() - started,
                error.attempts,
            )
            ledger([row])
            raise


@dataclass
class ClaudeSummarizer(ClaudeContextualizer):
    """Summary indexing (the RAG guide's level 2): a 2-3 sentence summary per chunk; context = heading + summary."""

    name: str = "claude-summary"

    @property
    def version(self) -> str:
        return f"{self.settings.model}/{SUMMARY.version}"

    def run(self, document: Document, chunks: list[Chunk], save: SaveContexts, ledger: SaveLedger) -> None:
        def one(chunk: Chunk) -> None:
            prompt = SUMMARY.render(
                corpus_description=self.settings.corpus_description,
                heading=chunk.heading or document.title,
                text=chunk.content,
            )
            params = {
                "model": self.settings.model,
                "max_tokens": 150,
                "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}],
            }
            heading = chunk.heading or document.title

            def keep(reply: Reply) -> None:
                summary = message_text(reply.message)
                save([(chunk, f"{heading}\n{summary}" if heading else summary)])

            self._call(document, [chunk], ledger, "summary", params, keep)

        failed, error = self._first_then_fan_out(chunks, one)
        if failed:
            raise ContextualizationFailed(
                f"{document.doc_id}: {len(failed)} of {len(chunks)} summaries failed ({error})"
            )


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def _tool_contexts(message: Any) -> dict[int, str]:
    """chunk index -> context from the record_contexts tool call; malformed entries are ignored (and so retried)."""
    found: dict[int, str] = {}
    for block in message.content:
        if getattr(block, "type", "") != "tool_use":
            continue
        entries = (block.input or {}).get("contexts", []) if isinstance(block.input, dict) else []
        for entry in entries if isinstance(entries, list) else []:
            if (
                isinstance(entry, dict)
                and isinstance(entry.get("chunk_index"), int)
                and isinstance(entry.get("context"), str)
            ):
                found.setdefault(entry["chunk_index"], entry["context"].strip())
    return found
