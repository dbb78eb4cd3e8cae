"""The BERT graph built from safetensors weights without torch: equal to transformers' model on a tiny BERT (padded
batches included), and a model of another kind refused by name."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ctxrag.tasks.embedding.bert_graph import UnsupportedModel, build_bert_graph
from ctxrag.tasks.embedding.onnx_queries import OnnxEncoder

TEXTS = ["def retry(request): return request", "how are retries delayed?", "x", "the client reads the file " * 9]


def test_a_model_that_is_not_a_bert_encoder_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "roberta", "hidden_act": "gelu"}))
    with pytest.raises(UnsupportedModel, match="model_type is 'roberta'; only 'bert' is built without torch"):
        build_bert_graph(tmp_path, tmp_path / "graph.onnx")


@pytest.mark.slow
def test_the_graph_of_a_tiny_bert_equals_transformers_own_model(tmp_path: Path) -> None:
    """Its token states, mean-pooled over the mask, against transformers' on torch: texts of different lengths in one
    padded batch, so the mask's lengths are checked too."""
    torch = pytest.importorskip("torch")  # the torch extra: the reference
    from transformers import AutoModel, AutoTokenizer

    from tests.equipment.tiny_models import bi_encoder_folder

    folder = bi_encoder_folder(tmp_path / "tiny", seed=3)
    build_bert_graph(folder, tmp_path / "graph.onnx")
    got = OnnxEncoder(tmp_path / "graph.onnx", folder, 128).embed(TEXTS)
    tokenizer, model = AutoTokenizer.from_pretrained(str(folder)), AutoModel.from_pretrained(str(folder)).eval()
    encoded = tokenizer(TEXTS, return_tensors="pt", padding=True, truncation=True, max_length=128)
    with torch.no_grad():
        hidden = model(**encoded).last_hidden_state.numpy()
    mask = encoded["attention_mask"].numpy()[..., None]
    expected = (hidden * mask).sum(axis=1) / mask.sum(axis=1)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    assert got.shape == expected.shape == (len(TEXTS), 32)
    assert float(np.min(np.sum(got * expected, axis=1))) >= 1 - 1e-5
