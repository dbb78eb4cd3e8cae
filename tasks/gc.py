"""``ctxrag gc``: drop stored contexts and embeddings that no kept index version references.

Referenced keys are derived from each kept version (live and previous) of every index: a context's key from the
chunk key and the contextualizer, an embedding's from the indexed text and the embedder. The ledger, evaluation
runs and open Message Batches are kept. Builds hold the artifact store's lock shared; gc takes it exclusively, so
it never runs while a build may be writing results no index references yet.
"""

from __future__ import annotations

import fcntl
import json
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from storage.artifacts import KEY, RowCache
from storage.index_store import IndexStore
from tasks.contextualize import context_key_of
from tasks.embed import EmbedderSpec


@contextmanager
def artifact_lock(home: Path, exclusive: bool) -> Iterator[None]:
    """Shared for builds, exclusive for gc; gc fails at once rather than wait for builds to end."""
    path = home / "artifacts" / ".gc.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        try:
            fcntl.flock(handle, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RuntimeError("an index build is running; run `ctxrag gc` when it ends") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def referenced_keys(home: Path) -> tuple[set[str], set[str]]:
    """(context keys, embedding keys) of every kept version of every index."""
    from tasks.indexing import indexed_text

    contexts: set[str] = set()
    embeddings: set[str] = set()
    root = IndexStore(home).root
    for version in sorted(root.glob("*/versions/*")) if root.is_dir() else []:
        manifest = json.loads((version / "manifest.json").read_text())
        table = pq.read_table(version / "chunks.parquet", columns=["key", "content", "context"])
        worker = manifest["config"]["contextualizer"]
        spec = EmbedderSpec.from_dict(manifest["config"]["embedder"])
        for key, content, context in zip(table["key"].to_pylist(), table["content"].to_pylist(), table["context"].to_pylist()):
            contexts.add(context_key_of(key, worker["name"], worker["version"]))
            embeddings.add(spec.cache_key(indexed_text(context, content), "document"))
    return contexts, embeddings


def collect_garbage(home: Path) -> dict[str, int]:
    """Rewrite the contexts and embeddings tables with referenced rows only; returns rows kept and removed."""
    with artifact_lock(home, exclusive=True):
        contexts, embeddings = referenced_keys(home)
        report: dict[str, int] = {}
        for table_name, keep in (("contexts", contexts), ("embeddings", embeddings)):
            cache = RowCache(home, table_name)
            table = cache.read()
            if table is None:
                report[f"{table_name}_kept"] = report[f"{table_name}_removed"] = 0
                continue
            kept = table.filter(pc.is_in(table[KEY], value_set=pa.array(sorted(keep), type=pa.string())))
            cache.replace(kept)
            report[f"{table_name}_kept"], report[f"{table_name}_removed"] = kept.num_rows, table.num_rows - kept.num_rows
        return report
