"""One index run's fixed facts, checked before any work: the index, the home, the run id, the contextualizer and
embedder specs, the backend, and the stage clock of the run report."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from prefect import get_run_logger
from prefect.runtime import flow_run

from ctxrag.storage.backends import backend_for
from ctxrag.storage.environment import ctxrag_home
from ctxrag.storage.index_store import IndexStore
from ctxrag.storage.names import validate_name
from ctxrag.tasks.common.memory import release_freed_memory
from ctxrag.tasks.context.spec import ContextualizerSpec
from ctxrag.tasks.embedding.embedder_spec import EmbedderSpec
from ctxrag.tasks.embedding.precision import with_index_precision
from ctxrag.tasks.gc import artifact_lock
from ctxrag.tasks.options import IndexOptions


@dataclass
class IndexRun:
    name: str
    options: IndexOptions
    home: Path
    run_id: str
    contextualizer: ContextualizerSpec
    embedder: EmbedderSpec
    seconds: dict[str, float] = field(default_factory=dict)
    _clock: float = field(default_factory=time.perf_counter)

    @classmethod
    def begin(cls, name: str, options: IndexOptions, home: str | None) -> IndexRun:
        """The run's facts; a bad name, backend, contextualizer or embedder fails here, before any work."""
        validate_name(name)
        backend_for(options.backend)
        return cls(
            name,
            options,
            Path(home) if home else ctxrag_home(),
            str(flow_run.id or uuid.uuid4()),
            ContextualizerSpec(options.contextualizer, options.contextualizer_claude()),
            options.embedding.spec(),
        )

    @property
    def store(self) -> IndexStore:
        return IndexStore(self.home)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """The index's build lock (a second run on it fails at once) and a shared hold on the stored results (gc
        waits)."""
        with self.store.lock(self.name), artifact_lock(self.home, exclusive=False):
            yield

    def keep_index_precision(self) -> None:
        """One precision per index, kept across runs (the local embedder's int8, bf16 or fp32)."""
        self.embedder, why = with_index_precision(self.embedder, self.store.manifest(self.name))
        if why:
            get_run_logger().info("local embedder precision for %r: %s, %s", self.name, self.embedder.precision, why)

    def lap(self, stage: str) -> None:
        """Close ``stage`` on the run report's clock, and give what it freed back to the OS: the next stage then starts
        from the memory the run holds, not from the last stage's peak."""
        release_freed_memory()
        now = time.perf_counter()
        self.seconds[stage] = round(now - self._clock, 3)
        self._clock = now
