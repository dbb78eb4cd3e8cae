"""Voyage contextualized chunk embeddings (``voyage-context-3``) through the SDK's ``contextualized_embed``.

A document's chunks are sent together, in order, as one inner list of ``inputs``: each chunk's vector then carries
its document's context. A document over the model's context length (32,000 tokens) is split into consecutive groups
that each fit (chunk order kept); requests hold whole groups within the API's limits (1,000 inputs, 16,000 chunks,
120,000 tokens). Queries are embedded one to an input with ``input_type="query"``. Tokens are estimated high
(``ctxrag.tasks.embedding.voyage.estimate_tokens``); one retry layer, one ledger row per request. ``ctxrag index --embedder
voyage-context-3`` sends whole documents (``ctxrag.tasks.stages.embed_documents``); a chunk's cache key names its document's
texts (``EmbedderSpec.document_keys``), so an edited document is embedded again whole.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ctxrag.storage.errors import InvalidInput
from ctxrag.tasks.embedding.voyage import SAFETY, VoyageEmbedder, estimate_tokens

CONTEXT_MODELS = {"voyage-context-3": 0.18}  # model -> US dollars per million tokens
CONTEXT_LENGTH = 32_000  # tokens of one input (a document's chunks)
REQUEST_TOKENS = 120_000
MAX_INPUTS = 1_000
MAX_CHUNKS = 16_000


class ContextualizedOnly(InvalidInput):
    """Chunks were handed to a contextualized embedder without their documents."""


def split_document(sizes: list[int], limit: int = int(CONTEXT_LENGTH * SAFETY)) -> list[list[int]]:
    """Indices of a document's chunks in consecutive groups of at most ``limit`` tokens (a larger chunk alone)."""
    groups: list[list[int]] = [[]]
    used = 0
    for index, tokens in enumerate(sizes):
        if groups[-1] and used + tokens > limit:
            groups.append([])
            used = 0
        groups[-1].append(index)
        used += tokens
    return [group for group in groups if group]


def requests_of(group_sizes: list[list[int]]) -> list[list[int]]:
    """Indices of groups packed into requests within the inputs, chunks and tokens limits, in order."""
    limit = int(REQUEST_TOKENS * SAFETY)
    requests: list[list[int]] = [[]]
    tokens = chunks = 0
    for index, sizes in enumerate(group_sizes):
        if requests[-1] and (
            len(requests[-1]) >= MAX_INPUTS or chunks + len(sizes) > MAX_CHUNKS or tokens + sum(sizes) > limit
        ):
            requests.append([])
            tokens = chunks = 0
        requests[-1].append(index)
        tokens += sum(sizes)
        chunks += len(sizes)
    return [request for request in requests if request]


class VoyageContextEmbedder(VoyageEmbedder):
    """``embed_documents(documents)``: each document's chunk texts, in order -> one vector per chunk.
    ``embed(texts, "query")``: queries, one to an input; chunks only through ``embed_documents``."""

    def embed(self, texts: list[str], input_type: str = "document") -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        if input_type == "query":
            groups = [[text] for text in texts]
            vectors = [
                row
                for request in requests_of([[estimate_tokens(t)] for t in texts])
                for row in self._request([groups[i] for i in request], "query")
            ]
            return np.asarray(vectors, dtype=np.float32)
        raise ContextualizedOnly(
            f"{self.spec.model} embeds a document's chunks together: call embed_documents with each document's chunks"
        )

    def embed_documents(
        self, documents: list[list[str]], done: Callable[[dict[int, np.ndarray]], None] | None = None
    ) -> list[np.ndarray]:
        """One array per document (rows in chunk order); a long document is sent as consecutive groups. After each
        request, ``done({document number: vectors})`` gets the documents whose last group it held, so a caller can
        keep them before the next request (an interrupted run then repeats only the request in flight)."""
        groups: list[tuple[int, list[int]]] = []  # (document, chunk indices)
        for number, texts in enumerate(documents):
            groups += [(number, group) for group in split_document([estimate_tokens(text) for text in texts])]
        sizes = [[estimate_tokens(documents[number][i]) for i in group] for number, group in groups]
        rows: list[list[np.ndarray]] = [[np.zeros(0)] * len(texts) for texts in documents]
        last_group = {number: g for g, (number, _) in enumerate(groups)}
        for request in requests_of(sizes):
            inputs = [[documents[groups[g][0]][i] for i in groups[g][1]] for g in request]
            vectors = iter(self._request(inputs, "document"))
            for g in request:
                number, group = groups[g]
                for i in group:
                    rows[number][i] = next(vectors)
            finished = {
                groups[g][0]: np.asarray(rows[groups[g][0]], dtype=np.float32)
                for g in request
                if last_group[groups[g][0]] == g
            }
            if done is not None and finished:
                done(finished)
        return [np.asarray(document, dtype=np.float32) for document in rows]

    def _request(self, inputs: list[list[str]], input_type: str) -> list[np.ndarray]:  # type: ignore[override]
        """One ``contextualized_embed`` call; its vectors flattened in input order; one ledger row."""
        result = self._paid_call(
            f"contextualized/{input_type}",
            sum(len(group) for group in inputs),
            sum(estimate_tokens(text) for group in inputs for text in group),
            "Voyage contextualized embeddings",
            CONTEXT_MODELS.get(self.spec.model, 0.18),
            lambda: self.client().contextualized_embed(
                inputs=inputs, model=self.spec.model, input_type=input_type, output_dimension=self.spec.output_dimension
            ),
        )
        return [
            np.asarray(vector, dtype=np.float32)
            for item in sorted(result.results, key=lambda r: r.index)
            for vector in item.embeddings
        ]
