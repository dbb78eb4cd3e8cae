"""What a user chooses for ``index``, ``search`` and ``evaluate``, and the defaults: the one definition that the
flows' signatures, the ``ctxrag`` command and the Python API (``ctxrag.index(source, **options)``) all read.

Names are the command's (``--gate`` is ``gate``, ``--rpm`` is ``rpm``); ``flow_parameters`` turns them into the
flows' parameters. A default that belongs to a lower part (the Claude settings, the embedder's sequence length) is
read from there, not restated; a strategy left at None is the index's own (``ctxrag.tasks.retrieval.search.strategy_of``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping, TypeVar

from ctxrag.storage.errors import InvalidInput
from ctxrag.tasks.context.claude.settings import ClaudeSettings
from ctxrag.tasks.embedding.embedder_spec import DEFAULT_MAX_SEQ_LENGTH, LOCAL_CONTEXT_TOKENS, LOCAL_WINDOW_TOKENS, EmbedderSpec
from ctxrag.tasks.evaluation.answer import EndToEnd
from ctxrag.tasks.load import DEFAULT_MAX_FILE_BYTES

DEFAULT_NAME = "default"  # the index a command or call uses when none is named
_CLAUDE = ClaudeSettings()
_JUDGE = EndToEnd()

Options = TypeVar("Options")


def options_of(kind: type[Options], given: Mapping[str, Any], call: str) -> Options:
    """``kind`` from keyword options; an unknown one is an ``InvalidInput`` naming it and listing the others."""
    known = [item.name for item in dataclasses.fields(kind)]  # type: ignore[arg-type]
    if unknown := sorted(set(given) - set(known)):
        raise InvalidInput(f"{call}: unknown option {unknown[0]!r}; options: {', '.join(known)}")
    return kind(**given)


@dataclass(frozen=True, kw_only=True)
class IndexOptions:
    """``ctxrag index``'s options."""

    contextualizer: str = "structural"  # structural (offline), none, claude, claude-summary
    max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH
    window_tokens: int = LOCAL_WINDOW_TOKENS
    context_tokens: int = LOCAL_CONTEXT_TOKENS
    backend: str = "embedded"  # or elasticsearch
    embedder: str = "local"  # or voyage
    embedding_model: str | None = None
    output_dimension: int | None = None
    model: str = _CLAUDE.model
    claude_mode: str = _CLAUDE.mode
    cache_ttl: str = _CLAUDE.cache_ttl
    concurrency: int = _CLAUDE.concurrency
    rpm: float | None = None
    tpm: float | None = None
    corpus_description: str = _CLAUDE.corpus_description
    task_runner: str | None = None  # threads (default) or dask
    gate: str | None = None  # an evaluation set the new version must not score worse on
    gate_strategy: str | None = None  # None: the live index's strategy (tuned, or the default)
    gate_metric: str | None = None
    gate_max_drop: float = 0.02
    include: list[str] | None = None
    exclude: list[str] | None = None
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES

    def claude(self) -> dict[str, Any] | None:
        """The ``ClaudeSettings`` fields of a Claude contextualizer, else None."""
        if not self.contextualizer.startswith("claude"):
            return None
        return {
            "model": self.model, "mode": self.claude_mode, "cache_ttl": self.cache_ttl, "concurrency": self.concurrency,
            "requests_per_minute": self.rpm, "tokens_per_minute": self.tpm, "corpus_description": self.corpus_description,
        }

    def embedder_spec(self) -> EmbedderSpec:
        """The embedder these options choose (a bad choice is an ``InvalidInput``)."""
        return EmbedderSpec.choose(self.embedder, self.embedding_model, self.max_seq_length, self.output_dimension,
                                   self.window_tokens, self.context_tokens)

    def flow_parameters(self, source: str, name: str) -> dict[str, Any]:
        """The ``index_corpus`` flow's parameters (``task_runner`` is not one: it chooses how the flow runs)."""
        return {
            "source": source, "name": name, "contextualizer": self.contextualizer, "max_seq_length": self.max_seq_length,
            "window_tokens": self.window_tokens, "context_tokens": self.context_tokens, "claude": self.claude(),
            "embedder": self.embedder, "embedding_model": self.embedding_model, "output_dimension": self.output_dimension,
            "backend": self.backend,
            "gate_evalset": self.gate, "gate_strategy": self.gate_strategy, "gate_metric": self.gate_metric,
            "gate_max_drop": self.gate_max_drop, "include": list(self.include) if self.include else None,
            "exclude": list(self.exclude) if self.exclude else None, "max_file_bytes": self.max_file_bytes,
        }


@dataclass(frozen=True, kw_only=True)
class SearchOptions:
    """``ctxrag search``'s options."""

    k: int = 10
    strategy: str | None = None  # None: the index's strategy (what ctxrag tune chose, or the default)
    rerank: str = "none"  # cohere, claude, local:PATH
    rerank_model: str = ""  # the provider's default when empty
    server_rrf: bool = False  # Elasticsearch backend: hybrid fused by the cluster


_SEARCH = SearchOptions()


@dataclass(frozen=True, kw_only=True)
class EvaluateOptions:
    """``ctxrag evaluate``'s options; ``k`` and ``strategy`` take one value or several (None: the set's cut-offs,
    every strategy)."""

    k: int | list[int] | None = None
    strategy: str | list[str] | None = None
    rerank: str = _SEARCH.rerank
    rerank_model: str = _SEARCH.rerank_model
    end_to_end: bool = False
    answer_model: str = _JUDGE.answer_model
    judge_model: str = _JUDGE.judge_model
    subject: str = _JUDGE.subject
    server_rrf: bool = _SEARCH.server_rrf

    def __post_init__(self) -> None:
        if bad := [k for k in self.ks() or [] if k < 1]:
            raise InvalidInput(f"k must be at least 1 (--k 5,10,20), got {', '.join(map(str, bad))}")

    def ks(self) -> list[int] | None:
        return [self.k] if isinstance(self.k, int) else list(self.k) if self.k else None

    def strategies(self) -> list[str] | None:
        return [self.strategy] if isinstance(self.strategy, str) else list(self.strategy) if self.strategy else None

    def flow_parameters(self, evalset: str, name: str) -> dict[str, Any]:
        """The ``evaluate_index`` flow's parameters."""
        return {
            "evalset": evalset, "name": name, "ks": self.ks(), "strategies": self.strategies(), "rerank": self.rerank,
            "rerank_model": self.rerank_model, "end_to_end": self.end_to_end, "answer_model": self.answer_model,
            "judge_model": self.judge_model, "subject": self.subject, "server_rrf": self.server_rrf,
        }
