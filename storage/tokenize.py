"""Code-aware English tokenization for BM25: identifiers are split and also kept whole, words are stemmed."""

from __future__ import annotations

import importlib.util
import re
from functools import lru_cache
from pathlib import Path

import Stemmer

WORD = re.compile(r"[A-Za-z0-9_]+")
_CAMEL_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_stemmer = Stemmer.Stemmer("english")


@lru_cache(maxsize=1)
def stopwords() -> frozenset[str]:
    """bm25s's 179 English stop words (measured +2 points Pass@10 over Lucene's 33). Their module imports nothing, so
    it is read on its own: bm25s's package would import scipy (0.1 s of a search, which needs no bm25s)."""
    package = importlib.util.find_spec("bm25s")  # finds the package without running its __init__
    assert package is not None and package.origin is not None, "bm25s is a dependency of ctxrag"
    spec = importlib.util.spec_from_file_location(
        "ctxrag_bm25s_stopwords", Path(package.origin).parent / "stopwords.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return frozenset(module.STOPWORDS_EN_PLUS)


def identifier_parts(word: str) -> list[str]:
    """Split ``parseHTTPRequest_v2`` into ``parse, http, request, v, 2`` (lowercase)."""
    parts: list[str] = []
    for piece in word.split("_"):
        parts.extend(match.lower() for match in _CAMEL_PART.findall(piece))
    return parts


@lru_cache(maxsize=200_000)
def word_terms(word: str) -> tuple[str, ...]:
    """One word's BM25 terms: itself whole and its identifier parts, stop words dropped, stemmed."""
    whole = word.lower().strip("_")
    parts = identifier_parts(word)
    terms = [whole] if whole else []
    if len(parts) > 1:
        terms.extend(parts)
    kept = [term for term in terms if term not in stopwords() and (len(term) > 1 or term.isdigit())]
    return tuple(_stemmer.stemWords(kept))


def tokenize(text: str) -> list[str]:
    """BM25 terms of ``text``: each word whole plus its identifier parts, stop words dropped, stemmed."""
    tokens: list[str] = []
    for word in WORD.findall(text):
        tokens.extend(word_terms(word))
    return tokens
