"""A LlamaIndex retriever over a ctxrag index (``pip install 'ctxrag[llamaindex]'``).

from ctxrag.integrations.llamaindex import CtxragRetriever
retriever = CtxragRetriever(index_name="sample", k=5)
nodes = retriever.retrieve("how are retries delayed?")
"""

from __future__ import annotations

from ctxrag.storage.extras import require

require(
    "llama_index.core", "llamaindex", "ctxrag.integrations.llamaindex"
)  # one line naming the extra where it is missing

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from ctxrag.api import Index
from ctxrag.integrations import hit_metadata


class CtxragRetriever(BaseRetriever):
    """The top ``k`` chunks of ctxrag index ``index_name`` by ``strategy`` (None: the index's own) as LlamaIndex
    ``NodeWithScore``s: a ``TextNode`` of the chunk's text with ctxrag's source, location and ranks in its metadata,
    and the strategy's score."""

    def __init__(self, index_name: str = "default", k: int = 10, strategy: str | None = None) -> None:
        super().__init__()
        self.index_name, self.k, self.strategy = index_name, k, strategy
        self._index: Index | None = None

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if self._index is None:
            self._index = Index(self.index_name)  # opened once: the model and the query vectors stay loaded
        hits = self._index.search(query_bundle.query_str, k=self.k, strategy=self.strategy)
        return [
            NodeWithScore(
                node=TextNode(text=hit.content, id_=hit.chunk_id, metadata=hit_metadata(hit)), score=hit.score
            )
            for hit in hits
        ]
