"""The fp32 ONNX graph: built from the packaged MiniLM's weights without torch, equal to sentence-transformers' vectors
on torch (where the torch extra is installed), and used for queries and fp32 documents without importing torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ctxrag.storage.environment import models_dir
from ctxrag.tasks.embedding.embed import EmbedderSpec, LocalEmbedder, packaged_model_path
from ctxrag.tasks.embedding.onnx_queries import OnnxEncoder, export_path, token_sorted_batches

SPEC = EmbedderSpec(max_seq_length=512)
SLOW = pytest.mark.slow  # the ONNX graph, torch's model, a new process
COOKBOOK = Path(__file__).resolve().parents[4] / "shared" / "data" / "codebase" / "codebase_chunks.json"

QUERIES = ["where are retries configured?", "How does the tokenizer split camelCase identifiers", "x", "pooling " * 300]


@pytest.fixture(scope="module")
def onnx_file() -> Path:
    """The session's export (CTXRAG_MODELS_DIR is per test session), made through the embedder as a user's first query does."""
    LocalEmbedder(SPEC, models_dir=models_dir()).embed(["warm-up"], input_type="query")
    path = export_path(models_dir(), SPEC.model)
    assert path.is_file()
    return path


def real_texts(count: int) -> list[str]:
    """The cookbook's first chunks (real code), else the queries."""
    if not COOKBOOK.is_file():
        return QUERIES
    documents = json.loads(COOKBOOK.read_text())
    return [chunk["content"] for document in documents for chunk in document["chunks"]][:count]


@SLOW
def test_the_graph_s_vectors_equal_sentence_transformers_on_torch(onnx_file: Path) -> None:
    """Parity with the torch path: the cookbook's chunks and the queries, each within 1e-5 cosine (fp32)."""
    sentence_transformers = pytest.importorskip("sentence_transformers")  # the torch extra
    model = sentence_transformers.SentenceTransformer(str(packaged_model_path()), device="cpu")
    model.max_seq_length = SPEC.max_seq_length
    texts = [*QUERIES, *real_texts(32)]
    expected = model.encode(texts, batch_size=16, normalize_embeddings=True, convert_to_numpy=True)
    got = OnnxEncoder(onnx_file, packaged_model_path(), SPEC.max_seq_length).embed(texts)
    assert got.shape == expected.shape == (len(texts), 384)
    assert float(np.min(np.sum(got * expected, axis=1))) >= 1 - 1e-5
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    whole = LocalEmbedder(EmbedderSpec(max_seq_length=512), precision="fp32").embed(texts)  # fp32 documents
    assert float(np.min(np.sum(whole * expected, axis=1))) >= 1 - 1e-5


@SLOW
def test_a_query_s_vector_is_the_same_alone_or_batched_with_others(onnx_file: Path) -> None:
    """Batches are formed by token count (little padding); the padding is masked, so each row is the one alone."""
    encoder = OnnxEncoder(onnx_file, packaged_model_path(), SPEC.max_seq_length)
    texts = [
        f"{word} " * (index % 23 + 1) + "retry backoff" for index, word in enumerate(["queue", "task", "worker"] * 25)
    ]
    batched = encoder.embed(texts)
    assert batched.shape == (len(texts), 384)
    assert np.array_equal(batched, np.vstack([encoder.embed([text]) for text in texts]))
    assert encoder.embed([]).shape[0] == 0


@SLOW
def test_fp32_documents_and_queries_run_on_the_graph_not_torch(onnx_file: Path) -> None:
    calls = []
    original = LocalEmbedder.model.fget

    class Spy(LocalEmbedder):
        @property
        def model(self):  # type: ignore[no-untyped-def]
            calls.append("torch")
            return original(self)

    spy = Spy(SPEC, precision="fp32", models_dir=onnx_file.parent)
    spy.embed(["a query"], input_type="query")
    spy.embed(["def document(): pass"], input_type="document")
    assert calls == []


@SLOW
def test_the_graph_is_built_where_torch_cannot_be_imported(tmp_path: Path) -> None:
    """As in a core install: torch, transformers and sentence-transformers unimportable, an empty models folder."""
    code = (
        "import sys, json\n"
        "for name in ('torch', 'transformers', 'sentence_transformers'): sys.modules[name] = None\n"
        "from ctxrag.tasks.embedding.embed import EmbedderSpec, LocalEmbedder\n"
        "from ctxrag.storage.environment import models_dir\n"
        "spec = EmbedderSpec.choose('local', None, 512, None)\n"
        "queries = LocalEmbedder(spec, precision='fp32').embed(['where are retries configured?'], 'query')\n"
        "documents = LocalEmbedder(spec, precision='fp32').embed(['def f():\\n    return 1', 'x'])\n"
        "print(json.dumps({'shapes': [list(queries.shape), list(documents.shape)], 'files': sorted(p.name for p in models_dir().glob('*.onnx'))}))\n"
    )
    env = {**os.environ, "CTXRAG_MODELS_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {
        "shapes": [[1, 384], [2, 384]],
        "files": [export_path(tmp_path, SPEC.model).name],
    }


@SLOW
def test_a_query_in_a_new_process_imports_no_torch(onnx_file: Path) -> None:
    code = (
        "import sys, json\n"
        "from ctxrag.tasks.embedding.embed import EmbedderSpec, LocalEmbedder\n"
        "from ctxrag.storage.environment import models_dir\n"
        "vector = LocalEmbedder(EmbedderSpec(max_seq_length=512), models_dir=models_dir()).embed(['where are retries configured?'], input_type='query')\n"
        "print(json.dumps({'torch': 'torch' in sys.modules, 'shape': list(vector.shape)}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"torch": False, "shape": [1, 384]}


@SLOW
def test_a_graph_whose_vectors_are_not_whole_is_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ctxrag.tasks.embedding.onnx_queries as onnx_queries

    class Broken(OnnxEncoder):
        def embed(self, texts: list[str]) -> np.ndarray:
            return np.full((len(texts), 384), np.nan, dtype=np.float32)

    monkeypatch.setattr(onnx_queries, "OnnxEncoder", Broken)
    target = export_path(tmp_path, SPEC.model)
    assert onnx_queries.export_query_model(packaged_model_path(), target) is False
    assert list(tmp_path.iterdir()) == []  # neither the graph nor its partial file


def test_batches_group_texts_by_token_count_longest_first() -> None:
    assert token_sorted_batches([3, 9, 1, 9, 5], 2) == [[1, 3], [4, 0], [2]]
    assert token_sorted_batches([], 32) == []
    assert token_sorted_batches([9, 3, 9, 1, 5], 4, max_tokens=18) == [[0, 2], [4, 1, 3]]
    assert token_sorted_batches([40], 4, max_tokens=8) == [[0]]  # an input longer than the budget goes alone
