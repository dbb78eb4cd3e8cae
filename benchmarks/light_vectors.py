"""The light install's vectors against an earlier commit's: the cookbook's 737 chunks and 248 questions through each
side's local embedder, int8 and fp32, and each question's vector-only top 10.

    .venv/bin/python benchmarks/light_vectors.py --base-python PY --base-code DIR --python PY [--out light_vectors]

Each side runs in its own process (``--base-code`` first on ``PYTHONPATH`` for the base), with models and cache folders
of its own, and embeds the chunks' texts as documents (windows of the default spec) and the questions as queries, in
each precision. Reported per precision: the least and median cosine between the two sides' vectors, how many are
bit-identical, and how many questions get the same top 10 chunks by cosine (the vector side of every fused strategy;
BM25 is the same code on both sides) and the vector side's MRR@10 on each side.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from common import RESULTS, SHARED_DATA, machine_meta  # benchmarks/common.py

EMBED = """
import json, sys
import numpy as np
from ctxrag.tasks.embedding.embed import EmbedderSpec, LocalEmbedder
texts, queries, out = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
spec = EmbedderSpec.choose("local", None, 512, None)
for precision in ("int8", "fp32"):
    documents = LocalEmbedder(spec, precision=precision).embed(texts)
    asked = LocalEmbedder(EmbedderSpec(**{**spec.to_dict(), "precision": precision})).embed(queries, "query")
    np.save(f"{out}-{precision}-documents.npy", documents)
    np.save(f"{out}-{precision}-queries.npy", asked)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-python", required=True)
    parser.add_argument("--base-code", type=Path, required=True)
    parser.add_argument("--python", required=True)
    parser.add_argument("--out", default="light_vectors")
    args = parser.parse_args()
    documents = json.loads((SHARED_DATA / "codebase" / "codebase_chunks.json").read_text())
    chunks = [
        (document["original_uuid"], chunk["original_index"], chunk["content"])
        for document in documents
        for chunk in document["chunks"]
    ]
    lines = (SHARED_DATA / "codebase" / "evaluation_set.jsonl").read_text().splitlines()
    questions = [json.loads(line) for line in lines if line.strip()]
    position = {(doc, index): number for number, (doc, index, _) in enumerate(chunks)}
    golden = [{position.get((doc, index)) for doc, index in q["golden_chunk_uuids"]} for q in questions]
    with tempfile.TemporaryDirectory(prefix="ctxrag-vectors-") as scratch:
        root = Path(scratch)
        (root / "texts.json").write_text(json.dumps([text for _, _, text in chunks]))
        (root / "queries.json").write_text(json.dumps([q["query"] for q in questions]))
        for side, python, code in (("base", args.base_python, args.base_code.resolve()), ("this", args.python, None)):
            env = {
                **os.environ,
                "CTXRAG_MODELS_DIR": str(root / side / "models"),
                "CTXRAG_CACHE_DIR": str(root / side / "cache"),
                **({"PYTHONPATH": str(code)} if code else {}),
            }
            command = [python, "-c", EMBED, str(root / "texts.json"), str(root / "queries.json"), str(root / side)]
            done = subprocess.run(command, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"{side}: {done.stderr[-2000:]}")
        report = {}
        for precision in ("int8", "fp32"):
            load = {
                side: {kind: np.load(root / f"{side}-{precision}-{kind}.npy") for kind in ("documents", "queries")}
                for side in ("base", "this")
            }
            entry: dict[str, object] = {}
            for kind in ("documents", "queries"):
                cosine = np.sum(load["base"][kind] * load["this"][kind], axis=1)
                entry[kind] = {
                    "least cosine": float(cosine.min()),
                    "median cosine": float(np.median(cosine)),
                    "bit-identical": int(np.all(load["base"][kind] == load["this"][kind], axis=1).sum()),
                    "of": len(cosine),
                }
            tops = {
                side: np.argsort(-(load[side]["queries"] @ load[side]["documents"].T), axis=1, kind="stable")[:, :10]
                for side in ("base", "this")
            }
            entry["same top 10"] = int(sum(np.array_equal(a, b) for a, b in zip(tops["base"], tops["this"])))
            entry["questions"] = len(questions)
            for side in ("base", "this"):
                ranks = [
                    next((1.0 / (rank + 1) for rank, hit in enumerate(top) if hit in gold), 0.0)
                    for top, gold in zip(tops[side], golden)
                ]
                entry[f"vector MRR@10 {side}"] = round(float(np.mean(ranks)), 4)
            report[precision] = entry
    record = {"machine": machine_meta(), **report}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    sys.exit(main())
