"""Stage 4 without Prefect: the plan (indexed texts derived once, the build key) and publishing with a backend."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from ctxrag.storage.errors import InvalidInput
from ctxrag.storage.index_store import IndexStore
from ctxrag.tasks.common.models import indexed_text
from ctxrag.tasks.context.spec import ContextualizerSpec
from ctxrag.tasks.embedding.embed import EmbedderSpec
from ctxrag.tasks.retrieval.search import DEFINES
from ctxrag.tasks.stages.load import compare_with_live
from ctxrag.tasks.stages.publish import build_plan, publish_index
from tests.tasks.stages.test_contextualize import corpus

KEYS = ["k0", "k1"]  # context keys (the plan records them; ctxrag.tasks.gc keeps what they name)


def test_the_plan_carries_each_chunks_indexed_text_and_a_stable_build_key() -> None:
    data = corpus({"a": 2})
    contexts = ["File: a.py.", ""]
    plan = build_plan(data, contexts, KEYS, EmbedderSpec(), ContextualizerSpec("structural"))
    assert plan.texts == [indexed_text(context, chunk.content) for context, chunk in zip(contexts, data.chunks)]
    assert plan.texts[1] == data.chunks[1].content  # no context: the chunk alone
    assert plan.rows["context_key"].to_pylist() == KEYS  # each row names its stored context, for gc
    assert (
        plan.build_key == build_plan(data, contexts, KEYS, EmbedderSpec(), ContextualizerSpec("structural")).build_key
    )
    assert (
        plan.build_key
        != build_plan(data, ["other", ""], KEYS, EmbedderSpec(), ContextualizerSpec("structural")).build_key
    )
    assert plan.config["bm25"] == {"k1": 1.2, "b": 0.75}
    with pytest.raises(InvalidInput, match="unknown backend 'solr'"):
        build_plan(data, contexts, KEYS, EmbedderSpec(), ContextualizerSpec("structural"), backend="solr")


def test_publish_writes_a_version_the_store_opens_and_the_diff_reads(tmp_path: Path) -> None:
    data = corpus({"a": 2, "b": 1})
    plan = build_plan(data, ["", "", ""], KEYS + ["k2"], EmbedderSpec(), ContextualizerSpec("none"))
    version = publish_index.fn("docs", tmp_path, plan, np.eye(3, 4, dtype=np.float32), "test")
    opened = IndexStore(tmp_path).open("docs")
    assert opened.manifest["version"] == version and opened.config["backend"] == "embedded"
    assert "text" not in opened.chunks.column_names  # derived from the context and chunk, not stored
    assert opened.ranker.rank_bm25("b_0", 3)[0][0] == 2
    assert compare_with_live(data, "docs", tmp_path) == {"new": 0, "changed": 0, "unchanged": 2, "removed": 0}
    edited = corpus({"a": 3, "c": 1})
    assert compare_with_live(edited, "docs", tmp_path) == {"new": 1, "changed": 1, "unchanged": 0, "removed": 1}


def test_the_plan_records_the_names_each_chunk_defines() -> None:
    data = corpus({"a": 2})
    plan = build_plan(data, ["", ""], KEYS, EmbedderSpec(), ContextualizerSpec("none"))
    assert plan.rows[DEFINES].to_pylist() == [["a_0"], ["a_1"]]  # each chunk is `def a_N(): return N`
    assert plan.rows.schema.field(DEFINES).type == pa.list_(pa.string())


def test_the_embedder_reads_its_own_text_and_bm25_the_whole_context() -> None:
    data = corpus({"a": 1})
    context = "Defines: " + ", ".join(f"name_{number}" for number in range(40)) + "."
    local = EmbedderSpec.choose("local", None, 512, None)
    plan = build_plan(data, [context], ["k0"], local, ContextualizerSpec("structural"))
    assert plan.texts == [indexed_text(context, data.chunks[0].content)]
    assert plan.embedded_texts == [local.embedded_text(context, data.chunks[0].content)] != plan.texts
    voyage = build_plan(
        data, [context], ["k0"], EmbedderSpec.choose("voyage", None, 512, None), ContextualizerSpec("structural")
    )
    assert voyage.embedded_texts == voyage.texts
