"""``ctxrag tune``: the user's own questions choose an index's search strategy and its parameters.

Every candidate (``CANDIDATES``: each strategy, ``hybrid``'s RRF constant, ``hybrid-score``'s vector weight) is
scored on every question from one pair of rankings per question. The choice is made by cross-validation grouped by
document: the questions are split into folds so that all questions about one document fall in the same fold; for
each fold the candidate with the best mean metric on the other folds is scored on it. The held-out mean of those
picks (``cv``) estimates what tuning is worth on questions not yet asked; the index keeps the candidate that is best
on all the questions only if ``cv`` beats the default, and with fewer than ``MINIMUM_QUESTIONS`` questions nothing
is chosen. Ties go to the default, then to the earlier candidate.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ctxrag.storage.errors import InvalidInput
from ctxrag.storage.fusion import FUSION_DEPTH
from ctxrag.tasks.evaluation.evalset import EvalFormat, EvalSet
from ctxrag.tasks.evaluation.evaluate import chunk_refs, query_metrics
from ctxrag.tasks.retrieval.fusion import SCORE_FUSION_VECTOR_WEIGHT
from ctxrag.tasks.retrieval.search import DEFAULT_STRATEGY, Searcher, Strategy, StrategyConfig

MINIMUM_QUESTIONS = 30  # fewer cannot tell a few points of difference from chance: the default stays
FOLDS = 5
_STRATEGIES = [Strategy.VECTOR, Strategy.BM25, Strategy.HYBRID_WEIGHTED, Strategy.HYBRID_DOC]
CANDIDATES: list[StrategyConfig] = (
    [StrategyConfig.from_str(DEFAULT_STRATEGY)]
    + [
        StrategyConfig(Strategy.HYBRID_SCORE, vector_weight=weight)
        for weight in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
        if weight != SCORE_FUSION_VECTOR_WEIGHT
    ]
    + [StrategyConfig(Strategy.HYBRID, rrf_k=k) for k in (60, 10, 2)]
    + [StrategyConfig(strategy) for strategy in _STRATEGIES]
)


@dataclass(frozen=True)
class Tuning:
    """What ``tune`` found: the choice (None: the default stays, ``reason`` says why) and the figures behind it."""

    choice: StrategyConfig | None
    reason: str
    metric: str
    questions: int
    documents: int
    folds: int
    cv: float | None  # held-out mean of the per-fold picks
    default: float  # the default's mean on all the questions
    scores: dict[str, float]  # each candidate's mean on all the questions
    fold_picks: list[str]

    def record(self, evalset: str, version: str) -> dict[str, Any]:
        """What the index keeps (``IndexStore.save_tuning``); ``strategy`` is None when the default stays."""
        return {
            "strategy": self.choice.to_dict() if self.choice else None,
            "label": self.choice.label if self.choice else None,
            "reason": self.reason,
            "metric": self.metric,
            "questions": self.questions,
            "documents": self.documents,
            "folds": self.folds,
            "cv": self.cv,
            "default": self.default,
            "scores": self.scores,
            "fold_picks": self.fold_picks,
            "evalset": str(Path(evalset).resolve()),
            "version": version,
            "tuned_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }


def default_metric(evalset: EvalSet) -> str:
    """pass@10 for Pass@k sets (the cookbook's), mrr@10 for docs sets (their questions have few golden chunks)."""
    return "pass@10" if evalset.format is EvalFormat.PASS_AT_K else "mrr@10"


def score_candidates(searcher: Searcher, evalset: EvalSet, metric: str, refs: list[str]) -> np.ndarray:
    """The metric of every candidate (rows) on every question (columns), from one pair of rankings per question;
    ``refs``: how each index row is named in the set (``chunk_refs``)."""
    family, _, cut = metric.partition("@")
    if not cut.isdigit() or int(cut) < 1 or f"{family}@1" not in query_metrics(evalset.format, [], [], [1]):
        choices = ", ".join(name.removesuffix("@1") + "@K" for name in query_metrics(evalset.format, [], [], [1]))
        raise InvalidInput(f"cannot tune on metric {metric!r} for {Path(evalset.path).name}; choose one of: {choices}")
    k = int(cut)
    searcher.prefetch([question.query for question in evalset.queries])
    values = np.zeros((len(CANDIDATES), len(evalset.queries)))
    for column, question in enumerate(evalset.queries):
        rankings = searcher.rankings(question.query, max(k, FUSION_DEPTH))
        for row, config in enumerate(CANDIDATES):
            retrieved = [refs[hit.row] for hit in searcher.fuse(question.query, config, rankings, k)]
            values[row, column] = query_metrics(evalset.format, retrieved, list(question.golden), [k])[metric]
    return values


def document_groups(searcher: Searcher, evalset: EvalSet, refs: list[str]) -> list[str]:
    """Each question's group: the document of its first golden chunk (the chunk reference itself if not indexed)."""
    document_of = dict(zip(refs, searcher.index.chunks["doc_id"].to_pylist()))
    return [
        document_of.get(question.golden[0], question.golden[0]) if question.golden else ""
        for question in evalset.queries
    ]


def tune(searcher: Searcher, evalset: EvalSet, metric: str | None = None) -> Tuning:
    """Choose the index's strategy on ``evalset`` (see the module's docstring)."""
    metric = metric or default_metric(evalset)
    refs = chunk_refs(searcher, evalset)
    return decide(score_candidates(searcher, evalset, metric, refs), document_groups(searcher, evalset, refs), metric)


def decide(values: np.ndarray, groups: list, metric: str) -> Tuning:
    """The choice from every candidate's ``metric`` (rows, ``CANDIDATES``' order) on every question (columns), each
    question in a group (its document) for the folds."""
    means = values.mean(axis=1) if values.size else np.zeros(len(CANDIDATES))
    scores = {config.label: round(float(value), 6) for config, value in zip(CANDIDATES, means)}
    documents, questions, default = len(set(groups)), len(groups), float(means[0])

    def result(
        choice: StrategyConfig | None,
        reason: str,
        folds: int = 0,
        cv: float | None = None,
        picks: list[str] | None = None,
    ) -> Tuning:
        return Tuning(choice, reason, metric, questions, documents, folds, cv, default, scores, picks or [])

    if questions < MINIMUM_QUESTIONS:
        return result(
            None,
            f"{questions} questions are too few to choose on ({MINIMUM_QUESTIONS} or more needed): the default stays",
        )
    folds, held_out, fold_picks = cross_validate(values, groups)
    picks = [CANDIDATES[pick].label for pick in fold_picks]
    cv = float(held_out.mean())
    best = _best(means)
    if best == 0:
        return result(None, f"the default is the best on these questions ({metric} {default:.4f})", folds, cv, picks)
    if folds < 2 or cv <= default:
        return result(
            None,
            f"tuning did not beat the default on held-out questions ({metric}: cross-validated {cv:.4f}, "
            f"default {default:.4f}): the default stays",
            folds,
            cv,
            picks,
        )
    reason = (
        f"{CANDIDATES[best].label} is the best on all {questions} questions ({metric} {means[best]:.4f}, default "
        f"{default:.4f}); choosing so held out scores {cv:.4f} across {folds} folds grouped by document"
    )
    return result(CANDIDATES[best], reason, folds, cv, picks)


def cross_validate(values: np.ndarray, groups: list) -> tuple[int, np.ndarray, list[int]]:
    """Candidates (rows of ``values``) x questions (columns), each question in a group (its document): the number of
    folds, each question's held-out value (the candidate best on the other folds), and each fold's pick."""
    fold_of = fold_assignment(groups, min(FOLDS, len(set(groups))))
    folds = int(fold_of.max()) + 1
    held_out = np.zeros(values.shape[1])
    picks = []
    for fold in range(folds):
        train, test = fold_of != fold, fold_of == fold
        picks.append(_best(values[:, train].mean(axis=1)))
        held_out[test] = values[picks[-1], test]
    return folds, held_out, picks


def fold_assignment(groups: list, folds: int) -> np.ndarray:
    """A fold per question: groups (documents) are shuffled with a fixed seed and dealt out in turn, so a
    document's questions share a fold and the same set always splits the same way."""
    names = sorted(set(groups))
    order = np.random.default_rng(0).permutation(len(names))
    fold_of_group = {names[index]: position % max(folds, 1) for position, index in enumerate(order)}
    return np.array([fold_of_group[group] for group in groups], dtype=int)


def _best(means: np.ndarray) -> int:
    """The first candidate with the highest mean (the default is first, so it wins ties)."""
    return int(np.flatnonzero(means >= means.max() - 1e-12)[0])
