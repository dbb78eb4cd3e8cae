"""``ctxrag gc``: drop stored contexts, embeddings and query vectors that no kept index version references, except paid
ones (no version references a query's vector).

Referenced keys are derived from each kept version (live and previous) of every index: a context's key from the
chunk key and the contextualizer, an embedding's from the indexed text and the embedder. The ledger, evaluation
runs and open Message Batches are kept. Paid results (a Claude context or summary, a Voyage vector) stay even
when no index references them (a failed or killed run paid for them; the next run uses them), until the user asks:
``--include-paid``, or ``--paid-older-than DAYS``. Builds hold the artifact store's lock shared; gc takes it exclusively, so
it never runs while a build may be writing results no index references yet.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from ctxrag.storage.artifacts import KEY, RowCache
from ctxrag.storage.errors import BusyError
from ctxrag.storage.index_store import IndexStore
from ctxrag.storage.locks import held_or_refused
from ctxrag.tasks.context.offline import CONTEXT_KEY, context_key_of
from ctxrag.tasks.embedding.embed import EmbedderSpec

TABLES = ("contexts", "embeddings", "queries")  # the stored tables gc rewrites (ctxrag.storage.artifacts)


def artifact_lock(home: Path, exclusive: bool) -> AbstractContextManager[None]:
    """Shared for builds, exclusive for gc; gc fails at once rather than wait for builds to end."""
    busy = BusyError("an index build is running; run `ctxrag gc` when it ends")
    return held_or_refused(home / "artifacts" / ".gc.lock", busy, shared=not exclusive)


def referenced_keys(home: Path) -> tuple[set[str], set[str]]:
    """(context keys, embedding keys) of every kept version of every index."""
    contexts: set[str] = set()
    embeddings: set[str] = set()
    for manifest, table in IndexStore(home).kept_versions():
        worker = manifest["config"]["contextualizer"]
        spec = EmbedderSpec.from_dict(manifest["config"]["embedder"])
        if CONTEXT_KEY in table.column_names:
            contexts.update(table[CONTEXT_KEY].to_pylist())
        else:  # a version built before its rows recorded their context keys: every key was the chunk's alone
            contexts.update(context_key_of(key, worker["name"], worker["version"]) for key in table["key"].to_pylist())
        texts = spec.embedded_texts(table["context"].to_pylist(), table["content"].to_pylist())
        embeddings.update(spec.document_keys(texts, table["doc_id"].to_pylist()))
    return contexts, embeddings


def collect_garbage(
    home: Path, include_paid: bool = False, paid_older_than_days: float | None = None
) -> dict[str, int]:
    """Rewrite the contexts, embeddings and queries tables without the rows no kept version references; returns counts
    per table (``*_kept``, ``*_kept_paid``, ``*_removed``) and ``bytes_freed`` on disk by all three.

    Paid rows (Claude contexts and summaries, Voyage vectors, and rows of unknown origin, written before ctxrag
    recorded it) are kept even then, unless ``include_paid`` (all of them) or ``paid_older_than_days`` (those
    older than that) says otherwise: ctxrag never deletes what was paid for on its own.
    """
    cutoff = None if paid_older_than_days is None else time.time() - paid_older_than_days * 86_400
    with artifact_lock(home, exclusive=True):
        contexts, embeddings = referenced_keys(home)
        report: dict[str, int] = {}
        size_before = sum(_stored_bytes(RowCache(home, table_name)) for table_name in TABLES)
        for table_name, keep in zip(TABLES, (contexts, embeddings, set())):  # no version keeps a query's vector
            cache = RowCache(home, table_name)
            table = cache.read()
            if table is None:
                report.update({f"{table_name}_kept": 0, f"{table_name}_kept_paid": 0, f"{table_name}_removed": 0})
                continue
            referenced = pc.is_in(table[KEY], value_set=pa.array(sorted(keep), type=pa.string()))
            paid_kept = _paid_rows_kept(table, include_paid, cutoff)
            kept = table.filter(pc.or_(referenced, paid_kept))
            cache.replace(kept)
            report[f"{table_name}_kept"] = kept.num_rows
            report[f"{table_name}_kept_paid"] = pc.sum(pc.and_(pc.invert(referenced), paid_kept)).as_py() or 0
            report[f"{table_name}_removed"] = table.num_rows - kept.num_rows
        size_after = sum(_stored_bytes(RowCache(home, table_name)) for table_name in TABLES)
        report["bytes_freed"] = max(0, size_before - size_after)
        return report


def _stored_bytes(cache: RowCache) -> int:
    """Bytes of a table's files on disk (its parts and journal)."""
    return (
        sum(path.stat().st_size for path in cache.directory.glob("*") if path.is_file())
        if cache.directory.is_dir()
        else 0
    )


def _paid_rows_kept(table: pa.Table, include_paid: bool, cutoff: float | None) -> pa.ChunkedArray | pa.Array:
    """Which rows are paid results to keep: paid (or of unknown origin) and not released by the user's option."""
    rows = table.num_rows
    paid = pc.fill_null(table["paid"], True) if "paid" in table.column_names else pa.array([True] * rows)
    if include_paid:
        return pa.array([False] * rows)
    if cutoff is None:
        return paid
    created = table["created_at"] if "created_at" in table.column_names else pa.nulls(rows, pa.float64())
    old = pc.fill_null(pc.less(created, cutoff), False)  # unknown age: never "old"
    return pc.and_(paid, pc.invert(old))
