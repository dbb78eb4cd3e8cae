"""The corpora `benchmarks/scale.py` generates: cookbook-format JSON of code-like text from a seeded vocabulary (QUERIES
find BM25 matches in it as in real code); and its fast path, the embeddings (and empty contexts) a run asks for,
pre-seeded in a helper process (scale.py's `_seed` mode, importing the measured source) so it never runs the model."""

from __future__ import annotations

import itertools
import json
import os
import random
import sys
import time
from pathlib import Path

from common import REPO  # benchmarks/common.py

CHUNKS_PER_DOCUMENT = 20
SEED_PART_ROWS = 10_000
DIMENSION = 384

QUERIES = [
    "how are failed tasks retried with a delay",
    "where is the configuration file parsed",
    "open a database connection",
    "read the cache from disk",
    "compute the hash of a buffer",
    "register a callback for an event",
    "split a string into tokens",
    "check that the input shape is valid",
    "convert the tensor to a list",
    "lock shared state between threads",
    "write the result to a file",
    "raise an error when the key is missing",
    "iterate over the graph nodes",
    "schedule a job for later",
    "serialize the object to json",
    "decode the response from the server",
    "merge two sorted lists",
    "normalize the vector length",
    "build the index from documents",
    "load the model weights",
    "log a warning message",
    "timeout waiting for a reply",
    "parse command line arguments",
    "compile the kernel for the device",
    "free the allocated buffer",
    "find the shortest path",
    "default value of the option",
    "update the counter atomically",
    "flush the queue",
    "validate the schema of a record",
    "estimate the memory size",
    "cancel the running task",
    "retry with backoff",
    "fuse the loops into one",
    "replace the node in the graph",
    "guard against recursion",
    "emit the generated code",
    "match a pattern in the text",
    "cache the compiled function",
    "group rows by key",
    "sort items by priority",
    "reduce over an axis",
    "broadcast the shapes",
    "close the file handle",
    "resolve the import path",
    "count tokens in the text",
    "encode the batch",
    "track the elapsed time",
    "convert dtype to float",
    "dump the state",
]

# A seeded vocabulary for the synthetic corpus: code keywords, common programming words (so that QUERIES find
# BM25 matches in it as in real code), and generated identifiers drawn with Zipf-like weights.
PROGRAMMING_WORDS = sorted(
    set(" ".join(QUERIES).split())
    | set(
        "value result index item node graph buffer cache config state error option token queue task worker request "
        "response handle stream batch shape tensor kernel device record schema key path file data count size limit "
        "offset length time retry delay backoff lock event callback parser reader writer loader builder manager".split()
    )
)
SYLLABLES = "ka ri to mo na se lu vi de po zu ga be fi ho ja ke li mu no pa qu ra si tu ve wo xa yo ze".split()


def import_measured_code() -> None:
    """Helper modes import the measured source: --code's copy, else this repository."""
    sys.path.insert(0, os.environ.get("CTXRAG_SCALE_CODE") or str(REPO))


def write_synthetic(path: Path, chunks: int, seed: int = 20261130) -> dict[str, object]:
    """A cookbook-format corpus of ``chunks`` chunks (20 per document) of code-like text from a seeded vocabulary."""
    rng = random.Random(seed)
    identifiers = sorted({"".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(30_000)})
    vocabulary = PROGRAMMING_WORDS + identifiers
    rng.shuffle(vocabulary)
    weights = [1.0 / (rank + 1) for rank in range(len(vocabulary))]  # Zipf-like
    cumulative = list(itertools.accumulate(weights))

    def words(count: int) -> list[str]:
        return rng.choices(vocabulary, cum_weights=cumulative, k=count)

    def chunk_text(doc: int, position: int) -> str:
        lines = [f"# module m{doc} part {position}"]  # makes every chunk's text (and so its embedding key) unique
        name, *params = words(4)
        lines.append(f"def {name}_{position}({', '.join(params)}):")
        while sum(len(line) + 1 for line in lines) < rng.randint(500, 1100):
            kind = rng.random()
            a, b, c, d = words(4)
            if kind < 0.45:
                lines.append(f"    {a} = {b}.{c}({d})")
            elif kind < 0.6:
                lines.append(f"    # {' '.join(words(rng.randint(4, 10)))}")
            elif kind < 0.75:
                lines.append(f"    if {a} is not None and {b} > {c}:")
                lines.append(f"        return {d}")
            elif kind < 0.9:
                lines.append(f"    for {a} in {b}:")
                lines.append(f"        {c}.append({d})")
            else:
                lines.append(f'    raise {a.capitalize()}Error("{" ".join(words(5))}")')
        return "\n".join(lines)

    documents = chunks // CHUNKS_PER_DOCUMENT
    started = time.perf_counter()
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("[")
        for doc in range(documents):
            texts = [chunk_text(doc, position) for position in range(CHUNKS_PER_DOCUMENT)]
            record = {
                "doc_id": f"doc_{doc}",
                "original_uuid": f"synthetic-{doc:06d}",
                "content": "\n\n".join(texts),
                "chunks": [
                    {"chunk_id": f"doc_{doc}_chunk_{i}", "original_index": i, "content": text}
                    for i, text in enumerate(texts)
                ],
            }
            handle.write(("," if doc else "") + json.dumps(record))
        handle.write("]")
    return {
        "documents": documents,
        "chunks": documents * CHUNKS_PER_DOCUMENT,
        "bytes": path.stat().st_size,
        "seconds": round(time.perf_counter() - started, 1),
    }


def seed_embeddings(home: Path, source: Path, contexts: bool = False) -> None:
    """Store random unit vectors for exactly the embedding keys `ctxrag index SOURCE --contextualizer none` asks for
    (and, ``contexts``, the empty contexts it would write, so its contextualize stage submits no task)."""
    import numpy as np
    import pyarrow as pa

    import_measured_code()
    from ctxrag.storage.artifacts import embeddings_cache
    from ctxrag.tasks.embedding.embed import EmbedderSpec, vector_rows
    from ctxrag.tasks.embedding.precision import with_index_precision
    from ctxrag.tasks.load import load_source

    started = time.perf_counter()
    corpus = load_source(str(source))
    spec, _ = with_index_precision(
        EmbedderSpec.choose("local", None, 512, None), None
    )  # the CLI's default, a new index's precision
    keys = list(
        dict.fromkeys(spec.cache_key(spec.embedded_text("", chunk.content), "document") for chunk in corpus.chunks)
    )
    cache = embeddings_cache(home)
    rng = np.random.default_rng(7)
    parts = 0
    for start in range(0, len(keys), SEED_PART_ROWS):
        part = keys[start : start + SEED_PART_ROWS]
        vectors = rng.standard_normal((len(part), DIMENSION)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        cache.append(vector_rows(part, vectors, paid=False))
        parts += 1
    seeded: dict[str, object] = {"rows": len(keys), "parts": parts, "dimension": DIMENSION}
    if contexts:
        from ctxrag.storage.artifacts import contexts_cache
        from ctxrag.tasks.context.offline import NoContext, context_key
        from ctxrag.tasks.stages.contextualize import context_row

        worker, store = NoContext(), contexts_cache(home)
        documents = {document.doc_id: document for document in corpus.documents}
        rows = [
            context_row(context_key(chunk, worker, documents[chunk.doc_id]), chunk.doc_id, "", paid=False)
            for chunk in corpus.chunks
        ]
        for start in range(0, len(rows), SEED_PART_ROWS):
            store.append(pa.Table.from_pylist(rows[start : start + SEED_PART_ROWS]))
        seeded["contexts"] = len(rows)
    seeded["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(seeded))
