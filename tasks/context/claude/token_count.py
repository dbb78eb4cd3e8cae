"""Prompt token counts for a plan: the API's free ``count_tokens`` endpoint when a key is set, else ctxrag's estimate.

What is counted (so a plan costs few calls): per document (window), one ``count_tokens`` call on a message holding
only its cached document block; per model, two calls that measure what the per-document tool definition adds. The
rest of each prompt (the chunk's part) is ctxrag's estimate scaled by that document's counted/estimated ratio.
Counts are kept in the artifact store (``artifacts/token_counts``), keyed by model and block content, so a re-plan
of an unchanged document does not count it again.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from ctxrag.storage.artifacts import KEY, RowCache
from ctxrag.tasks.common.models import sha256_hex
from ctxrag.tasks.context.claude.client import ClaudeClient
from ctxrag.tasks.context.claude.contextualizer import CHARS_PER_TOKEN_ESTIMATE, estimate_tokens

COUNT_THREADS = 4  # count_tokens calls open at once (they have their own rate limit, apart from messages)
ESTIMATE = f"estimated ({CHARS_PER_TOKEN_ESTIMATE:g} characters a token, ctxrag's estimate; no key to count with)"
COUNTED = "counted by the API's count_tokens endpoint (document blocks; chunk parts scaled by each document's ratio)"


class TokenCounter(Protocol):
    source: str  # how the counts were made, said in the plan

    def documents(self, model: str, blocks: list[dict[str, Any]]) -> list[int]:
        """Tokens of a user message holding only each cached document block."""
        ...

    def tools(self, model: str, tools: list[dict[str, Any]], tool_choice: dict[str, Any]) -> int:
        """What a request's tool definitions (and forced tool choice) add to its prompt."""
        ...


class EstimatedCounts:
    """ctxrag's own estimate (``estimate_tokens``): no call at all."""

    source = ESTIMATE
    counted_now = 0
    reused = 0

    def documents(self, model: str, blocks: list[dict[str, Any]]) -> list[int]:
        return [estimate_tokens(block["text"]) for block in blocks]

    def tools(self, model: str, tools: list[dict[str, Any]], tool_choice: dict[str, Any]) -> int:
        return estimate_tokens(json.dumps(tools))


class CountedTokens:
    """``client.count_tokens`` per distinct block, remembered in the artifact store."""

    source = COUNTED

    def __init__(self, client: ClaudeClient, home: Path) -> None:
        self._client = client
        self._store = RowCache(home, "token_counts")
        table = self._store.read(columns=["tokens"])
        self._known: dict[str, int] = (
            {} if table is None else dict(zip(table[KEY].to_pylist(), table["tokens"].to_pylist()))
        )
        self.counted_now = 0
        self.reused = 0

    def documents(self, model: str, blocks: list[dict[str, Any]]) -> list[int]:
        requests = {
            self._key(model, block): {"model": model, "messages": [{"role": "user", "content": [block]}]}
            for block in blocks
        }
        self._count(requests)
        return [self._known[self._key(model, block)] for block in blocks]

    def tools(self, model: str, tools: list[dict[str, Any]], tool_choice: dict[str, Any]) -> int:
        message = [{"role": "user", "content": "x"}]
        requests: dict[str, dict[str, Any]] = {
            self._key(model, {"tools": tools, "tool_choice": tool_choice}): {
                "model": model,
                "messages": message,
                "tools": tools,
                "tool_choice": tool_choice,
            },
            self._key(model, {"bare": "x"}): {"model": model, "messages": message},
        }
        self._count(requests)
        with_tools, bare = (self._known[key] for key in requests)
        return max(0, with_tools - bare)

    def _count(self, requests: dict[str, dict[str, Any]]) -> None:
        """Count what is not known yet (a few calls at once) and store each count as it arrives."""
        missing = [key for key in requests if key not in self._known]
        self.reused += len(requests) - len(missing)

        def one(key: str) -> None:
            tokens = self._client.count_tokens(**requests[key])
            self._store.append_rows([{KEY: key, "tokens": tokens}])
            self._known[key] = tokens

        with ThreadPoolExecutor(max_workers=COUNT_THREADS) as pool:
            list(pool.map(one, missing))
        self.counted_now += len(missing)

    @staticmethod
    def _key(model: str, content: dict[str, Any]) -> str:
        return sha256_hex(model, json.dumps(content, sort_keys=True))[:40]
