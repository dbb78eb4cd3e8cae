"""Windows of a long chunk for the local model: the chunk's context with each run of whole lines of its text.

MiniLM reads 512 word pieces and was trained on short passages, so a long chunk's vector is dominated by its first
few hundred word pieces and blurred by the rest. The local embedder instead embeds windows of at most
``window_tokens`` word pieces, each the chunk's context followed by a run of whole lines of its text, and averages
their vectors (``pooled_rows``): every line of the chunk is read, and every window knows which file or page it is in.
"""

from __future__ import annotations

import re
from typing import Callable

import numpy as np

from ctxrag.tasks.common.models import indexed_text

HEAD_SEPARATOR = "\n\n"  # between the context and the chunk's text, in a windowed spec's embedded text
_BLANK_LINES = re.compile(r"\n{2,}")  # a context's own blank lines: one newline in the windowed text
TokenCounter = Callable[[list[str]], list[int]]  # word pieces of each string, special tokens excluded


def windowed_text(context: str, content: str) -> str:
    """The embedded text of a windowed spec: the context, a blank line, the chunk (always, so it splits back)."""
    head = _BLANK_LINES.sub("\n", context.rstrip("\n"))
    return f"{head}{HEAD_SEPARATOR}{content}"


def split_windows(text: str, window_tokens: int, count_tokens: TokenCounter) -> list[str]:
    """``text`` (from ``windowed_text``) as windows: the context with runs of whole lines of at most
    ``window_tokens`` word pieces together; a run holds at least a quarter of that budget when the context is long,
    and a line longer than the budget is a window on its own (the model cuts it at its maximum)."""
    context, _, content = text.partition(HEAD_SEPARATOR)
    lines = content.split("\n")
    head_tokens, *line_tokens = count_tokens([context, *lines])
    budget = max(window_tokens - (head_tokens if context else 0), window_tokens // 4)
    runs: list[list[str]] = [[]]
    used = 0
    for line, tokens in zip(lines, line_tokens):
        if runs[-1] and used + tokens > budget:
            runs.append([])
            used = 0
        runs[-1].append(line)
        used += tokens
    return [indexed_text(context, "\n".join(run)) for run in runs]


def pooled_rows(vectors: np.ndarray, owners: list[int], rows: int) -> np.ndarray:
    """Unit-length mean of the window ``vectors`` of each of ``rows`` texts (``owners[i]``: the text of window i)."""
    pooled = np.zeros((rows, vectors.shape[1]), dtype=np.float32)
    np.add.at(pooled, np.asarray(owners), vectors)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return pooled / np.where(norms == 0, 1.0, norms)
