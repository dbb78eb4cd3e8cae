"""The suite's strategies, their leave-one-corpus-out (LOCO) selection, what ``ctxrag tune`` keeps, the bootstrap.

The configurations are the product's strategies (``FIXED``) and ``ctxrag tune``'s candidates, each a
``StrategyConfig`` label ranked by the product's fusion (suite_sets.SetData.rank). ``select`` chooses among them: on
training sets, the configuration with the best mean over those sets of each set's mean primary metric (every set
weighs the same), the first on ties. LOCO: the unit is the corpus; with each corpus out, ``select`` chooses on the
other corpora's sets and is scored on that corpus's sets.
``tuned``: the product's own decision (``ctxrag.tasks.evaluation.tune.decide``) over a set's own questions.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

RESAMPLES = 10_000
FIXED = ("bm25", "vector", "hybrid", "hybrid-weighted", "hybrid-doc", "hybrid-score")


def configs() -> list[str]:
    """The product's strategies, then ``ctxrag tune``'s other candidates in their order."""
    from ctxrag.tasks.evaluation.tune import CANDIDATES

    return list(dict.fromkeys([*FIXED, *(config.label for config in CANDIDATES)]))


def matrix(home: Path, data, grid: list[str]) -> np.ndarray:
    """configs x questions: the set's primary metric of every configuration, cached beside the set's rankings (keyed by
    them: a re-built index gives new scores)."""
    key = hashlib.sha256(json.dumps([grid, data.primary, data.texts, data.rankings]).encode()).hexdigest()[:16]
    path = home / "suite" / f"{data.name}.scores-{key}.npy"
    if path.exists():
        return np.load(path)
    started = time.perf_counter()
    out = np.array(
        [[data.score(i, data.rank(i, label), [data.primary])[0] for i in range(len(data.texts))] for label in grid]
    )
    np.save(path, out)
    print(
        f"{data.name}: {len(grid)} configurations x {len(data.texts)} questions scored in {time.perf_counter() - started:.0f} s",
        file=sys.stderr,
        flush=True,
    )
    return out


def tuned(data) -> dict:
    """``tune``'s outcome on one set (``suite_sets.SetData``): what it keeps, the cross-validated figure, the default's,
    and the figure to expect (the cross-validated one if the choice is kept, else the default's)."""
    from ctxrag.tasks.evaluation.tune import CANDIDATES, decide

    values = np.array(
        [
            [data.score(i, data.rank(i, config.label), [data.primary])[0] for i in range(len(data.texts))]
            for config in CANDIDATES
        ]
    )
    outcome = decide(values, data.clusters.tolist(), data.primary)
    return {
        "kept": outcome.choice.label if outcome.choice else None,
        "reason": outcome.reason,
        "cv": outcome.cv,
        "default": outcome.default,
        "expected": outcome.cv if outcome.choice else outcome.default,
        "fold picks": outcome.fold_picks,
    }


def pick(means: np.ndarray, columns: Sequence[int] | None = None) -> int:
    """Row with the best mean over the columns (sets); the first on ties."""
    chosen = means if columns is None else means[:, list(columns)]
    return int(np.argmax(chosen.mean(axis=1)))


def corpus_splits(units: Sequence[str]) -> list[tuple[str, list[int], list[int]]]:
    """(left-out unit, training set indices, held-out set indices), one per unit in order of first appearance."""
    return [
        (unit, [s for s, u in enumerate(units) if u != unit], [s for s, u in enumerate(units) if u == unit])
        for unit in dict.fromkeys(units)
    ]


def loco(sets: list, matrices: list[np.ndarray], grid: list[str]) -> tuple[list[np.ndarray], dict[str, str]]:
    """``select`` held out: per set its per-question primary values, and per unit what was chosen with it out."""
    means = np.stack([m.mean(axis=1) for m in matrices], axis=1)  # configs x sets
    held: list[np.ndarray] = [np.empty(0)] * len(sets)
    chosen = {}
    for unit, train, test in corpus_splits([data.unit for data in sets]):
        config = pick(means, train)
        chosen[unit] = grid[config]
        for s in test:
            held[s] = matrices[s][config]
    return held, chosen


def cluster_bootstrap(
    a: np.ndarray,
    b: np.ndarray,
    clusters: np.ndarray,
    resamples: int = RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """Mean of ``a - b`` and its percentile interval, resampling clusters (each with all its questions)."""
    return stratified_bootstrap([(a, b, clusters)], resamples, seed, confidence)


def stratified_bootstrap(
    groups: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    resamples: int = RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """The mean over groups (sets) of each group's mean ``a - b``; each group's clusters resampled on their own."""
    rng = np.random.default_rng(seed)
    means = np.zeros(resamples)
    observed = 0.0
    for a, b, clusters in groups:
        difference = np.asarray(a, float) - np.asarray(b, float)
        _, cluster = np.unique(clusters, return_inverse=True)
        sums = np.bincount(cluster, weights=difference)
        counts = np.bincount(cluster).astype(float)
        picks = rng.integers(0, sums.size, size=(resamples, sums.size))
        means += sums[picks].sum(axis=1) / counts[picks].sum(axis=1)
        observed += difference.mean()
    tail = (1 - confidence) / 2
    low, high = np.quantile(means / len(groups), [tail, 1 - tail])
    return observed / len(groups), float(low), float(high)
