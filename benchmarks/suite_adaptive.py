"""A query-adaptive fusion, learned under the suite's LOCO rule: weighted RRF whose vector weight depends on the query.

Features of a question and its two rankings (``features``): identifier-like terms, length, BM25's hit count and
top-score margins, the vector ranking's top cosine and its gap to the top 10, and the retrievers' agreement (top-10
overlap, same first row). ``fit``: k is the one of the ``wrrf`` family best on the training sets (as that family's
LOCO fit picks it); then a softmax over the vector weights of the families' grid (``WS``), linear in the
standardized features, is fitted by gradient ascent on the expected primary metric, each training set weighing the
same (every question weighs 1 / (its set's size x the number of sets)), with a fixed L2 penalty. A question is ranked
with its most probable weight. Held-out figures come from the cached ``wrrf`` scores of that (k, weight).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from suite_fusion import DEPTH, WS, Dataset, Query
from suite_select import GridEntry, pick
from ctxrag.tasks.context.structure import mentioned_names

CODE_TOKEN = re.compile(r"[A-Za-z_]\w*(?:[._][A-Za-z_]\w*)+|\b[a-z]+[A-Z]\w*|\w+\(\)")
FEATURES = ("names", "code tokens", "words", "bm25 hits", "bm25 margin@2", "bm25 margin@10", "top cosine", "cosine gap@10",
            "overlap@10", "same first")
L2 = 0.01
STEPS = 400
RATE = 0.05


def features(data: Dataset, query: Query) -> np.ndarray:
    words = query.text.split()
    scores = np.sort(query.sb[np.isfinite(query.rb)])[::-1]
    cosines = np.sort(query.sv[np.isfinite(query.sv)])[::-1]
    first = lambda values, n: values[min(n, values.size) - 1] if values.size else 0.0  # noqa: E731
    top = scores[0] if scores.size else 0.0
    return np.array([
        min(len(mentioned_names(query.text)), 3),
        len(CODE_TOKEN.findall(query.text)) / max(len(words), 1),
        np.log1p(len(words)),
        np.log1p(scores.size) / np.log1p(DEPTH),
        (top - first(scores, 2)) / top if top > 0 else 0.0,
        (top - first(scores, 10)) / top if top > 0 else 0.0,
        cosines[0] if cosines.size else 0.0,
        cosines[0] - cosines[:10].mean() if cosines.size else 0.0,
        np.sum((query.rb <= 10) & (query.rv <= 10)) / 10,
        float(np.argmin(query.rb) == np.argmin(query.rv)),
    ])


def fit_softmax(x: np.ndarray, gains: np.ndarray, weights: np.ndarray, l2: float = L2, steps: int = STEPS) -> np.ndarray:
    """theta ((features + 1) x choices) maximizing sum_q weights_q E_{softmax(x_q theta)}[gains_q] - l2/2 |theta|^2
    (bias unpenalized), by Adam from zero (every choice equally likely)."""
    x = np.hstack([x, np.ones((x.shape[0], 1))])
    theta = np.zeros((x.shape[1], gains.shape[1]))
    penalty = np.ones_like(theta)
    penalty[-1] = 0.0
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    for step in range(1, steps + 1):
        z = x @ theta
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        expected = (p * gains).sum(axis=1, keepdims=True)
        gradient = x.T @ (weights[:, None] * p * (gains - expected)) - l2 * penalty * theta
        m = 0.9 * m + 0.1 * gradient
        v = 0.999 * v + 0.001 * gradient ** 2
        theta += RATE * (m / (1 - 0.9 ** step)) / (np.sqrt(v / (1 - 0.999 ** step)) + 1e-8)
    return theta


@dataclass
class Model:
    k: float
    choices: list[int]  # configuration index per weight in WS
    mean: np.ndarray
    scale: np.ndarray
    theta: np.ndarray
    trained_picks: np.ndarray  # how often each weight was chosen on the training questions


class AdaptiveWRRF:
    name = "adaptive-wrrf"
    eligible = False  # reported next to the others; not (yet) a candidate for the default

    def __init__(self, wrrf: GridEntry) -> None:
        self.wrrf = wrrf
        self._features: dict[str, np.ndarray] = {}

    def table(self, data) -> np.ndarray:
        if data.name not in self._features:
            self._features[data.name] = np.array([features(d, q) for d, q, _ in data.views])
        return self._features[data.name]

    def fit(self, train: list[int], means: np.ndarray, matrices: list[np.ndarray], sets: list) -> Model:
        best = self.wrrf.grid[int(self.wrrf.members[pick(means[self.wrrf.members][:, train])])]
        k = best.params["kb"]
        index = {(self.wrrf.grid[c].params["kb"], self.wrrf.grid[c].params["w"]): c for c in self.wrrf.members.tolist()}
        choices = [index[(k, w)] for w in WS]
        x = np.vstack([self.table(sets[s]) for s in train])
        gains = np.vstack([matrices[s][choices].T for s in train])
        weights = np.concatenate([np.full(len(sets[s].texts), 1.0 / (len(sets[s].texts) * len(train))) for s in train])
        mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-9
        theta = fit_softmax((x - mean) / scale, gains, weights)
        model = Model(k, choices, mean, scale, theta, np.zeros(len(WS)))
        model.trained_picks = np.bincount(self.choose(model, x), minlength=len(WS))
        return model

    def choose(self, model: Model, x: np.ndarray) -> np.ndarray:
        z = np.hstack([(x - model.mean) / model.scale, np.ones((x.shape[0], 1))]) @ model.theta
        return np.argmax(z, axis=1)

    def held_out(self, model: Model, s: int, matrices: list[np.ndarray], sets: list) -> np.ndarray:
        picks = self.choose(model, self.table(sets[s]))
        return matrices[s][np.array(model.choices)[picks], np.arange(picks.size)]

    def describe(self, model: Model) -> str:
        shares = model.trained_picks / max(model.trained_picks.sum(), 1)
        common = ", ".join(f"w={WS[i]:g} {100 * shares[i]:.0f}%" for i in np.argsort(-shares)[:3] if shares[i] > 0)
        return f"wrrf k={model.k:g}, w per question (training: {common})"
