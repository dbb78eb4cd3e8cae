"""Named, versioned indexes: atomic publish, live pointer, pruning, build lock, delete, open errors."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest

import ctxrag.storage.index_store as index_store
from ctxrag.storage.bm25 import Bm25Index
from ctxrag.storage.errors import CorruptIndexError, IndexBusyError, UnknownIndexError, UserError
from ctxrag.storage.index_store import FORMAT_VERSION, IndexStore, StoredIndex
from ctxrag.storage.names import InvalidIndexName, validate_name
from ctxrag.storage.vectors import VectorIndex

TEXTS = ["lemon kiwi", "lemon lemon mango", "kiwi mango melon grape"]


def parts(texts: list[str] = TEXTS, tag: str = "v1") -> tuple[dict, pa.Table, list[str], np.ndarray]:
    """What a build hands the store: manifest, chunk rows, indexed texts and vectors (the embedded backend)."""
    manifest = {"config": {"embedder": {"provider": "local"}}, "tag": tag}
    chunks = pa.table({"chunk_id": [f"{tag}-{i}" for i in range(len(texts))], "content": texts})
    vectors = np.eye(len(texts), 4, dtype=np.float32) if texts else np.zeros((0, 4), dtype=np.float32)
    return manifest, chunks, texts, vectors


def versions(store: IndexStore, name: str) -> list[str]:
    return sorted(path.name for path in (store.root / name / "versions").iterdir())


def leftovers(store: IndexStore, name: str) -> list[str]:
    return sorted(path.name for path in (store.root / name).iterdir() if path.name.startswith("."))


# --- names -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "docs", "my-index", "my_index", "0day", "abc123", "a" * 100, "x-_-y"])
def test_validate_name_accepts(name: str) -> None:
    assert validate_name(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "Docs",
        "my index",
        "-lead",
        "_lead",
        "a/b",
        "../etc",
        ".",
        "..",
        ".hidden",
        "a" * 101,
        "naïve",
        "a.b",
        "a\nb",
    ],
)
def test_validate_name_rejects(name: str) -> None:
    with pytest.raises(ValueError, match="invalid index name"):
        validate_name(name)


@pytest.mark.parametrize("name", ["docs\n", "a\n"])
def test_validate_name_rejects_a_trailing_newline(name: str) -> None:
    with pytest.raises(ValueError, match="invalid index name"):
        validate_name(name)


def test_bad_name_is_rejected_by_every_operation(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    for call in (lambda: store.open("../x"), lambda: store.delete("../x"), lambda: store.publish("Bad", *parts())):
        with pytest.raises(ValueError, match="invalid index name"):
            call()
    with pytest.raises(ValueError, match="invalid index name"):
        with store.lock("a/b"):
            pass
    assert not (tmp_path / "x").exists()


# --- publish / open ----------------------------------------------------------------------------------------------


def test_no_indexes_yet(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    assert store.names() == []
    assert store.live_version("docs") is None
    assert store.manifest("docs") is None


def test_publish_then_open_round_trip(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    manifest, chunks, texts, vectors = parts()
    final = store.publish("docs", manifest, chunks, texts, vectors)
    assert final.parent == tmp_path / "indexes" / "docs" / "versions"
    assert sorted(p.name for p in final.iterdir()) == [
        "bm25",
        "chunks.parquet",
        "embeddings.npy",
        "manifest.json",
        "rows.arrow",
    ]

    opened = store.open("docs")
    assert isinstance(opened, StoredIndex)
    assert opened.chunks.read().equals(chunks)
    assert opened.manifest["tag"] == "v1"
    assert opened.manifest["format_version"] == FORMAT_VERSION
    assert opened.manifest["name"] == "docs"
    assert opened.manifest["version"] == final.name
    assert opened.config == {"embedder": {"provider": "local"}}
    np.testing.assert_array_equal(opened.ranker.bm25.scores("lemon"), Bm25Index.build(TEXTS).scores("lemon"))
    np.testing.assert_allclose(opened.ranker.vectors.matrix, VectorIndex(vectors).matrix)
    assert store.names() == ["docs"]
    assert store.manifest("docs") == opened.manifest


def test_rows_given_as_consecutive_tables_are_written_a_row_group_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows of a large version come in groups (never one table of all of them); a backend reads them back only if
    it needs them (the embedded one does not)."""
    store = IndexStore(tmp_path)
    manifest, chunks, texts, vectors = parts()
    read: list[pa.Table] = []
    backend = type(index_store.backend_for("embedded"))
    build = backend.build

    def recording(self, name, folder, rows, texts, vectors, live):  # type: ignore[no-untyped-def]
        read.append(rows())
        return build(self, name, folder, rows, texts, vectors, live)

    monkeypatch.setattr(backend, "build", recording)
    final = store.publish("docs", manifest, iter([chunks.slice(0, 2), chunks.slice(2)]), iter(texts), vectors)
    assert index_store.pq.ParquetFile(final / "chunks.parquet").metadata.num_row_groups == 2
    assert store.open("docs").chunks.read().equals(chunks) and read[0].equals(chunks)


def test_a_tuning_is_kept_across_versions_replaced_forgotten_and_deleted_with_the_index(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    with pytest.raises(UnknownIndexError, match="no index named 'docs'"):
        store.save_tuning("docs", {"strategy": None})
    store.publish("docs", *parts(tag="v1"))
    assert store.tuning("docs") is None and store.forget_tuning("docs") is False
    store.save_tuning("docs", {"strategy": {"strategy": "hybrid", "rrf_k": 10}})
    store.publish("docs", *parts(tag="v2"))  # a re-index keeps the choice
    assert store.tuning("docs") == {"strategy": {"strategy": "hybrid", "rrf_k": 10}}
    store.save_tuning("docs", {"strategy": None})
    assert store.tuning("docs") == {"strategy": None} and leftovers(store, "docs") == []
    assert store.forget_tuning("docs") is True and store.tuning("docs") is None
    store.save_tuning("docs", {"strategy": None})
    (tmp_path / "indexes" / "docs" / "tuning.json").write_text("[1]")
    with pytest.raises(CorruptIndexError, match="tuning.json: corrupt index tuning: expected a JSON object"):
        store.tuning("docs")
    assert store.delete("docs") and not (tmp_path / "indexes" / "docs").exists()


def test_live_json_points_to_the_new_version(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    first = store.publish("docs", *parts(tag="v1"))
    assert json.loads((tmp_path / "indexes" / "docs" / "live.json").read_text()) == {"version": first.name}
    second = store.publish("docs", *parts(["mango"], tag="v2"))
    assert second != first
    assert json.loads((tmp_path / "indexes" / "docs" / "live.json").read_text()) == {"version": second.name}
    assert store.live_version("docs") == second
    assert store.open("docs").manifest["tag"] == "v2"
    assert store.open("docs").chunks["chunk_id"].to_pylist() == ["v2-0"]


def test_publish_leaves_no_staging_or_temporary_files(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    store.publish("docs", *parts())
    store.publish("docs", *parts(tag="v2"))
    assert leftovers(store, "docs") == []


def test_publish_of_an_empty_index(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    store.publish("empty", *parts([]))
    opened = store.open("empty")
    assert opened.chunks.num_rows == 0
    assert opened.ranker.bm25.size == 0 and opened.ranker.vectors.size == 0
    assert opened.ranker.rank_bm25("lemon", 5) == []


def _ticking_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each publish one second after the previous one, so version ids sort in publish order."""
    seconds = iter(range(10, 60))
    monkeypatch.setattr(index_store.time, "strftime", lambda fmt, *args: f"20250101T0000{next(seconds)}")


def test_second_publish_keeps_exactly_one_previous_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _ticking_clock(monkeypatch)
    store = IndexStore(tmp_path)
    first = store.publish("docs", *parts(tag="v1"))
    second = store.publish("docs", *parts(tag="v2"))
    assert versions(store, "docs") == sorted([first.name, second.name])
    third = store.publish("docs", *parts(tag="v3"))
    assert set(versions(store, "docs")) == {second.name, third.name}
    fourth = store.publish("docs", *parts(tag="v4"))
    assert set(versions(store, "docs")) == {third.name, fourth.name}
    assert store.open("docs").manifest["tag"] == "v4"


def _scripted_ids(monkeypatch: pytest.MonkeyPatch, hexes: list[str]) -> None:
    """Every version id in the same second; uuid4().hex taken from ``hexes`` in order."""
    supply = iter(hexes)
    monkeypatch.setattr(index_store.time, "time_ns", lambda: 1)
    monkeypatch.setattr(index_store, "uuid", SimpleNamespace(uuid4=lambda: SimpleNamespace(hex=next(supply))))


def test_prune_keeps_the_version_that_was_live_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # publish uses uuid4 twice: the version id, then the live.json temporary file
    _scripted_ids(monkeypatch, ["ffffffff", "t1", "aaaaaaaa", "t2", "bbbbbbbb", "t3"])
    store = IndexStore(tmp_path)
    first = store.publish("docs", *parts(tag="v1"))
    second = store.publish("docs", *parts(tag="v2"))
    third = store.publish("docs", *parts(tag="v3"))
    assert (first.name, second.name, third.name) == (
        "00000000000000000001-ffffffff",
        "00000000000000000001-aaaaaaaa",
        "00000000000000000001-bbbbbbbb",
    )
    # the reader that opened v2 (live until this publish) must still find it
    assert set(versions(store, "docs")) == {second.name, third.name}


def test_failed_publish_keeps_the_live_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = IndexStore(tmp_path)
    first = store.publish("docs", *parts(tag="v1"))
    live_before = (store.root / "docs" / "live.json").read_text()

    def broken_save(vectors: np.ndarray, directory: Path, each: object = None) -> None:
        (directory / "embeddings.npy").write_bytes(b"half")
        raise OSError("disk full")

    monkeypatch.setattr("ctxrag.storage.backends.embedded.save_unit_rows", broken_save)
    with pytest.raises(OSError, match="disk full"):
        store.publish("docs", *parts(["mango"], tag="v2"))

    assert (store.root / "docs" / "live.json").read_text() == live_before
    assert store.live_version("docs") == first
    assert versions(store, "docs") == [first.name]
    assert leftovers(store, "docs") == []  # no .staging-* folder, no live.json temporary
    opened = store.open("docs")
    assert opened.manifest["tag"] == "v1"
    assert opened.chunks["chunk_id"].to_pylist() == ["v1-0", "v1-1", "v1-2"]
    np.testing.assert_array_equal(opened.ranker.bm25.scores("lemon"), Bm25Index.build(TEXTS).scores("lemon"))


def test_failed_first_publish_leaves_no_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = IndexStore(tmp_path)

    def broken_save(self: Bm25Index, directory: Path) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(Bm25Index, "save", broken_save)
    with pytest.raises(RuntimeError, match="boom"):
        store.publish("docs", *parts())
    assert store.names() == []
    assert leftovers(store, "docs") == []
    with pytest.raises(UnknownIndexError):
        store.open("docs")


def test_a_later_publish_cleans_staging_left_by_a_killed_build(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    store.publish("docs", *parts())
    (store.root / "docs" / ".staging-killed").mkdir()
    (store.root / "docs" / ".staging-killed" / "manifest.json").write_text("{}")
    store.publish("docs", *parts(tag="v2"))
    assert leftovers(store, "docs") == []


# --- open errors -------------------------------------------------------------------------------------------------


def test_open_of_a_missing_name_names_the_known_indexes(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    with pytest.raises(UnknownIndexError) as raised:
        store.open("nope")
    assert str(raised.value) == (
        f"no index named 'nope' in {tmp_path.resolve()} (indexes: none); build one with `ctxrag index SOURCE --name "
        "nope`, or set CTXRAG_HOME to the folder that has it"
    )
    store.publish("beta", *parts())
    store.publish("alpha", *parts())
    with pytest.raises(UnknownIndexError) as raised:
        store.open("nope")
    message = str(raised.value)
    assert "'nope'" in message
    assert "(indexes: alpha, beta)" in message
    assert "ctxrag index SOURCE --name nope" in message
    assert isinstance(raised.value, LookupError)


def test_a_folder_without_live_json_is_not_an_index(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    store.publish("real", *parts())
    (store.root / "ghost").mkdir()
    assert store.names() == ["real"]
    with pytest.raises(UnknownIndexError, match=r"indexes: real\)"):
        store.open("ghost")


def test_format_version_mismatch(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    final = store.publish("docs", *parts())
    manifest = json.loads((final / "manifest.json").read_text())
    manifest["format_version"] = FORMAT_VERSION + 1
    (final / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(UnknownIndexError) as raised:
        store.open("docs")
    assert str(raised.value) == (
        f"index 'docs' has format version {FORMAT_VERSION + 1}, this ctxrag reads {FORMAT_VERSION}: "
        "re-run `ctxrag index` for it"
    )


def test_missing_format_version(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    final = store.publish("docs", *parts())
    manifest = json.loads((final / "manifest.json").read_text())
    del manifest["format_version"]
    (final / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(UnknownIndexError, match="has format version None"):
        store.open("docs")


def test_publish_overrides_reserved_manifest_fields(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    manifest, chunks, texts, vectors = parts()
    manifest.update({"format_version": 999, "name": "other", "version": "fake"})
    final = store.publish("docs", manifest, chunks, texts, vectors)
    opened = store.open("docs")
    assert (opened.manifest["format_version"], opened.manifest["name"], opened.manifest["version"]) == (
        FORMAT_VERSION,
        "docs",
        final.name,
    )


# --- lock --------------------------------------------------------------------------------------------------------


def test_second_concurrent_lock_fails_with_a_clear_message(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    with store.lock("docs"):
        with pytest.raises(RuntimeError) as raised:
            with store.lock("docs"):
                pytest.fail("the second lock must not be granted")
        assert str(raised.value) == "index 'docs' is being built by another run; try again when it ends"
        # another index is independent
        with store.lock("other"):
            pass
    # released: can be taken again
    with store.lock("docs"):
        pass


def test_lock_is_released_when_the_body_raises(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    with pytest.raises(ZeroDivisionError):
        with store.lock("docs"):
            raise ZeroDivisionError
    with store.lock("docs"):
        pass


def test_lock_does_not_make_an_index(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    with store.lock("docs"):
        assert (store.root / "docs" / "build.lock").exists()
    assert store.names() == []


def test_publish_inside_the_lock(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    with store.lock("docs"):
        store.publish("docs", *parts())
    assert store.names() == ["docs"]
    assert store.open("docs").manifest["tag"] == "v1"


# --- delete ------------------------------------------------------------------------------------------------------


def test_delete(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    store.publish("docs", *parts())
    store.publish("keep", *parts())
    assert store.delete("docs") is True
    assert not (store.root / "docs").exists()
    assert store.names() == ["keep"]
    with pytest.raises(UnknownIndexError, match=r"indexes: keep\)"):
        store.open("docs")
    assert store.open("keep").manifest["tag"] == "v1"


def test_delete_of_a_missing_index_returns_false(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    assert store.delete("docs") is False
    store.publish("docs", *parts())
    assert store.delete("docs") is True
    assert store.delete("docs") is False


def test_publish_after_delete(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    store.publish("docs", *parts(tag="v1"))
    store.delete("docs")
    store.publish("docs", *parts(tag="v2"))
    assert store.open("docs").manifest["tag"] == "v2"
    assert len(versions(store, "docs")) == 1


def test_delete_waits_for_no_build(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    store.publish("docs", *parts())
    with store.lock("docs"):
        with pytest.raises(IndexBusyError, match="being built by another run"):
            store.delete("docs")
    assert store.names() == ["docs"]


# --- errors the user can act on ----------------------------------------------------------------------------------


def test_user_facing_errors_are_user_errors_and_keep_their_builtin_base() -> None:
    assert issubclass(UnknownIndexError, UserError) and issubclass(UnknownIndexError, LookupError)
    assert issubclass(CorruptIndexError, UnknownIndexError)
    assert issubclass(InvalidIndexName, UserError) and issubclass(InvalidIndexName, ValueError)
    assert issubclass(IndexBusyError, UserError) and issubclass(IndexBusyError, RuntimeError)
    with pytest.raises(InvalidIndexName):
        validate_name("Bad")


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b'{"config": ', "invalid JSON (Expecting value at line 1, column 12)"),
        (b"", "invalid JSON (Expecting value at line 1, column 1)"),
        (b"[1, 2]", "expected a JSON object, got list"),
        (b'{"a": "\xff"}', "not UTF-8 (byte 7)"),
    ],
    ids=["truncated", "empty", "a-list", "not-utf8"],
)
def test_a_corrupt_manifest_is_an_error_naming_the_file(tmp_path: Path, content: bytes, fragment: str) -> None:
    store = IndexStore(tmp_path)
    final = store.publish("docs", *parts())
    (final / "manifest.json").write_bytes(content)
    for call in (lambda: store.open("docs"), lambda: store.manifest("docs"), store.check_manifests):
        with pytest.raises(CorruptIndexError) as raised:
            call()
        assert str(raised.value) == f"{final / 'manifest.json'}: corrupt index manifest: {fragment}"


def test_a_corrupt_live_pointer_is_an_error_naming_the_file(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    store.publish("docs", *parts())
    pointer = store.root / "docs" / "live.json"
    pointer.write_text('{"version": ')
    with pytest.raises(CorruptIndexError, match=f"^{pointer}: corrupt live pointer: invalid JSON"):
        store.open("docs")
    for bad in ('{"version": "../../elsewhere"}', '{"version": 3}', "{}"):
        pointer.write_text(bad)
        with pytest.raises(CorruptIndexError, match=f"^{pointer}: corrupt live pointer: no valid 'version'"):
            store.live_version("docs")


def test_a_corrupt_chunk_table_is_an_error_naming_the_file(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    final = store.publish("docs", *parts())
    (final / "chunks.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(CorruptIndexError, match=f"^{final / 'chunks.parquet'}: corrupt chunk table"):
        store.open("docs")


def test_delete_with_a_corrupt_manifest_names_it_and_deletes_nothing(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    store.publish("docs", *parts(tag="v1"))
    live = store.publish("docs", *parts(tag="v2"))
    previous = next(path for path in (store.root / "docs" / "versions").iterdir() if path != live)
    (previous / "manifest.json").write_text("{")  # the kept previous version: it may name an Elasticsearch index
    with pytest.raises(CorruptIndexError) as raised:
        store.delete("docs")
    message = str(raised.value)
    assert message.startswith(f"{previous / 'manifest.json'}: corrupt index manifest: invalid JSON")
    assert "so what index 'docs' holds outside its folder (e.g. Elasticsearch indexes) is unknown" in message
    assert store.names() == ["docs"] and store.open("docs").manifest["tag"] == "v2"


def test_kept_manifests_skips_a_version_half_removed_by_a_prune(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    live = store.publish("docs", *parts())
    (store.root / "docs" / "versions" / "00000000000000000001-deadbeef").mkdir()  # no manifest left in it
    assert list(store.kept_manifests("docs")) == [live.name]
    assert store.check_manifests() == 1
    assert IndexStore(tmp_path / "nowhere").check_manifests() == 0
