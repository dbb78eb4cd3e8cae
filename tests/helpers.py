"""Shared non-fixture test helpers: repository paths, the fake Anthropic key, and the corpora several test modules use.

Fixtures live in conftest.py files (tests/conftest.py across folders, a folder's own conftest.py for local ones);
everything a test imports by name lives here, never in another test module or a conftest.py. Production modules and
heavy libraries are imported inside the helpers that need them, so importing this module stays cheap.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ctxrag.tasks.context.claude.settings import ClaudeSettings
from ctxrag.tasks.options import IndexOptions, from_flat

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from tests.equipment.anthropic_simulator import AnthropicSimulator

# --- paths ---------------------------------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"  # the cookbook's codebase and docs corpora, beside the repository
SAMPLE_CORPUS = REPO / "data" / "sample" / "corpus"
SAMPLE_QUESTIONS = REPO / "data" / "sample" / "questions.jsonl"
BENCHMARKS = REPO / "benchmarks"  # scripts, not a package: they import each other by bare name from their folder


def benchmark_module(name: str) -> ModuleType:
    """``benchmarks/NAME.py`` imported as the scripts import it (their folder first on sys.path)."""
    import importlib
    import sys

    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    return importlib.import_module(name)


def index_as_sample(home: Path, corpus: Path = SAMPLE_CORPUS, **options: Any) -> str:
    """Index ``corpus`` as "sample" in ``home`` in this process (the session's Prefect harness), with ``options``
    (``IndexOptions``' fields); the version made live."""
    import pytest

    import ctxrag

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CTXRAG_HOME", str(home))
        report = ctxrag.index(corpus, name="sample", **options)
    assert report.status == "published" and report.chunks > 0 and report.index == "sample", report
    return report.version


def copy_home(template: Path, destination: Path) -> Path:
    """A copy of the home ``template`` (the session's ``sample_index``) at ``destination``: a home its tests may change."""
    import shutil

    return Path(shutil.copytree(template, destination, symlinks=True))


# --- index rows (tests/tasks/retrieval) ---------------------------------------------------------------------------


def index_rows(chunks: list[tuple[str, int, str, str]], documents: dict[str, str]) -> pa.Table:
    """Index rows (doc_id, chunk_index, heading, content) in the order given (a backend may store a document's chunks
    in any order), with each document's hash from ``documents`` (doc_id -> its text)."""
    import pyarrow as pa

    from ctxrag.tasks.common.models import sha256_hex

    return pa.table(
        {
            "chunk_id": [f"{doc}#{index}" for doc, index, _, _ in chunks],
            "doc_id": [doc for doc, _, _, _ in chunks],
            "chunk_index": [index for _, index, _, _ in chunks],
            "doc_sha": [sha256_hex(doc, documents[doc]) for doc, _, _, _ in chunks],
            "heading": [heading for _, _, heading, _ in chunks],
            "content": [content for _, _, _, content in chunks],
        }
    )


# --- a user's folder with its own tasks, storage and flows (tests/test_packaging.py, test_prefect_server.py) -------

SHADOWING_MODULES = ("tasks.py", "storage/__init__.py", "flows/__init__.py")


def shadowing_folder(path: Path) -> Path:
    """A user's project at ``path``: its own ``tasks.py``, ``storage/`` and ``flows/`` (each raising on import, so
    ctxrag importing a generic top-level name shows at once) and a copy of the sample data (``data/sample``)."""
    import shutil

    for name in SHADOWING_MODULES:
        module = path / name
        module.parent.mkdir(parents=True, exist_ok=True)
        module.write_text(f'raise RuntimeError("the user\'s own {name} was imported")\n')
    shutil.copytree(REPO / "data" / "sample", path / "data" / "sample")
    return path


# --- keys ----------------------------------------------------------------------------------------------------------

ANTHROPIC_TEST_KEY = "sk-ant-test-DO-NOT-LEAK-0123456789"  # set by the ``anthropic_simulator`` fixture; never real

# --- paid index runs against the Anthropic simulator (tests/flows/test_index_claude*.py) -----------------------------

CHUNK_TEXT = re.compile(r"<chunk>\n(.*?)\n</chunk>", re.S)


def words(prefix: str, count: int) -> str:
    return " ".join(f"{prefix}{i}" for i in range(count))


def write_corpus(
    path: Path,
    big_docs: int = 2,
    chunks_per_doc: int = 4,
    edit: str = "",
    words_per_chunk: int = 1400,
    small_chunks: int | None = None,
) -> dict[str, str]:
    """A cookbook-format corpus: ``big_docs`` documents above Haiku 4.5's cache minimum (with enough chunks of
    ``words_per_chunk`` words), one small one (``small_chunks`` chunks of 120 words, default ``chunks_per_doc``)."""
    records, texts = [], {}
    for d in range(big_docs + 1):
        size = words_per_chunk if d < big_docs else 120  # words per chunk
        count = chunks_per_doc if d < big_docs or small_chunks is None else small_chunks
        chunks = [words(f"d{d}c{c}w", size) + (edit if d == 0 and c == 0 else "") for c in range(count)]
        for c, text in enumerate(chunks):
            texts[text] = f"doc{d}_chunk{c}"
        records.append(
            {
                "doc_id": f"doc{d}",
                "original_uuid": f"uuid-{d}",
                "content": "\n".join(chunks),
                "chunks": [
                    {"chunk_id": f"doc{d}_chunk{c}", "original_index": c, "content": text}
                    for c, text in enumerate(chunks)
                ],
            }
        )
    path.write_text(json.dumps(records))
    return texts


def requested_chunks(simulator: AnthropicSimulator, texts: dict[str, str], since: int = 0) -> list[str]:
    """The chunk ids (from ``write_corpus``'s texts) the simulator was asked to contextualize, in request order."""
    found = []
    for request in simulator.requests[since:]:
        if request.path == "/v1/messages" and request.json:
            for block in request.json["messages"][0]["content"]:
                found += [texts[match] for match in CHUNK_TEXT.findall(block.get("text", "")) if match in texts]
    return found


def index_options(**flat: Any) -> IndexOptions:
    """``IndexOptions`` from the command's flat names (``contextualizer="none"``, ``rpm=50``)."""
    return from_flat(IndexOptions, flat, "test")


def run(corpus: Path, home: Path, **claude: Any) -> dict:
    """Index ``corpus`` as "paid" with the Claude contextualizer (batches polled every 0.05 s)."""
    from ctxrag.flows.index import index_corpus

    options = IndexOptions(contextualizer="claude", claude=ClaudeSettings(**{"batch_poll_seconds": 0.05, **claude}))
    return index_corpus(source=str(corpus), name="paid", home=str(home), options=options)


# --- Elasticsearch chunks (tests/storage/test_elasticsearch_*.py, test_index_store_elasticsearch.py) ---------------

DIMS = 8

# (content, context): about 20 chunks on distinct subjects; a few carry code identifiers.
CHUNKS = [
    (
        "Boil the pasta in salted water, then toss it with crushed tomatoes and basil.",
        "Recipe: a quick Italian dinner.",
    ),
    ("The DiffExecutor applies each hunk in order and stops at the first conflict.", "Source file: patching/core.py."),
    ("Glaciers carve U-shaped valleys as they advance over thousands of years.", "Geography notes on erosion."),
    ("Call parse_http_request(raw) to turn the bytes into a Request object.", "API reference for the web module."),
    ("The violin section enters softly in the second movement.", "Concert programme notes."),
    ("Photosynthesis converts light, water and carbon dioxide into sugar.", "Biology lesson on plants."),
    ("The RetryPolicy doubles its delay after every failed attempt.", "Source file: net/retry.py."),
    ("Saturn's rings are made of ice particles and rocky debris.", "Astronomy overview of the planets."),
    ("A sourdough starter needs flour, water and a few days of patience.", "Baking guide."),
    ("The referee showed a red card in the final minute of the match.", "Sports report."),
    ("Compound interest grows savings faster than simple interest.", "Personal finance primer."),
    ("The lighthouse keeper trimmed the wick every evening at dusk.", "A short story about the coast."),
    ("Volcanic eruptions release ash and sulfur dioxide into the air.", "Geology notes on volcanoes."),
    ("The migration of monarch butterflies spans thousands of kilometres.", "Nature documentary transcript."),
    ("A haiku has three lines of five, seven and five syllables.", "Poetry workshop handout."),
    ("The tokenizer splits camelCase identifiers into their parts.", "Search engine design notes."),
    ("Chess openings such as the Sicilian Defence favour counterattack.", "Chess strategy guide."),
    ("The museum reopened its Egyptian gallery after renovation.", "City news."),
    ("Penguins huddle together to survive the Antarctic winter.", "Wildlife encyclopaedia."),
    ("Espresso is brewed by forcing hot water through fine coffee grounds.", "Cafe training manual."),
]


def chunk_table(tag: str = "") -> pa.Table:
    import pyarrow as pa

    return pa.table(
        {
            "chunk_id": [f"doc{i // 5}-c{i % 5}{tag}" for i in range(len(CHUNKS))],
            "doc_id": [f"doc{i // 5}" for i in range(len(CHUNKS))],
            "chunk_index": pa.array([i % 5 for i in range(len(CHUNKS))], type=pa.int64()),
            "key": [f"key{i:02d}{tag}" for i in range(len(CHUNKS))],
            "heading": [""] * len(CHUNKS),
            "content": [content for content, _ in CHUNKS],
            "context": [context for _, context in CHUNKS],
        }
    )


def chunk_vectors() -> np.ndarray:
    import numpy as np

    vectors = np.random.default_rng(7).normal(size=(len(CHUNKS), DIMS)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def row_of(word: str) -> int:
    return next(row for row, (content, _) in enumerate(CHUNKS) if word in content)
