"""The Message Batches variants (half price): ``batch`` sends the per-chunk prompt, one request per pending chunk;
``per-document-batch`` sends the per-document prompt, one request per group of up to 20 chunks (the same params as
the per-document mode, so the same validated tool call; a chunk its answer leaves out is asked again alone, in one
more batch).

The batch id is saved before polling starts (``artifacts/batches/*.json``). A resumed run first collects every
open batch it finds (polling, never re-submitting), saves those results, and only then submits what is still
missing. Results are saved as they are read; failed items get ledger rows and are left pending for the next run.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxrag.storage.environment import private_dirs
from ctxrag.storage.ledger import LedgerRow, SaveLedger
from ctxrag.tasks.common.models import Chunk, Document, sha256_hex
from ctxrag.tasks.common.providers import Provider
from ctxrag.tasks.context.claude.client import message_text
from ctxrag.tasks.context.claude.contextualizer import (
    ClaudeContextualizer,
    _tool_contexts,
    chunk_groups,
    document_windows,
)
from ctxrag.tasks.context.claude.pricing import Usage, charge
from ctxrag.tasks.context.offline import context_key

MAX_REQUESTS_PER_BATCH = 10_000
SaveByKey = Callable[[list[tuple[str, str, str]]], None]  # (context key, doc_id, context)
Requests = tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]  # (batch requests, custom_id -> what it asks for)


class BatchState:
    """Open batches on disk: one JSON file per submitted batch, removed once its results are saved."""

    def __init__(self, home: Path) -> None:
        self.directory = home / "artifacts" / "batches"

    def open_batches(self) -> list[dict[str, Any]]:
        if not self.directory.is_dir():
            return []
        return [json.loads(path.read_text()) for path in sorted(self.directory.glob("*.json"))]

    def record(self, batch_id: str, items: dict[str, dict[str, Any]]) -> None:
        private_dirs(self.directory)
        temporary = self.directory / f".{batch_id}.{uuid.uuid4().hex}.tmp"
        temporary.write_text(json.dumps({"batch_id": batch_id, "items": items, "submitted_at": time.time()}))
        os.replace(temporary, self.directory / f"{batch_id}.json")

    def close(self, batch_id: str) -> None:
        (self.directory / f"{batch_id}.json").unlink(missing_ok=True)


def run_batches(
    worker: ClaudeContextualizer,
    pending: list[tuple[Document, list[Chunk]]],
    save: SaveByKey,
    ledger: SaveLedger,
    state: BatchState,
    poll_seconds: float = 30.0,
    is_done: Callable[[str], bool] = lambda key: False,
) -> dict[str, int]:
    """Collect open batches, then submit and collect new ones for chunks still missing; returns counts.

    ``failed`` counts batch items that failed and chunks that a per-document answer left out even when asked alone.
    """
    counts = {"resumed_batches": 0, "submitted_batches": 0, "succeeded": 0, "failed": 0}
    skipped: set[str] = set()  # context keys a per-document answer left out: asked again alone
    for open_batch in state.open_batches():
        counts["resumed_batches"] += 1
        _collect(worker, open_batch, save, ledger, state, poll_seconds, counts, skipped)
    requests = batch_requests(worker, pending, lambda key: is_done(key) or key in skipped)
    _submit_and_collect(worker, requests, save, ledger, state, poll_seconds, counts, skipped)
    if worker.settings.per_document and skipped:
        retry = set(skipped)
        requests = batch_requests(worker, pending, lambda key: key not in retry or is_done(key), alone=True)
        _submit_and_collect(worker, requests, save, ledger, state, poll_seconds, counts, skipped)
        counts["failed"] += len(skipped)
    return counts


def batch_requests(
    worker: ClaudeContextualizer,
    pending: list[tuple[Document, list[Chunk]]],
    skip: Callable[[str], bool],
    alone: bool = False,
) -> Requests:
    """The batch requests for every pending chunk not ``skip``-ped: the run's own per-chunk or per-document params
    (``alone``: one chunk per per-document request, for chunks an earlier answer left out)."""
    requests: list[dict[str, Any]] = []
    items: dict[str, dict[str, Any]] = {}
    for document, chunks in pending:
        windows = document_windows(document, chunks, worker.settings.window_tokens)
        for text, window in windows:
            keyed = [(chunk, key) for chunk in window if not skip(key := context_key(chunk, worker, document))]
            if not worker.settings.per_document:
                for chunk, key in keyed:
                    requests.append({"custom_id": key, "params": worker._chunk_params(text, chunk)})
                    items[key] = {"doc_id": document.doc_id, "chunk_id": chunk.chunk_id}
                continue
            mode = worker.settings.mode + ("/windowed" if len(windows) > 1 else "") + ("/missing" if alone else "")
            for group in chunk_groups(keyed, 1 if alone else worker.settings.chunks_per_call):
                custom_id = sha256_hex(*(key for _, key in group))[:32]
                requests.append(
                    {"custom_id": custom_id, "params": worker._group_params(text, [chunk for chunk, _ in group])}
                )
                items[custom_id] = {
                    "doc_id": document.doc_id,
                    "mode": mode,
                    "keys": [key for _, key in group],
                    "chunk_ids": [chunk.chunk_id for chunk, _ in group],
                    "indexes": [chunk.chunk_index for chunk, _ in group],
                }
    return requests, items


def _submit_and_collect(
    worker: ClaudeContextualizer,
    requests: Requests,
    save: SaveByKey,
    ledger: SaveLedger,
    state: BatchState,
    poll_seconds: float,
    counts: dict[str, int],
    skipped: set[str],
) -> None:
    """Submit in batches of at most ``MAX_REQUESTS_PER_BATCH``, each recorded before it is polled."""
    bodies, items = requests
    for start in range(0, len(bodies), MAX_REQUESTS_PER_BATCH):
        part = bodies[start : start + MAX_REQUESTS_PER_BATCH]
        batch = worker._client().create_batch(part)
        submitted = {
            "batch_id": batch.id,
            "items": {request["custom_id"]: items[request["custom_id"]] for request in part},
        }
        state.record(submitted["batch_id"], submitted["items"])
        counts["submitted_batches"] += 1
        _collect(worker, submitted, save, ledger, state, poll_seconds, counts, skipped)


def _collect(
    worker: ClaudeContextualizer,
    open_batch: dict[str, Any],
    save: SaveByKey,
    ledger: SaveLedger,
    state: BatchState,
    poll_seconds: float,
    counts: dict[str, int],
    skipped: set[str],
) -> None:
    """Poll one batch until it ends, then save each result under the key it was submitted with."""
    client = worker._client()
    batch_id = open_batch["batch_id"]
    while client.retrieve_batch(batch_id).processing_status != "ended":
        time.sleep(poll_seconds)
    for result in client.batch_results(batch_id):
        item = open_batch["items"].get(result.custom_id, {})
        row = LedgerRow(
            run_id=worker.run_id,
            stage="contextualize",
            provider=Provider.ANTHROPIC,
            model=worker.settings.model,
            prompt_version=worker.version,
            mode=item.get("mode", "batch"),
            doc_id=item.get("doc_id", ""),
            chunk_ids=item.get("chunk_ids") or [item.get("chunk_id", "")],
            status="ok",
            call_id=f"{batch_id}/{result.custom_id}",  # a resumed batch re-reads it: one row, not two
        )
        if result.result.type == "succeeded":
            message = result.result.message
            usage = Usage.from_api(message.usage)
            charge(row, worker.settings.model, usage, worker.settings.cache_ttl, batch=True)
            row.cache_applied = (usage.cache_write_tokens + usage.cache_read_tokens) > 0
            saved = _answers(result.custom_id, item, message)
            save(saved)
            skipped.difference_update(key for key, _, _ in saved)
            skipped.update(set(item.get("keys", [])) - {key for key, _, _ in saved})
            counts["succeeded"] += len(saved)
        else:
            row.status, row.error = "error", f"batch item {result.result.type}: {getattr(result.result, 'error', '')}"
            counts["failed"] += len(item.get("keys", [result.custom_id]))
        ledger([row])
    state.close(batch_id)


def _answers(custom_id: str, item: dict[str, Any], message: Any) -> list[tuple[str, str, str]]:
    """(context key, doc_id, context) of each chunk a succeeded item answered: a per-document item's validated tool
    call (chunks it leaves out are not there), or a per-chunk item's text."""
    doc_id = item.get("doc_id", "")
    if "keys" not in item:
        return [(custom_id, doc_id, message_text(message))]
    answered = _tool_contexts(message)
    return [
        (key, doc_id, answered[index])
        for key, index in zip(item["keys"], item["indexes"])
        if answered.get(index, "").strip()
    ]
