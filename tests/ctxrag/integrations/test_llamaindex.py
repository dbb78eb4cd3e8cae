"""ctxrag as a LlamaIndex retriever, against the real llama-index-core."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip(
    "llama_index.core", reason="the llamaindex extra is not installed: pip install 'ctxrag[llamaindex]'"
)

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore

from ctxrag.integrations.llamaindex import CtxragRetriever

QUESTION = (
    "What happens if I push a task with a priority of 250?"  # the sample's answer: tinyq/queue.py or docs/guide.md
)


def test_the_retriever_returns_the_samples_answer_first_as_scored_nodes(home: Path) -> None:
    retriever = CtxragRetriever(index_name="sample", k=3)
    nodes = retriever.retrieve(QUESTION)
    assert isinstance(retriever, BaseRetriever) and len(nodes) == 3 and all(isinstance(n, NodeWithScore) for n in nodes)
    first = nodes[0]
    assert first.node.metadata["source"] in {"tinyq/queue.py", "docs/guide.md"} and first.node.metadata["rank"] == 1
    assert first.node.get_content(metadata_mode="none") and first.node.node_id == first.node.metadata["chunk_id"]
    assert first.score == pytest.approx(first.node.metadata["score"], abs=1e-6)
    assert [n.score for n in nodes] == sorted((n.score for n in nodes), reverse=True)
