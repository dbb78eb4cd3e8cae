"""The embedder spec: what each provider embeds for a chunk, and its manifest form across versions."""

from __future__ import annotations

import pytest

from ctxrag.storage.errors import InvalidInput
from ctxrag.tasks.common.models import indexed_text
from ctxrag.tasks.embedding.embedder_spec import (
    LOCAL_CONTEXT_TOKENS,
    LOCAL_DEFINES_CHARS,
    LOCAL_WINDOW_TOKENS,
    EmbedderSpec,
)
from ctxrag.tasks.embedding.windows import HEAD_SEPARATOR, local_word_pieces, windowed_text

NAMES = ", ".join(f"handler_{number}" for number in range(30))
CONTEXT = f"File: app/handlers.py.\nDefines: {NAMES}.\nInside: class Router"


def test_the_cli_local_embedder_reads_a_shortened_defines_line_and_the_rest_whole() -> None:
    spec = EmbedderSpec.choose("local", None, 512, None)
    assert spec.defines_chars == LOCAL_DEFINES_CHARS == 100
    text = spec.embedded_text(CONTEXT, "def route(): ...")
    assert spec.window_tokens == LOCAL_WINDOW_TOKENS
    file_line, defines, inside, blank, body = text.split("\n")
    assert (file_line, inside, blank, body) == (
        "File: app/handlers.py.",
        "Inside: class Router",
        "",
        "def route(): ...",
    )
    assert defines.startswith("Defines: handler_0, handler_1, ") and defines.endswith(", ...")
    assert len(defines) <= LOCAL_DEFINES_CHARS + len(", ...")
    assert spec.embedded_text("File: a.py.", "x = 1") == indexed_text("File: a.py.", "x = 1")  # nothing to cut
    assert spec.embedded_text("", "x = 1") == windowed_text("", "x = 1") == "\n\nx = 1"  # splits back into windows


def test_voyage_and_plain_specs_embed_the_whole_indexed_text() -> None:
    for spec in (EmbedderSpec.choose("voyage", None, 512, None), EmbedderSpec()):
        assert spec.defines_chars == spec.window_tokens == 0
        assert spec.embedded_text(CONTEXT, "body") == indexed_text(CONTEXT, "body")


def test_manifest_form_keeps_specs_from_before_the_field_unchanged() -> None:
    before = {"provider": "local", "model": "all-MiniLM-L6-v2", "max_seq_length": 512, "output_dimension": None}
    old = EmbedderSpec.from_dict(before)
    assert old.defines_chars == 0 and old.to_dict() == before  # same build key, same embedded texts as then
    local = EmbedderSpec.choose("local", None, 512, None, context_tokens=0)
    assert local.to_dict() == {**before, "defines_chars": 100, "window_tokens": LOCAL_WINDOW_TOKENS}
    assert EmbedderSpec.from_dict(local.to_dict()) == local
    assert EmbedderSpec.from_dict({**before, "defines_chars": 100}).window_tokens == 0  # the previous release's index
    voyage = EmbedderSpec.choose("voyage", None, 512, None).to_dict()
    assert "defines_chars" not in voyage and "window_tokens" not in voyage


def test_windowed_vectors_have_their_own_cache_keys_and_queries_share_them() -> None:
    whole, windowed = EmbedderSpec(), EmbedderSpec(window_tokens=256)
    assert whole.cache_key("text", "document") != windowed.cache_key("text", "document")
    assert windowed.cache_key("text", "document") != EmbedderSpec(window_tokens=128).cache_key("text", "document")
    assert whole.cache_key("question", "query") == windowed.cache_key("question", "query")  # queries are not windowed


def test_only_the_local_model_windows_and_not_below_16_word_pieces() -> None:
    for bad in ({"provider": "voyage", "model": "voyage-2", "window_tokens": 256}, {"window_tokens": 8}):
        with pytest.raises(InvalidInput, match="window_tokens"):
            EmbedderSpec(**bad)  # type: ignore[arg-type]


def test_the_cli_chooses_the_window_size_for_the_local_model_only() -> None:
    assert EmbedderSpec.choose("local", None, 512, None, 128).window_tokens == 128
    whole = EmbedderSpec.choose("local", None, 512, None, 0)
    previous_release = {
        "provider": "local",
        "model": "all-MiniLM-L6-v2",
        "max_seq_length": 512,
        "output_dimension": None,
        "defines_chars": 100,
    }
    assert whole.window_tokens == 0 and whole.to_dict() == previous_release  # its build key and vectors, unchanged
    assert whole.embedded_text("File: a.py.", "x = 1") == indexed_text("File: a.py.", "x = 1")
    assert EmbedderSpec.choose("voyage", None, 512, None, 128).window_tokens == 0  # Voyage embeds whole texts
    with pytest.raises(InvalidInput, match="window_tokens 8"):
        EmbedderSpec.choose("local", None, 512, None, 8)


COMMENT = "A module of request handlers that route every page of the site to its view and render it with a template."


def test_a_context_cap_cuts_what_the_local_model_reads_and_keys_only_the_texts_it_changes() -> None:
    spec, whole = (
        EmbedderSpec.choose("local", None, 512, None, context_tokens=28),
        EmbedderSpec.choose("local", None, 512, None, context_tokens=0),
    )
    assert spec.context_tokens == 28 and spec.to_dict() == {**whole.to_dict(), "context_tokens": 28}
    context = f"File: app/handlers.py.\n{COMMENT}\nInside: class Router"
    text = spec.embedded_text(context, "def route(): ...")
    head, _, body = text.partition(HEAD_SEPARATOR)
    assert body == "def route(): ..." and local_word_pieces([head])[0] <= 28 < local_word_pieces([context])[0]
    assert head.split("\n")[0] == "File: app/handlers.py." and head.split("\n")[-1] == "Inside: class Router"
    assert spec.cache_key(text, "document") != whole.cache_key(
        whole.embedded_text(context, "def route(): ..."), "document"
    )
    short = "File: a.py.\nInside: def f()"  # within the cap: the same text, so the same stored vector
    assert spec.embedded_text(short, "x = 1") == whole.embedded_text(short, "x = 1")
    assert spec.cache_key(spec.embedded_text(short, "x = 1"), "document") == whole.cache_key(
        whole.embedded_text(short, "x = 1"), "document"
    )


def test_a_context_cap_applies_to_the_local_models_windows_only() -> None:
    assert EmbedderSpec.choose("local", None, 512, None).context_tokens == LOCAL_CONTEXT_TOKENS == 64
    assert EmbedderSpec.choose("local", None, 512, None, 0, 64).context_tokens == 0  # whole texts: the previous spec
    assert EmbedderSpec.choose("voyage", None, 512, None, 256, 64).context_tokens == 0
    assert (
        EmbedderSpec.from_dict({"provider": "local", "window_tokens": 256}).context_tokens == 0
    )  # built before the cap
    for bad in ({"context_tokens": 64}, {"window_tokens": 256, "context_tokens": -1}):
        with pytest.raises(InvalidInput, match="context_tokens"):
            EmbedderSpec(**bad)  # type: ignore[arg-type]
