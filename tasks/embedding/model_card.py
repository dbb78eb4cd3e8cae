"""A local model's needs, read from its own files or from one small table: the model is data, not code.

``--embedding-model`` and ``--rerank`` name a model by a folder, a model a package ships or a Hugging Face id
(``ctxrag.tasks.embedding.model_sources``); its needs are read here. ``read_model_folder`` checks the folder before
anything is embedded: one ``ModelFolderError`` names the folder and what is missing or of the wrong kind.

What a card says, first from the folder's own sentence-transformers files, else from ``KNOWN``, else defaults:
- pooling: ``1_Pooling/config.json`` (``pooling_mode_cls_token`` / ``pooling_mode_mean_tokens``), else mean;
- prefixes: ``config_sentence_transformers.json``'s ``prompts`` (``query``, ``document`` or ``passage``);
- maximum length: ``sentence_bert_config.json``'s ``max_seq_length``, else the position embeddings', at most 512;
- kind: a ``*ForSequenceClassification`` architecture is a cross-encoder, ``*ForMaskedLM`` with a SPLADE name
  sparse, anything else a bi-encoder;
- weights: an ONNX file (onnxruntime; an int8 one is run an input at a time) or transformers weights (torch).
A card's ``fingerprint`` (the files that decide its vectors, hashed by size and first and last MiB) goes into every
vector key, so a changed model never reuses another's vectors.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxrag.storage.errors import InvalidInput

MAX_LENGTH = 512  # word pieces a bi-encoder reads at most, whatever its position embeddings allow
ONNX_NAMES = (
    "model.onnx",
    "model_quantized.onnx",
    "model_int8.onnx",
    "model_qint8_avx512_vnni.onnx",
)  # preferred order
TORCH_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
KINDS = ("bi-encoder", "cross-encoder", "sparse")
HASHED_BYTES = 1 << 20  # of a weights file: its size and first and last MiB stand for it (a full hash of 130 MB: 0.3 s)


class ModelFolderError(InvalidInput):
    """A model folder that is missing, incomplete or of the wrong kind; the message names the folder and the reason."""


@dataclass(frozen=True)
class Known:
    """What a published model needs that its folder may not say (prefixes, pooling)."""

    pooling: str = "mean"
    query_prefix: str = ""
    document_prefix: str = ""


BGE_QUERY = "Represent this sentence for searching relevant passages: "
KNOWN: dict[str, Known] = {  # by the last part of a Hugging Face id, lower case
    "all-minilm-l6-v2": Known(),
    "all-minilm-l12-v2": Known(),
    "all-mpnet-base-v2": Known(),
    "bge-small-en-v1.5": Known("cls", BGE_QUERY),
    "bge-base-en-v1.5": Known("cls", BGE_QUERY),
    "bge-large-en-v1.5": Known("cls", BGE_QUERY),
    "e5-small-v2": Known("mean", "query: ", "passage: "),
    "e5-base-v2": Known("mean", "query: ", "passage: "),
    "multilingual-e5-small": Known("mean", "query: ", "passage: "),
    "gte-small": Known(),
    "gte-base": Known(),
    "snowflake-arctic-embed-xs": Known("cls", BGE_QUERY),
    "snowflake-arctic-embed-s": Known("cls", BGE_QUERY),
    "snowflake-arctic-embed-m": Known("cls", BGE_QUERY),
    "nomic-embed-text-v1.5": Known("mean", "search_query: ", "search_document: "),
    "jina-embeddings-v2-base-code": Known(),
}


@dataclass(frozen=True)
class ModelCard:
    """One local model: where its files are, what kind it is and how it reads text."""

    name: str
    folder: Path
    kind: str
    weights: Path  # an .onnx file, or the transformers weights
    pooling: str = "mean"
    query_prefix: str = ""
    document_prefix: str = ""
    max_length: int = MAX_LENGTH
    normalize: bool = True
    reference: str = ""  # how to find it again: the folder's absolute path, or the Hugging Face id
    config: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def runtime(self) -> str:
        """ "onnx" (onnxruntime) or "torch" (transformers)."""
        return "onnx" if self.weights.suffix == ".onnx" else "torch"

    @property
    def quantized(self) -> bool:
        """An int8 ONNX file (its activations are quantized per run: each input is run alone)."""
        return self.runtime == "onnx" and any(word in self.weights.name for word in ("quant", "int8", "qint8"))

    @property
    def precision(self) -> str:
        """What its vectors are made in: int8 for a quantized file, else fp32 (torch may run bf16: the index says)."""
        return "int8" if self.quantized else "fp32"

    def fingerprint(self) -> str:
        """A hash of what decides this model's vectors: its config, tokenizer and weights, pooling, prefixes, length."""
        digest = hashlib.sha256()
        for path in (self.folder / "config.json", self.folder / "tokenizer.json", self.weights):
            digest.update(_file_signature(path) if path.exists() else b"absent")
        digest.update(
            json.dumps(
                [self.pooling, self.query_prefix, self.document_prefix, self.max_length, self.normalize]
            ).encode()
        )
        return digest.hexdigest()[:16]

    def describe(self) -> str:
        prefixes = f", query prefix {self.query_prefix!r}" if self.query_prefix else ""
        prefixes += f", document prefix {self.document_prefix!r}" if self.document_prefix else ""
        return f"{self.name} ({self.kind}, {self.runtime} {self.precision}, {self.pooling} pooling, max {self.max_length}{prefixes})"


def _file_signature(path: Path) -> bytes:
    size = path.stat().st_size
    with path.open("rb") as handle:
        head = handle.read(HASHED_BYTES)
        handle.seek(max(size - HASHED_BYTES, 0))
        tail = handle.read(HASHED_BYTES)
    return hashlib.sha256(str(size).encode() + head + tail).digest()


def read_model_folder(folder: Path, name: str = "", want: str | None = "bi-encoder") -> ModelCard:
    """The card of the model in ``folder``, checked to be complete and a ``want`` model (None: any kind, as a search
    reads the model its index was built with); ``ModelFolderError`` if not."""
    folder = folder.expanduser()
    shown = name or str(folder)
    if not folder.is_dir():
        raise ModelFolderError(f"model {shown}: {folder} is not a folder")
    if not (folder / "tokenizer.json").is_file():
        raise ModelFolderError(f"model {shown}: {folder} has no tokenizer.json (a fast tokenizer's file is needed)")
    weights = _weights(folder, shown)
    config = _json(folder / "config.json", shown, required=weights.suffix != ".onnx")  # an ONNX graph says enough
    if want is None:
        kind = model_kind(config, folder) if config.get("architectures") else "bi-encoder"
    else:
        kind = (
            model_kind(config, folder)
            if config.get("architectures") or weights.suffix != ".onnx"
            else onnx_kind(weights)
        )
    if want is not None and kind != want:
        what = ", ".join(config.get("architectures") or []) or f"{weights.name}'s outputs"
        raise ModelFolderError(f"model {shown}: {folder} holds a {kind} ({what}), not a {want}")
    known = known_needs(name or folder.name)
    sentence = _json(folder / "sentence_bert_config.json", shown, required=False)
    prompts = _json(folder / "config_sentence_transformers.json", shown, required=False).get("prompts") or {}
    positions = int(config.get("max_position_embeddings") or MAX_LENGTH)
    if config.get("model_type") in {"roberta", "xlm-roberta", "camembert"}:
        positions -= 2  # RoBERTa's positions start after the padding index
    return ModelCard(
        name=name or folder.name,
        folder=folder.resolve(),
        kind=kind,
        weights=weights,
        pooling=_pooling(folder, shown) or known.pooling,
        query_prefix=prompts.get("query", known.query_prefix),
        document_prefix=prompts.get("document", prompts.get("passage", known.document_prefix)),
        max_length=min(int(sentence.get("max_seq_length") or MAX_LENGTH), positions, MAX_LENGTH),
        reference=name if name else str(folder.resolve()),
        config=config,
    )


def known_needs(name: str) -> Known:
    """The table's row for a model id or folder name (its longest key that the name starts with), else defaults."""
    short = name.rsplit("/", 1)[-1].lower()
    matches = [key for key in KNOWN if short.startswith(key)]
    return KNOWN[max(matches, key=len)] if matches else Known()


def onnx_kind(weights: Path) -> str:
    """bi-encoder or cross-encoder, from an ONNX graph's outputs (``logits``: a classifier), read without its weights."""
    import onnx

    try:
        graph = onnx.load(str(weights), load_external_data=False).graph
    except Exception as error:
        raise ModelFolderError(
            f"model {weights.parent}: {weights.name} is not a readable ONNX model ({type(error).__name__})"
        ) from None
    outputs = [output.name for output in graph.output]
    return "cross-encoder" if outputs and outputs[0] == "logits" else "bi-encoder"


def model_kind(config: dict[str, Any], folder: Path) -> str:
    """bi-encoder, cross-encoder or sparse, from the config's architectures (and a SPLADE folder's name)."""
    architectures = " ".join(config.get("architectures") or [])
    if "ForSequenceClassification" in architectures:
        return "cross-encoder"
    if "ForMaskedLM" in architectures and "splade" in f"{folder.name} {config.get('_name_or_path', '')}".lower():
        return "sparse"
    return "bi-encoder"


def _weights(folder: Path, shown: str) -> Path:
    for relative in (*ONNX_NAMES, *(f"onnx/{onnx}" for onnx in ONNX_NAMES), *TORCH_WEIGHTS):
        if (folder / relative).is_file():
            return folder / relative
    others = sorted(folder.glob("*.onnx"))
    if others:
        return others[0]
    raise ModelFolderError(
        f"model {shown}: {folder} has no weights ({', '.join(ONNX_NAMES[:2] + TORCH_WEIGHTS)} or another .onnx file)"
    )


def _pooling(folder: Path, shown: str) -> str | None:
    """The pooling a sentence-transformers folder names (``1_Pooling/config.json``), None when it names none."""
    pooling = _json(folder / "1_Pooling" / "config.json", shown, required=False)
    if pooling.get("pooling_mode_cls_token"):
        return "cls"
    if pooling.get("pooling_mode_mean_tokens"):
        return "mean"
    if pooling and any(value for key, value in pooling.items() if key.startswith("pooling_mode")):
        modes = [key for key, value in pooling.items() if key.startswith("pooling_mode") and value]
        raise ModelFolderError(f"model {shown}: pooling {', '.join(modes)} is not supported (mean or CLS)")
    return None


def _json(path: Path, shown: str, required: bool = True) -> dict[str, Any]:
    if not path.is_file():
        if required:
            raise ModelFolderError(f"model {shown}: {path.parent} has no {path.name}")
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ModelFolderError(f"model {shown}: {path} is not readable JSON ({error})") from None
    if not isinstance(data, dict):
        raise ModelFolderError(f"model {shown}: {path} is not a JSON object")
    return data
