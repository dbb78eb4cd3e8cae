"""The cost ledger: one row per paid API call, append-only Parquet, summed into a run report."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa

from ctxrag.storage.artifacts import KEY, RowCache


@dataclass
class LedgerRow:
    """One call: what it was for, how it ended, and what it cost."""

    run_id: str
    stage: str  # "contextualize", "embed", "rerank", "answer", "judge"
    provider: str
    model: str
    prompt_version: str
    mode: str  # e.g. "per-chunk", "per-document", "batch"
    doc_id: str
    chunk_ids: list[str]
    status: str  # "ok" | "error"
    error: str = ""
    latency_s: float = 0.0
    waited_s: float = 0.0  # of latency_s: waiting for the run's budget (call slots, rate limits)
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    cost_usd: float = 0.0
    cost_without_cache_usd: float = 0.0
    cache_applied: bool | None = None  # False: the prompt was below the model's minimum cacheable length
    units: int = 0  # non-token billing units (e.g. rerank search units)
    attempts: int = 1  # HTTP requests the call took: 1 + its retries (429s included)
    call_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    created_at: float = field(default_factory=time.time)


SaveLedger = Callable[[list[LedgerRow]], None]  # how a paid call hands its row to the ledger


SCHEMA = pa.schema(
    [
        (KEY, pa.string()),
        ("run_id", pa.string()),
        ("stage", pa.string()),
        ("provider", pa.string()),
        ("model", pa.string()),
        ("prompt_version", pa.string()),
        ("mode", pa.string()),
        ("doc_id", pa.string()),
        ("chunk_ids", pa.list_(pa.string())),
        ("status", pa.string()),
        ("error", pa.string()),
        ("latency_s", pa.float64()),
        ("input_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("cache_write_tokens", pa.int64()),
        ("cache_read_tokens", pa.int64()),
        ("cost_usd", pa.float64()),
        ("cost_without_cache_usd", pa.float64()),
        ("cache_applied", pa.bool_()),
        ("units", pa.int64()),
        ("attempts", pa.int64()),
        ("created_at", pa.float64()),
        ("waited_s", pa.float64()),
    ]
)


class Ledger:
    """Append-only and durable row by row (the artifact store's journal); safe across threads and processes."""

    def __init__(self, home: Path) -> None:
        self._cache = RowCache(home, "ledger", SCHEMA)

    def append(self, rows: list[LedgerRow]) -> None:
        if rows:
            records = [{KEY: row.call_id, **{k: v for k, v in asdict(row).items() if k != "call_id"}} for row in rows]
            self._cache.append_rows(records)

    def rows(self, run_id: str | None = None) -> list[dict]:
        table = self._cache.read()
        if table is None:
            return []
        records = table.to_pylist()
        return [record for record in records if run_id is None or record["run_id"] == run_id]

    def compact(self) -> None:
        self._cache.compact(min_parts=2)


def summarize(rows: list[dict]) -> dict[str, object]:
    """Calls, share of prompt tokens read from cache, cost, cost without caching, documents caching did not apply to."""
    ok = [row for row in rows if row["status"] == "ok"]
    prompt = sum(row["input_tokens"] + row["cache_write_tokens"] + row["cache_read_tokens"] for row in ok)
    read = sum(row["cache_read_tokens"] for row in ok)
    return {
        "calls": len(rows),
        "failed_calls": len(rows) - len(ok),
        "requests": sum(row.get("attempts") or 1 for row in rows),  # HTTP requests, retries included
        "waited_for_budget_s": round(sum(row.get("waited_s") or 0.0 for row in rows), 1),  # all calls' waits added
        "input_tokens": sum(row["input_tokens"] for row in ok),
        "cache_write_tokens": sum(row["cache_write_tokens"] for row in ok),
        "cache_read_tokens": read,
        "output_tokens": sum(row["output_tokens"] for row in ok),
        "cache_read_share": round(read / prompt, 4) if prompt else 0.0,
        "cost_usd": round(sum(row["cost_usd"] for row in ok), 6),
        "cost_without_cache_usd": round(sum(row["cost_without_cache_usd"] for row in ok), 6),
        "documents_without_caching": _documents_without_caching(ok),
    }


def _documents_without_caching(rows: list[dict]) -> list[str]:
    """Documents that asked for caching and never got a cache write or read (below the model's minimum length)."""
    asked = {row["doc_id"] for row in rows if row["cache_applied"] is not None}
    cached = {row["doc_id"] for row in rows if row["cache_applied"]}
    return sorted(asked - cached)
