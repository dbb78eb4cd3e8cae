"""ctxrag's index as the retriever of the RAG frameworks users already run: ``ctxrag.integrations.langchain``
(``pip install 'ctxrag[langchain]'``) and ``ctxrag.integrations.llamaindex`` (``pip install 'ctxrag[llamaindex]'``).
Each returns the framework's own document type: the chunk's text, and ctxrag's source, location, score and ranks in
its metadata (``Hit.to_dict`` without the text)."""

from __future__ import annotations

from ctxrag.hits import Hit


def hit_metadata(hit: Hit) -> dict[str, object]:
    """What a framework's document carries beside the chunk's text: every field ``ctxrag search --json`` prints."""
    return {key: value for key, value in hit.to_dict().items() if key != "content"}
