"""Lab (not shipped): candidate fusions on cached suite rankings vs their parts, every set, k in KS, with LOCO choice."""
import json, sys
from pathlib import Path
import numpy as np
sys.path.insert(0, "/work/main/benchmarks")
from suite_sets import metric_value

KS = (3, 5, 10, 20)

def load(home: Path, name: str) -> dict:
    meta = json.loads((home / "suite" / f"{name}.json").read_text())
    arrays = dict(np.load(home / "suite" / f"{name}.npz"))
    meta["arrays"], meta["golden"] = arrays, [np.array(g) for g in meta["golden"]]
    return meta

def rankings(s, i):
    a, out = s["arrays"], {}
    for side in ("b", "v"):
        rows, scores = a[side + "row"][i], a[side + "score"][i]
        keep = rows >= 0
        out[side] = (rows[keep].astype(int), scores[keep].astype(np.float64))
    return out

def z(scores):
    if len(scores) < 2: return scores.copy()
    return (scores - scores.mean()) / (scores.std() or 1.0)

def combine(r, wv, k=20, doc_of_row=None, doc_w=0.0):
    (brows, bs), (vrows, vs) = r["b"], r["v"]
    rows = np.union1d(brows, vrows)
    zb = np.full(len(rows), np.nan); zv = np.full(len(rows), np.nan)
    zb[np.searchsorted(rows, brows)] = z(bs); zv[np.searchsorted(rows, vrows)] = z(vs)
    zb[np.isnan(zb)] = np.nanmin(zb) if np.isfinite(zb).any() else 0
    zv[np.isnan(zv)] = np.nanmin(zv) if np.isfinite(zv).any() else 0
    fused = (1 - wv) * zb + wv * zv
    if doc_w:
        docs = doc_of_row[rows]; best = {}
        for d, f in zip(docs, fused): best[d] = max(best.get(d, -1e9), f)
        fused = fused + doc_w * np.array([best[d] for d in docs])
    return rows[np.argsort(-fused, kind="stable")][:k].tolist()

def peak(scores):
    return float(z(scores)[0]) if len(scores) > 1 else 0.0

def strategies():
    S = {"bm25": lambda s, i, r: r["b"][0][:20].tolist(), "vector": lambda s, i, r: r["v"][0][:20].tolist()}
    for w in (0.3, 0.4, 0.5, 0.6):
        S[f"score w={w}"] = (lambda w: lambda s, i, r: combine(r, w))(w)
        for dw in (0.25, 0.5):
            S[f"score w={w} doc={dw}"] = (lambda w, dw: lambda s, i, r: combine(r, w, 20, s["arrays"]["doc_of_row"], dw))(w, dw)
    for p in (1.0, 2.0, 4.0):
        def ad(s, i, r, p=p):
            pb, pv = max(peak(r["b"][1]), 1e-6), max(peak(r["v"][1]), 1e-6)
            return combine(r, pv**p / (pv**p + pb**p))
        S[f"adaptive p={p}"] = ad
    for c in (0.1, 0.2, 0.3):
        def lin(s, i, r, c=c):
            return combine(r, float(np.clip(0.5 + c * (peak(r["v"][1]) - peak(r["b"][1])), 0.3, 0.7)))
        S[f"adaptive-linear c={c}"] = lin
    return S

def family(metric):
    kind = metric.rsplit("@", 1)[0]
    return [f"{kind}@{k}" for k in KS]

def evaluate(sets, S):
    table = {}
    for s in sets:
        fam = family(s["metrics"][0])
        per = {name: np.zeros((len(s["texts"]), len(fam))) for name in S}
        for i in range(len(s["texts"])):
            r = rankings(s, i)
            for name, f in S.items():
                ranking = f(s, i, r)
                per[name][i] = [metric_value(m, ranking, s["golden"][i], s["arrays"]["doc_of_row"]) for m in fam]
        table[s["name"]] = ({name: v.mean(0) * 100 for name, v in per.items()}, fam, s["unit"])
    return table

def main(homes):
    sets = []
    for home in homes:
        for meta in sorted((home / "suite").glob("*.json")):
            if meta.name == "indexing.json" or meta.stem in {s["name"] for s in sets}: continue
            sets.append(load(home, meta.stem))
    S = strategies(); table = evaluate(sets, S)
    fused = [n for n in S if n not in ("bm25", "vector")]
    print("| strategy | (set, k) below its best part | worst margin | mean primary@10 |\n|---|---:|---:|---:|")
    for n in fused:
        below = sum(int(((res[n] - np.maximum(res["bm25"], res["vector"])) < 0).sum()) for res, _, _ in table.values())
        worst = min(float((res[n] - np.maximum(res["bm25"], res["vector"])).min()) for res, _, _ in table.values())
        print(f"| {n} | {below} | {worst:+.2f} | {np.mean([res[n][2] for res, _, _ in table.values()]):.2f} |")
    units = sorted({u for _, _, u in table.values()})
    print("\nLOCO (by mean primary@10 over the other corpora's sets):\n| set | chosen | @3/5/10/20 | bm25 | vector | below parts at |\n|---|---|---|---|---|---|")
    total_below = 0
    for name, (res, fam, unit) in table.items():
        others = [r for r, _, u in table.values() if u != unit]
        chosen = max(fused, key=lambda n: np.mean([r[n][2] for r in others]))
        d = res[chosen] - np.maximum(res["bm25"], res["vector"])
        ks = [str(KS[j]) for j in range(len(KS)) if d[j] < 0]; total_below += len(ks)
        print(f"| {name} | {chosen} | {'/'.join(f'{x:.1f}' for x in res[chosen])} | {'/'.join(f'{x:.1f}' for x in res['bm25'])} | {'/'.join(f'{x:.1f}' for x in res['vector'])} | {','.join(ks) or '-'} |")
    print(f"\nLOCO default below a part at {total_below} (set, k) pairs")

if __name__ == "__main__":
    main([Path(h) for h in sys.argv[1].split(",")])
