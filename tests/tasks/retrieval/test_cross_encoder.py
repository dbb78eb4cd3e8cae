"""A local cross-encoder reranks by its own scores (checked against sentence-transformers' CrossEncoder), from a folder
with transformers weights or an ONNX file; a folder that is not a cross-encoder is refused before any search."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ctxrag.tasks.embedding.model_card import ModelFolderError
from ctxrag.tasks.retrieval.cross_encoder import CrossEncoderReranker
from ctxrag.tasks.retrieval.rerank import RerankSpec
from tests.equipment.tiny_models import bi_encoder_folder, cross_encoder_folder

pytestmark = pytest.mark.slow  # builds models with torch

DOCUMENTS = [
    "the cat sat",
    "retry with exponential backoff",
    "backoff and retry limits",
    "unrelated text",
    "open the file",
]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cross")
    cross_encoder_folder(root / "torch")
    cross_encoder_folder(root / "onnx", onnx=True)
    (root / "onnx" / "model.safetensors").unlink()
    shutil.copy(root / "torch" / "model.safetensors", root / "model.safetensors")  # the reference loads these
    return root


@pytest.mark.parametrize("name", ["torch", "onnx"])
def test_orders_by_the_model_s_own_scores(models: Path, name: str) -> None:
    from sentence_transformers import CrossEncoder

    reranker = RerankSpec.from_str(f"local:{models / name}").build()  # type: ignore[union-attr]
    assert isinstance(reranker, CrossEncoderReranker) and reranker.card.runtime == name
    order = reranker.rerank("retry backoff", DOCUMENTS, 3)
    scores = CrossEncoder(str(models / "torch"), device="cpu").predict([("retry backoff", text) for text in DOCUMENTS])
    assert order == sorted(range(len(DOCUMENTS)), key=lambda i: (-float(scores[i]), i))[:3]
    assert reranker.depth(5) == 30 and reranker.rerank("q", [], 3) == []


def test_a_bi_encoder_or_a_missing_folder_is_refused_when_the_reranker_is_built(tmp_path: Path) -> None:
    with pytest.raises(ModelFolderError, match="holds a bi-encoder"):
        CrossEncoderReranker(str(bi_encoder_folder(tmp_path / "bi")))
    with pytest.raises(ModelFolderError, match="is not a folder"):
        CrossEncoderReranker(str(tmp_path / "none"))
