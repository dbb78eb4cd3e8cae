"""The local model's floor on the standard library folder: the word pieces it must read, and what they cost here.

    .venv/bin/python benchmarks/embed_floor.py [--sample 1024] [--out benchmarks/results]

Chunks and structural contexts of the standard library folder as ``ctxrag index`` makes them
(``context_tokens.stdlib_pairs``); embedded texts and windows from the CLI's default spec (``IndexOptions().embedder_spec()``:
windows of 256 word pieces, the context cut to 64) and ``LocalEmbedder._window_ids``, so the windows are the ones an
index run embeds. Two workloads: the product's windows, and the same chunks with no context at all (each window is
only the chunk's lines: the least that any windowing reading every line must run). A uniform sample of each
workload's windows (fixed seed) runs through the model (``LocalEmbedder._encode_ids``, token-sorted batches of 32)
after a warm-up, in the precision the product chooses on this machine, and, for speed only, with torch's dynamic
int8 (per-channel weights; not a product path: it changes the vectors). Seconds per sampled window times the number
of windows estimates the embed stage. Each timing is the best of ``--repeats``. *GFLOP/s*: the model's
multiply-adds in the sampled windows (``flops``: the encoder's matrix products, padding excluded) per second, to
hold against the CPU's peak.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path

import numpy as np

from common import RESULTS, machine_meta, provenance, write_report
from context_tokens import stdlib_pairs
from ctxrag.flows.options import IndexOptions
from ctxrag.tasks.embedding.embed import LocalEmbedder


def workloads(contexts: list[str], contents: list[str]) -> dict[str, list[list[int]]]:
    """Each workload's windows as the model's input ids."""
    spec = IndexOptions().embedder_spec()
    embedder = LocalEmbedder(spec)
    return {name: embedder._window_ids(spec.embedded_texts(heads, contents))[0]
            for name, heads in (("the product's windows", contexts), ("no context", [""] * len(contents)))}


def flops(lengths: list[int], config) -> float:  # type: ignore[no-untyped-def]
    """Floating-point operations of a BERT encoder (``config``: its transformers config) on inputs of ``lengths``
    word pieces: per layer and word piece, the four attention projections and the two feed-forward products
    (2 x (4h^2 + 2hi)), and per layer the attention's two products over the input (4 L^2 h); embeddings, softmax and
    norms left out."""
    h, i, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    return float(sum(layers * (2 * length * (4 * h * h + 2 * h * i) + 4 * length * length * h) for length in lengths))


def seconds(embedder: LocalEmbedder, windows: list[list[int]], model, repeats: int) -> float:  # type: ignore[no-untyped-def]
    embedder._encode_ids(windows[:64], model)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        embedder._encode_ids(windows, model)
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=1024, help="windows timed per workload")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    import torch
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    contexts, contents = stdlib_pairs()
    found = workloads(contexts, contents)
    embedder = LocalEmbedder(IndexOptions().embedder_spec())
    models = {embedder.precision: embedder.model,
              "int8": quantize_dynamic(copy.deepcopy(embedder.model), {torch.nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8)}
    config = embedder.model[0].auto_model.config
    rng = np.random.default_rng(0)
    rows = []
    for name, windows in found.items():
        sample = [windows[i] for i in sorted(rng.choice(len(windows), min(args.sample, len(windows)), replace=False))]
        row = {"workload": name, "chunks": len(contents), "windows": len(windows), "word pieces": sum(map(len, windows)),
               "sample windows": len(sample), "sample word pieces": sum(map(len, sample)), "embed s": {}}
        for precision, model in models.items():
            took = seconds(embedder, sample, model, args.repeats)
            row["embed s"][precision] = took / len(sample) * len(windows)
            row.setdefault("us per word piece", {})[precision] = took / row["sample word pieces"] * 1e6
            row.setdefault("GFLOP/s", {})[precision] = flops(list(map(len, sample)), config) / took / 1e9
        rows.append(row)
        print(json.dumps(row), flush=True)
    meta = {**machine_meta(), "precision": embedder.precision, "reason": embedder.precision_reason, "threads": torch.get_num_threads()}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "embed_floor.json").write_text(json.dumps({"rows": rows, "meta": meta}, indent=1) + "\n")
    write_report(args.out / "embed_floor.md", render(rows, meta))


def render(rows: list[dict], meta: dict) -> str:
    precisions = list(rows[0]["embed s"])
    lines = [
        "# The local model's floor on the standard library folder",
        "",
        f"{provenance(meta)}; produced by `benchmarks/embed_floor.py` (method in its docstring); torch on "
        f"{meta['threads']} threads, the product's precision here {meta['precision']} ({meta['reason']}). *embed s*: "
        "seconds per sampled window times the workload's windows, an estimate of the embed stage (the model's work "
        "alone); int8 is torch's dynamic per-channel quantization, timed for speed only.",
        "",
        "| workload | chunks | windows | word pieces | sampled | " + " | ".join(f"µs per word piece ({p})" for p in precisions)
        + " | " + " | ".join(f"GFLOP/s ({p})" for p in precisions) + " | " + " | ".join(f"embed s ({p})" for p in precisions) + " |",
        "|---|---:|---:|---:|---:|" + "---:|" * (3 * len(precisions)),
    ]
    for row in rows:
        lines.append(f"| {row['workload']} | {row['chunks']:,} | {row['windows']:,} | {row['word pieces'] / 1e6:.2f} M | "
                     f"{row['sample windows']:,} | " + " | ".join(f"{row['us per word piece'][p]:.0f}" for p in precisions)
                     + " | " + " | ".join(f"{row['GFLOP/s'][p]:.0f}" for p in precisions) + " | " + " | ".join(f"{row['embed s'][p]:.0f}" for p in precisions) + " |")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
