"""A version's chunk rows read as they are asked for: a few rows read only their row groups, a column is read whole once."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ctxrag.storage.chunk_table import ChunkTable

TABLE = pa.table({"doc_id": [f"d{row // 3}" for row in range(10)], "content": [f"text {row}" for row in range(10)]})


@pytest.fixture
def stored(tmp_path: Path) -> ChunkTable:
    pq.write_table(TABLE, tmp_path / "chunks.parquet", row_group_size=4)  # groups of rows 0-3, 4-7, 8-9
    return ChunkTable(path=tmp_path / "chunks.parquet")


def test_rows_read_from_their_row_groups_are_the_table_s(stored: ChunkTable, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pq.ParquetFile, "read", lambda *args, **kwargs: pytest.fail("a whole column was read"))
    rows = [9, 0, 5, 4, 9]
    assert stored.values("content", rows) == [TABLE["content"][row].as_py() for row in rows]
    assert stored.value("doc_id", 3) == "d1" and (len(stored), stored.column_names) == (10, ["doc_id", "content"])


def test_whole_columns_and_the_table_are_the_stored_ones(stored: ChunkTable) -> None:
    assert stored["doc_id"].to_pylist() == TABLE["doc_id"].to_pylist()
    assert stored.read().equals(TABLE) and stored.to_pylist() == TABLE.to_pylist()
    in_memory = ChunkTable(TABLE)
    assert in_memory.values("content", [2, 7]) == ["text 2", "text 7"] and in_memory.read().equals(TABLE)


def test_an_unknown_column_or_row_is_named(stored: ChunkTable) -> None:
    with pytest.raises(KeyError, match="no column 'heading' in the chunk table \\(columns: doc_id, content\\)"):
        stored.values("heading", [0])
    with pytest.raises(IndexError, match="row 10 of a chunk table of 10 rows"):
        stored.values("content", [10])
