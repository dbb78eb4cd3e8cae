"""What a local cross-encoder adds to a warm search: a model of ms-marco-MiniLM-L-6-v2's shape, on torch, ONNX fp32
and ONNX int8, reranking the default strategy's top 30.

    .venv/bin/python benchmarks/rerank_cost.py --home HOME --name INDEX [--queries N] [--out DIR]

No cross-encoder ships on the package index (docs/decisions.md), so the model is built here with that shape (6 layers,
hidden 384, 12 heads, MiniLM's tokenizer) and random weights: its orderings mean nothing, its cost is a real
model's. HOME/INDEX: an index built beforehand (e.g. the cookbook's, ``ctxrag index
../shared/data/codebase/codebase_chunks.json``); its evaluation set's first N questions are the queries, each new to
the process's cache of query vectors (p50/p95 of ``Index.search`` with the model loaded and warm). Writes
``rerank_cost.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import SHARED_DATA, machine_meta, write_report  # benchmarks/common.py

SHAPE = {
    "vocab_size": 30522,
    "hidden_size": 384,
    "num_hidden_layers": 6,
    "num_attention_heads": 12,
    "intermediate_size": 1536,
    "max_position_embeddings": 512,
    "num_labels": 1,
}


def build_models(root: Path) -> dict[str, Path]:
    """The same random cross-encoder three ways: transformers weights, an ONNX fp32 export, and its int8 weights."""
    import torch
    from onnxruntime.quantization import quantize_dynamic
    from transformers import BertConfig, BertForSequenceClassification

    from ctxrag.tasks.embedding.local_runtimes import packaged_model_path

    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(**SHAPE)).eval()
    folders = {name: root / name for name in ("torch", "onnx-fp32", "onnx-int8")}
    for folder in folders.values():
        folder.mkdir(parents=True)
        for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
            shutil.copy(packaged_model_path() / name, folder / name)
    model.save_pretrained(str(folders["torch"]))
    sample = torch.ones((1, 8), dtype=torch.int64)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    torch.onnx.export(
        model,
        (sample, sample, torch.zeros_like(sample)),
        str(folders["onnx-fp32"] / "model.onnx"),
        input_names=names,
        output_names=["logits"],
        opset_version=17,
        dynamo=False,
        dynamic_axes={**{name: {0: "batch", 1: "tokens"} for name in names}, "logits": {0: "batch"}},
    )
    quantize_dynamic(str(folders["onnx-fp32"] / "model.onnx"), str(folders["onnx-int8"] / "model.onnx"))
    return folders


def timings(home: Path, name: str, queries: list[str], rerank: str) -> dict[str, float]:
    os.environ["CTXRAG_HOME"] = str(home)
    import ctxrag

    index = ctxrag.open(name)
    index.search("warm up the model and the index", rerank=rerank)
    seconds = []
    for query in queries:
        started = time.perf_counter()
        index.search(query, k=10, rerank=rerank)
        seconds.append(time.perf_counter() - started)
    seconds.sort()
    return {"p50_ms": 1000 * statistics.median(seconds), "p95_ms": 1000 * seconds[int(0.95 * (len(seconds) - 1))]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    lines = (SHARED_DATA / "codebase" / "evaluation_set.jsonl").read_text().splitlines()
    questions = [json.loads(line)["query"] for line in lines if line.strip()]
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        folders = build_models(Path(scratch))
        results["none"] = timings(args.home, args.name, [f"{q} (a)" for q in questions[: args.queries]], "none")
        for variant, folder in folders.items():
            batch = [f"{q} ({variant})" for q in questions[: args.queries]]  # new to the query cache
            results[variant] = timings(args.home, args.name, batch, f"local:{folder}")
            print(variant, results[variant], file=sys.stderr, flush=True)
    load = os.getloadavg()
    meta = machine_meta() | {"load average at the end": [round(value, 2) for value in load]}
    lines_out = [
        "# A local cross-encoder's cost in a warm search",
        "",
        f"`benchmarks/rerank_cost.py`, {meta['cpu']}, {meta['date']}, load average at the end {meta['load average at the end']} "
        "(a shared 2-core machine: the absolute milliseconds vary with it). A model of ms-marco-MiniLM-L-6-v2's shape "
        "(random weights: no cross-encoder ships on the package index) reranks the default strategy's top 30 of "
        f"each of {args.queries} cookbook questions new to the process, each pair cut to 256 word pieces; "
        "`Index.search` of an open index, k 10.",
        "",
        "| reranker | p50 ms | p95 ms |",
        "|---|---:|---:|",
        *(f"| {variant} | {figures['p50_ms']:.0f} | {figures['p95_ms']:.0f} |" for variant, figures in results.items()),
        "",
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "rerank_cost.json").write_text(json.dumps({"results": results, "meta": meta}, indent=1) + "\n")
    write_report(args.out / "rerank_cost.md", "\n".join(lines_out))


if __name__ == "__main__":
    main()
