"""Experiment (leaves the tree once run): `hybrid-score` with each document's later chunks moved down, on the suite's
cached rankings of all 18 sets (a suite home's `suite/*.npz`), with leave-one-corpus-out choice.

    .venv/bin/python benchmarks/doc_diversity.py SUITE_HOME > benchmarks/results/doc_diversity.md

A chunk's rank in the fused list is raised by PENALTY ranks for each chunk of its document ranked above it (stable;
a penalty of 1000 ranks documents by their best chunk). The fusion is `fusion_parts.py`'s numpy CombSUM of
z-standardized scores (at 3c46e6f), which reproduces the suite's `hybrid-score` figures.
"""
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from suite_sets import metric_value  # noqa: E402

WEIGHTS, PENALTIES = (0.5, 0.6), (0, 1, 2, 4, 1000)


def load(home: Path, name: str) -> dict:
    meta = json.loads((home / "suite" / f"{name}.json").read_text())
    meta["arrays"], meta["golden"] = dict(np.load(home / "suite" / f"{name}.npz")), [np.array(g) for g in meta["golden"]]
    return meta


def z(scores: np.ndarray) -> np.ndarray:
    return scores.copy() if len(scores) < 2 else (scores - scores.mean()) / (scores.std() or 1.0)


def fused(s: dict, i: int, wv: float) -> list[int]:
    sides = {}
    for side in ("b", "v"):
        rows, scores = s["arrays"][side + "row"][i], s["arrays"][side + "score"][i]
        sides[side] = (rows[rows >= 0].astype(int), scores[rows >= 0].astype(np.float64))
    (brows, bs), (vrows, vs) = sides["b"], sides["v"]
    rows = np.union1d(brows, vrows)
    zb, zv = np.full(len(rows), np.nan), np.full(len(rows), np.nan)
    zb[np.searchsorted(rows, brows)], zv[np.searchsorted(rows, vrows)] = z(bs), z(vs)
    zb[np.isnan(zb)] = np.nanmin(zb) if np.isfinite(zb).any() else 0
    zv[np.isnan(zv)] = np.nanmin(zv) if np.isfinite(zv).any() else 0
    return rows[np.argsort(-((1 - wv) * zb + wv * zv), kind="stable")].tolist()


def diversified(rows: list[int], docs: np.ndarray, penalty: int) -> list[int]:
    seen: dict[int, int] = {}
    keyed = []
    for position, row in enumerate(rows):
        before = seen.get(docs[row], 0)
        seen[docs[row]] = before + 1
        keyed.append((position + penalty * before, position, row))
    return [row for _, _, row in sorted(keyed)][:20]


def main(home: Path) -> None:
    sets = [load(home, meta.stem) for meta in sorted((home / "suite").glob("*.json")) if meta.name != "indexing.json"]
    configs = [(w, p) for w in WEIGHTS for p in PENALTIES]
    score = {}  # (set, config) -> primary@10
    for s in sets:
        metric = s["metrics"][0].rsplit("@", 1)[0] + "@10"
        for w, p in configs:
            score[s["name"], (w, p)] = 100 * np.mean([metric_value(metric, diversified(fused(s, i, w), s["arrays"]["doc_of_row"], p), s["golden"][i], s["arrays"]["doc_of_row"]) for i in range(len(s["texts"]))])
    label = lambda c: f"w={c[0]} p={c[1]}"  # noqa: E731
    print("| set | level | metric | " + " | ".join(label(c) for c in configs) + " | LOCO chose | LOCO |")
    print("|---|---|---|" + "---:|" * len(configs) + "---|---:|")
    loco = []
    for s in sets:
        others = [t["name"] for t in sets if t["unit"] != s["unit"]]
        chosen = max(configs, key=lambda c: np.mean([score[name, c] for name in others]))
        loco.append(score[s["name"], chosen])
        print(f"| {s['name']} | {s['level']} | {s['metrics'][0].rsplit('@', 1)[0]}@10 | " + " | ".join(f"{score[s['name'], c]:.1f}" for c in configs) + f" | {label(chosen)} | {loco[-1]:.1f} |")
    print("| **mean** | | | " + " | ".join(f"{np.mean([score[s['name'], c] for s in sets]):.2f}" for c in configs) + f" | | {np.mean(loco):.2f} |")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
