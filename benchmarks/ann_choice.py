"""ANN libraries side by side (docs/decisions.md, "Approximate vector search"): build seconds, peak RSS, query p50 (one
query at a time, one thread), recall@10 and @150 against exact cosine, on random unit vectors (384 d, as
benchmarks/scale.py seeds them) and 200 random queries. Kept in git history only (a concluded experiment).

    python benchmarks/ann_choice.py LIB N M EFC EF1,EF2,... [dtype]
    LIB: hnswlib | faiss (HNSW) | usearch: M connectivity, EFC efConstruction, EF efSearch;
         faisspq: faiss IndexPQFastScan with M 4-bit codes, EF = candidates scored exactly
faiss-cpu, usearch (with numkong) and hnswlib (no wheel: built from its sdist with g++) must be importable; the
comparison ran them one after another: faisspq 100000 192 0 1024,4096; usearch, faiss, hnswlib 100000 16 100 150,600,2000.
"""
import json, resource, sys, time, os
import numpy as np

lib, n, M, efc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
efs_list = [int(v) for v in sys.argv[5].split(",")]
dtype = sys.argv[6] if len(sys.argv) > 6 else "f32"
threads = 2
D, NQ = 384, 200
rng = np.random.default_rng(7)
X = np.empty((n, D), dtype=np.float32)
for s in range(0, n, 100_000):
    part = rng.standard_normal((min(100_000, n - s), D)).astype(np.float32)
    X[s:s + len(part)] = part / np.linalg.norm(part, axis=1, keepdims=True)
Q = np.random.default_rng(11).standard_normal((NQ, D)).astype(np.float32)
Q /= np.linalg.norm(Q, axis=1, keepdims=True)
t = time.perf_counter()
exact = np.empty((NQ, 150), dtype=np.int64)
for s0 in range(0, NQ, 20):
    S = Q[s0:s0 + 20] @ X.T
    part = np.argpartition(-S, 150, axis=1)[:, :150]
    ps = np.take_along_axis(S, part, axis=1)
    exact[s0:s0 + 20] = np.take_along_axis(part, np.argsort(-ps, axis=1, kind="stable"), axis=1)
exact_s = time.perf_counter() - t
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t = time.perf_counter()
if lib == "faiss":
    import faiss
    faiss.omp_set_num_threads(threads)
    if dtype == "f32":
        index = faiss.IndexHNSWFlat(D, M, faiss.METRIC_INNER_PRODUCT)
    else:
        index = faiss.IndexHNSWSQ(D, faiss.ScalarQuantizer.QT_8bit if dtype == "i8" else faiss.ScalarQuantizer.QT_fp16, M, faiss.METRIC_INNER_PRODUCT)
        index.train(X[:100_000])
    index.hnsw.efConstruction = efc
    index.add(X)
    faiss.omp_set_num_threads(1)
    def search(q, k, ef):
        index.hnsw.efSearch = ef
        return index.search(q.reshape(1, -1), k)[1][0]
elif lib == "faisspq":
    import faiss
    faiss.omp_set_num_threads(threads)
    index = faiss.IndexPQFastScan(D, M, 4, faiss.METRIC_INNER_PRODUCT)
    index.train(X[rng.choice(n, min(n, 65_536), replace=False)])
    index.add(X)
    faiss.omp_set_num_threads(1)
    def search(q, k, ef):
        rows = index.search(q.reshape(1, -1), ef)[1][0]
        rows = np.sort(rows[rows >= 0])
        scores = np.einsum("ij,j->i", X[rows], q)
        return rows[np.argsort(-scores, kind="stable")[:k]]
elif lib == "hnswlib":
    import hnswlib
    index = hnswlib.Index(space="ip", dim=D)
    index.init_index(max_elements=n, M=M, ef_construction=efc, random_seed=1)
    index.add_items(X, np.arange(n), num_threads=threads)
    index.set_num_threads(1)
    def search(q, k, ef):
        index.set_ef(ef)
        return index.knn_query(q, k=k, num_threads=1)[0][0]
elif lib == "usearch":
    from usearch.index import Index
    index = Index(ndim=D, metric="ip", dtype=dtype, connectivity=M, expansion_add=efc)
    index.add(np.arange(n), X, threads=threads)
    def search(q, k, ef):
        index.expansion_search = ef
        return index.search(q, k, threads=1).keys
build_s = time.perf_counter() - t
rss_build = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
out = {"lib": lib, "n": n, "M": M, "efc": efc, "dtype": dtype, "build_s": round(build_s, 1),
       "exact_batch_ms_per_q": round(exact_s / NQ * 1000, 2), "rss_before_mb": round(rss0), "peak_rss_mb": round(rss_build), "runs": []}
for ef in efs_list:
    times, r10, r150 = [], [], []
    for i, q in enumerate(Q):
        t = time.perf_counter()
        got = np.asarray(search(q, 150, max(ef, 150)))
        times.append((time.perf_counter() - t) * 1000)
        r10.append(len(set(got[:10].tolist()) & set(exact[i, :10].tolist())) / 10)
        r150.append(len(set(got.tolist()) & set(exact[i].tolist())) / 150)
    out["runs"].append({"ef": ef, "p50_ms": round(float(np.median(times)), 2), "recall10": round(float(np.mean(r10)), 4),
                        "recall150": round(float(np.mean(r150)), 4)})
    print(json.dumps(out["runs"][-1]), flush=True)
print(json.dumps(out), flush=True)
