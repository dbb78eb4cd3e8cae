"""Windows of a long chunk for the local model: split back from the windowed text, budgeted, pooled."""

from __future__ import annotations

import numpy as np
import pytest

from ctxrag.tasks.embedding import windows
from ctxrag.tasks.embedding.windows import (
    cap_context,
    cap_contexts,
    cap_local_contexts,
    local_word_pieces,
    pooled_rows,
    split_windows,
    windowed_text,
)


def characters(texts: list[str]) -> list[int]:
    """A stand-in word-piece counter: one piece per character."""
    return [len(text) for text in texts]


def words(texts: list[str]) -> list[int]:
    """A stand-in word-piece counter: one piece per space-separated word (it adds up over lines and words, as the
    model's does)."""
    return [len(text.split()) for text in texts]


CONTEXT = "File: a.py.\nA long opening comment of the file, in seven words\nDefines: x, y, z, w\nInside: def f(x)"


def test_a_context_within_the_cap_is_unchanged() -> None:
    assert cap_context(CONTEXT, 22, words) == CONTEXT  # 2 + 10 + 5 + 3 word pieces
    assert cap_context("", 4, words) == ""


def test_the_cap_shortens_the_longest_lines_first_each_at_a_word_boundary() -> None:
    capped = cap_context(CONTEXT, 12, words)
    assert capped == "File: a.py.\nA long opening\nDefines: x, y,\nInside: def f(x)"  # each line cut to 3 pieces
    assert sum(words(capped.split("\n"))) <= 12
    assert cap_context(CONTEXT, 8, words) == "File: a.py.\nA long\nDefines: x,\nInside: def"  # 2 each


def test_a_line_with_no_whole_word_within_the_cap_goes() -> None:
    def pieces(texts: list[str]) -> list[int]:  # "Inside:" alone is 6 pieces
        return [sum(6 if word == "Inside:" else 1 for word in text.split()) for text in texts]

    assert cap_context("File: a.py.\nInside: def f(x)", 6, pieces) == "File: a.py."


def test_the_local_counter_is_the_packaged_models_tokenizer_uncut_and_unpadded() -> None:
    assert local_word_pieces(["File: asyncio/base_events.py.", "a", ""]) == [13, 1, 0]  # file : as ##yn ##cio / ...
    long = "word " * 600
    assert local_word_pieces([long]) == [600]  # the tokenizer file's own settings cut at 128 and pad
    lines = CONTEXT.split("\n")
    assert local_word_pieces([CONTEXT]) == [sum(local_word_pieces(lines))]  # adds up over lines and words
    assert local_word_pieces(lines) == [sum(local_word_pieces(line.split(" "))) for line in lines]
    capped = cap_context(CONTEXT, 16, local_word_pieces)
    assert local_word_pieces([capped])[0] <= 16 < local_word_pieces([CONTEXT])[0]
    assert [line.split(" ")[0] for line in capped.split("\n")] == ["File:", "A", "Defines:", "Inside:"]


def test_local_caps_are_the_local_counter_s_and_each_context_is_counted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    counted: list[str] = []

    def counting(texts: list[str]) -> list[int]:
        counted.extend(texts)
        return local_word_pieces(texts)

    monkeypatch.setattr(windows, "local_word_pieces", counting)
    monkeypatch.setattr(windows, "_capped", windows.OrderedDict())
    contexts = [CONTEXT, "short", CONTEXT + "\nDefines: more, names", CONTEXT]
    expected = cap_contexts(contexts, 16, local_word_pieces)
    assert cap_local_contexts(contexts, 16) == expected
    first = len(counted)
    assert first and "short" not in counted  # a context within the cap in bytes is never counted
    assert cap_local_contexts(list(reversed(contexts)), 16) == list(reversed(expected))
    assert len(counted) == first  # the same contexts again: nothing counted
    assert cap_local_contexts([CONTEXT], 12) == cap_contexts([CONTEXT], 12, local_word_pieces)  # another cap: counted
    assert len(counted) > first


def test_the_remembered_caps_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(windows, "_capped", windows.OrderedDict())
    monkeypatch.setattr(windows, "CAPPED_KEPT", 2)
    contexts = [f"{CONTEXT} {number}" for number in range(5)]
    assert cap_local_contexts(contexts, 16) == cap_contexts(contexts, 16, local_word_pieces)
    assert list(windows._capped) == [(contexts[3], 16), (contexts[4], 16)]  # the last used kept


def test_every_window_carries_the_context_and_whole_lines_within_the_budget() -> None:
    text = windowed_text("ctx", "aaaa\nbbbb\ncccc\ndd")
    windows = split_windows(text, 12, characters)  # 12 - 3 for the context: 9 characters of lines per window
    assert windows == ["ctx\n\naaaa\nbbbb", "ctx\n\ncccc\ndd"]


def test_a_line_longer_than_the_budget_is_a_window_of_its_own() -> None:
    windows = split_windows(windowed_text("c", "ab\n" + "x" * 40 + "\ncd"), 10, characters)
    assert windows == ["c\n\nab", "c\n\n" + "x" * 40, "c\n\ncd"]


def test_a_long_context_still_leaves_a_quarter_of_the_budget_to_the_lines() -> None:
    windows = split_windows(windowed_text("c" * 50, "ab\ncd\nef"), 16, characters)  # budget max(16 - 50, 4)
    assert windows == ["c" * 50 + "\n\nab\ncd", "c" * 50 + "\n\nef"]


def test_without_a_context_the_windows_are_runs_of_lines_alone() -> None:
    text = windowed_text("", "ab\ncd\nef")
    assert text == "\n\nab\ncd\nef"
    assert split_windows(text, 4, characters) == ["ab\ncd", "ef"]


def test_a_context_with_blank_lines_still_splits_back_at_the_first_one() -> None:
    text = windowed_text("page\n\n\nsummary\n", "body\n\nmore")
    assert text == "page\nsummary\n\nbody\n\nmore"
    assert split_windows(text, 100, characters) == ["page\nsummary\n\nbody\n\nmore"]


def test_pooling_averages_each_texts_windows_to_unit_length() -> None:
    vectors = np.array([[1.0, 0.0], [0.0, 1.0], [3.0, 4.0]], dtype=np.float32)
    pooled = pooled_rows(vectors, [0, 0, 1], 2)
    assert np.allclose(pooled, [[2**-0.5, 2**-0.5], [0.6, 0.8]])
