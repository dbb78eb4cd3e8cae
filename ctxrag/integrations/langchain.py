"""A LangChain retriever over a ctxrag index (``pip install 'ctxrag[langchain]'``).

from ctxrag.integrations.langchain import CtxragRetriever
retriever = CtxragRetriever(index_name="sample", k=5)
documents = retriever.invoke("how are retries delayed?")
"""

from __future__ import annotations

from ctxrag.storage.extras import require

require("langchain_core", "langchain", "ctxrag.integrations.langchain")  # one line naming the extra where it is missing

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import PrivateAttr

from ctxrag.api import Index
from ctxrag.integrations import hit_metadata


class CtxragRetriever(BaseRetriever):
    """The top ``k`` chunks of ctxrag index ``index_name`` by ``strategy`` (None: the index's own) as LangChain
    ``Document``s: the chunk's text, and ctxrag's source, location, score and ranks in ``metadata``."""

    index_name: str = "default"
    k: int = 10
    strategy: str | None = None
    _index: Index | None = PrivateAttr(default=None)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        if self._index is None:
            self._index = Index(self.index_name)  # opened once: the model and the query vectors stay loaded
        hits = self._index.search(query, k=self.k, strategy=self.strategy)
        return [Document(page_content=hit.content, metadata=hit_metadata(hit), id=hit.chunk_id) for hit in hits]
