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


def test_the_row_groups_kept_after_reads_stay_under_the_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = pa.table({"content": [f"text {row} " * 20 for row in range(400)]})
    pq.write_table(table, tmp_path / "chunks.parquet", row_group_size=10)  # 40 groups of ~2 kB
    stored = ChunkTable(path=tmp_path / "chunks.parquet")
    one_group = pq.ParquetFile(tmp_path / "chunks.parquet").read_row_group(0)["content"].nbytes
    monkeypatch.setattr("ctxrag.storage.chunk_table.GROUP_CACHE_BYTES", 5 * one_group)
    reads: list[int] = []
    read_row_group = pq.ParquetFile.read_row_group
    monkeypatch.setattr(
        pq.ParquetFile,
        "read_row_group",
        lambda self, group, **kw: reads.append(group) or read_row_group(self, group, **kw),
    )
    rows = list(range(0, 400, 7))
    assert stored.values("content", rows) == [table["content"][row].as_py() for row in rows]
    assert stored._group_bytes <= 5 * one_group + one_group and len(stored._groups) <= 6
    assert len(reads) == 40
    stored.values("content", [399, 395])  # the group read last is kept: no read
    assert len(reads) == 40
    stored.values("content", [0])  # the first was dropped long ago: read again
    assert reads[-1] == 0 and len(reads) == 41


def test_a_versions_rows_file_answers_every_row_without_the_parquet_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxrag.storage.chunk_table import GROUP_ROWS, ROWS_FILE
    from ctxrag.storage.index_store import _write_rows

    rows = 3 * GROUP_ROWS + 77
    table = pa.table(
        {
            "doc_id": [f"d{row // 5}" for row in range(rows)],
            "content": [f"text {row}" for row in range(rows)],
            "defines": [[f"f{row}"] if row % 2 else [] for row in range(rows)],
        }
    )
    cuts = [0, 1500, 2200, rows]  # tables of consecutive rows, none a whole number of batches
    _write_rows((table.slice(start, end - start) for start, end in zip(cuts, cuts[1:])), tmp_path / "chunks.parquet")
    batches = pa.ipc.open_file(tmp_path / ROWS_FILE)
    assert [batches.get_batch(at).num_rows for at in range(batches.num_record_batches)] == [GROUP_ROWS] * 3 + [77]

    stored = ChunkTable(path=tmp_path / "chunks.parquet")
    monkeypatch.setattr(pq.ParquetFile, "read_row_group", lambda *args, **kwargs: pytest.fail("a row group was read"))
    monkeypatch.setattr(pq.ParquetFile, "read", lambda *args, **kwargs: pytest.fail("the Parquet file was read"))
    picked = [0, GROUP_ROWS - 1, GROUP_ROWS, 2199, 2200, rows - 1, 5]
    for name in ("doc_id", "content", "defines"):
        assert stored.values(name, picked) == [table[name][row].as_py() for row in picked]
        assert stored[name].to_pylist() == table[name].to_pylist()
    assert stored.read().equals(table) and len(stored) == rows
    with pytest.raises(IndexError, match=f"row {rows} of a chunk table of {rows} rows"):
        stored.values("content", [rows])


def test_a_corrupt_rows_file_is_named(tmp_path: Path) -> None:
    from ctxrag.storage.chunk_table import ROWS_FILE
    from ctxrag.storage.errors import CorruptIndexError

    pq.write_table(TABLE, tmp_path / "chunks.parquet")
    (tmp_path / ROWS_FILE).write_bytes(b"not an arrow file")
    with pytest.raises(CorruptIndexError, match=f"{ROWS_FILE}: corrupt rows file"):
        ChunkTable(path=tmp_path / "chunks.parquet")


def test_a_values_call_opens_each_mapped_batch_once_and_keeps_a_bounded_few(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxrag.storage.chunk_table import GROUP_ROWS
    from ctxrag.storage.index_store import _write_rows

    rows = 4 * GROUP_ROWS
    table = pa.table(
        {"doc_id": [f"d{row // 5}" for row in range(rows)], "defines": [[f"f{row}"] for row in range(rows)]}
    )
    _write_rows(iter([table]), tmp_path / "chunks.parquet")
    stored = ChunkTable(path=tmp_path / "chunks.parquet")
    mapped, opened = stored._mapped, []
    assert mapped is not None

    class Spy:
        def get_batch(self, at: int) -> pa.RecordBatch:
            opened.append(at)
            return mapped.get_batch(at)

    monkeypatch.setattr(stored, "_mapped", Spy())
    monkeypatch.setattr("ctxrag.storage.chunk_table.KEPT_BATCHES", 3)
    picked = [5, GROUP_ROWS + 1, 6, 7, GROUP_ROWS + 2, 3 * GROUP_ROWS]  # three batches, rows of each scattered
    for name in ("doc_id", "defines"):
        assert stored.values(name, picked) == [table[name][row].as_py() for row in picked]
    assert sorted(opened) == [0, 1, 3]  # each batch opened once, for both columns
    stored.values("doc_id", [GROUP_ROWS, 0])  # kept: nothing opened; 1 and 0 are now the latest used
    assert sorted(opened) == [0, 1, 3]
    assert stored.values("doc_id", [2 * GROUP_ROWS]) == [table["doc_id"][2 * GROUP_ROWS].as_py()]
    assert sorted(stored._batches) == [0, 1, 2]  # a fourth: the least recently used (3) dropped
    stored.values("defines", [3 * GROUP_ROWS])
    assert opened[-1] == 3 and len(stored._batches) == 3


def test_many_rows_of_a_mapped_batch_are_taken_at_once_in_the_order_asked(tmp_path: Path) -> None:
    from ctxrag.storage.chunk_table import GROUP_ROWS, MANY_VALUES
    from ctxrag.storage.index_store import _write_rows

    rows = 2 * GROUP_ROWS + 10
    table = pa.table({"doc_id": [f"d{row // 5}" for row in range(rows)], "chunk_index": list(range(rows))})
    _write_rows(iter([table]), tmp_path / "chunks.parquet")
    stored = ChunkTable(path=tmp_path / "chunks.parquet")
    one_batch = list(range(MANY_VALUES * 3, 0, -3)) + [9, 9]  # many rows of batch 0, backwards, one twice
    across = one_batch + [GROUP_ROWS + 4, 2 * GROUP_ROWS + 9] + list(range(GROUP_ROWS + MANY_VALUES, GROUP_ROWS, -1))
    for picked in (one_batch, across):
        for name in ("doc_id", "chunk_index"):
            assert stored.values(name, picked) == [table[name][row].as_py() for row in picked]
