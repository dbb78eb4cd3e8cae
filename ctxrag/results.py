"""What ``ctxrag.index``, ``ctxrag.evaluate`` and ``ctxrag.tune`` return: frozen dataclasses over the reports the
flows and ``ctxrag tune`` write (the objects ``ctxrag index --json`` and ``ctxrag tune --json`` print: ``to_dict``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

Result = TypeVar("Result", bound="_FromReport")


class _FromReport:
    @classmethod
    def from_dict(cls: type[Result], report: Mapping[str, object]) -> Result:
        """The result of ``report`` (its keys the fields' names; a key no field names is left out)."""
        names = {item.name for item in dataclasses.fields(cls)}  # type: ignore[arg-type]
        return cls(**{key: value for key, value in report.items() if key in names})

    def to_dict(self) -> dict[str, object]:
        """The report as the command prints it with ``--json``."""
        return {item.name: _plain(getattr(self, item.name)) for item in dataclasses.fields(self)}  # type: ignore[arg-type]


def _plain(value: object) -> object:
    return str(value) if isinstance(value, Path) else value


@dataclass(frozen=True)
class IndexReport(_FromReport):
    """What an index run did: ``status`` ``published`` (a new ``version`` is live) or ``unchanged``, the counts of
    documents (new, changed, unchanged, removed) and chunks (contextualized, embedded, reused), the paid calls and
    their cost, the quality gate's scores, seconds per stage, the corpus's warnings, its chunks per language and the
    files cut as plain text for want of a chunker."""

    index: str
    version: str
    status: str
    documents: int
    documents_new: int
    documents_changed: int
    documents_unchanged: int
    documents_removed: int
    chunks: int
    documents_contextualized: int
    chunks_contextualized: int
    chunks_embedded: int
    chunks_embedding_reused: int
    contextualizer_calls: dict[str, object]
    embedding_calls: dict[str, object]
    gate: dict[str, object] | None
    seconds: dict[str, float]
    warnings: list[str]
    chunks_by_language: dict[str, int] = dataclasses.field(
        default_factory=dict
    )  # most first (ctxrag.tasks.common.languages)
    read_as_plain_text: dict[str, object] = dataclasses.field(
        default_factory=dict
    )  # files no chunker knows: how many, the first 20
    chunked_by_regex: dict[str, object] = dataclasses.field(
        default_factory=dict
    )  # code files cut without a syntax tree: how many, the first 20


@dataclass(frozen=True)
class EvaluateResult(_FromReport):
    """An evaluation: ``metrics`` ({strategy: {metric: value}}), the run's folder and chart, the number of questions,
    golden chunks not in the index, rows not computed (and why), per row the unparseable judgements and the rerank
    fallbacks, the run's paid calls and the seconds the scoring took."""

    metrics: dict[str, dict[str, float]]
    run_dir: Path
    chart: Path
    queries: int
    missing_golden: list[str]
    unavailable: dict[str, str]
    unparseable_judgements: dict[str, int]
    rerank_fallbacks: dict[str, int]
    paid_calls: dict[str, object]
    seconds: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "run_dir", Path(self.run_dir))
        object.__setattr__(self, "chart", Path(self.chart))


@dataclass(frozen=True)
class TuneResult(_FromReport):
    """What the index keeps of a tuning: ``strategy`` (its configuration; None: the default stays) and ``label``,
    why (``reason``), the ``metric``, the numbers of ``questions``, ``documents`` and ``folds``, the held-out figure
    (``cv``) and the default's (``default``), every candidate's figure on all the questions (``scores``), each fold's
    pick, the set, the index version and when."""

    strategy: dict[str, object] | None
    label: str | None
    reason: str
    metric: str
    questions: int
    documents: int
    folds: int
    cv: float | None
    default: float | None
    scores: dict[str, float]
    fold_picks: list[str]
    evalset: str
    version: str
    tuned_at: str
