"""Stage 4: plan the version (rows, indexed texts, config, build key) and publish it with the index's backend."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import numpy as np
import pyarrow as pa
from prefect import task
from prefect.cache_policies import NONE
from prefect.transactions import get_transaction, transaction
from prefect.utilities.annotations import quote

from ctxrag.storage.backends import backend_for
from ctxrag.storage.bm25 import BM25_B, BM25_K1
from ctxrag.storage.index_store import IndexStore
from ctxrag.tasks.common.models import Chunk, Corpus, indexed_text, sha256_hex
from ctxrag.tasks.common.retry import retry_only_io
from ctxrag.tasks.context.offline import CONTEXT_KEY
from ctxrag.tasks.context.spec import ContextualizerSpec
from ctxrag.tasks.context.structure import defined_names
from ctxrag.tasks.embedding.embed import EmbedderSpec
from ctxrag.tasks.retrieval.search import DEFINES
from ctxrag.tasks.stages.gate import check_gate
from ctxrag.tasks.stages.run import IndexRun

TEXT_BLOCK = 16_384  # rows whose embedded texts are made at a time
ROW_GROUP = 65_536  # rows made into Arrow and written to chunks.parquet at a time (in row groups of GROUP_ROWS)


@dataclass
class BuildPlan:
    """What a build would publish, and the key that says whether the live index already is exactly that."""

    config: dict[str, object]
    build_key: str
    chunks: list[Chunk] = field(repr=False)
    contexts: list[str] = field(repr=False)
    context_keys: list[str] = field(repr=False)
    spec: EmbedderSpec  # how the embedder reads each row

    def live_version(self, run: IndexRun) -> str | None:
        """The live version when it is already this plan (its build key), else None."""
        live = IndexStore(run.home).manifest(run.name)
        return str(live["version"]) if live is not None and live.get("build_key") == self.build_key else None

    @property
    def doc_ids(self) -> list[str]:
        return [chunk.doc_id for chunk in self.chunks]

    @property
    def texts(self) -> list[str]:
        """Each row's indexed text (context + chunk): what BM25 reads."""
        return list(self.indexed_texts())

    def indexed_texts(self) -> Iterator[str]:
        """``texts`` one at a time: BM25 reads them once, so 1M of them (~1 GB with contexts) are never all held."""
        return (indexed_text(context, chunk.content) for context, chunk in zip(self.contexts, self.chunks))

    @property
    def embedded_texts(self) -> list[str]:
        """What the embedder reads for each row (``EmbedderSpec.embedded_texts``), derived from its context and chunk."""
        return [text for _, block in self.embedded_blocks() for text in block]

    def embedded_blocks(self, rows: int = TEXT_BLOCK) -> Iterator[tuple[int, list[str]]]:
        """``embedded_texts`` a block of rows at a time, each with its first row (a block's texts are the same as the
        whole list's: each row's text depends on its own context and chunk only)."""
        for start in range(0, len(self.chunks), rows):
            yield start, self.embedded_texts_of(start, rows)

    def embedded_texts_of(self, start: int, rows: int) -> list[str]:
        """``embedded_texts`` of rows ``start`` to ``start + rows``."""
        contents = [chunk.content for chunk in self.chunks[start : start + rows]]
        return self.spec.embedded_texts(self.contexts[start : start + rows], contents)

    @property
    def rows(self) -> pa.Table:
        """The version's stored rows as one table (``row_groups`` makes them a group at a time)."""
        return pa.concat_tables(self.row_groups())

    def row_groups(self, rows: int = ROW_GROUP) -> Iterator[pa.Table]:
        """The version's stored rows, ``rows`` at a time: the chunks, their contexts and context keys (which
        ctxrag.tasks.gc keeps), and the names each chunk defines. Published a group at a time (written to
        chunks.parquet in row groups of ``GROUP_ROWS``: a search reads its hits' groups), so the rows of 1M chunks
        (~1 GB in Arrow) are never all held. Made only when a version is published: a re-index with nothing to
        publish makes none (pyarrow imports pandas, 0.3 s, to make an array from Python values)."""
        for start in range(0, max(len(self.chunks), 1), rows):  # no chunks: one empty table, its columns typed as ever
            chunks = self.chunks[start : start + rows]
            yield pa.table(
                {
                    "chunk_id": [chunk.chunk_id for chunk in chunks],
                    "doc_id": [chunk.doc_id for chunk in chunks],
                    "chunk_index": pa.array([chunk.chunk_index for chunk in chunks], type=pa.int64()),
                    "key": [chunk.key for chunk in chunks],
                    "doc_sha": [chunk.doc_sha for chunk in chunks],
                    "heading": [chunk.heading for chunk in chunks],
                    "content": [chunk.content for chunk in chunks],
                    "context": self.contexts[start : start + rows],
                    CONTEXT_KEY: self.context_keys[start : start + rows],
                    DEFINES: pa.array([defined_names(chunk.content) for chunk in chunks], type=pa.list_(pa.string())),
                }
            )


def build_plan(
    corpus: Corpus,
    contexts: list[str],
    context_keys: list[str],
    spec: EmbedderSpec,
    contextualizer: ContextualizerSpec,
    backend: str = "embedded",
) -> BuildPlan:
    """The version's plan: its config and build key, with the chunks and contexts its rows are made of."""
    backend_for(backend)  # an unknown backend fails here, before anything is embedded
    worker = contextualizer.build()
    config: dict[str, object] = {
        "backend": backend,
        "contextualizer": {"name": worker.name, "version": worker.version},
        "embedder": spec.to_dict(),
        "bm25": {"k1": BM25_K1, "b": BM25_B},
    }
    chunks = corpus.chunks
    build_key = sha256_hex(
        repr(sorted(config.items())), *(f"{chunk.chunk_id}|{chunk.key}" for chunk in chunks), *contexts
    )
    return BuildPlan(config, build_key, chunks, contexts, context_keys, spec)


@task(retries=2, retry_delay_seconds=[10, 60], retry_condition_fn=retry_only_io, cache_policy=NONE)
def publish_index(name: str, home: Path, plan: BuildPlan, vectors: np.ndarray, source: str, live: bool = True) -> str:
    """Build the version with the index's backend and make it live, or (``live=False``) only stage it for a quality
    gate. Returns the version id. A failed build leaves the live version as it was; inside a transaction, a
    rollback discards the staged version."""
    manifest = {
        "config": plan.config,
        "build_key": plan.build_key,
        "source": source,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "counts": {"chunks": len(plan.chunks), "documents": len(set(plan.doc_ids))},
    }
    version = IndexStore(home).publish(name, manifest, plan.row_groups(), plan.indexed_texts(), vectors, live=live).name
    transaction = get_transaction()
    if transaction is not None:
        transaction.set("staged", {"name": name, "home": str(home), "version": version})
    return version


@publish_index.on_rollback
def _discard_staged(transaction) -> None:  # type: ignore[no-untyped-def]
    """The quality gate refused the staged version: remove it (the live version never changed)."""
    staged = transaction.get("staged", None)
    if staged:
        IndexStore(Path(staged["home"])).discard(staged["name"], staged["version"])


@task(cache_policy=NONE)
def promote_index(name: str, home: Path, version_id: str) -> None:
    """Serve a staged version (the backend first, e.g. an alias switch, then the local pointer)."""
    IndexStore(home).promote(name, version_id)


@dataclass(frozen=True)
class Published:
    """The stage's outcome: the live version after the run, whether this run made it, and the gate's scores."""

    version: str
    status: str  # "published" or "unchanged"
    gate: dict[str, object] | None = None


def publish_version(plan: BuildPlan, vectors: np.ndarray, source: str, run: IndexRun) -> Published:
    """The live version when it already has the plan's build key (nothing is written). Else the new version is
    published; with a quality gate and a live version, it is staged, scored against the live one and promoted, or
    discarded (a transaction rollback) when ``GateRejected`` is raised, the live version untouched."""
    name, home, gate = run.name, run.home, run.options.gate
    if (version := plan.live_version(run)) is not None:
        return Published(version, "unchanged")
    live = IndexStore(home).manifest(name)
    if gate.evalset and live is not None:
        with transaction():  # a rejected gate rolls back: publish_index's hook discards the staged version
            version = publish_index(name, home, unvisited(plan), vectors, source, live=False)
            scores = check_gate(
                name, home, version, gate.evalset, gate.strategy, gate.metric, gate.max_drop, run.run_id
            )
        promote_index(name, home, version)
        return Published(version, "published", scores)
    return Published(publish_index(name, home, unvisited(plan), vectors, source), "published")


def unvisited(plan: BuildPlan) -> BuildPlan:
    """``plan`` as a task argument that Prefect hands over without walking it (``quote``; the task gets the plan
    itself): it holds no future, and visiting the 1M chunks of a large plan took 80-290 s of a run."""
    return cast(BuildPlan, quote(plan))
