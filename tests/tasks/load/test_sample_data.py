"""The sample corpus the project ships, and its questions' golden chunks under the default chunker."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ctxrag.tasks.common.models import Chunk
from ctxrag.tasks.load import load_source

SAMPLE = Path(__file__).resolve().parents[3] / "data" / "sample"
# Words too common in the sample to show that a chunk is about the answer.
COMMON = {"tinyq", "tasks", "worker", "workers", "which", "there", "their", "about", "after", "before", "other"}


@pytest.fixture(scope="module")
def chunks() -> dict[tuple[str, int], Chunk]:
    corpus = load_source(SAMPLE / "corpus")
    assert corpus.warnings == []
    return {(chunk.doc_id, chunk.chunk_index): chunk for chunk in corpus.chunks}


def questions() -> list[dict[str, Any]]:
    lines = (SAMPLE / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_sample_corpus_is_small_and_varied() -> None:
    corpus = load_source(SAMPLE / "corpus")
    kinds = [document.kind for document in corpus.documents]
    assert 6 <= len(kinds) <= 12
    assert {"code", "markdown", "text"} <= set(kinds)
    assert sum(len(document.content.encode()) for document in corpus.documents) < 40_000


def test_questions_have_the_evaluation_fields() -> None:
    loaded = questions()
    assert 12 <= len(loaded) <= 16
    for question in loaded:
        assert set(question) == {"query", "answer", "golden_chunk_uuids", "golden_doc_uuids"}
        assert question["golden_chunk_uuids"]
        assert question["golden_doc_uuids"] == list(dict.fromkeys(path for path, _ in question["golden_chunk_uuids"]))


@pytest.mark.parametrize("question", questions(), ids=lambda question: question["query"][:40])
def test_golden_chunks_exist_and_mention_the_answer(
    question: dict[str, Any], chunks: dict[tuple[str, int], Chunk]
) -> None:
    answer_words = {word.lower() for word in re.findall(r"[A-Za-z_]{5,}", question["answer"])} - COMMON
    for path, index in question["golden_chunk_uuids"]:
        chunk = chunks.get((path, index))
        assert chunk is not None, f"golden chunk [{path!r}, {index}] is not among the loaded chunks"
        content_words = {word.lower() for word in re.findall(r"[A-Za-z_]{5,}", chunk.content)}
        assert answer_words & content_words, f"[{path!r}, {index}] shares no word with the answer"
