"""What the local model reads of each chunk, with the context whole or cut to N word pieces: per corpus, the context's
word pieces, windows per chunk, the share of windows whose context takes more than half of the window, windows cut
at 512, and the word pieces the model runs (no model is run: the tokenizer alone).

    .venv/bin/python benchmarks/context_tokens.py --home SUITE_HOME [--caps 0,128,64,32] [--out benchmarks/results]

Corpora: every index of the suite's home (``benchmarks/suite.py --home``; their stored structural contexts) and the
standard library folder (``sysconfig``'s stdlib, less site-packages and test folders, as ``ctxrag index STDLIB
--exclude site-packages --exclude test/ --exclude tests/ --exclude idle_test/`` loads it; contexts written here).
Embedded texts are ``EmbedderSpec.embedded_texts`` of the CLI's local spec (``Defines:`` cut to 100 characters,
windows of 256) at each cap; windows and their ids are ``LocalEmbedder._window_ids``'s, so the counts are the ones
the index run embeds.
"""

from __future__ import annotations

import argparse
import json
import sysconfig
from collections import defaultdict
from pathlib import Path

import numpy as np

from common import RESULTS, machine_meta, provenance, write_report
from ctxrag.storage.index_store import IndexStore
from ctxrag.tasks.context.contextualize import StructuralContextualizer
from ctxrag.tasks.embedding.embed import LocalEmbedder
from ctxrag.tasks.embedding.embedder_spec import EmbedderSpec
from ctxrag.tasks.embedding.windows import HEAD_SEPARATOR, local_word_pieces
from ctxrag.tasks.load import load_source

STDLIB_EXCLUDE = ["site-packages", "test/", "tests/", "idle_test/"]
WINDOW = 256


def stdlib_pairs() -> tuple[list[str], list[str]]:
    """(contexts, contents) of the standard library folder, as ``ctxrag index`` writes them (structural)."""
    corpus = load_source(sysconfig.get_paths()["stdlib"], exclude=STDLIB_EXCLUDE)
    by_document = defaultdict(list)
    for chunk in corpus.chunks:
        by_document[chunk.doc_id].append(chunk)
    contexts, contents = [], []
    worker = StructuralContextualizer()
    for document in corpus.documents:
        chunks = by_document.get(document.doc_id, [])
        if chunks:
            contexts += worker.contextualize(document, chunks)
            contents += [chunk.content for chunk in chunks]
    return contexts, contents


def measure(contexts: list[str], contents: list[str], cap: int) -> dict:
    spec = EmbedderSpec.choose("local", None, 512, None, WINDOW, cap)
    texts = spec.embedded_texts(contexts, contents)
    heads = np.array(local_word_pieces([text.partition(HEAD_SEPARATOR)[0] for text in texts]))
    ids, owners = LocalEmbedder(spec)._window_ids(texts)
    lengths = np.array([len(row) for row in ids])
    whole = np.array(local_word_pieces(texts)) + 2
    owner_heads = heads[np.array(owners)]
    return {
        "chunks": len(texts), "context median": float(np.median(heads)), "context mean": float(heads.mean()),
        "context p90": float(np.percentile(heads, 90)), "context max": int(heads.max()),
        "windows": len(ids), "windows per chunk": len(ids) / len(texts),
        "context over half a window": float(np.mean(owner_heads > WINDOW // 2)),
        "context share": float(np.sum(np.minimum(owner_heads, lengths - 2)) / np.sum(lengths)),
        "windows cut at 512": float(np.mean(lengths >= 512)), "whole texts over 512": float(np.mean(whole > 512)),
        "word pieces": int(lengths.sum()), "attention (sum of squares)": int(np.sum(lengths.astype(np.int64) ** 2)),
    }


def render(rows: list[dict], meta: dict, caps: list[int]) -> str:
    lines = [
        "# What the local model reads of a chunk: the context whole or cut to N word pieces",
        "",
        f"{provenance(meta)}; produced by `benchmarks/context_tokens.py` (method in its docstring). The tokenizer "
        "alone: no model is run. Windows of 256 word pieces with the `Defines:` line cut to 100 characters (the CLI's "
        "local spec); *cap*: `--context-tokens` (0: the context whole). *context*: word pieces of the context the "
        "model reads (median / p90 / max); *> half*: windows whose context takes more than 128 of the window's 256; "
        "*context share*: the context's part of all word pieces run; *cut*: windows cut at 512 (a single line longer "
        "than that); *whole > 512*: the embedded text read whole (no windows) would be cut; *word pieces*, "
        "*attention*: what the model runs, [CLS] and [SEP] included (attention: the sum of squared window lengths).",
        "",
        "| corpus | chunks | cap | context median / p90 / max | windows (per chunk) | > half | context share | cut at 512 | whole > 512 | word pieces | vs cap 0 | attention vs cap 0 |",
        "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        base = row["by cap"][str(caps[0])]
        for cap in caps:
            m = row["by cap"][str(cap)]
            lines.append(
                f"| {row['corpus']} | {m['chunks']:,} | {cap or 'whole'} | {m['context median']:.0f} / {m['context p90']:.0f} / {m['context max']} | "
                f"{m['windows']:,} ({m['windows per chunk']:.2f}) | {100 * m['context over half a window']:.1f}% | "
                f"{100 * m['context share']:.1f}% | {100 * m['windows cut at 512']:.1f}% | "
                f"{100 * m['whole texts over 512']:.1f}% | {m['word pieces'] / 1e6:.2f} M | "
                f"{100 * (m['word pieces'] / base['word pieces'] - 1):+.1f}% | "
                f"{100 * (m['attention (sum of squares)'] / base['attention (sum of squares)'] - 1):+.1f}% |"
            )
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True, help="the suite's home (benchmarks/suite.py --home)")
    parser.add_argument("--caps", default="0,128,64,32")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    caps = [int(cap) for cap in args.caps.split(",")]
    store = IndexStore(args.home.resolve())
    corpora = [(name, lambda name=name: (store.open(name).chunks["context"].to_pylist(), store.open(name).chunks["content"].to_pylist()))
               for name in store.names()]
    corpora.append(("the stdlib folder (less site-packages and tests)", stdlib_pairs))
    rows = []
    for name, pairs in corpora:
        contexts, contents = pairs()
        rows.append({"corpus": name, "by cap": {str(cap): measure(contexts, contents, cap) for cap in caps}})
        print(json.dumps(rows[-1]), flush=True)
    meta = machine_meta()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "context_tokens.json").write_text(json.dumps({"rows": rows, "meta": meta}, indent=1) + "\n")
    write_report(args.out / "context_tokens.md", render(rows, meta, caps))


if __name__ == "__main__":
    main()
