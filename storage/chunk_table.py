"""A version's chunk rows, read from its chunks.parquet as they are asked for.

A search needs a few rows (its hits and their documents' other chunks): ``values`` reads only the row groups that
hold them, a column at a time. Whole columns (``table[name]``), which evaluation and tuning read, are read on first
use. Opening a million-row version read all 700 MB of it (2.8 s and 1.5 GB of a one-query ``ctxrag search``); a row
group of 65,536 rows (versions written before ``GROUP_ROWS``) takes 75 ms to read its text columns.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from itertools import accumulate
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

GROUP_ROWS = 1_024  # rows of a row group as versions are written: a hit reads its group's text (at 1M chunks 2 ms, not 24 ms at 8,192)


class ChunkTable:
    """The chunk rows of a version file (``path``), or of a table already in memory (``table``)."""

    def __init__(self, table: pa.Table | None = None, path: Path | None = None) -> None:
        if (table is None) == (path is None):
            raise ValueError("a chunk table is read from a table or from a file")
        self._file = pq.ParquetFile(path) if path is not None else None  # reads the footer: a corrupt file fails here
        self._columns: dict[str, pa.ChunkedArray] = {name: table[name] for name in table.column_names} if table is not None else {}
        self._groups: dict[tuple[str, int], pa.ChunkedArray] = {}
        self._reading = threading.Lock()  # one read of the file at a time: a program may search from several threads
        if self._file is not None:
            metadata = self._file.metadata
            self.column_names: list[str] = self._file.schema_arrow.names
            self.num_rows: int = metadata.num_rows
            self._starts = [0, *accumulate(metadata.row_group(group).num_rows for group in range(metadata.num_row_groups))]
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
                self._columns[name] = self._file.read(columns=[name])[name]
        return self._columns[name]

    def values(self, name: str, rows: list[int]) -> list[Any]:
        """``name``'s values at ``rows`` as Python values, reading only the row groups that hold them."""
        if name in self._columns or self._file is None or name not in self.column_names:
            column = self[name]
            return [column[row].as_py() for row in rows]
        found = []
        for row in rows:
            if not 0 <= row < self.num_rows:
                raise IndexError(f"row {row} of a chunk table of {self.num_rows} rows")
            group = bisect_right(self._starts, row) - 1
            if (name, group) not in self._groups:
                with self._reading:
                    self._groups[(name, group)] = self._file.read_row_group(group, columns=[name])[name]
            found.append(self._groups[(name, group)][row - self._starts[group]].as_py())
        return found

    def value(self, name: str, row: int) -> Any:
        return self.values(name, [row])[0]

    def read(self) -> pa.Table:
        """Every row, as one table."""
        return pa.table({name: self[name] for name in self.column_names})

    def to_pylist(self) -> list[dict[str, Any]]:
        return self.read().to_pylist()
