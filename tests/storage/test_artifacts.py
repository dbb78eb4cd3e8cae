"""The artifact store: append-only, content-keyed Parquet parts; later parts win; atomic writes."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ctxrag.storage.artifacts as artifacts
from ctxrag.storage.artifacts import KEY, RowCache, write_parquet_atomic


def rows(table: pa.Table | None) -> list[dict]:
    assert table is not None
    return sorted(table.to_pylist(), key=lambda row: row[KEY])


def test_empty_store_reads_none_and_has_no_keys(tmp_path: Path) -> None:
    cache = RowCache(tmp_path, "things")
    assert cache.parts() == []
    assert cache.read() is None
    assert cache.read(keys=["a"]) is None
    assert cache.read(columns=["v"]) is None
    assert cache.keys() == set()


def test_table_folder_layout(tmp_path: Path) -> None:
    cache = RowCache(tmp_path, "things")
    cache.append(pa.table({KEY: ["a"], "v": [1]}))
    assert cache.directory == tmp_path / "artifacts" / "things"
    [part] = cache.parts()
    assert part.parent == cache.directory
    assert part.name.startswith("part-") and part.name.endswith(".parquet")


def test_append_then_read_all(tmp_path: Path) -> None:
    cache = RowCache(tmp_path, "things")
    cache.append(pa.table({KEY: ["a", "b"], "v": [1, 2]}))
    cache.append(pa.table({KEY: ["c"], "v": [3]}))
    assert len(cache.parts()) == 2
    assert rows(cache.read()) == [{KEY: "a", "v": 1}, {KEY: "b", "v": 2}, {KEY: "c", "v": 3}]


def test_append_of_an_empty_table_writes_nothing(tmp_path: Path) -> None:
    cache = RowCache(tmp_path, "things")
    cache.append(pa.table({KEY: pa.array([], pa.string()), "v": pa.array([], pa.int64())}))
    assert cache.parts() == []
    assert cache.read() is None


def test_read_by_keys(tmp_path: Path) -> None:
    cache = RowCache(tmp_path, "things")
    cache.append(pa.table({KEY: ["a", "b"], "v": [1, 2]}))
    cache.append(pa.table({KEY: ["c"], "v": [3]}))
    assert rows(cache.read(keys=["c", "a", "zzz"])) == [{KEY: "a", "v": 1}, {KEY: "c", "v": 3}]
    # keys may be any iterable, with repeats
    assert rows(cache.read(keys=iter(["b", "b"]))) == [{KEY: "b", "v": 2}]


def test_read_with_no_matching_keys_is_an_empty_table(tmp_path: Path) -> None:
    cache = RowCache(tmp_path, "things")
    cache.append(pa.table({KEY: ["a"], "v": [1]}))
    table = cache.read(keys=["zzz"])
    assert table is not None and table.num_rows == 0
    table = cache.read(keys=[])
    assert table is not None and table.num_rows == 0


def test_later_part_wins_for_a_repeated_key(tmp_path: Path) -> None:
    cache = RowCache(tmp_path, "things")
    cache.append(pa.table({KEY: ["a", "b"], "v": [1, 2]}))
    cache.append(pa.table({KEY: ["b", "c"], "v": [20, 30]}))
    cache.append(pa.table({KEY: ["b"], "v": [200]}))
    assert rows(cache.read()) == [{KEY: "a", "v": 1}, {KEY: "b", "v": 200}, {KEY: "c", "v": 30}]
    assert rows(cache.read(keys=["b"])) == [{KEY: "b", "v": 200}]
    assert cache.read().num_rows == 3


def test_later_row_wins_within_one_part(tmp_path: Path) -> None:
    cache = RowCache(tmp_path, "things")
    cache.append(pa.table({KEY: ["a", "a", "b"], "v": [1, 2, 3]}))
    assert rows(cache.read()) == [{KEY: "a", "v": 2}, {KEY: "b", "v": 3}]


def test_part_names_sort_in_creation_order(tmp_path: Path) -> None:
    cache = RowCache(tmp_path, "things")
    for value in range(5):
        cache.append(pa.table({KEY: ["a"], "v": [value]}))
    assert rows(cache.read()) == [{KEY: "a", "v": 4}]
    names = [part.name for part in cache.parts()]
    assert names == sorted(names) and len(names) == 5


def test_keys(tmp_path: Path) -> None:
    cache = RowCache(tmp_path, "things")
    cache.append(pa.table({KEY: ["a", "b"], "v": [1, 2]}))
    cache.append(pa.table({KEY: ["b", "c"], "v": [3, 4]}))
    assert cache.keys() == {"a", "b", "c"}


def test_read_a_subset_of_columns_always_includes_the_key(tmp_path: Path) -> None:
    cache = RowCache(tmp_path, "things")
    cache.append(pa.table({KEY: ["a", "b"], "v": [1, 2], "w": ["x", "y"]}))
    cache.append(pa.table({KEY: ["b"], "v": [20], "w": ["yy"]}))
    table = cache.read(columns=["w"])
    assert table.column_names == [KEY, "w"]
    assert rows(table) == [{KEY: "a", "w": "x"}, {KEY: "b", "w": "yy"}]
    table = cache.read(keys=["a"], columns=[])
    assert table.column_names == [KEY]
    assert table.to_pylist() == [{KEY: "a"}]


def test_read_with_the_key_named_in_columns(tmp_path: Path) -> None:
    cache = RowCache(tmp_path, "things")
    cache.append(pa.table({KEY: ["a"], "v": [1]}))
    cache.append(pa.table({KEY: ["b"], "v": [2]}))
    assert rows(cache.read(columns=[KEY, "v"])) == [{KEY: "a", "v": 1}, {KEY: "b", "v": 2}]


def test_parts_with_an_added_column_are_combined(tmp_path: Path) -> None:
    cache = RowCache(tmp_path, "things")
    cache.append(pa.table({KEY: ["a"], "v": [1]}))
    cache.append(pa.table({KEY: ["b"], "v": [2], "extra": ["e"]}))
    assert rows(cache.read()) == [{KEY: "a", "v": 1, "extra": None}, {KEY: "b", "v": 2, "extra": "e"}]


def test_stray_files_are_not_parts(tmp_path: Path) -> None:
    cache = RowCache(tmp_path, "things")
    cache.append(pa.table({KEY: ["a"], "v": [1]}))
    (cache.directory / ".part-x.parquet.abc.tmp").write_bytes(b"half a file")
    (cache.directory / "notes.txt").write_text("hi")
    assert len(cache.parts()) == 1
    assert rows(cache.read()) == [{KEY: "a", "v": 1}]


def test_atomic_write_leaves_no_temporary_files(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "folder" / "t.parquet"
    write_parquet_atomic(pa.table({KEY: ["a"], "v": [1]}), path)
    assert [p.name for p in path.parent.iterdir()] == ["t.parquet"]
    assert pq.read_table(path).to_pylist() == [{KEY: "a", "v": 1}]
    # overwrite in place
    write_parquet_atomic(pa.table({KEY: ["b"], "v": [2]}), path)
    assert [p.name for p in path.parent.iterdir()] == ["t.parquet"]
    assert pq.read_table(path).to_pylist() == [{KEY: "b", "v": 2}]


def test_append_leaves_no_temporary_files(tmp_path: Path) -> None:
    cache = RowCache(tmp_path, "things")
    for value in range(3):
        cache.append(pa.table({KEY: [str(value)], "v": [value]}))
    names = [p.name for p in cache.directory.iterdir()]
    assert len(names) == 3
    assert all(name.startswith("part-") and name.endswith(".parquet") for name in names)


def test_failed_write_leaves_neither_the_file_nor_a_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.parquet"

    def half_write(table: pa.Table, where: Path) -> None:
        Path(where).write_bytes(b"PAR1 half")
        raise OSError("disk full")

    monkeypatch.setattr(artifacts.pq, "write_table", half_write)
    with pytest.raises(OSError, match="disk full"):
        write_parquet_atomic(pa.table({KEY: ["a"]}), path)
    assert list(tmp_path.iterdir()) == []


def test_failed_write_keeps_the_previous_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.parquet"
    write_parquet_atomic(pa.table({KEY: ["old"]}), path)

    def failing(table: pa.Table, where: Path) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(artifacts.pq, "write_table", failing)
    with pytest.raises(OSError):
        write_parquet_atomic(pa.table({KEY: ["new"]}), path)
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]
    assert pq.read_table(path).to_pylist() == [{KEY: "old"}]


# --- the journal: a torn last line is dropped, any other bad line is an error ---------------------------------


def journal_of(tmp_path: Path, content: bytes) -> RowCache:
    cache = RowCache(tmp_path, "contexts")
    cache.directory.mkdir(parents=True)
    cache.journal.write_bytes(content)
    return cache


def test_journal_rows_are_read_and_empty_lines_are_fine(tmp_path: Path) -> None:
    cache = journal_of(tmp_path, b'{"key":"a","v":1}\n\n  \n{"key":"b","v":2}\n\n')
    assert rows(cache.read()) == [{"key": "a", "v": 1}, {"key": "b", "v": 2}]


def test_a_torn_last_line_is_dropped(tmp_path: Path) -> None:
    cache = journal_of(tmp_path, b'{"key":"a","v":1}\n{"key":"b","v"')  # a killed write: no newline after it
    assert rows(cache.read()) == [{"key": "a", "v": 1}]


def test_a_corrupt_line_in_the_middle_is_an_error_naming_the_file_and_line(tmp_path: Path) -> None:
    cache = journal_of(tmp_path, b'{"key":"a","v":1}\n\n{"key":"b","v"\n{"key":"c","v":3}\n')
    with pytest.raises(artifacts.CorruptJournalError) as raised:
        cache.read()
    assert str(raised.value).startswith(f"{cache.journal}: line 3: corrupt journal row (")
    assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize("line", [b"\xff\xfe garbage", b"[1, 2]", b'"text"'], ids=["not-utf8", "a-list", "a-string"])
def test_a_last_complete_line_that_is_not_a_row_is_an_error(tmp_path: Path, line: bytes) -> None:
    cache = journal_of(tmp_path, b'{"key":"a","v":1}\n' + line + b"\n")
    with pytest.raises(artifacts.CorruptJournalError, match=r": line 2: corrupt journal row"):
        cache.keys()


def test_an_append_after_a_killed_write_removes_the_torn_line(tmp_path: Path) -> None:
    cache = journal_of(tmp_path, b'{"key":"a","v":1}\n{"key":"b","v"')
    cache.append_rows([{"key": "c", "v": 3}])
    assert cache.journal.read_bytes() == b'{"key":"a","v":1}\n{"key":"c","v":3}\n'
    assert rows(cache.read()) == [{"key": "a", "v": 1}, {"key": "c", "v": 3}]


def test_an_append_after_a_write_killed_before_its_newline_keeps_that_row(tmp_path: Path) -> None:
    cache = journal_of(tmp_path, b'{"key":"a","v":1}\n{"key":"b","v":2}')
    assert rows(cache.read()) == [{"key": "a", "v": 1}, {"key": "b", "v": 2}]
    cache.append_rows([{"key": "c", "v": 3}])
    assert rows(cache.read()) == [{"key": "a", "v": 1}, {"key": "b", "v": 2}, {"key": "c", "v": 3}]


def test_an_append_after_a_torn_first_line_longer_than_a_read_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(artifacts, "_TAIL_BLOCK", 4)
    cache = journal_of(tmp_path, b'{"key":"a","v":1}\n{"key":"b","text":"' + b"x" * 50)
    cache.append_rows([{"key": "c", "v": 3}])
    assert rows(cache.read()) == [{"key": "a", "v": 1}, {"key": "c", "v": 3}]
    only_torn = journal_of(tmp_path / "other", b'{"key":"b","te')
    only_torn.append_rows([{"key": "c", "v": 3}])
    assert only_torn.journal.read_bytes() == b'{"key":"c","v":3}\n'


# --- compaction: the journal is truncated only once the Parquet part holding its rows is on the disk --------------


def test_compaction_fsyncs_the_new_part_and_its_folder_before_truncating_the_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = RowCache(tmp_path, "contexts")
    cache.append(pa.table({KEY: ["a"], "context": ["older part"]}))
    cache.append_rows([{KEY: "b", "context": "paid for"}, {KEY: "c", "context": "paid for too"}])
    events: list[tuple[str, object]] = []
    fsync, truncate = os.fsync, os.truncate

    def recording_fsync(descriptor: int) -> None:
        status = os.fstat(descriptor)
        events.append(("fsync", (status.st_dev, status.st_ino)))  # the temporary part keeps its inode when renamed
        fsync(descriptor)

    def recording_truncate(path: Path, length: int) -> None:
        events.append(("truncate", Path(path)))
        truncate(path, length)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    monkeypatch.setattr(os, "truncate", recording_truncate)
    cache.compact()

    [part] = cache.parts()
    synced = [what for kind, what in events[: events.index(("truncate", cache.journal))] if kind == "fsync"]
    part_id, folder_id = [(os.stat(path).st_dev, os.stat(path).st_ino) for path in (part, cache.directory)]
    assert part_id in synced, "the new part was not fsynced before the journal was truncated"
    assert folder_id in synced[synced.index(part_id) :], "the part's folder (its name) was not fsynced after it"
    assert cache.journal.read_bytes() == b""
    assert rows(cache.read()) == [
        {KEY: "a", "context": "older part"},
        {KEY: "b", "context": "paid for"},
        {KEY: "c", "context": "paid for too"},
    ]


# --- the journal's lock: threads and processes (issue 35, "No hang") -------------------------------------------------

HOLD_LOCK = """
import sys, time
from pathlib import Path
from ctxrag.storage.artifacts import journal_lock
with journal_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""

APPEND_ROWS = """
import sys, threading
from pathlib import Path
from ctxrag.storage.artifacts import RowCache
cache = RowCache(Path(sys.argv[1]), "things")
def one(thread):
    for n in range(int(sys.argv[3])):
        cache.append_rows([{"key": f"{sys.argv[2]}-{thread}-{n}", "v": n}])
threads = [threading.Thread(target=one, args=(t,)) for t in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
"""


def test_a_thread_that_holds_the_journal_lock_can_append(tmp_path: Path) -> None:
    """Re-entrant within a thread: before, a second flock of the journal through another open file of the same
    thread waited for itself forever."""
    import threading

    cache = RowCache(tmp_path, "things")
    cache.append_rows([{KEY: "a", "v": 1}])
    done = threading.Event()

    def nested() -> None:
        with artifacts.journal_lock(cache.journal):
            cache.append_rows([{KEY: "b", "v": 2}])
        done.set()

    threading.Thread(target=nested, daemon=True).start()
    assert done.wait(10), "an append under the journal lock, in the same thread, waited for itself"
    assert cache.keys() == {"a", "b"}


def test_threads_of_one_process_exclude_each_other(tmp_path: Path) -> None:
    import threading

    journal = tmp_path / "journal.jsonl"
    inside, overlaps = [0], []

    def hold() -> None:
        for _ in range(50):
            with artifacts.journal_lock(journal):
                inside[0] += 1
                overlaps.append(inside[0])
                inside[0] -= 1

    threads = [threading.Thread(target=hold) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert max(overlaps) == 1 and len(overlaps) == 200


def test_a_lock_held_by_another_process_is_a_timeout_naming_it_not_a_hang(tmp_path: Path) -> None:
    import subprocess
    import sys

    cache = RowCache(tmp_path, "things")
    cache.append_rows([{KEY: "a", "v": 1}])
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(cache.journal), "30"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(artifacts.JournalLockTimeout, match="another process held the journal's lock"):
            with artifacts.journal_lock(cache.journal, timeout=0.5):
                pass
    finally:
        holder.kill()
        holder.wait()
    cache.append_rows([{KEY: "b", "v": 2}])  # the holder is gone: its lock with it
    assert cache.keys() == {"a", "b"}


def test_appends_from_threads_of_two_processes_all_land_whole(tmp_path: Path) -> None:
    import subprocess
    import sys

    writers = [
        subprocess.Popen([sys.executable, "-c", APPEND_ROWS, str(tmp_path), name, "25"]) for name in ("p1", "p2")
    ]
    for writer in writers:
        assert writer.wait(120) == 0
    cache = RowCache(tmp_path, "things")
    lines = cache.journal.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 2 * 4 * 25 + 1  # one whole line per row, none torn or run together
    assert len(cache.keys()) == 200
    cache.compact(min_parts=2)
    assert len(cache.keys()) == 200 and cache.journal.stat().st_size == 0


def _vector_part(keys: list[str], first: float) -> pa.Table:
    vectors = [[first + row, -(first + row)] for row in range(len(keys))]
    return pa.table({KEY: keys, "vector": pa.array(vectors, type=pa.list_(pa.float32()))})


def test_matrix_reads_each_keys_latest_vector_into_one_matrix(tmp_path: Path) -> None:
    """Later parts win, then the journal; a repeated key fills each of its rows; a key with no vector is not found."""
    cache = RowCache(tmp_path, "embeddings")
    cache.append(_vector_part(["a", "b", "c"], 0.0))
    cache.append(_vector_part(["b"], 10.0))
    cache.append_rows([{KEY: "c", "vector": [20.0, -20.0]}])
    made: list[tuple[int, int]] = []

    def allocate(rows: int, dimension: int) -> np.ndarray:
        made.append((rows, dimension))
        return np.zeros((rows, dimension), dtype=np.float32)

    matrix, found = cache.matrix(["c", "a", "missing", "b", "a"], allocate=allocate)
    assert made == [(5, 2)] and matrix.dtype == np.float32
    assert matrix.tolist() == [[20, -20], [0, 0], [0, 0], [10, -10], [0, 0]]
    assert found.tolist() == [True, True, False, True, True]


def test_matrix_holds_no_array_per_vector(tmp_path: Path) -> None:
    """20,000 stored vectors in 20 parts read into one matrix: the traced peak is the matrix, the keys' rows and a
    part's worth (1.2x the matrix), not a second copy of every vector (1M vectors' arrays took 1.6 GB beside it)."""
    cache = RowCache(tmp_path, "embeddings")
    keys = [f"key-{row}" for row in range(20_000)]
    rng = np.random.default_rng(3)
    for start in range(0, len(keys), 1_000):
        part = keys[start : start + 1_000]
        cache.append(
            pa.table(
                {
                    KEY: part,
                    "vector": pa.array(
                        list(rng.normal(size=(len(part), 128)).astype(np.float32)), type=pa.list_(pa.float32())
                    ),
                }
            )
        )
    tracemalloc.start()
    try:
        matrix, found = cache.matrix(keys)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert found.all() and matrix.shape == (20_000, 128)
    assert peak < 1.5 * matrix.nbytes, (peak, matrix.nbytes)


def test_matrix_reads_a_part_of_several_lengths_row_by_row(tmp_path: Path) -> None:
    """A part compacted from two embedders' vectors: the asked rows must be of one length."""
    cache = RowCache(tmp_path, "embeddings")
    cache.append(
        pa.table(
            {
                KEY: ["short", "long", "other"],
                "vector": pa.array([[1.0], [2.0, 3.0], [4.0, 5.0]], type=pa.list_(pa.float32())),
            }
        )
    )
    matrix, found = cache.matrix(["other", "long"])
    assert matrix.tolist() == [[4, 5], [2, 3]] and found.all()
    with pytest.raises(ValueError, match="different lengths"):
        cache.matrix(["short", "long"])


# --- a journaled table: no file per append, folded into parts, every row kept bit for bit ----------------------------


def test_a_journaled_table_appends_lines_and_folds_them_into_few_parts(tmp_path: Path) -> None:
    import numpy as np

    from ctxrag.storage.artifacts import FOLD_PARTS, VECTOR_SCHEMA, vector_table

    cache = RowCache(tmp_path, "queries", VECTOR_SCHEMA, fold_bytes=4096)
    vectors = np.random.default_rng(0).standard_normal((200, 48)).astype(np.float32)
    keys = [f"q{number}" for number in range(200)]
    for number in range(3):
        cache.append(vector_table([keys[number]], vectors[number : number + 1], False, 1.0))
    assert cache.parts() == [] and len(cache.journal.read_text().splitlines()) == 3  # lines, not files
    for number in range(3, 200):
        cache.append(vector_table([keys[number]], vectors[number : number + 1], False, 1.0))
        assert len(cache.parts()) < FOLD_PARTS
    assert cache.journal.stat().st_size < 4096 and len(cache.parts()) >= 1
    matrix, found = cache.matrix(keys)
    assert found.all() and np.array_equal(matrix, vectors)  # JSON lines keep float32 values exactly
    assert cache.stored(keys) == set(keys) and cache.read().num_rows == 200
