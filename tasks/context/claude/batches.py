"""The Message Batches variant (half price): every pending chunk's per-chunk request in one batch.

The batch id is saved before polling starts (``artifacts/batches/*.json``). A resumed run first collects every
open batch it finds (polling, never re-submitting), saves those results, and only then submits what is still
missing. Results are saved as they are read; failed items get ledger rows and are left pending for the next run.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from ctxrag.storage.ledger import LedgerRow
from ctxrag.tasks.context.claude.contextualizer import ClaudeContextualizer, document_windows
from ctxrag.tasks.context.claude.client import message_text
from ctxrag.tasks.context.claude.pricing import Usage, charge
from ctxrag.storage.ledger import SaveLedger
from ctxrag.tasks.context.contextualize import context_key
from ctxrag.tasks.common.models import Chunk, Document

MAX_REQUESTS_PER_BATCH = 10_000
SaveByKey = Callable[[list[tuple[str, str, str]]], None]  # (context key, doc_id, context)


class BatchState:
    """Open batches on disk: one JSON file per submitted batch, removed once its results are saved."""

    def __init__(self, home: Path) -> None:
        self.directory = home / "artifacts" / "batches"

    def open_batches(self) -> list[dict[str, Any]]:
        if not self.directory.is_dir():
            return []
        return [json.loads(path.read_text()) for path in sorted(self.directory.glob("*.json"))]

    def record(self, batch_id: str, items: dict[str, dict[str, str]]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
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
    """Collect open batches, then submit and collect new ones for chunks still missing; returns counts."""
    counts = {"resumed_batches": 0, "submitted_batches": 0, "succeeded": 0, "failed": 0}
    for open_batch in state.open_batches():
        counts["resumed_batches"] += 1
        _collect(worker, open_batch, save, ledger, state, poll_seconds, counts)
    requests, items = [], {}
    for document, chunks in pending:
        for text, group in document_windows(document, chunks, worker.settings.window_tokens):
            for chunk in group:
                key = context_key(chunk, worker, document)
                if is_done(key):
                    continue
                requests.append({"custom_id": key, "params": worker._chunk_params(text, chunk)})
                items[key] = {"doc_id": document.doc_id, "chunk_id": chunk.chunk_id}
    for start in range(0, len(requests), MAX_REQUESTS_PER_BATCH):
        part = requests[start : start + MAX_REQUESTS_PER_BATCH]
        batch = worker._client().create_batch(part)
        submitted = {"batch_id": batch.id, "items": {request["custom_id"]: items[request["custom_id"]] for request in part}}
        state.record(submitted["batch_id"], submitted["items"])
        counts["submitted_batches"] += 1
        _collect(worker, submitted, save, ledger, state, poll_seconds, counts)
    return counts


def _collect(
    worker: ClaudeContextualizer,
    open_batch: dict[str, Any],
    save: SaveByKey,
    ledger: SaveLedger,
    state: BatchState,
    poll_seconds: float,
    counts: dict[str, int],
) -> None:
    """Poll one batch until it ends, then save each result under the key it was submitted with."""
    client = worker._client()
    batch_id = open_batch["batch_id"]
    while client.retrieve_batch(batch_id).processing_status != "ended":
        time.sleep(poll_seconds)
    for result in client.batch_results(batch_id):
        item = open_batch["items"].get(result.custom_id, {})
        row = LedgerRow(
            run_id=worker.run_id, stage="contextualize", provider="anthropic", model=worker.settings.model,
            prompt_version=worker.version, mode="batch", doc_id=item.get("doc_id", ""), chunk_ids=[item.get("chunk_id", "")],
            status="ok", call_id=f"{batch_id}/{result.custom_id}",  # a resumed batch re-reads it: one row, not two
        )
        if result.result.type == "succeeded":
            message = result.result.message
            usage = Usage.from_api(message.usage)
            charge(row, worker.settings.model, usage, worker.settings.cache_ttl, batch=True)
            row.cache_applied = (usage.cache_write_tokens + usage.cache_read_tokens) > 0
            save([(result.custom_id, item.get("doc_id", ""), message_text(message))])
            counts["succeeded"] += 1
        else:
            row.status, row.error = "error", f"batch item {result.result.type}: {getattr(result.result, 'error', '')}"
            counts["failed"] += 1
        ledger([row])
    state.close(batch_id)
