"""int8 vectors: the int8 file is made once from the packaged model and reused, kept only near fp32, and it embeds
documents and queries without torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ctxrag.tasks.embedding.local_runtimes as runtimes
import ctxrag.tasks.embedding.onnx_int8 as onnx_int8
from ctxrag.storage.environment import models_dir
from ctxrag.tasks.embedding.embed import EmbedderSpec, LocalEmbedder, packaged_model_path
from ctxrag.tasks.embedding.embedder_spec import INT8_RECIPE
from ctxrag.tasks.embedding.onnx_int8 import Int8Refused, int8_path
from ctxrag.tasks.embedding.onnx_queries import OnnxEncoder

pytestmark = (
    pytest.mark.slow
)  # the int8 file (the graph built from the weights, onnxruntime's quantizer), new processes
COOKBOOK = Path(__file__).resolve().parents[4] / "shared" / "data" / "codebase" / "codebase_chunks.json"

SPEC = EmbedderSpec.choose("local", None, 512, None)
INT8 = EmbedderSpec(**{**SPEC.to_dict(), "precision": "int8"})  # type: ignore[arg-type]
DOCUMENTS = [
    SPEC.embedded_text(
        "File: retry.py. retry.", "def retry(fn, attempts=3):\n    for attempt in range(attempts):\n        return fn()"
    ),
    SPEC.embedded_text(
        "File: README.md. Install.", "Install the package with pip, then run the server on port 8080. " * 20
    ),
    SPEC.embedded_text("", "x"),
]
QUERIES = ["where are retries configured?", "How does the tokenizer split camelCase identifiers", "pooling " * 300]


@pytest.fixture(scope="module")
def int8_file() -> Path:
    """The session's int8 file (CTXRAG_MODELS_DIR is per test session), made as a first int8 index makes it."""
    LocalEmbedder(INT8).embed(DOCUMENTS[:1])
    path = int8_path(models_dir(), SPEC.model)
    assert path.is_file()
    return path


def test_int8_vectors_are_unit_float32_rows_close_to_fp32(int8_file: Path) -> None:
    for texts, input_type in ((DOCUMENTS, "document"), (QUERIES, "query")):
        int8 = LocalEmbedder(INT8).embed(texts, input_type)
        fp32 = LocalEmbedder(SPEC, precision="fp32").embed(texts, input_type)
        assert int8.dtype == np.float32 and int8.shape == fp32.shape == (len(texts), 384)
        assert np.allclose(np.linalg.norm(int8, axis=1), 1.0, atol=1e-5)
        cosine = np.sum(int8 * fp32, axis=1)
        assert cosine.min() > 0.97 and cosine.mean() > 0.985, cosine  # the least: a one-character text (0.980)
        assert float(cosine.min()) < 0.99999  # int8 indeed: not fp32 by another road


def test_a_text_has_one_int8_vector_alone_or_among_others(int8_file: Path) -> None:
    """Dynamic quantization takes one activation scale per run: in a batch, a text's vector would move with its
    batch-mates (cosine down to 0.985 on the cookbook's chunks). Each input runs alone, so it does not."""
    embedder = LocalEmbedder(INT8)
    for texts, input_type in ((DOCUMENTS, "document"), (QUERIES, "query")):
        together = embedder.embed(texts, input_type)
        alone = np.vstack([embedder.embed([text], input_type) for text in texts])
        assert np.array_equal(together, alone), input_type
        assert np.array_equal(embedder.embed(texts[::-1], input_type), together[::-1])
    assert OnnxEncoder(int8_file, packaged_model_path(), 512, alone=True).embed([]).shape[0] == 0


def test_the_int8_file_is_made_once_and_reused(int8_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made = int8_file.stat().st_mtime_ns

    def never(model_dir: Path, target: Path) -> bool:
        raise AssertionError("the int8 file was made again")

    monkeypatch.setattr(onnx_int8, "make_int8_model", never)
    runtimes.int8_encoder.cache_clear()  # as a new process: found on disk
    LocalEmbedder(INT8).embed(DOCUMENTS)
    assert int8_file.stat().st_mtime_ns == made
    made_here = [
        path.name for path in int8_file.parent.iterdir() if path.name.startswith(SPEC.model) and "int8" in path.name
    ]
    assert made_here == [int8_file.name]  # no leftovers (other models in the folder are not this file's)


def test_the_int8_file_is_the_fused_graph_with_every_matrix_product_in_int8(int8_file: Path) -> None:
    import onnx
    import onnxruntime

    kinds = [node.op_type for node in onnx.load(str(int8_file)).graph.node]
    assert (
        kinds.count("QAttention") == 6 and kinds.count("MatMulInteger") == 18
    )  # per layer: attention's output, 2 feed-forward
    assert (
        "MatMul" not in kinds and "EmbedLayerNormalization" in kinds
    )  # nothing left in fp32 but the embeddings' table
    assert f"onnxruntime-{onnxruntime.__version__}" in int8_file.name and INT8_RECIPE in int8_file.name


def test_int8_documents_and_queries_in_a_new_process_import_no_torch(int8_file: Path) -> None:
    code = (
        "import sys, json\n"
        "from ctxrag.tasks.embedding.embed import EmbedderSpec, LocalEmbedder\n"
        f"spec = EmbedderSpec.from_dict({INT8.to_dict()!r})\n"
        "documents = LocalEmbedder(spec).embed(['def f(): pass', 'x'])\n"
        "queries = LocalEmbedder(spec).embed(['where is f?'], 'query')\n"
        "print(json.dumps({'torch': 'torch' in sys.modules, 'shapes': [list(documents.shape), list(queries.shape)]}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"torch": False, "shapes": [[2, 384], [1, 384]]}


def test_an_int8_file_too_far_from_fp32_is_refused_and_nothing_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(onnx_int8, "MIN_COSINE", 1.5)  # no int8 file can reach it
    assert onnx_int8.make_int8_model(packaged_model_path(), int8_path(tmp_path, SPEC.model)) is False
    assert list(tmp_path.iterdir()) == []  # neither the file, its partial file nor the scratch folder
    with pytest.raises(Int8Refused):
        runtimes.int8_model(tmp_path, SPEC.model)


def test_the_int8_file_gives_the_vectors_of_the_one_made_from_torch_s_export(int8_file: Path, tmp_path: Path) -> None:
    """The torch-free int8 file against the one torch's export, the optimizer and the same quantization made (the
    torch extra): the same int8 weights, so the same vectors (an index built before keeps its keys)."""
    pytest.importorskip("transformers")
    from tests.equipment.torch_export import torch_int8

    made_by_torch = tmp_path / "torch-int8.onnx"
    torch_int8(packaged_model_path(), tmp_path, made_by_torch)
    documents = json.loads(COOKBOOK.read_text()) if COOKBOOK.is_file() else []
    texts = [*QUERIES, *DOCUMENTS, *(chunk["content"] for document in documents for chunk in document["chunks"])][:80]
    ours = OnnxEncoder(int8_file, packaged_model_path(), 512, alone=True).embed(texts)
    theirs = OnnxEncoder(made_by_torch, packaged_model_path(), 512, alone=True).embed(texts)
    assert float(np.min(np.sum(ours * theirs, axis=1))) >= 1 - 1e-6


def test_the_int8_timing_runs_here_on_the_real_model(int8_file: Path) -> None:
    import math

    import ctxrag.tasks.embedding.precision as precision

    precision.measured_int8_speedup.cache_clear()
    speedup = precision.measured_int8_speedup("fp32")
    assert math.isfinite(speedup) and speedup > 0
