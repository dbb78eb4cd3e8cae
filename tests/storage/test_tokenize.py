"""Code-aware BM25 tokenization: identifiers split and kept whole, stop words dropped, words stemmed."""

from __future__ import annotations

import pytest

from ctxrag.storage.tokenize import identifier_parts, tokenize


def test_empty_and_punctuation_only_text_give_no_tokens() -> None:
    assert tokenize("") == []
    assert tokenize("   \n\t") == []
    assert tokenize("{}();,.-+*/") == []


@pytest.mark.parametrize(
    ("word", "parts"),
    [
        ("parseHTTPRequest_v2", ["parse", "http", "request", "v", "2"]),
        ("max_retries", ["max", "retries"]),
        ("QueueWorker", ["queue", "worker"]),
        ("HTTPServer", ["http", "server"]),
        ("lower", ["lower"]),
        ("__init__", ["init"]),
    ],
)
def test_identifier_parts(word: str, parts: list[str]) -> None:
    assert identifier_parts(word) == parts


def test_camel_case_identifier_is_kept_whole_and_split() -> None:
    # whole (lowercased, stemmed "queueworker" -> "queuework"), then the parts
    assert tokenize("QueueWorker") == ["queuework", "queue", "worker"]


def test_snake_case_identifier_is_kept_whole_and_split() -> None:
    # "retries" stems to "retri"; the whole identifier is stemmed as one word
    assert tokenize("max_retries") == ["max_retri", "max", "retri"]


def test_mixed_identifier_drops_single_letters_but_keeps_digits() -> None:
    # parts: parse, http, request, v, 2 -> "v" (one letter) is dropped, "2" (a digit) is kept; "parse" -> "pars"
    assert tokenize("parseHTTPRequest_v2") == ["parsehttprequest_v2", "pars", "http", "request", "2"]


def test_plain_word_is_not_duplicated() -> None:
    assert tokenize("worker") == ["worker"]


def test_stop_words_are_dropped() -> None:
    assert tokenize("the queue and the worker") == ["queue", "worker"]
    assert tokenize("the of and to a") == []


def test_stemming() -> None:
    assert tokenize("running") == ["run"]
    assert tokenize("runs") == ["run"]
    assert tokenize("dogs") == ["dog"]
    # different surface forms meet on the same term
    assert tokenize("retries") == tokenize("retry")


def test_numbers_are_tokens_including_single_digits() -> None:
    assert tokenize("version 42 and 7") == ["version", "42", "7"]
    assert tokenize("a b 1") == ["1"]  # single letters dropped, the single digit kept


def test_lowercases_and_is_deterministic() -> None:
    assert tokenize("Queue QUEUE queue") == ["queue", "queue", "queue"]
    assert tokenize("Retry the Queue") == tokenize("Retry the Queue")


def test_leading_and_trailing_underscores_are_stripped_from_the_whole_identifier() -> None:
    assert tokenize("__init__") == ["init"]
    assert tokenize("_private_name") == ["private_nam", "privat", "name"]


def test_stop_words_read_without_bm25s_are_bm25s_own(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from bm25s.stopwords import STOPWORDS_EN_PLUS

    from ctxrag.storage.tokenize import stopwords

    monkeypatch.delitem(sys.modules, "bm25s")  # as in a search's process, which never imports the package
    stopwords.cache_clear()
    try:
        assert stopwords() == frozenset(STOPWORDS_EN_PLUS) and len(stopwords()) == 179
    finally:
        stopwords.cache_clear()
