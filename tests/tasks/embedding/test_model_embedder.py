"""Any local bi-encoder from a folder: the vectors are the model's own (checked against transformers run directly),
with its pooling and prefixes, on onnxruntime or torch alike. The models are tiny ones the tests build."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from ctxrag.storage.errors import InvalidInput
from ctxrag.tasks.embedding.embedder_spec import EmbedderSpec
from ctxrag.tasks.embedding.embedders import make_embedder
from ctxrag.tasks.embedding.model_embedder import ModelEmbedder
from tests.equipment.tiny_models import bi_encoder_folder

pytestmark = pytest.mark.slow  # builds models with torch

TEXTS = ["File: client.py\nDefines: retry\n\ndef retry(request):\n    return request", "how are retries delayed?"]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("models")
    bi_encoder_folder(root / "cls-onnx", pooling="cls", prompts={"query": "q: ", "document": "d: "}, onnx=True)
    shutil.copytree(root / "cls-onnx", root / "cls-torch")
    (root / "cls-torch" / "model.onnx").unlink()
    bi_encoder_folder(root / "mean", pooling="mean")
    return root


def reference(folder: Path, texts: list[str], pooling: str) -> np.ndarray:
    """transformers' own model and tokenizer, pooled by hand, unit length."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModel.from_pretrained(str(folder)).eval()
    rows = []
    for text in texts:
        encoded = tokenizer(text, return_tensors="pt", truncation=True, max_length=128)
        with torch.no_grad():
            hidden = model(**encoded).last_hidden_state[0].numpy()
        vector = hidden[0] if pooling == "cls" else hidden.mean(axis=0)
        rows.append(vector / np.linalg.norm(vector))
    return np.array(rows)


def spec_of(folder: Path, window_tokens: int = 0) -> EmbedderSpec:
    return EmbedderSpec.choose("local", str(folder), 512, None, window_tokens=window_tokens)


@pytest.mark.parametrize("name", ["cls-onnx", "cls-torch"])
def test_vectors_are_the_model_s_own_with_its_pooling_and_prefixes(models: Path, name: str) -> None:
    embedder = make_embedder(spec_of(models / name))
    assert isinstance(embedder, ModelEmbedder)
    queries = embedder.embed(TEXTS, "query")
    documents = embedder.embed(TEXTS, "document")
    np.testing.assert_allclose(
        queries, reference(models / "cls-torch", [f"q: {text}" for text in TEXTS], "cls"), atol=2e-5
    )
    np.testing.assert_allclose(
        documents, reference(models / "cls-torch", [f"d: {text}" for text in TEXTS], "cls"), atol=2e-5
    )


def test_mean_pooling_from_the_folder_s_pooling_file(models: Path) -> None:
    vectors = make_embedder(spec_of(models / "mean")).embed(TEXTS, "query")
    np.testing.assert_allclose(vectors, reference(models / "mean", TEXTS, "mean"), atol=2e-5)


def test_a_long_document_is_the_mean_of_its_windows_in_the_model_s_word_pieces(models: Path) -> None:
    from ctxrag.tasks.embedding.windows import windowed_text

    text = windowed_text(
        "File: client.py", "\n".join(f"def retry{n}(request): return request.open(file)" for n in range(30))
    )
    windowed = make_embedder(spec_of(models / "cls-onnx", window_tokens=32))
    vector = windowed.embed([text], "document")[0]
    pieces = ModelEmbedder(spec_of(models / "cls-onnx", window_tokens=32))._piece_counts(text.split("\n"))
    assert sum(pieces) > 64  # several windows
    from ctxrag.tasks.embedding.windows import split_windows

    windows = split_windows(text, 32, ModelEmbedder(spec_of(models / "cls-onnx"))._piece_counts)
    whole = make_embedder(spec_of(models / "cls-onnx")).embed(windows, "document").mean(axis=0)
    np.testing.assert_allclose(vector, whole / np.linalg.norm(whole), atol=2e-5)


def test_a_changed_model_folder_is_refused_by_the_index_built_with_it(models: Path, tmp_path: Path) -> None:
    folder = shutil.copytree(models / "mean", tmp_path / "model")
    spec = spec_of(folder)
    bi_encoder_folder(folder, pooling="mean", seed=1)  # other weights in the same place
    with pytest.raises(InvalidInput, match="not those the index was built with"):
        make_embedder(spec).embed(["query"], "query")


def sentence_transformers_folder(source: Path, target: Path, pooling: str, dense: str | None) -> Path:
    """``source``'s tiny BERT saved by sentence-transformers itself with ``pooling``, a Dense layer of 16 outputs
    (``dense``: "tanh" or "identity"; None: none) and Normalize: its modules.json and the modules' folders."""
    import torch
    from sentence_transformers import SentenceTransformer, models

    torch.manual_seed(1)
    modules = [models.Transformer(str(source), max_seq_length=128), models.Pooling(32, pooling_mode=pooling)]
    if dense:
        activation = torch.nn.Tanh() if dense == "tanh" else torch.nn.Identity()
        modules.append(models.Dense(32, 16, activation_function=activation))
    modules.append(models.Normalize())
    SentenceTransformer(modules=modules, device="cpu").save(str(target))
    return target


@pytest.mark.parametrize(("pooling", "dense"), [("mean", "tanh"), ("max", None), ("cls", "identity")])
@pytest.mark.parametrize("runtime", ["onnx", "torch"])
def test_modules_json_pooling_dense_and_normalize_give_sentence_transformers_own_vectors(
    models: Path, tmp_path: Path, pooling: str, dense: str | None, runtime: str
) -> None:
    """modules.json read, not assumed: the folder's Pooling, Dense and Normalize modules, against
    sentence-transformers' own ``encode`` of the same folder."""
    from sentence_transformers import SentenceTransformer

    folder = sentence_transformers_folder(models / "mean", tmp_path / "st", pooling, dense)
    expected = SentenceTransformer(str(folder), device="cpu").encode(TEXTS, convert_to_numpy=True)
    if runtime == "onnx":
        shutil.copy(models / "cls-onnx" / "model.onnx", folder / "model.onnx")  # the same weights (seed 0)
        (folder / "model.safetensors").unlink()
    vectors = make_embedder(spec_of(folder)).embed(TEXTS, "query")
    assert vectors.shape == expected.shape == (len(TEXTS), 16 if dense else 32)
    np.testing.assert_allclose(vectors, expected, atol=2e-5)
