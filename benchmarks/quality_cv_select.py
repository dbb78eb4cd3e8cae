"""quality_cv.py's selection: every variant scored per query (ctxrag.tasks.evaluation.metrics), its parameters (and, for cv-select,
the family) chosen per fold on the other folds, the held-out folds pooled."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np

from quality_cv_data import KS, Dataset
from quality_cv_fusion import PROBES, REFERENCES, VARIANTS
from ctxrag.tasks.evaluation.metrics import pass_at_k, recall_at_k, reciprocal_rank_at_k


def code_scores(data: Dataset, rows: list[list[int]]) -> np.ndarray:
    """Queries x KS Pass@k, with ctxrag.tasks.evaluation.metrics."""
    return np.array([[pass_at_k([data.refs[row] for row in ranking], query.golden, k) for k in KS] for query, ranking in zip(data.queries, rows)])


def docs_scores(data: Dataset, rows: list[list[int]]) -> np.ndarray:
    """Queries x (recall@3, MRR@3), with ctxrag.tasks.evaluation.metrics."""
    out = []
    for query, ranking in zip(data.queries, rows):
        retrieved = [data.refs[row] for row in ranking]
        out.append([recall_at_k(retrieved, query.golden, 3), reciprocal_rank_at_k(retrieved, query.golden, 3)])
    return np.array(out)


def run_variant(data: Dataset, function: Callable[..., list[int]], params: dict) -> list[list[int]]:
    return [function(data, query, **params) for query in data.queries]


def cross_validate(scores: np.ndarray, folds: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """scores: configs x queries x KS. Per fold: the config with the best training mean (first on ties) scores it."""
    held = np.zeros(scores.shape[1:])
    picks = []
    for fold in range(folds.max() + 1):
        train = folds != fold
        pick = int(np.argmax(scores[:, train, :].mean(axis=(1, 2))))
        picks.append(pick)
        held[~train] = scores[pick][~train]
    return held, picks


@dataclass
class Result:
    name: str
    about: str
    configs: list[tuple[str, dict]]  # (variant name, params)
    scores: np.ndarray  # configs x queries x KS
    plain: np.ndarray  # queries x KS of the config chosen on the whole set
    final: tuple[str, dict]
    cv: np.ndarray
    picks: list[tuple[str, dict]]
    cv_round_robin: np.ndarray
    docs: np.ndarray | None = None


def evaluate_variants(code: Dataset, folds: np.ndarray, folds_rr: np.ndarray, families: Iterable[str] | None = None) -> dict[str, Result]:
    """Every variant (or only ``families``) cross-validated, and ``cv-select`` over the non-reference, non-probe ones."""
    results: dict[str, Result] = {}
    every: list[tuple[str, dict]] = []
    blocks = []
    wanted = set(VARIANTS if families is None else families)
    for name, (function, params_grid, about) in VARIANTS.items():
        if name not in wanted:
            continue
        started = time.perf_counter()
        scores = np.stack([code_scores(code, run_variant(code, function, params)) for params in params_grid])
        configs = [(name, params) for params in params_grid]
        results[name] = summarize(name, about, configs, scores, folds, folds_rr)
        if name not in REFERENCES + PROBES:
            every += configs
            blocks.append(scores)
        print(f"{name}: {len(params_grid)} configurations, {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    results["cv-select"] = summarize("cv-select", "nested: family and parameters chosen per fold among all the above but the probes", every, np.concatenate(blocks), folds, folds_rr)
    return results


def summarize(name: str, about: str, configs: list[tuple[str, dict]], scores: np.ndarray, folds: np.ndarray, folds_rr: np.ndarray) -> Result:
    final = int(np.argmax(scores.mean(axis=(1, 2))))
    cv, picks = cross_validate(scores, folds)
    cv_rr, _ = cross_validate(scores, folds_rr)
    return Result(name, about, configs, scores, scores[final], configs[final], cv, [configs[p] for p in picks], cv_rr)


def check_docs(docs: Dataset, results: dict[str, Result]) -> None:
    for result in results.values():
        name, params = result.final
        result.docs = docs_scores(docs, run_variant(docs, VARIANTS[name][0], params)).mean(axis=0)
