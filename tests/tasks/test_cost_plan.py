"""``ctxrag.tasks.cost_plan``: what indexing would pay for, without Prefect or a paid call (token counts on the Anthropic
simulator, test equipment, where a key is set)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ctxrag.storage.artifacts import KEY, contexts_cache, embeddings_cache
from ctxrag.tasks.context.claude.contextualizer import MODES, ClaudeSettings
from ctxrag.tasks.context.claude.pricing import UnknownModelPrices, facts_for
from ctxrag.tasks.context.spec import ContextualizerSpec
from ctxrag.tasks.cost_plan import plan_costs
from ctxrag.tasks.embedding.embedder_spec import EmbedderSpec
from ctxrag.tasks.embedding.voyage import PRICE_PER_MTOK
from ctxrag.tasks.load import load_source
from ctxrag.tasks.stored import context_keys
from tests.equipment.anthropic_simulator import AnthropicSimulator
from tests.helpers import write_corpus

CHUNKS_PER_DOC = 25  # two per-document requests a big document (20 + 5)
SMALL_CHUNKS = 3  # the small document: below Haiku 4.5's cache minimum
CHUNKS = 2 * CHUNKS_PER_DOC + SMALL_CHUNKS


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.json"
    write_corpus(path, big_docs=2, chunks_per_doc=CHUNKS_PER_DOC, words_per_chunk=200, small_chunks=SMALL_CHUNKS)
    return path


def store_contexts(home: Path, corpus: Path, mode: str, doc_ids: set[str] | None = None) -> int:
    """Store a context for every chunk (of ``doc_ids``) under ``mode``'s prompt, as a run would have."""
    data = load_source(str(corpus))
    keys = context_keys(data, ContextualizerSpec("claude", ClaudeSettings(mode=mode)))
    rows = [
        {KEY: key, "doc_id": chunk.doc_id, "context": "stored", "paid": True, "created_at": 0.0}
        for chunk, key in zip(data.chunks, keys)
        if doc_ids is None or chunk.doc_id in doc_ids
    ]
    contexts_cache(home).append_rows(rows)
    return len(rows)


def test_every_mode_is_priced_offline_and_the_plan_says_how_tokens_were_estimated(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    plan = plan_costs(str(corpus), "paid", tmp_path / "home")
    assert plan["token_counts"].startswith("estimated") and plan["token_count_calls"] == {
        "now": 0,
        "reused_from_store": 0,
    }
    modes = plan["modes"]
    assert list(modes) == list(MODES) and plan["chosen_mode"] == "per-chunk"
    assert all(mode["chunks"] == CHUNKS and mode["documents"] == 3 for mode in modes.values())
    assert modes["per-chunk"]["requests"] == modes["batch"]["requests"] == CHUNKS
    assert (
        modes["per-document"]["requests"]
        == modes["per-document-batch"]["requests"]
        == 2 * math.ceil(CHUNKS_PER_DOC / 20) + 1
    )
    assert modes["batch"]["cost_usd"] == pytest.approx(modes["per-chunk"]["cost_usd"] / 2, abs=1e-6)
    assert modes["per-document-batch"]["cost_usd"] == pytest.approx(modes["per-document"]["cost_usd"] / 2, abs=1e-6)
    assert plan["cheapest_mode"] == "per-document-batch"
    assert plan["documents_below_cache_minimum"] == ["uuid-2"]  # the small document: caching does nothing for it
    assert plan["prices"]["as_of"] and plan["prices"]["file"] == "tasks/context/claude/pricing.py"
    assert modes["per-chunk"]["wall_time_bound"] == "concurrency" and modes["batch"]["wall_time_s"] is None


def test_the_rpm_limit_sets_the_wall_time_when_it_is_the_tightest(corpus: Path, tmp_path: Path) -> None:
    plan = plan_costs(
        str(corpus), "paid", tmp_path / "home", claude=ClaudeSettings(requests_per_minute=10, concurrency=8)
    )
    per_chunk = plan["modes"]["per-chunk"]
    assert per_chunk["wall_time_bound"] == "rpm" and per_chunk["wall_time_s"] == pytest.approx(
        per_chunk["requests"] / 10 * 60, abs=0.1
    )


def test_what_is_stored_is_named_and_not_priced_again(corpus: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    stored = store_contexts(home, corpus, "per-chunk", {"uuid-0"})
    modes = plan_costs(str(corpus), "paid", home)["modes"]
    for mode in ("per-chunk", "batch"):  # one prompt: their stored contexts are shared
        assert modes[mode]["chunks_already_contextualized"] == stored == CHUNKS_PER_DOC
        assert modes[mode]["documents"] == 2 and modes[mode]["requests"] == CHUNKS - CHUNKS_PER_DOC
    assert modes["per-document"]["chunks_already_contextualized"] == 0 and modes["per-document"]["documents"] == 3


def test_a_source_with_nothing_pending_says_so_and_costs_nothing(corpus: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    store_contexts(home, corpus, "per-chunk")
    store_contexts(home, corpus, "per-document")
    plan = plan_costs(str(corpus), "paid", home)
    assert plan["nothing_pending"] is True
    assert all(mode["requests"] == mode["chunks"] == 0 and mode["cost_usd"] == 0.0 for mode in plan["modes"].values())


def test_a_model_without_known_prices_is_an_error_naming_it_and_where_prices_live(corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(UnknownModelPrices, match=r"'claude-mystery-9'.*tasks/context/claude/pricing\.py"):
        plan_costs(str(corpus), "paid", tmp_path / "home", claude=ClaudeSettings(model="claude-mystery-9"))
    with pytest.raises(ValueError, match=r"'voyage-unknown'.*tasks/embedding/voyage\.py"):
        plan_costs(str(corpus), "paid", tmp_path / "home", embedder=EmbedderSpec("voyage", "voyage-unknown", 0))
    assert facts_for("claude-mystery-9")  # a run still prices it at the default (unchanged behaviour)


def test_voyage_embedding_tokens_and_cost_leave_out_what_is_embedded(corpus: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    embedder = EmbedderSpec("voyage", "voyage-3.5", 0)
    data = load_source(str(corpus))
    offline = plan_costs(str(corpus), "paid", home, contextualizer="none", embedder=embedder)["embedding"]
    assert offline["texts_to_embed"] == len(data.chunks) and offline["texts_with_assumed_context"] == 0
    assert offline["cost_usd"] == pytest.approx(offline["tokens"] * PRICE_PER_MTOK["voyage-3.5"] / 1e6, abs=1e-6)
    text = embedder.embedded_text("", data.chunks[0].content)  # the none contextualizer's text of chunk 0
    embeddings_cache(home).append_rows([{KEY: embedder.cache_key(text, "document")}])
    again = plan_costs(str(corpus), "paid", home, contextualizer="none", embedder=embedder)["embedding"]
    assert again["texts_already_embedded"] == 1 and again["texts_to_embed"] == len(data.chunks) - 1
    paid = plan_costs(str(corpus), "paid", home, embedder=embedder)["embedding"]  # claude: contexts not written yet
    assert paid["texts_with_assumed_context"] == len(data.chunks) and paid["tokens"] > offline["tokens"]


def test_with_a_key_prompts_are_counted_once_per_document_and_counts_are_reused(
    simulator: AnthropicSimulator, corpus: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    plan = plan_costs(str(corpus), "paid", home)
    assert plan["token_counts"].startswith("counted")
    paths = [request.path for request in simulator.requests]
    assert set(paths) == {"/v1/messages/count_tokens"}
    assert len(paths) == plan["token_count_calls"]["now"] == 3 + 2  # one per document, two for the tool definition
    replan = plan_costs(str(corpus), "paid", home)
    assert len(simulator.requests) == len(paths) and replan["token_count_calls"]["now"] == 0  # all from the store
    assert replan["modes"] == plan["modes"]


@pytest.fixture
def simulator(anthropic_simulator: AnthropicSimulator) -> AnthropicSimulator:
    return anthropic_simulator


def test_contextualized_embeddings_are_planned_per_whole_document(corpus: Path, tmp_path: Path) -> None:
    from ctxrag.tasks.embedding.voyage_context import CONTEXT_MODELS

    home = tmp_path / "home"
    embedder = EmbedderSpec.choose("voyage-context-3", None, 0, None)
    data = load_source(str(corpus))
    first = plan_costs(str(corpus), "paid", home, contextualizer="none", embedder=embedder)["embedding"]
    assert first["texts_to_embed"] == CHUNKS and first["price_per_mtok"] == CONTEXT_MODELS["voyage-context-3"]
    assert first["requests"] == 1 and first["prices_file"] == "tasks/embedding/voyage_context.py"
    chunks = data.chunks
    texts = [embedder.embedded_text("", chunk.content) for chunk in chunks]
    keys = embedder.document_keys(texts, [chunk.doc_id for chunk in chunks])
    stored = [key for key, chunk in zip(keys, chunks) if chunk.doc_id == "uuid-0"]
    embeddings_cache(home).append_rows([{KEY: key} for key in stored[:-1]])  # all but one chunk of uuid-0
    partial = plan_costs(str(corpus), "paid", home, contextualizer="none", embedder=embedder)["embedding"]
    assert partial["texts_to_embed"] == CHUNKS  # a document with one vector missing is embedded whole
    embeddings_cache(home).append_rows([{KEY: stored[-1]}])
    done = plan_costs(str(corpus), "paid", home, contextualizer="none", embedder=embedder)["embedding"]
    assert done["texts_to_embed"] == CHUNKS - CHUNKS_PER_DOC and done["texts_already_embedded"] == CHUNKS_PER_DOC
