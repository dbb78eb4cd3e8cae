"""Versioned prompts. A prompt's version is part of every context's cache key: change the text, bump the version.

The per-chunk prompt is the Contextual Retrieval cookbook's, unchanged; the summary prompt is the RAG guide's
summary-indexing prompt, with the knowledge-base description made a parameter.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Prompt:
    version: str
    template: str

    def render(self, **values: str) -> str:
        return self.template.format(**values)


DOCUMENT = Prompt("doc-v1", "<document>\n{doc_content}\n</document>")

CHUNK_CONTEXT = Prompt(
    "chunk-v1",
    """Here is the chunk we want to situate within the whole document
<chunk>
{chunk_content}
</chunk>

Please give a short succinct context to situate this chunk within the overall document for the purposes of improving search retrieval of the chunk.
Answer only with the succinct context and nothing else.""",
)

DOCUMENT_CONTEXTS = Prompt(
    "doc-contexts-v1",
    """Here are chunks of the document above, each in a <chunk index="..."> tag:
{chunks}

For every chunk, give a short succinct context to situate it within the overall document for the purposes of improving search retrieval of the chunk.
Call the record_contexts tool once, with one entry per chunk, in the same order, each with the chunk's index and its context only.""",
)

RECORD_CONTEXTS_TOOL = {
    "name": "record_contexts",
    "description": "Record the situating context of every chunk.",
    "input_schema": {
        "type": "object",
        "properties": {
            "contexts": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"chunk_index": {"type": "integer"}, "context": {"type": "string"}},
                    "required": ["chunk_index", "context"],
                },
            }
        },
        "required": ["contexts"],
    },
}

SUMMARY = Prompt(
    "summary-v1",
    """You are tasked with creating a short summary of the following content from {corpus_description}.

Content to summarize:
Heading: {heading}
{text}

Please provide a brief summary of the above content in 2-3 sentences. The summary should capture the key points and be concise. We will be using it as a key part of our search pipeline when answering user queries about this content.

Avoid using any preamble whatsoever in your response. Statements such as 'here is the summary' or 'the summary is as follows' are prohibited. You should immediately get into the summary itself and be as concise as possible.""",
)


def tagged_chunks(chunks: list[tuple[int, str]]) -> str:
    return "\n".join(f'<chunk index="{index}">\n{content}\n</chunk>' for index, content in chunks)
