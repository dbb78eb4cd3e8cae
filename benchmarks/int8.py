"""The local model in int8 against fp32 and bf16: speed, cosine to fp32, the floor on an index's chunks, and the
suite's and the stdlib folder's runs side by side; int8.md and int8.json.

    .venv/bin/python benchmarks/int8.py --home HOME --name NAME [--sample 200] [--rounds 3] [--suite LABEL=FOLDER ...]
        [--stdlib LABEL=FOLDER ...] [--out benchmarks/results]

Texts: a uniform sample (seed 0) of the chunks of index NAME in HOME (a `ctxrag index` of the stdlib folder kept by
``scale.py --keep``), as the CLI's default spec embeds them (windows of 256 word pieces, the context cut to 64;
``LocalEmbedder._window_ids``). Configurations, in one process: torch fp32 and bf16 autocast (``_encode_torch``), and
the product's int8 file (``onnx_int8.make_int8_model``, made in a scratch folder) run two ways: in batches of 32 on
onnxruntime's intra-op threads (one per core, spinning: the recipe before, where a text's vector depends on its
batch-mates) and each window alone on one single-threaded run per core (the product's ``OnnxEncoder(alone=True)``).
Each round runs every configuration once after a warm-up; docs/s is the best round's. Cosine: each chunk's pooled
vector against fp32's; *alone vs batched*: the same chunk's int8 vector in the two ways. *GOP/s*: the encoder's
matrix products (2 x (4h^2 + 2hi) per word piece and layer, 4 L^2 h per layer, padding excluded) per second; peak:
cores x the CPU's clock x ``OPS_PER_CYCLE`` (per core: two 256-bit FMA pipes, AVX-512 on Zen 4 twice through them;
bf16 dot products twice fp32's, VNNI int8 four times). *embed s*: seconds per sampled chunk x the index's chunks.
``--suite LABEL=FOLDER ...``: suite.py outputs (suite.json; the first is the base); ``--stdlib LABEL=FOLDER ...``:
scale.py outputs (scale.json, the tree size).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from common import RESULTS, machine_meta, write_report
from ctxrag.storage.index_store import IndexStore
from ctxrag.tasks.embedding.embed import LocalEmbedder, packaged_model_path
from ctxrag.tasks.embedding.embedder_spec import EmbedderSpec
from ctxrag.tasks.embedding.windows import pooled_rows

OPS_PER_CYCLE = {"fp32": 32, "bf16": 64, "int8": 128}


def batched_runner(path: Path):  # type: ignore[no-untyped-def]
    """The int8 file in batches of 32 on onnxruntime's intra-op threads, spinning (the recipe before this one)."""
    import onnxruntime

    from ctxrag.tasks.embedding.onnx_queries import OnnxEncoder

    encoder = OnnxEncoder(path, packaged_model_path(), 512)
    options = onnxruntime.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "1")
    encoder.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return encoder.embed_ids


def flops(lengths: list[int]) -> float:
    h, i, layers = 384, 1536, 6
    return float(sum(layers * (2 * length * (4 * h * h + 2 * h * i) + 4 * length * length * h) for length in lengths))


def measure(args: argparse.Namespace) -> dict:
    from ctxrag.tasks.embedding.onnx_int8 import make_int8_model
    from ctxrag.tasks.embedding.onnx_queries import OnnxEncoder

    chunks = IndexStore(args.home).open(args.name).chunks
    spec = EmbedderSpec.choose("local", None, 512, None)
    texts = spec.embedded_texts(chunks["context"].to_pylist(), chunks["content"].to_pylist())
    picked = sorted(np.random.default_rng(0).choice(len(texts), min(args.sample, len(texts)), replace=False))
    torch_side = {precision: LocalEmbedder(spec, precision) for precision in ("fp32", "bf16")}
    windows, owners = torch_side["fp32"]._window_ids([texts[i] for i in picked])
    runs = {f"torch {precision}": embedder._encode_torch for precision, embedder in torch_side.items()}
    scratch = tempfile.TemporaryDirectory(prefix="ctxrag-int8-")
    path = Path(scratch.name) / "int8.onnx"
    assert make_int8_model(packaged_model_path(), path)
    runs["int8 batches of 32 (before)"] = batched_runner(path)
    runs["int8 each window alone (product)"] = OnnxEncoder(path, packaged_model_path(), 512, alone=True, threads=os.cpu_count() or 1).embed_ids
    vectors = {name: pooled_rows(run(windows), owners, len(picked)) for name, run in runs.items()}  # warm-up
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    loads = [os.getloadavg()]
    for _ in range(args.rounds):
        for name, run in runs.items():
            started = time.perf_counter()
            run(windows)
            seconds[name].append(time.perf_counter() - started)
        loads.append(os.getloadavg())
        print({name: round(values[-1], 2) for name, values in seconds.items()}, loads[-1], flush=True)
    mhz = float(next(line.split(":")[1] for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("cpu MHz")))
    pieces, work = sum(map(len, windows)), flops(list(map(len, windows)))
    rows = []
    for name, values in seconds.items():
        best, cosine = min(values), np.sum(vectors[name] * vectors["torch fp32"], axis=1)
        peak = (os.cpu_count() or 1) * mhz / 1e3 * OPS_PER_CYCLE[name.split()[-1] if "torch" in name else "int8"]
        rows.append({"configuration": name, "seconds": values, "docs/s": len(picked) / best, "us per word piece": best / pieces * 1e6,
                     "GOP/s": work / best / 1e9, "peak GOP/s": peak, "of peak": work / best / 1e9 / peak,
                     "speedup vs fp32": min(seconds["torch fp32"]) / best, "speedup vs bf16": min(seconds["torch bf16"]) / best,
                     "cosine mean": float(cosine.mean()), "cosine min": float(cosine.min()), "embed s": best / len(picked) * len(texts)})
    apart = np.sum(vectors["int8 batches of 32 (before)"] * vectors["int8 each window alone (product)"], axis=1)
    return {"alone vs batched": [float(apart.mean()), float(apart.min())], "chunks": len(texts), "sample": len(picked), "windows": len(windows), "word pieces": pieces, "cpu MHz": mhz,
            "load": [[round(value, 2) for value in load] for load in loads], "rows": rows}


def suite_rows(folders: dict[str, Path]) -> list[dict]:
    """Per set, each run's LOCO default, ``hybrid-score`` and vector alone (primary metric); then the means."""
    found = {label: json.loads((folder / "suite.json").read_text())["sets"] for label, folder in folders.items()}
    rows = [{"set": sets[0]["set"], "metric": sets[0]["primary"], **{f"{figure} {label}": value for label, one in zip(found, sets)
             for figure, value in (("LOCO", one["default"]["held out"]), ("hybrid-score", one["fixed"]["hybrid-score"][one["primary"]]),
                                   ("vector", one["fixed"]["vector"][one["primary"]]))}} for sets in zip(*found.values(), strict=True)]
    return rows + [{"set": "mean", "metric": "", **{key: float(np.mean([row[key] for row in rows])) for key in rows[0] if key not in ("set", "metric")}}]


def stdlib_rows(folders: dict[str, Path]) -> list[dict]:
    rows = []
    for label, folder in folders.items():
        scale = json.loads((folder / "scale.json").read_text())
        record = next(record for record in scale["sizes"] if record["size"] == "tree")
        rows.append({"run": label, "chunks": record["report"]["chunks"], "wall s": record["index"]["wall_seconds"],
                     "embed s": record["report"]["seconds"]["embed"], "CPU s": record["index"]["cpu_seconds"],
                     "peak RSS MB": record["index"]["peak_rss_sum_mb"], "largest MB": record["index"]["peak_rss_largest_mb"],
                     "load": f"{record['load_average_before']} / {record['load_average_after']}"})
    return rows


def render(result: dict, meta: dict) -> str:
    speed = result["speed"]
    lines = ["# The local model in int8, fp32 and bf16", "",
             f"{meta['cpus']}-core machine ({meta['cpu']}, {speed['cpu MHz']:.0f} MHz), Python {meta['python']}, {meta['date']}; "
             "produced by `benchmarks/int8.py` (method in its docstring).", "",
             f"## Speed and cosine to fp32 ({speed['sample']} chunks of {speed['chunks']:,}: {speed['windows']} windows, "
             f"{speed['word pieces']:,} word pieces; {len(speed['load']) - 1} rounds; load {speed['load'][0]} at the start, "
             f"{speed['load'][-1]} at the end)", "",
             f"The same chunk's int8 vector alone and batched: cosine mean {speed['alone vs batched'][0]:.4f}, min "
             f"{speed['alone vs batched'][1]:.4f}.", "",
             "| configuration | docs/s | x fp32 | x bf16 | µs per word piece | GOP/s | of its peak | cosine mean | cosine min | embed s (index) | rounds s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for row in speed["rows"]:
        lines.append(f"| {row['configuration']} | {row['docs/s']:.1f} | {row['speedup vs fp32']:.2f} | {row['speedup vs bf16']:.2f} | "
                     f"{row['us per word piece']:.0f} | {row['GOP/s']:.0f} | {100 * row['of peak']:.0f}% of {row['peak GOP/s']:.0f} | "
                     f"{row['cosine mean']:.4f} | {row['cosine min']:.4f} | {row['embed s']:.0f} | {', '.join(f'{s:.1f}' for s in row['seconds'])} |")
    if result.get("suite"):
        figures = [key for key in result["suite"][0] if key not in ("set", "metric")]
        lines += ["", "## The suite (suite.py, each precision in a home of its own): each set's primary metric x100", "",
                  "| set | metric | " + " | ".join(figures) + " |", "|---|---|" + "---:|" * len(figures)]
        lines += [f"| {r['set']} | {r['metric']} | " + " | ".join(f"{100 * r[key]:.1f}" for key in figures) + " |" for r in result["suite"]]
    if result.get("stdlib"):
        lines += ["", "## A cold `ctxrag index` of the stdlib folder (scale.py, the tree size)", "",
                  "| run | chunks | wall s | embed s | CPU s | peak RSS MB (process tree, largest process) | load before / after |", "|---|---:|---:|---:|---:|---:|---|"]
        lines += [f"| {r['run']} | {r['chunks']:,} | {r['wall s']:.0f} | {r['embed s']:.0f} | {r['CPU s']:.0f} | "
                  f"{r['peak RSS MB']:,.0f}, {r['largest MB']:,.0f} | {r['load']} |" for r in result["stdlib"]]
    return "\n".join(lines + [""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--name", default="tree")
    parser.add_argument("--sample", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--suite", nargs="+", default=[], help="LABEL=FOLDER of suite.py's output; the first is the base")
    parser.add_argument("--stdlib", nargs="+", default=[], help="LABEL=FOLDER of scale.py's output (the tree size)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    def folders(items: list[str]) -> dict[str, Path]:
        return {label: Path(folder) for label, _, folder in (item.partition("=") for item in items)}

    result = {"speed": measure(args), "suite": suite_rows(folders(args.suite)) if args.suite else None,
              "stdlib": stdlib_rows(folders(args.stdlib)) if args.stdlib else None}
    meta = machine_meta()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "int8.json").write_text(json.dumps({**result, "meta": meta}, indent=1) + "\n")
    write_report(args.out / "int8.md", render(result, meta))


if __name__ == "__main__":
    main()
