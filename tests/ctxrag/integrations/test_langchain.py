"""ctxrag as a LangChain retriever, against the real langchain-core."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("langchain_core", reason="the langchain extra is not installed: pip install 'ctxrag[langchain]'")

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from ctxrag.integrations.langchain import CtxragRetriever

QUESTION = (
    "What happens if I push a task with a priority of 250?"  # the sample's answer: tinyq/queue.py or docs/guide.md
)


def test_the_retriever_returns_the_samples_answer_first_as_langchain_documents(home: Path) -> None:
    retriever = CtxragRetriever(index_name="sample", k=3)
    documents = retriever.invoke(QUESTION)
    assert (
        isinstance(retriever, BaseRetriever) and len(documents) == 3 and all(isinstance(d, Document) for d in documents)
    )
    first = documents[0]
    assert first.metadata["source"] in {"tinyq/queue.py", "docs/guide.md"} and first.metadata["rank"] == 1
    assert first.page_content and "content" not in first.metadata  # the chunk's text is the document's, once
    assert {"location", "score", "ranks", "found_by", "chunk_id"} <= set(first.metadata) and first.id == first.metadata[
        "chunk_id"
    ]
    assert [d.metadata["score"] for d in documents] == sorted((d.metadata["score"] for d in documents), reverse=True)
