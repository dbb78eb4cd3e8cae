"""A feature whose extra is not installed fails with one line naming the command that installs it (tested by making
its library unimportable, as in a core install; tests/test_core_install.py runs the command in one)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from ctxrag.errors import user_message
from ctxrag.storage.extras import MissingExtra, require


def blocked(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """``names`` unimportable in this test (``import`` raises ModuleNotFoundError naming them)."""
    for name in names:
        for loaded in [module for module in sys.modules if module == name or module.startswith(f"{name}.")]:
            monkeypatch.delitem(sys.modules, loaded)
        monkeypatch.setitem(sys.modules, name, None)


def test_a_missing_library_is_one_line_naming_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    blocked(monkeypatch, "torch")
    with pytest.raises(MissingExtra) as raised:
        require("torch", "torch", "the model tiny (transformers weights, no .onnx file)")
    message = user_message(raised.value)
    assert message == "the model tiny (transformers weights, no .onnx file) needs torch: pip install 'ctxrag[torch]'"
    assert isinstance(raised.value, ImportError)  # an ``except ImportError`` still catches it


def test_an_installed_library_is_returned() -> None:
    assert require("json", "none", "json") is importlib.import_module("json")


def test_a_transformers_model_without_torch_names_the_torch_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from ctxrag.tasks.embedding.model_embedder import TorchEncoder

    blocked(monkeypatch, "torch", "transformers")
    TorchEncoder.load.cache_clear()
    with pytest.raises(MissingExtra, match=r"the model model \(transformers weights.*pip install 'ctxrag\[torch\]'"):
        TorchEncoder.load(tmp_path / "model", "mean")


def test_a_cross_encoder_without_torch_names_the_torch_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from ctxrag.tasks.retrieval.cross_encoder import pair_scorer

    blocked(monkeypatch, "torch", "transformers")
    pair_scorer.cache_clear()
    with pytest.raises(MissingExtra, match=r"cross-encoder reranker .*pip install 'ctxrag\[torch\]'"):
        pair_scorer(tmp_path / "reranker" / "model.safetensors", tmp_path / "reranker")


def test_bf16_without_torch_names_the_torch_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import ctxrag.tasks.embedding.precision as precision

    monkeypatch.setattr(precision, "torch_installed", lambda: False)
    with pytest.raises(MissingExtra, match=r"bf16 runs on torch.*pip install 'ctxrag\[torch\]'"):
        precision.choose_precision("bf16")
    assert precision._decide_torch()[0] == "fp32"  # auto: fp32 on onnxruntime, nothing timed on torch


def test_the_elasticsearch_backend_without_its_library_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxrag.storage.backends import backend_for

    blocked(monkeypatch, "elasticsearch")
    with pytest.raises(MissingExtra, match=r"elasticsearch backend needs elasticsearch: .*ctxrag\[elasticsearch\]"):
        backend_for("elasticsearch")


@pytest.mark.parametrize(
    ("module", "library", "extra"),
    [
        ("ctxrag.integrations.langchain", "langchain_core", "langchain"),
        ("ctxrag.integrations.llamaindex", "llama_index", "llamaindex"),
    ],
)
def test_a_framework_retriever_without_its_framework_names_its_extra(
    monkeypatch: pytest.MonkeyPatch, module: str, library: str, extra: str
) -> None:
    blocked(monkeypatch, library)
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(MissingExtra, match=rf"{module} needs {library}: pip install 'ctxrag\[{extra}\]'"):
        importlib.import_module(module)
