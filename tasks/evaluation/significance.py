"""Is strategy A really better than B on this evaluation set? A paired bootstrap over the queries.

Both strategies were scored on the same queries, so the per-query differences ``a - b`` are resampled (queries drawn
with replacement, as many as there are) and the interval is the percentile interval of the resampled mean
differences. An interval that excludes 0 means the difference is unlikely to be an accident of which queries the
evaluation set happens to hold; it says nothing about queries unlike these.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

_BATCH = 1_000  # resamples drawn at once: bounds memory at about _BATCH x queries indices


@dataclass(frozen=True)
class PairedBootstrap:
    """Mean of ``a - b`` over the queries and its bootstrap interval at ``confidence``."""

    mean_difference: float
    low: float
    high: float
    excludes_zero: bool
    confidence: float
    resamples: int
    queries: int


def paired_bootstrap(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> PairedBootstrap:
    """Percentile interval of the mean per-query difference ``a[i] - b[i]``, resampling queries with replacement.

    ``a`` and ``b`` hold one metric value per query, in the same query order. ``seed`` fixes the
    ``numpy.random.Generator``, so the same inputs always give the same interval.
    """
    first = np.asarray(a, dtype=float)
    second = np.asarray(b, dtype=float)
    if first.ndim != 1 or first.shape != second.shape:
        raise ValueError(
            f"paired bootstrap needs two equally long lists of per-query values (got {first.shape} and {second.shape})"
        )
    if first.size == 0:
        raise ValueError("paired bootstrap needs at least one query")
    if not (np.isfinite(first).all() and np.isfinite(second).all()):
        raise ValueError("paired bootstrap: per-query values must be finite numbers (found NaN or infinity)")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    differences = first - second
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for start in range(0, resamples, _BATCH):
        stop = min(start + _BATCH, resamples)
        picks = rng.integers(0, differences.size, size=(stop - start, differences.size))
        means[start:stop] = differences[picks].mean(axis=1)
    tail = (1 - confidence) / 2
    low, high = (float(value) for value in np.quantile(means, [tail, 1 - tail]))
    return PairedBootstrap(
        mean_difference=float(differences.mean()),
        low=low,
        high=high,
        excludes_zero=bool(low > 0 or high < 0),
        confidence=confidence,
        resamples=resamples,
        queries=int(differences.size),
    )
