"""A version's chunk rows, read as they are asked for.

A version has its rows twice: ``chunks.parquet`` (compressed; what backends and gc read) and ``rows.arrow``
(``ROWS_FILE``: the same rows uncompressed in Arrow's IPC file format, in record batches of ``GROUP_ROWS``), which
is memory-mapped: a search's few rows (its hits and their documents' other chunks) cost microseconds each and touch
only their own pages, at any size. Versions written before ``rows.arrow`` are read from the Parquet file: ``values``
reads only the row groups that hold them (~2 ms a 1,024-row text group at 1M chunks, kept in a bounded cache).
Whole columns (``table[name]``), which evaluation and tuning read, are read on first use.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections import OrderedDict
from itertools import accumulate
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ctxrag.storage.errors import CorruptIndexError

GROUP_ROWS = 1_024  # rows of a row group as versions are written: a hit reads its group's text (at 1M chunks 2 ms, not 24 ms at 8,192)
GROUP_CACHE_BYTES = 64 * 1024**2  # row groups' columns kept after a read, the least recently used dropped past this
KEPT_BATCHES = (
    256  # rows.arrow's record batches kept opened (no copy: views of the map), the least recently used dropped
)
# From this many rows of one mapped batch, their values are taken at once (150 ``doc_id`` values: 31 us, not 92 one at a
# time; below it, one at a time is as fast).
MANY_VALUES = 16
ROWS_FILE = "rows.arrow"  # beside chunks.parquet: the rows memory-mapped, for reads of a few at a time


class ChunkTable:
    """The chunk rows of a version file (``path``), or of a table already in memory (``table``)."""

    def __init__(self, table: pa.Table | None = None, path: Path | None = None) -> None:
        if (table is None) == (path is None):
            raise ValueError("a chunk table is read from a table or from a file")
        self._file = pq.ParquetFile(path) if path is not None else None  # reads the footer: a corrupt file fails here
        self._mapped = _open_rows(path.parent / ROWS_FILE) if path is not None else None
        self._columns: dict[str, pa.ChunkedArray] = (
            {name: table[name] for name in table.column_names} if table is not None else {}
        )
        self._groups: OrderedDict[tuple[str, int], pa.ChunkedArray] = OrderedDict()  # the latest read last
        self._group_bytes = 0
        self._batches: OrderedDict[int, pa.RecordBatch] = OrderedDict()  # the latest used last
        self._reading = threading.Lock()  # one read of the file at a time: a program may search from several threads
        if self._file is not None:
            metadata = self._file.metadata
            self.column_names: list[str] = self._file.schema_arrow.names
            self.num_rows: int = metadata.num_rows
            self._starts = [
                0,
                *accumulate(metadata.row_group(group).num_rows for group in range(metadata.num_row_groups)),
            ]
        else:
            assert table is not None
            self.column_names, self.num_rows, self._starts = table.column_names, table.num_rows, [0, table.num_rows]

    def __len__(self) -> int:
        return self.num_rows

    def __getitem__(self, name: str) -> pa.ChunkedArray:
        """The whole column (read from the file on first use)."""
        if name not in self._columns:
            if self._file is None or name not in self.column_names:
                raise KeyError(f"no column {name!r} in the chunk table (columns: {', '.join(self.column_names)})")
            with self._reading:
                if self._mapped is not None:
                    self._columns[name] = pa.chunked_array(
                        [self._mapped.get_batch(batch)[name] for batch in range(self._mapped.num_record_batches)],
                        self._mapped.schema.field(name).type,
                    )
                else:
                    self._columns[name] = self._file.read(columns=[name])[name]
        return self._columns[name]

    def values(self, name: str, rows: list[int]) -> list[Any]:
        """``name``'s values at ``rows`` as Python values: from the mapped rows, else reading only the row groups
        that hold them."""
        if rows and not (0 <= min(rows) and max(rows) < self.num_rows):
            wrong = next(row for row in rows if not 0 <= row < self.num_rows)
            raise IndexError(f"row {wrong} of a chunk table of {self.num_rows} rows")
        if name in self._columns or self._file is None or name not in self.column_names:
            column = self[name]
            return [column[row].as_py() for row in rows]
        if self._mapped is not None:  # batches of GROUP_ROWS rows: a row's is its number // GROUP_ROWS
            by_batch: dict[int, list[int]] = {}
            for row in rows:
                by_batch.setdefault(row // GROUP_ROWS, []).append(row)
            got: dict[int, Any] = {}
            for batch, kept in by_batch.items():
                column = self._batch(batch).column(name)
                if len(kept) < MANY_VALUES:
                    got.update((row, column[row % GROUP_ROWS].as_py()) for row in kept)
                    continue
                values = column.take(np.array(kept) % GROUP_ROWS).to_pylist()
                if len(by_batch) == 1:
                    return values  # type: ignore[no-any-return]
                got.update(zip(kept, values))
            return [got[row] for row in rows]
        return [
            self._group(name, group)[row - self._starts[group]].as_py()
            for row, group in ((row, bisect_right(self._starts, row) - 1) for row in rows)
        ]

    def _batch(self, batch: int) -> pa.RecordBatch:
        """Record batch ``batch`` of the mapped rows: opening one reads its IPC header (~40 us, as much as 20 values'
        reads), so the ``KEPT_BATCHES`` used last stay open; they are views of the map and hold no copy of its rows."""
        assert self._mapped is not None
        with self._reading:
            found = self._batches.get(batch)
            if found is None:
                found = self._batches[batch] = self._mapped.get_batch(batch)
                while len(self._batches) > KEPT_BATCHES:
                    self._batches.popitem(last=False)
            else:
                self._batches.move_to_end(batch)
            return found

    def _group(self, name: str, group: int) -> pa.ChunkedArray:
        """Column ``name`` of row group ``group``: from the cache of recent reads, else read (on this thread: pyarrow's
        pool took 9.6 ms for a 1,024-row text group on 2 busy cores, one thread 2 ms) and cached, the least recently
        used dropped past ``GROUP_CACHE_BYTES`` (a service searching a million chunks for hours stays bounded)."""
        assert self._file is not None
        with self._reading:
            key = (name, group)
            if key in self._groups:
                self._groups.move_to_end(key)
                return self._groups[key]
            column = self._file.read_row_group(group, columns=[name], use_threads=False)[name]
            self._groups[key] = column
            self._group_bytes += column.nbytes
            while self._group_bytes > GROUP_CACHE_BYTES and len(self._groups) > 1:
                _, dropped = self._groups.popitem(last=False)
                self._group_bytes -= dropped.nbytes
            return column

    def value(self, name: str, row: int) -> Any:
        return self.values(name, [row])[0]

    def read(self) -> pa.Table:
        """Every row, as one table."""
        return pa.table({name: self[name] for name in self.column_names})

    def to_pylist(self) -> list[dict[str, Any]]:
        return self.read().to_pylist()


def _open_rows(path: Path) -> pa.ipc.RecordBatchFileReader | None:
    """``rows.arrow`` memory-mapped (its footer read; batches are read as asked), or None for a version without one."""
    try:
        return pa.ipc.open_file(pa.memory_map(str(path)))
    except FileNotFoundError:
        return None
    except pa.ArrowInvalid as error:
        raise CorruptIndexError(f"{path}: corrupt rows file: {error}") from None


class RowsWriter:
    """Writes ``rows.arrow``: every table given, in order, as record batches of exactly ``GROUP_ROWS`` rows (the last
    shorter), so a row's batch is its number divided by ``GROUP_ROWS``."""

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        self._writer = pa.ipc.new_file(str(path), schema)
        self._pending = schema.empty_table()

    def write(self, table: pa.Table) -> None:
        pending = pa.concat_tables([self._pending, table]) if self._pending.num_rows else table
        whole = pending.num_rows - pending.num_rows % GROUP_ROWS
        if whole:
            self._writer.write_table(pending.slice(0, whole).combine_chunks(), max_chunksize=GROUP_ROWS)
        self._pending = pending.slice(whole)

    def close(self) -> None:
        if self._pending.num_rows:
            self._writer.write_table(self._pending.combine_chunks(), max_chunksize=GROUP_ROWS)
        self._writer.close()
