"""Named indexes on disk, in versions: a build is staged aside and made live by one atomic rename.

Layout under ``$CTXRAG_HOME/indexes/NAME/``: ``versions/<id>/`` (manifest.json, chunks.parquet and rows.arrow, the
BM25 and vector files), ``live.json`` naming the live version, ``build.lock`` held while a build runs, and ``tuning.json``, the strategy
``ctxrag tune`` chose (it outlives re-indexing; ``delete`` removes it with the rest). Readers follow
``live.json``, so they see the old version or the new one, never a half-written one; a failed build is removed
and the live version is untouched.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ctxrag.storage.backends import Ranker, backend_for
from ctxrag.storage.chunk_table import GROUP_ROWS, ROWS_FILE, ChunkTable, RowsWriter
from ctxrag.storage.environment import private_dirs
from ctxrag.storage.errors import CorruptIndexError, IndexBusyError, UnknownIndexError
from ctxrag.storage.locks import held_or_refused
from ctxrag.storage.names import NAME_PATTERN, validate_name

FORMAT_VERSION = 2  # 2: BM25 files carry ctxrag.json


def read_json_file(path: Path, what: str) -> dict[str, Any]:
    """A JSON object from ``path``; ``CorruptIndexError`` naming the file if it is not one (``OSError`` passes)."""
    try:
        value = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as error:
        raise CorruptIndexError(f"{path}: corrupt {what}: not UTF-8 (byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise CorruptIndexError(
            f"{path}: corrupt {what}: invalid JSON ({error.msg} at line {error.lineno}, column {error.colno})"
        ) from None
    if not isinstance(value, dict):
        raise CorruptIndexError(f"{path}: corrupt {what}: expected a JSON object, got {type(value).__name__}")
    return value


@dataclass
class StoredIndex:
    """A loaded index version: its manifest, its chunk rows (in ranking row order; read as they are asked for) and its
    backend's ranker."""

    manifest: dict[str, Any]
    chunks: ChunkTable
    ranker: Ranker

    def __post_init__(self) -> None:
        if isinstance(self.chunks, pa.Table):  # rows already in memory (a test's, a program's)
            self.chunks = ChunkTable(self.chunks)

    @property
    def config(self) -> dict[str, Any]:
        return self.manifest["config"]


class IndexStore:
    """All named indexes under one home folder."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.root = home / "indexes"

    def _dir(self, name: str) -> Path:
        return self.root / validate_name(name)

    def names(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(path.name for path in self.root.iterdir() if (path / "live.json").is_file())

    def live_version(self, name: str) -> Path | None:
        pointer = self._dir(name) / "live.json"
        if not pointer.is_file():
            return None
        version = read_json_file(pointer, "live pointer").get("version")
        if not isinstance(version, str) or not version or "/" in version or version.startswith("."):
            raise CorruptIndexError(f"{pointer}: corrupt live pointer: no valid 'version' (got {version!r})")
        return self._dir(name) / "versions" / version

    def manifest(self, name: str) -> dict[str, Any] | None:
        version = self.live_version(name)
        return None if version is None else read_json_file(version / "manifest.json", "index manifest")

    def tuning(self, name: str) -> dict[str, Any] | None:
        """What ``ctxrag tune`` saved for ``name`` (None: never tuned)."""
        path = self._dir(name) / "tuning.json"
        return read_json_file(path, "index tuning") if path.is_file() else None

    def save_tuning(self, name: str, tuning: dict[str, Any]) -> None:
        """Keep ``tuning`` for ``name`` (replacing any earlier one at once: a reader sees the old or the new)."""
        if self.live_version(name) is None:
            self.open(name)  # raises UnknownIndexError, naming the indexes there are
        directory = self._dir(name)
        temporary = directory / f".tuning.{uuid.uuid4().hex}.tmp"
        temporary.write_text(json.dumps(tuning, indent=2, sort_keys=True))
        os.replace(temporary, directory / "tuning.json")

    def forget_tuning(self, name: str) -> bool:
        """Remove ``name``'s tuning (its searches go back to the default); False if it had none."""
        path = self._dir(name) / "tuning.json"
        existed = path.is_file()
        path.unlink(missing_ok=True)
        return existed

    def kept_manifests(self, name: str) -> dict[str, dict[str, Any]]:
        """version id -> manifest, for every kept version of ``name`` (live, previous, staged)."""
        versions = self._dir(name) / "versions"
        manifests = {}
        for version in sorted(versions.iterdir()) if versions.is_dir() else []:
            path = version / "manifest.json"
            if path.is_file():  # a version without one is the remains of an interrupted prune
                manifests[version.name] = read_json_file(path, "index manifest")
        return manifests

    def check_manifests(self) -> int:
        """Read every kept version's manifest of every index; ``CorruptIndexError`` names the first unreadable one."""
        if not self.root.is_dir():
            return 0
        return sum(
            len(self.kept_manifests(path.name))
            for path in sorted(self.root.iterdir())
            if NAME_PATTERN.fullmatch(path.name)
        )

    def open(self, name: str, version_id: str | None = None, staged: bool = False) -> StoredIndex:
        """Load the live version of ``name`` (or the given version; ``staged``: one not yet served, under a gate)."""
        version = self._dir(name) / "versions" / version_id if version_id else self.live_version(name)
        if version is None:
            known = ", ".join(self.names()) or "none"
            raise UnknownIndexError(
                f"no index named {name!r} in {self.home.resolve()} (indexes: {known}); build one with `ctxrag index "
                f"SOURCE --name {name}`, or set CTXRAG_HOME to the folder that has it"
            )
        manifest = read_json_file(version / "manifest.json", "index manifest")
        if manifest.get("format_version") != FORMAT_VERSION:
            raise UnknownIndexError(
                f"index {name!r} has format version {manifest.get('format_version')}, this ctxrag reads "
                f"{FORMAT_VERSION}: re-run `ctxrag index` for it"
            )
        try:
            chunks = ChunkTable(path=version / "chunks.parquet")
        except pa.ArrowInvalid as error:
            raise CorruptIndexError(f"{version / 'chunks.parquet'}: corrupt chunk table: {error}") from None
        backend = _backend_of(manifest)
        return StoredIndex(manifest, chunks, backend.open(name, version, manifest.get(backend.name), staged))

    def chunk_column(self, name: str, column: str) -> list[Any] | None:
        """One column of the live version's chunk table (None when there is no live version or no such column)."""
        version = self.live_version(name)
        if version is None or not (version / "chunks.parquet").is_file():
            return None
        table = pq.ParquetFile(version / "chunks.parquet").read()
        return table[column].to_pylist() if column in table.column_names else None

    def kept_versions(self) -> Iterator[tuple[dict[str, Any], pa.Table]]:
        """(manifest, chunk table) of every kept version of every index (gc derives what they reference)."""
        for name in self.names():
            for version_id, manifest in self.kept_manifests(name).items():
                yield manifest, pq.ParquetFile(self._dir(name) / "versions" / version_id / "chunks.parquet").read()

    def lock(self, name: str) -> AbstractContextManager[None]:
        """Hold the index's build lock; a second build of the same index fails at once with a clear message."""
        busy = IndexBusyError(f"index {name!r} is being built by another run; try again when it ends")
        return held_or_refused(self._dir(name) / "build.lock", busy)

    def publish(
        self,
        name: str,
        manifest: dict[str, Any],
        chunks: pa.Table | Iterable[pa.Table],
        texts: Iterable[str],
        vectors: np.ndarray,
        live: bool = True,
    ) -> Path:
        """Build a new version with the manifest's backend beside the live one, then (``live``) serve it and prune old
        versions. With ``live=False`` the version is only staged: ``promote`` or ``discard`` it. Returns its folder.
        ``chunks``: the rows, one table or tables of consecutive rows (each written as it comes, a row group each, and
        read back only by a backend that needs them)."""
        directory = self._dir(name)
        backend = _backend_of(manifest)
        version_id = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"  # sorts by creation, whatever the time zone
        staging = directory / f".staging-{version_id}"
        try:
            private_dirs(directory)
            staging.mkdir(0o700)
            rows = staging / "chunks.parquet"
            _write_rows([chunks] if isinstance(chunks, pa.Table) else chunks, rows)
            state = backend.build(name, staging, lambda: pq.ParquetFile(rows).read(), texts, vectors, live)
            full = {
                **manifest,
                "format_version": FORMAT_VERSION,
                "name": name,
                "version": version_id,
                backend.name: state,
            }
            (staging / "manifest.json").write_text(json.dumps(full, indent=2, sort_keys=True))
            final = directory / "versions" / version_id
            private_dirs(final.parent)
            os.rename(staging, final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        if live:
            self._serve(directory, version_id)
        return final

    def promote(self, name: str, version_id: str) -> None:
        """Serve a staged version: the backend first (e.g. an alias switch), then the live pointer."""
        manifest = read_json_file(self._dir(name) / "versions" / version_id / "manifest.json", "index manifest")
        backend = _backend_of(manifest)
        backend.promote(name, manifest.get(backend.name))
        self._serve(self._dir(name), version_id)

    def _serve(self, directory: Path, version_id: str) -> None:
        """Make a written version live (one atomic rename); keep the one it replaces, prune the rest."""
        previous = self.live_version(directory.name)
        self._point_to(directory, version_id)
        self._prune(directory, keep={version_id, previous.name if previous else ""})

    def discard(self, name: str, version_id: str) -> None:
        """Remove a staged version that will not go live (and what its backend holds of it)."""
        version = self._dir(name) / "versions" / version_id
        if self.live_version(name) == version:
            raise ValueError(f"version {version_id} of {name!r} is live; it cannot be discarded")
        if (version / "manifest.json").is_file():
            manifest = read_json_file(version / "manifest.json", "index manifest")
            backend = _backend_of(manifest)
            backend.discard(name, manifest.get(backend.name))
        shutil.rmtree(version, ignore_errors=True)

    def delete(self, name: str) -> bool:
        """Delete index ``name``; False if there is none. Holds the build lock (a running build makes it fail).

        What a backend holds outside the folder (an Elasticsearch alias and its physical indexes) goes first; if that
        fails the folder is kept, so the manifests still say what to remove and the delete can be run again.
        """
        directory = self._dir(name)
        if not directory.exists():
            return False
        with self.lock(name):
            try:
                manifests = self.kept_manifests(name)
            except CorruptIndexError as error:
                raise CorruptIndexError(
                    f"{error}; so what index {name!r} holds outside its folder (e.g. Elasticsearch indexes) is unknown: "
                    f"repair the file, or remove {directory} (and any such indexes) by hand"
                ) from None
            by_backend: dict[str, list[dict[str, Any]]] = {}
            for manifest in manifests.values():
                by_backend.setdefault(manifest.get("config", {}).get("backend", "embedded"), []).append(manifest)
            for backend_name, kept in sorted(by_backend.items()):
                backend = backend_for(backend_name)
                backend.delete(name, [manifest.get(backend.name) for manifest in kept])
            (directory / "live.json").unlink(missing_ok=True)  # readers stop finding it first
            shutil.rmtree(directory)
        return True

    @staticmethod
    def _point_to(directory: Path, version_id: str) -> None:
        temporary = directory / f".live.{uuid.uuid4().hex}.tmp"
        temporary.write_text(json.dumps({"version": version_id}))
        os.replace(temporary, directory / "live.json")

    @staticmethod
    def _prune(directory: Path, keep: set[str]) -> None:
        """Remove every version but the new one and the one it replaced (a reader may still be loading that)."""
        for old in (directory / "versions").iterdir():
            if old.name not in keep:
                shutil.rmtree(old, ignore_errors=True)
        for leftover in directory.glob(".staging-*"):
            shutil.rmtree(leftover, ignore_errors=True)


def _write_rows(tables: Iterable[pa.Table], path: Path) -> None:
    """``path`` as ``pq.write_table`` writes one table in row groups of ``GROUP_ROWS`` (the same bytes), and the same
    rows memory-mappable beside it (``ROWS_FILE``), a table at a time."""
    writer = mapped = None
    try:
        for table in tables:
            if writer is None or mapped is None:
                writer = pq.ParquetWriter(path, table.schema)
                mapped = RowsWriter(path.parent / ROWS_FILE, table.schema)
            writer.write_table(table, row_group_size=GROUP_ROWS)
            mapped.write(table)
    finally:
        if writer is not None:
            writer.close()
        if mapped is not None:
            mapped.close()
    if writer is None:
        raise ValueError("no rows to publish (not even an empty table)")


def _backend_of(manifest: dict[str, Any]):  # type: ignore[no-untyped-def]
    """The backend a version was built with (manifests before backends were named are embedded)."""
    return backend_for(manifest.get("config", {}).get("backend", "embedded"))
