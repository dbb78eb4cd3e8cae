"""The artifact store: append-only, content-keyed Parquet tables under ``$CTXRAG_HOME/artifacts``.

Each table is a folder of part files. A stage writes a part as soon as a batch of work is done (write to a
temporary file, then an atomic rename), so a killed run keeps everything it finished and a re-run looks
rows up by key instead of computing them again. Small, frequent results (one paid API call each) go to the
table's journal instead, one fsynced JSON line per row; ``compact`` folds the journal and parts into one part.
A killed journal write leaves at most a torn last line (no newline after it): readers ignore it and the next append
removes it. Any other unreadable journal line is corruption, reported with the file and the line number.

Writers of a journal hold ``journal_lock``: a thread lock of the process, then a file lock (``filelock``) beside the
journal for the other processes (Dask workers). Nothing that holds it waits for anything else (a call slot, a retry,
another lock): appends only write and fsync.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ctxrag.storage.environment import private_dirs
from ctxrag.storage.journal import (  # noqa: F401  (the errors and the lock: the store's API)
    JOURNAL_LOCK_TIMEOUT_S,
    CorruptJournalError,
    JournalLockTimeout,
    _fsync,
    _private_opener,
    journal_lock,
    write_parquet_atomic,
)

KEY = "key"
_TAIL_BLOCK = 1 << 16
FOLD_PARTS = 16  # a table folding its journal into parts rewrites them all into one from this many
QUERY_FOLD_BYTES = 1 << 20  # the queries table's journal (~8 KB a local query's vector) becomes a part from 1 MiB
VECTOR_SCHEMA = pa.schema(
    [("key", pa.string()), ("vector", pa.list_(pa.float32())), ("paid", pa.bool_()), ("created_at", pa.float64())]
)


class RowCache:
    """Rows keyed by the string column ``key``; later parts (and then the journal) win when a key repeats.

    ``fold_bytes``: ``append`` writes rows to the journal (one fsynced line each: no file per call) and folds the
    journal into a part once it holds this many bytes (all parts into one from ``FOLD_PARTS`` parts); 0: each
    ``append`` is a part of its own. Readers read the journal before the parts, and a fold writes its part before it
    empties the journal, so a row being folded is always seen.
    """

    def __init__(self, root: Path, table: str, schema: pa.Schema | None = None, fold_bytes: int = 0) -> None:
        self.directory = root / "artifacts" / table
        self.journal = self.directory / "journal.jsonl"
        self.schema = schema
        self.fold_bytes = fold_bytes

    def append_rows(self, rows: list[dict]) -> None:
        """Persist rows now, durably, as JSON lines (cheap for one row; safe across threads and processes)."""
        if not rows:
            return
        private_dirs(self.directory)
        payload = "".join(json.dumps(row, separators=(",", ":")) + "\n" for row in rows).encode("utf-8")
        with journal_lock(self.journal), open(self.journal, "a+b", opener=_private_opener) as handle:
            _end_torn_write(handle.fileno())
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())

    def _journal_rows(self) -> list[dict]:
        if not self.journal.is_file():
            return []
        rows = []
        lines = self.journal.read_bytes().split(b"\n")
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as error:  # UnicodeDecodeError too
                if number == len(lines):  # no newline after it: the torn end of a killed write, never acknowledged
                    continue
                raise CorruptJournalError(
                    f"{self.journal}: line {number}: corrupt journal row ({error}); only a torn last line is dropped. "
                    "Remove the line to drop that row (a stored result, computed again when needed)"
                ) from None
            if not isinstance(row, dict):
                raise CorruptJournalError(
                    f"{self.journal}: line {number}: corrupt journal row (a JSON {type(row).__name__}, not an object)"
                )
            rows.append(row)
        return rows

    def _journal_table(self) -> pa.Table | None:
        rows = self._journal_rows()
        return pa.Table.from_pylist(rows, schema=self.schema) if rows else None

    def parts(self) -> list[Path]:
        return sorted(self.directory.glob("part-*.parquet")) if self.directory.is_dir() else []

    def read(self, keys: Iterable[str] | None = None, columns: list[str] | None = None) -> pa.Table | None:
        """The stored rows (only those whose key is in ``keys``, when given), deduplicated by key; None if empty."""
        wanted = None if keys is None else pa.array(sorted(set(keys)), type=pa.string())
        names = None if columns is None else [KEY, *(c for c in columns if c != KEY)]
        journal = self._journal_table()  # before the parts: a fold writes its part before it empties the journal
        tables = [pq.ParquetFile(part).read(columns=names) for part in self.parts()]
        if journal is not None:
            tables.append(journal.select(names) if names else journal)
        if not tables:
            return None
        combined = pa.concat_tables(tables, promote_options="default")
        if wanted is not None:
            combined = combined.filter(pc.is_in(combined[KEY], value_set=wanted))
        return _last_per_key(combined)

    def stored(self, keys: Iterable[str]) -> set[str]:
        """Which of ``keys`` have a stored row (only the key column is read)."""
        wanted = set(keys)
        journaled = {row[KEY] for row in self._journal_rows() if row.get(KEY) in wanted}  # first: see ``RowCache``
        return journaled | {
            key
            for part in self.parts()
            for key in pq.ParquetFile(part).read(columns=[KEY])[KEY].to_pylist()
            if key in wanted
        }

    def lookup(self, keys: Iterable[str], column: str) -> dict[str, Any]:
        """``column``'s stored value of each of ``keys`` that has a row (later rows win), read as Python values: no
        Arrow array is made from them (see ``vectors``)."""
        wanted = set(keys)
        found: dict[str, Any] = {}
        journaled = [
            (row[KEY], row.get(column)) for row in self._journal_rows() if row.get(KEY) in wanted
        ]  # first: see ``RowCache``
        for part in self.parts():
            table = pq.ParquetFile(part).read(columns=[KEY, column])
            found.update(
                (key, value) for key, value in zip(table[KEY].to_pylist(), table[column].to_pylist()) if key in wanted
            )
        found.update(journaled)
        return found

    def matrix(
        self, keys: list[str], column: str = "vector", allocate: Callable[[int, int], np.ndarray] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The stored float32 vectors of ``keys`` as one matrix, a row per key in order (later rows win), and which rows
        were found. Each part's vectors are copied from Arrow's buffers straight into the matrix: no Python value is made
        into an Arrow array (pyarrow would import pandas, a third of a one-query ``ctxrag search``), and no vector is an
        array of its own (1M of those took 1.6 GB beside the matrix). ``allocate(rows, dimension)``: the zeroed matrix
        (default in memory)."""
        rows_of: dict[str, int] = {}
        repeats: list[tuple[int, int]] = []  # (row, the first row of its key)
        for row, key in enumerate(keys):
            first = rows_of.setdefault(key, row)
            if first != row:
                repeats.append((row, first))
        matrix = np.zeros((len(keys), 0), dtype=np.float32)
        found = np.zeros(len(keys), dtype=bool)
        journaled = [record for record in self._journal_rows() if record.get(KEY) in rows_of]  # first: see ``RowCache``

        def fill(rows: list[int], vectors: np.ndarray) -> None:
            nonlocal matrix
            if matrix.shape[1] == 0 and len(rows):
                matrix = (allocate or _zeros)(len(keys), vectors.shape[1])
            matrix[rows] = vectors
            found[rows] = True

        for part in self.parts():
            stored = pq.ParquetFile(part)
            hits = [
                (position, rows_of[key])
                for position, key in enumerate(stored.read(columns=[KEY])[KEY].to_pylist())
                if key in rows_of
            ]
            if hits:  # a part's vectors are read only if it holds one asked for (a query's: none of 1M documents')
                fill(
                    [row for _, row in hits],
                    _float_matrix(
                        stored.read(columns=[column])[column].combine_chunks(), [position for position, _ in hits]
                    ),
                )
        for record in journaled:
            fill([rows_of[record[KEY]]], np.asarray([record[column]], dtype=np.float32))
        for row, first in repeats:
            matrix[row], found[row] = matrix[first], found[first]
        return matrix, found

    def keys(self) -> set[str]:
        table = self.read(columns=[])
        return set() if table is None else set(table[KEY].to_pylist())

    def compact(self, min_parts: int = 16) -> None:
        """Fold the journal and the parts into one part (when there are ``min_parts`` parts, or any journal)."""
        if self.directory.is_dir():
            self._rewrite(lambda table: table, only_if=lambda parts, journal: len(parts) >= min_parts or journal > 0)

    def replace(self, table: pa.Table) -> None:
        """Make ``table`` the table's whole content (gc)."""
        private_dirs(self.directory)
        self._rewrite(lambda _: table)

    def _rewrite(
        self,
        transform: Callable[[pa.Table | None], pa.Table | None],
        only_if: Callable[[list[Path], int], bool] | None = None,
    ) -> None:
        """Replace parts and journal by one part holding ``transform(current rows)``.

        Holds the journal lock throughout, so rows appended meanwhile wait and are not lost; part writers of the
        same table must not run at the same time (stages compact their own tables after they finish).
        """
        with journal_lock(self.journal):
            self.journal.touch()
            parts = self.parts()
            if only_if is not None and not only_if(parts, self.journal.stat().st_size):
                return
            table = transform(self.read())
            if table is not None and table.num_rows:
                self._append_part(
                    table
                )  # newest part, holding every row, fsynced with its folder before the journal goes
            for part in parts:
                part.unlink(missing_ok=True)
            os.truncate(self.journal, 0)

    def append(self, table: pa.Table) -> None:
        """Persist new rows: as one more part file (atomic), or with ``fold_bytes`` as journal lines, folded into a
        part when the journal has grown to ``fold_bytes``."""
        if self.fold_bytes and table.num_rows:
            self.append_rows(table.to_pylist())
            if self.journal.stat().st_size >= self.fold_bytes:
                self._fold()
            return
        self._append_part(table)

    def _fold(self) -> None:
        """The journal into a part of its own, or every part and the journal into one from ``FOLD_PARTS`` parts."""
        with journal_lock(self.journal):
            if self.journal.stat().st_size < self.fold_bytes:
                return  # another process folded it meanwhile
            if len(self.parts()) + 1 >= FOLD_PARTS:
                self._rewrite(lambda table: table)
                return
            rows = self._journal_table()
            if rows is not None:
                self._append_part(_last_per_key(rows))  # fsynced before the journal is emptied
            os.truncate(self.journal, 0)

    def _append_part(self, table: pa.Table) -> None:
        if table.num_rows:
            # Names sort by creation time, so "later parts win" holds when reading in name order.
            name = f"part-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
            write_parquet_atomic(table, self.directory / name)


def _end_torn_write(fd: int) -> None:
    """Before appending (journal lock held): a journal not ending in a newline has a killed write's torn last line.
    Truncate it away (that row was never acknowledged), or end it with a newline if it is a whole row already, so the
    next row does not run into it."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    start = 0
    position = size
    while position > 0:
        block_start = max(0, position - _TAIL_BLOCK)
        found = os.pread(fd, position - block_start, block_start).rfind(b"\n")
        if found >= 0:
            start = block_start + found + 1
            break
        position = block_start
    tail = os.pread(fd, size - start, start)
    try:
        whole = isinstance(json.loads(tail), dict)
    except ValueError:
        whole = False
    if whole:
        os.write(fd, b"\n")  # the fd is in append mode: this lands at the end
    else:
        os.ftruncate(fd, start)


def _zeros(rows: int, dimension: int) -> np.ndarray:
    return np.zeros((rows, dimension), dtype=np.float32)


def _float_matrix(lists: pa.ListArray, positions: list[int]) -> np.ndarray:
    """Rows ``positions`` of a list<float32> array, as a matrix sliced from its buffers (no validity: stored vectors
    have none); they must be of one length (a part compacted from several embedders' may hold several)."""
    values = lists.values
    flat = np.frombuffer(values.buffers()[1], dtype=np.float32)[values.offset : values.offset + len(values)]
    offsets = np.frombuffer(lists.buffers()[1], dtype=np.int32)[lists.offset : lists.offset + len(lists) + 1]
    widths = np.diff(offsets)[positions]
    width = int(widths[0])
    if np.any(widths != width):
        raise ValueError("stored vectors of different lengths")
    if np.all(np.diff(offsets) == width):  # the usual part, of one embedder's vectors: a view of its rows
        return flat[offsets[0] : offsets[-1]].reshape(len(lists), width)[positions]
    return flat[offsets[positions].astype(np.int64)[:, None] + np.arange(width)]


def _last_per_key(table: pa.Table) -> pa.Table:
    """Keep the last row of each key (parts are read oldest first)."""
    keys = table[KEY].to_pylist()
    last: dict[str, int] = {key: position for position, key in enumerate(keys)}
    if len(last) == len(keys):
        return table
    return table.take(pa.array(sorted(last.values()), type=pa.int64()))


def vector_table(keys: list[str], vectors: np.ndarray, paid: bool, created_at: float) -> pa.Table:
    """Rows of ``VECTOR_SCHEMA`` made from buffers: ``pa.array`` of any value imports pandas (0.4 s of a new query's
    ``ctxrag search``)."""
    rows = len(keys)
    encoded = [key.encode("utf-8") for key in keys]
    key_offsets = np.zeros(rows + 1, dtype=np.int32)
    np.cumsum([len(key) for key in encoded], out=key_offsets[1:])
    width = vectors.shape[1] if rows else 0
    flat = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1)
    columns = [
        pa.StringArray.from_buffers(rows, pa.py_buffer(key_offsets.tobytes()), pa.py_buffer(b"".join(encoded))),
        pa.ListArray.from_buffers(
            VECTOR_SCHEMA.field("vector").type,
            rows,
            [None, pa.py_buffer(np.arange(0, rows * width + 1, width or 1, dtype=np.int32)[: rows + 1].tobytes())],
            children=[pa.Array.from_buffers(pa.float32(), flat.size, [None, pa.py_buffer(flat.tobytes())])],
        ),
        pa.Array.from_buffers(
            pa.bool_(), rows, [None, pa.py_buffer(np.packbits(np.full(rows, paid), bitorder="little").tobytes())]
        ),
        pa.Array.from_buffers(
            pa.float64(), rows, [None, pa.py_buffer(np.full(rows, created_at, dtype=np.float64).tobytes())]
        ),
    ]
    return pa.Table.from_arrays(columns, schema=VECTOR_SCHEMA)


def contexts_cache(home: Path) -> RowCache:
    """Stored contexts, keyed by context key (ctxrag.tasks.context.offline.context_key)."""
    return RowCache(home, "contexts")


def embeddings_cache(home: Path) -> RowCache:
    """Stored vectors, keyed by embedding key (ctxrag.tasks.embedding.embed.EmbedderSpec.cache_key)."""
    return RowCache(home, "embeddings")


def queries_cache(home: Path) -> RowCache:
    """Stored query vectors (a search's), keyed as ``embeddings_cache``'s rows: a table of their own, so looking one up
    reads the keys of queries, not of every chunk (a million chunks' keys took 0.7 s of a one-query search). A new
    query's vector is a journal line, not a part file of its own, folded into a part every ``QUERY_FOLD_BYTES``."""
    return RowCache(home, "queries", VECTOR_SCHEMA, fold_bytes=QUERY_FOLD_BYTES)
