"""``ctxrag gc`` as a user runs it: a line saying what went and the space freed; ``--json`` for scripts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from ctxrag.storage.artifacts import contexts_cache, embeddings_cache
from ctxrag.tasks.embedding.embed import vector_rows
from ctxrag.tasks.stages.contextualize import context_row
from tests.ctxrag.test_cli_errors import ctxrag


def unused_results(home: Path) -> None:
    """Two free contexts and two free vectors that no index uses (gc removes them) and one paid context (kept)."""
    contexts_cache(home).append_rows(
        [
            context_row("free-1", "doc", "a structural context " * 50, paid=False),
            context_row("free-2", "doc", "another structural context " * 50, paid=False),
            context_row("paid", "doc", "a Claude context", paid=True),
        ]
    )
    embeddings_cache(home).append(
        vector_rows(["v1", "v2"], np.random.default_rng(0).random((2, 384), dtype=np.float32), paid=False)
    )


def test_gc_prints_what_it_removed_and_the_space_freed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    unused_results(home)
    result = ctxrag(home, "gc")
    assert result.exit_code == 0, result.stderr
    line = result.stdout.strip()
    assert re.fullmatch(
        r"removed 2 contexts, 2 embeddings, 0 queries no index uses, freeing [\d.]+ (kB|bytes); kept 1 contexts, 0 embeddings, 0 queries",
        line,
    ), line
    assert "kept 1 paid contexts no index uses" in result.stderr  # the paid one, and how to remove it


def test_gc_json_is_one_object_with_the_counts_and_bytes_freed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    unused_results(home)
    report = json.loads(ctxrag(home, "gc", "--json").stdout)
    assert {key: value for key, value in report.items() if key != "bytes_freed"} == {
        "contexts_kept": 1,
        "contexts_kept_paid": 1,
        "contexts_removed": 2,
        "embeddings_kept": 0,
        "embeddings_kept_paid": 0,
        "embeddings_removed": 2,
        "queries_kept": 0,
        "queries_kept_paid": 0,
        "queries_removed": 0,
    }
    assert report["bytes_freed"] > 2 * 384 * 4  # at least the two random vectors' floats
