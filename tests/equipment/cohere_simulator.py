"""Local simulator of the Cohere v2 rerank API (``POST /v2/rerank``) — TEST EQUIPMENT.

It keeps the public request/response/error contract so the real ``cohere`` SDK can be
pointed at it (``cohere.ClientV2(api_key="test", base_url=sim.url, max_retries=0)``;
``sim.url`` has no path: the SDK appends ``v2/rerank`` itself). Its relevance scores are
a deterministic word-overlap heuristic and its billing is SIMULATED: never quote anything
it produces as a quality or cost figure.

Contract kept (docs.cohere.com/reference/rerank, SDK cohere 7.3.1):

* ``Authorization: Bearer <key>`` is required, otherwise 401.
* Body: ``model`` (accepted when it starts with ``rerank-``), ``query`` (non-empty string),
  ``documents`` (1..``MAX_DOCUMENTS`` strings — v2 takes plain strings, and has no
  ``return_documents``), optional ``top_n`` (>= 1), ``max_tokens_per_doc`` (>= 1, default
  4096); ``relevant_spans`` / ``priority`` are accepted and ignored.
* Errors are ``{"message": "..."}`` with status 400 / 401 (429, 5xx via ``fail_next``).
* Response: ``{"id", "results": [{"index", "relevance_score"}...] sorted by score desc and
  cut to top_n, "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units"}}}``.

Simulated rules:

* tokens = ceil(UTF-8 bytes / 4); a document is truncated to ``max_tokens_per_doc`` tokens
  (its first 4 x max_tokens_per_doc bytes) before scoring and billing;
* relevance = 0.999 x (fraction of distinct query words present in the document)
  + 0.001 x (1 - index / n), a tiny tie-break favouring earlier documents; always in [0, 1];
* billing: each document counts as ceil((query tokens + document tokens) / 500) chunks
  (at least 1) and search_units = ceil(total chunks / 100): 1 unit per query per 100
  short documents, long documents count as several.
"""

from __future__ import annotations

import math
import re
import uuid
from typing import Any

from tests.equipment._http import RecordedRequest, Reply, SimulatorServer

__all__ = ["CohereSimulator", "MAX_DOCUMENTS", "relevance", "search_units", "RecordedRequest"]

MAX_DOCUMENTS = 1_000
DEFAULT_MAX_TOKENS_PER_DOC = 4_096
CHUNK_TOKENS = 500
DOCUMENTS_PER_SEARCH_UNIT = 100
_WORD = re.compile(r"\w+", re.UNICODE)


def simulated_tokens(text: str) -> int:
    """SIMULATED token count: ceil(UTF-8 bytes / 4)."""
    return math.ceil(len(text.encode("utf-8")) / 4)


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """Keep the first ``4 * max_tokens`` UTF-8 bytes (the simulated truncation)."""
    raw = text.encode("utf-8")
    limit = 4 * max_tokens
    return text if len(raw) <= limit else raw[:limit].decode("utf-8", errors="ignore")


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def relevance(query: str, document: str, index: int, n_documents: int) -> float:
    """Simulated relevance score in [0, 1] (see the module docstring)."""
    query_words = _words(query)
    overlap = len(query_words & _words(document)) / len(query_words) if query_words else 0.0
    return 0.999 * overlap + 0.001 * (1.0 - index / max(n_documents, 1))


def search_units(query: str, documents: list[str]) -> int:
    """Simulated billed search units for already-truncated ``documents``."""
    query_tokens = simulated_tokens(query)
    chunks = sum(max(1, math.ceil((query_tokens + simulated_tokens(d)) / CHUNK_TOKENS)) for d in documents)
    return max(1, math.ceil(chunks / DOCUMENTS_PER_SEARCH_UNIT))


def _positive_int_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1)


class CohereSimulator(SimulatorServer):
    """Cohere v2 rerank API on 127.0.0.1; ``url`` is ``http://127.0.0.1:PORT`` (no path)."""

    base_path = ""

    def error_body(self, status: int, message: str) -> Any:
        return {"id": str(uuid.uuid4()), "message": message}

    def handle(self, request: RecordedRequest) -> Reply:
        auth = request.headers.get("authorization", "")
        if not auth.startswith("Bearer ") or not auth[len("Bearer ") :].strip():
            return self.error(401, "invalid api token")
        if request.method != "POST" or request.path.split("?")[0] != "/v2/rerank":
            return self.error(404, f"Not found: {request.method} {request.path}")
        body = request.json
        if not isinstance(body, dict):
            return self.error(400, "invalid request: body must be a JSON object.")
        problem = self._validate(body)
        if problem is not None:
            return self.error(400, f"invalid request: {problem}")

        query: str = body["query"]
        max_tokens = body.get("max_tokens_per_doc") or DEFAULT_MAX_TOKENS_PER_DOC
        documents = [truncate_to_tokens(d, max_tokens) for d in body["documents"]]
        n = len(documents)
        scored = [(relevance(query, d, i, n), i) for i, d in enumerate(documents)]
        scored.sort(key=lambda pair: (-pair[0], pair[1]))
        top_n = body.get("top_n")
        if top_n is not None:
            scored = scored[:top_n]
        return Reply(
            200,
            {
                "id": str(uuid.uuid4()),
                "results": [{"index": i, "relevance_score": score} for score, i in scored],
                "meta": {
                    "api_version": {"version": "2"},
                    "billed_units": {"search_units": search_units(query, documents)},
                },
            },
        )

    @staticmethod
    def _validate(body: dict[str, Any]) -> str | None:
        model = body.get("model")
        if not isinstance(model, str) or not model.startswith("rerank-"):
            return f"model '{model}' not found, make sure the correct model ID was used and that you have access to the model."
        query = body.get("query")
        if not isinstance(query, str) or not query.strip():
            return "query must not be empty."
        documents = body.get("documents")
        if not isinstance(documents, list) or not documents:
            return "documents must be a non-empty list of strings."
        if not all(isinstance(d, str) for d in documents):
            return "documents must be strings in the v2 API."
        if len(documents) > MAX_DOCUMENTS:
            return f"too many documents: got {len(documents)}, the maximum is {MAX_DOCUMENTS}."
        if not _positive_int_or_none(body.get("top_n")):
            return "top_n must be a positive integer."
        if not _positive_int_or_none(body.get("max_tokens_per_doc")):
            return "max_tokens_per_doc must be a positive integer."
        return None
