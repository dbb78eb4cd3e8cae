"""The artifact store: append-only, content-keyed Parquet tables under ``$CTXRAG_HOME/artifacts``.

Each table is a folder of part files. A stage writes a part as soon as a batch of work is done (write to a
temporary file, then an atomic rename), so a killed run keeps everything it finished and a re-run looks
rows up by key instead of computing them again.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Iterable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

KEY = "key"


def write_parquet_atomic(table: pa.Table, path: Path) -> None:
    """Write ``table`` to ``path`` so that readers see either nothing or the whole file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        pq.write_table(table, temporary)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


class RowCache:
    """Rows keyed by the string column ``key``; later parts win when a key repeats."""

    def __init__(self, root: Path, table: str) -> None:
        self.directory = root / "artifacts" / table

    def parts(self) -> list[Path]:
        return sorted(self.directory.glob("part-*.parquet")) if self.directory.is_dir() else []

    def read(self, keys: Iterable[str] | None = None, columns: list[str] | None = None) -> pa.Table | None:
        """The stored rows (only those whose key is in ``keys``, when given), deduplicated by key; None if empty."""
        parts = self.parts()
        if not parts:
            return None
        wanted = None if keys is None else pa.array(sorted(set(keys)), type=pa.string())
        tables = []
        for part in parts:
            table = pq.read_table(part, columns=None if columns is None else [KEY, *(c for c in columns if c != KEY)])
            if wanted is not None:
                table = table.filter(pc.is_in(table[KEY], value_set=wanted))
            tables.append(table)
        combined = pa.concat_tables(tables, promote_options="default")
        return _last_per_key(combined)

    def keys(self) -> set[str]:
        table = self.read(columns=[])
        return set() if table is None else set(table[KEY].to_pylist())

    def append(self, table: pa.Table) -> None:
        """Persist new rows as one more part file (atomic)."""
        if table.num_rows:
            # Names sort by creation time, so "later parts win" holds when reading in name order.
            name = f"part-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
            write_parquet_atomic(table, self.directory / name)


def _last_per_key(table: pa.Table) -> pa.Table:
    """Keep the last row of each key (parts are read oldest first)."""
    keys = table[KEY].to_pylist()
    last: dict[str, int] = {key: position for position, key in enumerate(keys)}
    if len(last) == len(keys):
        return table
    return table.take(pa.array(sorted(last.values()), type=pa.int64()))
