"""What a user chooses for ``index``, ``search`` and ``evaluate``, and the defaults: the one definition that the
flows' parameters, the ``ctxrag`` command's options, the Python API's keywords and a deployment's run form all read.

Each option is a dataclass field whose ``metadata`` holds its ``description`` (the command's help, and the Prefect
UI's form text: pydantic reads it) and, when the command's name differs from the field's, its ``flag``. The index
options are grouped (Claude, embedding, files, gate), each group a dataclass of its own; the command and the Python
API see them flat (``--rpm``, ``ctxrag.index(src, rpm=50)``), through ``flat_options`` and ``from_flat``. Adding an
index option is a field here and the code that reads it.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ctxrag.storage.errors import InvalidInput
from ctxrag.storage.names import DEFAULT_NAME  # noqa: F401  (the commands' and the API's)
from ctxrag.tasks.common.models import DEFAULT_MAX_FILE_BYTES
from ctxrag.tasks.common.providers import Provider
from ctxrag.tasks.common.search_request import SearchRequest
from ctxrag.tasks.context.claude.settings import ClaudeSettings
from ctxrag.tasks.embedding.embedder_spec import (
    DEFAULT_MAX_SEQ_LENGTH,
    LOCAL_CONTEXT_TOKENS,
    LOCAL_WINDOW_TOKENS,
    EmbedderSpec,
)
from ctxrag.tasks.evaluation.answer import EndToEnd

_JUDGE = EndToEnd()

Options = TypeVar("Options")


def about(description: str, flag: str | None = None, minimum: int | None = None) -> dict[str, Any]:
    """A field's metadata: its help text, its command-line name when not the field's, its least value."""
    return {"description": description, "flag": flag, "min": minimum}


@dataclass(frozen=True, kw_only=True)
class EmbeddingOptions:
    """Which model embeds the chunks, and how it reads them."""

    __pydantic_config__ = {"title": "Embedding"}

    embedder: str = field(
        default=Provider.LOCAL.value,
        metadata=about(
            "local (MiniLM shipped in a package, offline), voyage or voyage-context-3 (each chunk with its document; VOYAGE_API_KEY)."
        ),
    )
    embedding_model: str | None = field(
        default=None,
        metadata=about(
            "local: a model folder (sentence-transformers or ONNX bi-encoder) or a Hugging Face id (default: the packaged "
            "all-MiniLM-L6-v2). Voyage: its model (default voyage-2, or voyage-context-3 with --embedder voyage-context-3; "
            "voyage-3.5, voyage-code-3, ...)."
        ),
    )
    output_dimension: int | None = field(
        default=None, metadata=about("Voyage output dimension, where the model supports it.")
    )
    max_seq_length: int = field(
        default=DEFAULT_MAX_SEQ_LENGTH, metadata=about("Local embedding model's max word pieces per chunk.")
    )
    window_tokens: int = field(
        default=LOCAL_WINDOW_TOKENS,
        metadata=about(
            "Local model: embed a chunk as windows of this many word pieces and average them (0: the whole text, cut at "
            "--max-seq-length).",
            minimum=0,
        ),
    )
    context_tokens: int = field(
        default=LOCAL_CONTEXT_TOKENS,
        metadata=about(
            "Local model's windows: cut the context in front of each window to this many word pieces, its longest lines "
            "first (0: whole; BM25 always reads it whole).",
            minimum=0,
        ),
    )

    def spec(self) -> EmbedderSpec:
        """The embedder these options choose (a bad choice is an ``InvalidInput``)."""
        return EmbedderSpec.choose(
            self.embedder,
            self.embedding_model,
            self.max_seq_length,
            self.output_dimension,
            self.window_tokens,
            self.context_tokens,
        )


@dataclass(frozen=True, kw_only=True)
class FileOptions:
    """Which files of a folder SOURCE are read."""

    __pydantic_config__ = {"title": "Files"}

    include: list[str] | None = field(
        default=None,
        metadata=about(
            "Folder SOURCE: load only paths matching this gitignore-style pattern (relative to SOURCE; repeatable)."
        ),
    )
    exclude: list[str] | None = field(
        default=None,
        metadata=about(
            "Folder SOURCE: skip paths matching this gitignore-style pattern, on top of .gitignore files (repeatable)."
        ),
    )
    max_file_bytes: int = field(
        default=DEFAULT_MAX_FILE_BYTES,
        metadata=about("Folder SOURCE: skip larger files, with a warning (0: no limit).", minimum=0),
    )


@dataclass(frozen=True, kw_only=True)
class GateOptions:
    """The quality gate: a new version scoring worse than the live one on an evaluation set is discarded."""

    __pydantic_config__ = {"title": "Quality gate"}

    evalset: str | None = field(
        default=None,
        metadata=about("Evaluation set: refuse a new version scoring worse than the live one.", flag="gate"),
    )
    strategy: str | None = field(
        default=None,
        metadata=about("--gate: the strategy scored (default: the index's, as search).", flag="gate-strategy"),
    )
    metric: str | None = field(
        default=None,
        metadata=about("--gate: the metric (default pass@10, or recall@3 for docs sets).", flag="gate-metric"),
    )
    max_drop: float = field(
        default=0.02,
        metadata=about("--gate: the largest drop allowed (a fraction: 0.02 = 2 points).", flag="gate-max-drop"),
    )


@dataclass(frozen=True, kw_only=True)
class IndexOptions:
    """``ctxrag index``'s options: a flow parameter of its own (the UI's form groups them)."""

    __pydantic_config__ = {"title": "Index options"}

    contextualizer: str = field(
        default="structural", metadata=about("structural (offline, no LLM), none, claude, claude-summary.")
    )
    claude: ClaudeSettings = field(default_factory=ClaudeSettings, metadata=about("The Claude contextualizers' calls."))
    embedding: EmbeddingOptions = field(default_factory=EmbeddingOptions, metadata=about("The embedder."))
    backend: str = field(default="embedded", metadata=about("embedded (offline) or elasticsearch (ELASTICSEARCH_URL)."))
    files: FileOptions = field(default_factory=FileOptions, metadata=about("A folder SOURCE's files."))
    gate: GateOptions = field(default_factory=GateOptions, metadata=about("The quality gate."))
    task_runner: str | None = field(
        default=None,
        metadata=about(
            "threads (default) or dask (a local cluster, or CTXRAG_DASK_ADDRESS). A deployment's runs read "
            "CTXRAG_TASK_RUNNER instead: the flow's runner is chosen before it runs."
        ),
    )

    def contextualizer_claude(self) -> ClaudeSettings | None:
        """The Claude settings when the contextualizer is Claude's, else None."""
        return self.claude if self.contextualizer.startswith("claude") else None


_SEARCH = SearchRequest(query="-")  # a search's defaults (the search contract: ctxrag.tasks.common.search_request)


@dataclass(frozen=True, kw_only=True)
class EvaluateOptions:
    """``ctxrag evaluate``'s options; ``k`` and ``strategy`` take one value or several (None: the set's cut-offs,
    every strategy)."""

    __pydantic_config__ = {"title": "Evaluate options"}

    k: int | list[int] | None = field(
        default=None, metadata=about("Cut-offs (default: 5, 10, 20 for JSONL sets, 3 for docs sets).")
    )
    strategy: str | list[str] | None = field(
        default=None, metadata=about("Strategies (default: every one, and the index's tuned one).")
    )
    rerank: str = field(
        default=_SEARCH.rerank,
        metadata=about(
            "Add <strategy>+rerank-<provider> rows: cohere, claude, local:MODEL (a cross-encoder folder or id)."
        ),
    )
    rerank_model: str = field(default=_SEARCH.rerank_model, metadata=about("Reranker model."))
    end_to_end: bool = field(default=False, metadata=about("Add accuracy: Claude answers, a Claude judge grades."))
    answer_model: str = field(default=_JUDGE.answer_model, metadata=about("End to end: the answering model."))
    judge_model: str = field(default=_JUDGE.judge_model, metadata=about("End to end: the judging model."))
    subject: str = field(
        default=_JUDGE.subject, metadata=about("End to end: what the questions are about (judge prompt).")
    )
    server_rrf: bool = field(
        default=_SEARCH.server_rrf,
        metadata=about("Elasticsearch backend: hybrid fused by the cluster's rrf retriever."),
    )

    def __post_init__(self) -> None:
        if bad := [k for k in self.ks() or [] if k < 1]:
            raise InvalidInput(f"k must be at least 1 (--k 5,10,20), got {', '.join(map(str, bad))}")

    def ks(self) -> list[int] | None:
        return [self.k] if isinstance(self.k, int) else list(self.k) if self.k else None

    def strategies(self) -> list[str] | None:
        return [self.strategy] if isinstance(self.strategy, str) else list(self.strategy) if self.strategy else None


@dataclass(frozen=True)
class FlatOption:
    """One option as the command and the Python API name it: ``path`` leads to its field through the groups."""

    name: str  # the keyword (``gate_strategy``); the command's flag is ``--gate-strategy``
    path: tuple[str, ...]
    annotation: Any
    default: Any
    description: str
    minimum: int | None


def flat_options(kind: type) -> list[FlatOption]:
    """``kind``'s options, groups opened (a field whose type is a dataclass is a group)."""
    found: list[FlatOption] = []
    hints = typing.get_type_hints(kind)
    for item in dataclasses.fields(kind):
        annotation = hints[item.name]
        if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
            found += [dataclasses.replace(inner, path=(item.name, *inner.path)) for inner in flat_options(annotation)]
            continue
        if item.metadata.get("internal"):
            continue  # not a user's option (ClaudeSettings' fixed shapes: max_tokens, chunks_per_call, ...)
        default = item.default_factory() if item.default_factory is not dataclasses.MISSING else item.default
        flag = item.metadata.get("flag") or item.name
        found.append(
            FlatOption(
                flag.replace("-", "_"),
                (item.name,),
                annotation,
                default,
                item.metadata.get("description", ""),
                item.metadata.get("min"),
            )
        )
    return found


def from_flat(kind: type[Options], given: Mapping[str, Any], call: str) -> Options:
    """``kind`` from flat keywords (``rpm=50``, ``gate="set.json"``); an unknown one is an ``InvalidInput`` naming it
    and listing the others."""
    return _build(kind, nested(kind, given, call))


def nested(kind: type, given: Mapping[str, Any], call: str, into: dict[str, Any] | None = None) -> dict[str, Any]:
    """Flat keywords placed in their groups (``{"rpm": 50}`` -> ``{"claude": {"requests_per_minute": 50}}``), set
    in ``into`` (a deployment's options) when given."""
    options = {option.name: option for option in flat_options(kind)}
    if unknown := sorted(set(given) - set(options)):
        raise InvalidInput(f"{call}: unknown option {unknown[0]!r}; options: {', '.join(options)}")
    values: dict[str, Any] = into if into is not None else {}
    for name, value in given.items():
        *groups, leaf = options[name].path
        place = values
        for group in groups:
            place = place.setdefault(group, {})
        place[leaf] = value
    return values


def _build(kind: type[Options], values: Mapping[str, Any]) -> Options:
    hints = typing.get_type_hints(kind)
    return kind(
        **{
            key: _build(hints[key], value)
            if isinstance(value, dict) and dataclasses.is_dataclass(hints[key])
            else value
            for key, value in values.items()
        }
    )
