"""Every configuration's primary metric on a set, fast: the RRF-shaped configurations of a question scored at once.

Most of the grid (the families rrf-k, wrrf, wrrf-2k, wrrf-depth, gated, doc-rank, doc-def) share one form over a
question's candidates:

    wb / (kb + bm25 rank) + w / (kv + vector rank, cut at dv) + ub / (k + BM25 document rank)
        + uv / (k + vector document rank) + dm x (the chunk defines a name the question mentions)

ordered as suite_fusion.ranked orders (score, then best single rank, then row), the top 20 kept. ``fast_scores``
scores all of them as one array per question (numpy, same operations in the same order as suite_fusion, so the same
floats and ties); the other configurations (the product's strategies among them) go through their own functions.
``check`` compares a seeded sample of (configuration, question) pairs with suite_fusion's functions and
ctxrag.tasks.evaluation.metrics, so the fast path cannot drift.
"""

from __future__ import annotations

import random

import numpy as np

from suite_fusion import ABSENT, DEPTH, TOP, Dataset, Query, gate, v_doc_signals, v_gated, v_rrf
from ctxrag.tasks.context.structure import mentioned_names

FORM = ("wb", "kb", "w", "kv", "dv", "k", "ub", "uv", "dm")


def form(config) -> tuple[float, ...] | None:
    """The configuration's coefficients in the shared form, or None (scored by its own function)."""
    p, function = config.params, config.function
    if function is v_rrf:
        return (1.0, p["kb"], p["w"], p["kv"], p.get("dv", DEPTH), 0.0, 0.0, 0.0, 0.0)
    if function is v_doc_signals:
        return (1.0, p["k"], p["w"], p["k"], DEPTH, p["k"], p["ub"], p["uv"], p.get("dm", 0.0))
    if function is v_gated:
        return (1.0, p["k"], np.nan, p["k"], DEPTH, 0.0, 0.0, 0.0, 0.0)  # w: per question (gate)
    return None


def inverse(ranks: np.ndarray, k: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """suite_fusion.inverse for a column of (k, weight) per configuration against a row of ranks."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.isfinite(ranks), weight / (k + ranks), 0.0)


def top_rows(data: Dataset, query: Query, coefficients: np.ndarray, gated: list[tuple[int, dict]]) -> tuple[np.ndarray, np.ndarray]:
    """configurations x 20 local rows, and which of those positions hold a candidate."""
    c = {name: coefficients[:, j : j + 1] for j, name in enumerate(FORM)}
    w = c["w"].copy()
    for row, params in gated:
        w[row] = params["w_high"] if gate(query, params["feature"]) >= params["tau"] else params["w_low"]
    rv = np.where(query.rv[None, :] <= c["dv"], query.rv[None, :], ABSENT)
    score = inverse(query.rb[None, :], c["kb"], c["wb"]) + inverse(rv, c["kv"], w)
    score = score + inverse(query.db[None, :], c["k"], c["ub"]) + inverse(query.dv[None, :], c["k"], c["uv"])
    if np.any(c["dm"]):
        names = mentioned_names(query.text)
        defining = np.array([bool(defined & names) for defined in data.defines], bool)
        score = np.where(defining[None, :], score + c["dm"], score)
    candidate = np.isfinite(query.rb)[None, :] | np.isfinite(rv)
    best = np.where(candidate, np.minimum(query.rb[None, :], rv), np.inf)
    key = np.where(candidate, -score, np.inf)
    rows = np.broadcast_to(np.arange(query.rb.size), key.shape)
    order = np.lexsort((rows, best, key), axis=-1)[:, :TOP]
    return order, np.take_along_axis(candidate, order, axis=1)


def metric_rows(name: str, top: np.ndarray, valid: np.ndarray, golden_mask: np.ndarray, golden_count: int) -> np.ndarray:
    """The metric of each configuration's ranking (rows of ``top``), as ctxrag.tasks.evaluation.metrics computes it."""
    kind, k = name.rsplit("@", 1)
    kind = kind.removeprefix("doc-")
    hits = (golden_mask[top] & valid)[:, : int(k)]
    if kind == "mrr":
        first = np.argmax(hits, axis=1)
        return np.where(hits.any(axis=1), 1.0 / (first + 1), 0.0)
    if kind == "hit":
        return hits.any(axis=1).astype(float)
    return hits.sum(axis=1) / golden_count  # pass, recall: each golden chunk once (rows are distinct)


def fast_scores(data, grid: list) -> tuple[np.ndarray, np.ndarray]:
    """configs x questions of the set's primary metric for the configurations of the shared form (NaN elsewhere),
    and a mask of those configurations."""
    forms = [form(config) for config in grid]
    fast = np.array([f is not None for f in forms])
    coefficients = np.array([f for f in forms if f is not None], float)
    gated = [(row, config.params) for row, config in enumerate(c for c, f in zip(grid, forms) if f is not None) if config.function is v_gated]
    out = np.full((len(grid), len(data.texts)), np.nan)
    for i, (dataset, query, rows) in enumerate(data.views):
        mask, count = golden_mask(data, i, rows)
        top, valid = top_rows(dataset, query, coefficients, gated)
        out[fast, i] = metric_rows(data.primary, top, valid, mask, count)
    return out, fast


def golden_mask(data, i: int, rows: np.ndarray) -> tuple[np.ndarray, int]:
    """Which of the question's candidates (local rows) are golden, and how many golden items it has."""
    golden = data.golden[i]
    if data.primary.startswith("doc-"):
        return np.isin(data.doc_of_row[rows], golden), len(set(golden.tolist()))
    return np.isin(rows, golden), len(set(golden.tolist()))


def check(data, grid: list, scores: np.ndarray, fast: np.ndarray, samples: int = 300, seed: int = 0) -> None:
    """Fast scores equal suite_fusion's function + ctxrag.tasks.evaluation.metrics on a seeded sample (AssertionError otherwise)."""
    rng = random.Random(seed)
    candidates = np.nonzero(fast)[0].tolist()
    for _ in range(min(samples, len(candidates) * len(data.texts))):
        c, i = rng.choice(candidates), rng.randrange(len(data.texts))
        expected = data.score(i, data.rank(i, grid[c].function, grid[c].params), [data.primary])[0]
        assert abs(scores[c, i] - expected) < 1e-6, f"{data.name}: {grid[c].describe()} on question {i}: fast {scores[c, i]} != {expected}"
