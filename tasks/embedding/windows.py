"""Windows of a long chunk for the local model: the chunk's context with each run of whole lines of its text.

MiniLM reads 512 word pieces and was trained on short passages, so a long chunk's vector is dominated by its first
few hundred word pieces and blurred by the rest. The local embedder instead embeds windows of at most
``window_tokens`` word pieces, each the chunk's context followed by a run of whole lines of its text, and averages
their vectors (``pooled_rows``): every line of the chunk is read, and every window knows which file or page it is in.

The context is repeated in every window, so a long one takes most of each window's word pieces (and most of the
embedding time). ``cap_context`` shortens it to a number of word pieces before it is written in front of the chunk.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from functools import lru_cache

import numpy as np

from ctxrag.tasks.common.models import indexed_text

HEAD_SEPARATOR = "\n\n"  # between the context and the chunk's text, in a windowed spec's embedded text
_BLANK_LINES = re.compile(r"\n{2,}")  # a context's own blank lines: one newline in the windowed text
TokenCounter = Callable[[list[str]], list[int]]  # word pieces of each string, special tokens excluded


def windowed_text(context: str, content: str) -> str:
    """The embedded text of a windowed spec: the context, a blank line, the chunk (always, so it splits back)."""
    head = _BLANK_LINES.sub("\n", context.rstrip("\n"))
    return f"{head}{HEAD_SEPARATOR}{content}"


def cap_context(context: str, limit: int, count_tokens: TokenCounter) -> str:
    """``context`` in at most ``limit`` word pieces: its longest lines are shortened first, each to the same number of
    word pieces and cut at a word boundary, so every line keeps its start (the file's name, the first words of its
    opening comment, the first defined names, the definitions enclosing the chunk). A line with no whole word left
    goes; a context within the limit is unchanged. Word pieces add up over lines and over space-separated words
    (the model's tokenizer splits at whitespace before it splits words), so nothing is counted twice."""
    return cap_contexts([context], limit, count_tokens)[0]


def cap_contexts(contexts: list[str], limit: int, count_tokens: TokenCounter) -> list[str]:
    """``cap_context`` of each context, the words of all of them counted in one call."""
    long = [number for number, context in enumerate(contexts) if len(context.encode("utf-8")) > limit]  # a word piece
    lines = [[line.split(" ") for line in contexts[number].split("\n")] for number in long]  # covers 1 byte or more
    counts = iter(count_tokens([word for words in lines for line in words for word in line]))
    capped = list(contexts)
    for number, words in zip(long, lines):
        pieces = [[next(counts) for _ in line] for line in words]
        totals = [sum(line) for line in pieces]
        if sum(totals) <= limit:
            continue
        level = _water_level(totals, limit)
        kept = [
            " ".join(line if total <= level else _first_words(line, line_pieces, level)).rstrip()
            for line, line_pieces, total in zip(words, pieces, totals)
        ]
        capped[number] = "\n".join(line for line in kept if line)
    return capped


def cap_local_contexts(contexts: list[str], limit: int) -> list[str]:
    """``cap_contexts`` counted in the packaged model's word pieces, each long context's result remembered by the
    process (the ``CAPPED_KEPT`` last): a second pass over a run's rows, or the next run of a process that stays
    (``ctxrag index --watch``), counts the word pieces of only the contexts it has not seen (a one-file change of a
    604-chunk folder: 1.5 s of counting before)."""
    with _capped_lock:
        long = [context for context in dict.fromkeys(contexts) if len(context.encode("utf-8")) > limit]
        todo = [context for context in long if (context, limit) not in _capped]
        for context, capped in zip(todo, cap_contexts(todo, limit, local_word_pieces)):
            _capped[(context, limit)] = capped
        for context in long:
            _capped.move_to_end((context, limit))
        result = [_capped.get((context, limit), context) for context in contexts]
        while len(_capped) > CAPPED_KEPT:
            _capped.popitem(last=False)  # the least recently used
        return result


CAPPED_KEPT = 65_536  # capped contexts a process remembers (a few tens of MB at most)
_capped: OrderedDict[tuple[str, int], str] = OrderedDict()
_capped_lock = threading.Lock()


def _water_level(counts: list[int], limit: int) -> int:
    """The largest number of word pieces L such that the lines, each cut to at most L, hold at most ``limit``."""
    remaining, ordered = limit, sorted(counts)
    for position, tokens in enumerate(ordered):
        share = remaining // (len(ordered) - position)
        if tokens > share:
            return share
        remaining -= tokens
    return ordered[-1]


def _first_words(words: list[str], pieces: list[int], limit: int) -> list[str]:
    """The longest run of ``words`` from the first within ``limit`` word pieces (none if the first does not fit)."""
    used = 0
    for number, tokens in enumerate(pieces):
        used += tokens
        if used > limit:
            return words[:number]
    return words


@lru_cache(maxsize=1)
def _local_tokenizer():  # type: ignore[no-untyped-def]
    """The packaged MiniLM's own tokenizer (``tokenizers``: no torch), for counting word pieces."""
    from tokenizers import Tokenizer

    from ctxrag.tasks.embedding.model_sources import packaged_model_path

    tokenizer = Tokenizer.from_file(str(packaged_model_path() / "tokenizer.json"))
    tokenizer.no_truncation()  # the file's own settings pad and cut at 128
    tokenizer.no_padding()
    return tokenizer


def local_word_pieces(texts: list[str]) -> list[int]:
    """Word pieces of each text as the packaged local model reads it, special tokens excluded, not truncated."""
    return [len(ids) for ids in local_piece_ids(texts)]


def local_piece_ids(texts: list[str]) -> list[list[int]]:
    """Word-piece ids of each text as the packaged local model reads it, special tokens excluded, not truncated (the
    ids transformers' tokenizer of the model gives: the same ``tokenizer.json``)."""
    if not texts:
        return []
    tokenizer = _local_tokenizer()
    encode = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)  # no offsets: faster (tokenizers 0.21+)
    return [encoding.ids for encoding in encode(texts, add_special_tokens=False)]


@lru_cache(maxsize=1)
def local_special_ids() -> tuple[int, int, int]:
    """The local model's [CLS], [SEP] and [PAD] ids."""
    tokenizer = _local_tokenizer()
    return tuple(tokenizer.token_to_id(token) for token in ("[CLS]", "[SEP]", "[PAD]"))  # type: ignore[return-value]


def split_windows(text: str, window_tokens: int, count_tokens: TokenCounter) -> list[str]:
    """``text`` (from ``windowed_text``) as windows: the context with runs of whole lines of at most
    ``window_tokens`` word pieces together; a run holds at least a quarter of that budget when the context is long,
    and a line longer than the budget is a window on its own (the model cuts it at its maximum)."""
    context, _, content = text.partition(HEAD_SEPARATOR)
    lines = content.split("\n")
    head_tokens, *line_tokens = count_tokens([context, *lines])
    return [
        indexed_text(context, "\n".join(lines[start:end]))
        for start, end in window_runs(head_tokens, line_tokens, window_tokens)
    ]


def window_runs(head_tokens: int, line_tokens: list[int], window_tokens: int) -> list[tuple[int, int]]:
    """Where ``split_windows`` splits a chunk's lines (their word pieces ``line_tokens``) behind a context of
    ``head_tokens``: (first line, line after the last) of each run."""
    budget = max(window_tokens - head_tokens, window_tokens // 4)
    runs: list[tuple[int, int]] = []
    start, used = 0, 0
    for number, tokens in enumerate(line_tokens):
        if number > start and used + tokens > budget:
            runs.append((start, number))
            start, used = number, 0
        used += tokens
    return [*runs, (start, len(line_tokens))]


def pooled_rows(vectors: np.ndarray, owners: list[int], rows: int) -> np.ndarray:
    """Unit-length mean of the window ``vectors`` of each of ``rows`` texts (``owners[i]``: the text of window i)."""
    pooled = np.zeros((rows, vectors.shape[1]), dtype=np.float32)
    np.add.at(pooled, np.asarray(owners), vectors)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return pooled / np.where(norms == 0, 1.0, norms)
