"""The ONNX query encoder: made from the packaged MiniLM, equal to torch's vectors, and used without importing torch."""

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
SLOW = pytest.mark.slow  # the ONNX export, torch's model, a new process

QUERIES = ["where are retries configured?", "How does the tokenizer split camelCase identifiers", "x", "pooling " * 300]


@pytest.fixture(scope="module")
def onnx_file() -> Path:
    """The session's export (CTXRAG_MODELS_DIR is per test session), made through the embedder as a user's first query does."""
    LocalEmbedder(SPEC, models_dir=models_dir()).embed(["warm-up"], input_type="query")
    path = export_path(models_dir(), SPEC.model)
    assert path.is_file()
    return path


@SLOW
def test_onnx_query_vectors_equal_torchs_fp32_vectors(onnx_file: Path) -> None:
    torch_vectors = LocalEmbedder(SPEC, precision="fp32").embed(QUERIES, input_type="query")
    onnx_vectors = OnnxEncoder(onnx_file, packaged_model_path(), SPEC.max_seq_length).embed(QUERIES)
    assert onnx_vectors.shape == torch_vectors.shape == (len(QUERIES), 384)
    assert np.abs(onnx_vectors - torch_vectors).max() < 1e-4
    assert np.allclose(np.linalg.norm(onnx_vectors, axis=1), 1.0, atol=1e-5)


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
def test_documents_are_still_embedded_by_torch(onnx_file: Path) -> None:
    calls = []
    original = LocalEmbedder.model.fget

    class Spy(LocalEmbedder):
        @property
        def model(self):  # type: ignore[no-untyped-def]
            calls.append("torch")
            return original(self)

    spy = Spy(SPEC, precision="fp32", models_dir=onnx_file.parent)
    spy.embed(["a query"], input_type="query")
    assert calls == []
    spy.embed(["def document(): pass"], input_type="document")
    assert calls == ["torch"]


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
def test_an_export_that_does_not_match_torch_is_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ctxrag.tasks.embedding.onnx_queries as onnx_queries

    monkeypatch.setattr(onnx_queries, "PARITY_COSINE", 1.5)  # no export can reach it
    target = export_path(tmp_path, SPEC.model)
    assert onnx_queries.export_query_model(packaged_model_path(), target) is False
    assert list(tmp_path.iterdir()) == []  # neither the export nor its partial file


def test_batches_group_texts_by_token_count_longest_first() -> None:
    assert token_sorted_batches([3, 9, 1, 9, 5], 2) == [[1, 3], [4, 0], [2]]
    assert token_sorted_batches([], 32) == []
