"""Strategies of the evaluation suite and their leave-one-corpus-out (LOCO) selection; the cluster bootstrap.

Strategies are entries of one registry (``entries``): the product's fixed strategies (ranked by the product's own
fusion, suite_fusion.product), the tuned families over their grids (suite_fusion.FAMILIES), and any learned ones.
An entry is fitted on training sets (``fit``) and then ranks any question; a grid family's fit is the configuration
with the best objective on the training sets. The objective is the mean over sets of each set's mean primary metric:
every set weighs the same, whatever its size.

LOCO: the unit is the corpus. For each corpus, every entry is fitted on the sets of all other corpora and scored on
that corpus's sets; the default strategy (family and constants together) is the grid configuration best on the
training sets among the eligible entries, first in registry order on ties.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol, Sequence

import numpy as np

import suite_fast
from suite_fusion import FAMILIES, describe, product

RESAMPLES = 10_000

# The product's strategies, each ranked by ctxrag.tasks.retrieval.search.fuse_rankings at the shipped constants.
FIXED: dict[str, tuple[Callable[..., list[int]], dict]] = {
    name: (product, {"strategy": name}) for name in ("bm25", "vector", "hybrid", "hybrid-weighted", "hybrid-doc", "hybrid-score")
}


@dataclass(frozen=True)
class Config:
    family: str
    function: Callable[..., list[int]]
    params: dict

    def describe(self) -> str:
        return describe(self.family, self.params) if self.family not in FIXED else self.family


def configs() -> list[Config]:
    """Every grid point: the fixed strategies first, then each family's grid in order."""
    found = [Config(name, function, params) for name, (function, params) in FIXED.items()]
    for family, (function, grid) in FAMILIES.items():
        found += [Config(family, function, params) for params in grid]
    return found


def matrix(home: Path, data, grid: list[Config]) -> np.ndarray:
    """configs x questions: the set's primary metric of every configuration, cached beside the set's rankings (keyed by
    them: a re-built index gives new scores)."""
    key = hashlib.sha256(json.dumps([[c.family, c.params] for c in grid] + [data.primary, data.texts, data.rankings], default=str).encode()).hexdigest()[:16]
    path = home / "suite" / f"{data.name}.scores-{key}.npy"
    if path.exists():
        return np.load(path)
    started = time.perf_counter()
    out, fast = suite_fast.fast_scores(data, grid)
    suite_fast.check(data, grid, out, fast)
    for c in np.nonzero(~fast)[0]:
        for i in range(len(data.texts)):
            out[c, i] = data.score(i, data.rank(i, grid[c].function, grid[c].params), [data.primary])[0]
    np.save(path, out)
    print(f"{data.name}: {len(grid)} configurations x {len(data.texts)} questions scored in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return out


# --- entries: fit on training sets, score held-out sets --------------------------------------------------------------


class Entry(Protocol):
    name: str
    eligible: bool  # may be chosen as the default

    def fit(self, train: list[int], means: np.ndarray, matrices: list[np.ndarray], sets: list) -> object: ...

    def held_out(self, model: object, s: int, matrices: list[np.ndarray], sets: list) -> np.ndarray: ...

    def describe(self, model: object) -> str: ...


@dataclass
class GridEntry:
    """Fixed strategies (one-point grids), tuned families, or ``select`` (every eligible configuration at once)."""

    name: str
    members: np.ndarray  # indices into the configuration list
    grid: list[Config]
    eligible: bool = True

    def fit(self, train: list[int], means: np.ndarray, matrices: list[np.ndarray], sets: list) -> int:
        return int(self.members[pick(means[self.members][:, train])])

    def held_out(self, model: int, s: int, matrices: list[np.ndarray], sets: list) -> np.ndarray:
        return matrices[s][model]

    def describe(self, model: int) -> str:
        return self.grid[model].describe()


def pick(means: np.ndarray, columns: Sequence[int] | None = None) -> int:
    """Row with the best mean over the columns (sets); the first on ties."""
    chosen = means if columns is None else means[:, list(columns)]
    return int(np.argmax(chosen.mean(axis=1)))


def entries(grid: list[Config], learned: Sequence[Entry] = ()) -> list[Entry]:
    """One entry per fixed strategy and per family, ``select`` (the default's choice), then the learned ones."""
    families = list(FIXED) + list(FAMILIES)
    members = {name: np.array([c for c, config in enumerate(grid) if config.family == name], int) for name in families}
    found: list[Entry] = [GridEntry(name, rows, grid) for name, rows in members.items() if rows.size]
    found.append(GridEntry("select", np.arange(len(grid)), grid))
    return found + list(learned)


def corpus_splits(units: Sequence[str]) -> list[tuple[str, list[int], list[int]]]:
    """(left-out unit, training set indices, held-out set indices), one per unit in order of first appearance."""
    return [(unit, [s for s, u in enumerate(units) if u != unit], [s for s, u in enumerate(units) if u == unit])
            for unit in dict.fromkeys(units)]


def loco(sets: list, matrices: list[np.ndarray], registry: list[Entry]) -> dict[str, dict]:
    """Per entry: per set its held-out per-question primary values, and what was chosen when its corpus was out."""
    means = np.stack([m.mean(axis=1) for m in matrices], axis=1)  # configs x sets
    out: dict[str, dict] = {entry.name: {"held": [None] * len(sets), "chosen": {}} for entry in registry}
    for unit, train, test in corpus_splits([data.unit for data in sets]):
        for entry in registry:
            model = entry.fit(train, means, matrices, sets)
            out[entry.name]["chosen"][unit] = entry.describe(model)
            for s in test:
                out[entry.name]["held"][s] = entry.held_out(model, s, matrices, sets)
    return out


# --- significance ----------------------------------------------------------------------------------------------------


def cluster_bootstrap(a: np.ndarray, b: np.ndarray, clusters: np.ndarray, resamples: int = RESAMPLES, seed: int = 0,
                      confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean of ``a - b`` and its percentile interval, resampling clusters (each with all its questions)."""
    return stratified_bootstrap([(a, b, clusters)], resamples, seed, confidence)


def stratified_bootstrap(groups: list[tuple[np.ndarray, np.ndarray, np.ndarray]], resamples: int = RESAMPLES, seed: int = 0,
                         confidence: float = 0.95) -> tuple[float, float, float]:
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
