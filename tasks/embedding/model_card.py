"""A local model's needs, read from its own files or from one small table: the model is data, not code.

``--embedding-model`` and ``--rerank`` name a model by a folder, a model a package ships or a Hugging Face id
(``ctxrag.tasks.embedding.model_sources``); its needs are read here. ``read_model_folder`` checks the folder before
anything is embedded: one ``ModelFolderError`` names the folder and what is missing or of the wrong kind.

What a card says, first from the folder's own sentence-transformers files, else from ``KNOWN``, else defaults:
- modules: ``modules.json`` lists what runs after the transformer, each read here: ``Pooling`` (its folder's config),
  ``Dense`` (a linear layer and its activation, from its folder's ``model.safetensors``, run on numpy) and
  ``Normalize``; any other module (an LSTM, a CNN, a router, ...) is refused, since ctxrag would not run it. Vectors
  are stored at unit length whatever the model says (the vector index is cosine), so ``Normalize`` changes nothing;
- pooling: the Pooling module's config (``1_Pooling/config.json`` without ``modules.json``): CLS, mean or max, one of
  them; else mean;
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
from functools import lru_cache
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


MODULES = ("Transformer", "Pooling", "Dense", "Normalize")  # the sentence-transformers modules ctxrag runs
ACTIVATIONS = {"torch.nn.modules.linear.Identity": "identity", "torch.nn.modules.activation.Tanh": "tanh"}
POOLING_MODES = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean", "pooling_mode_max_tokens": "max"}


@dataclass(frozen=True)
class DenseLayer:
    """A sentence-transformers Dense module: ``activation(weights @ vector + bias)`` on a pooled vector."""

    weights: Path  # its model.safetensors (linear.weight, linear.bias)
    activation: str = "identity"  # "identity" or "tanh"

    def apply(self, vectors: Any) -> Any:
        """The layer's output for pooled ``vectors`` (rows)."""
        import numpy as np

        weight, bias = _dense_weights(self.weights)
        out = vectors @ weight.T + bias
        return np.tanh(out) if self.activation == "tanh" else out


@lru_cache(maxsize=8)
def _dense_weights(path: Path) -> tuple[Any, Any]:
    import numpy as np
    from safetensors.numpy import load_file

    tensors = load_file(str(path))
    weight = tensors["linear.weight"].astype(np.float32)
    bias = tensors.get("linear.bias")
    return weight, np.zeros(weight.shape[0], dtype=np.float32) if bias is None else bias.astype(np.float32)


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
    normalize: bool = True  # stored vectors are unit length (a cosine index), whether or not the model normalizes
    dense: tuple[DenseLayer, ...] = ()  # Dense modules after pooling, in order (modules.json)
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
        needs: list[object] = [self.pooling, self.query_prefix, self.document_prefix, self.max_length, self.normalize]
        for layer in self.dense:  # only where there are any: a model without them keeps the fingerprint it had
            digest.update(_file_signature(layer.weights))
            needs.append(layer.activation)
        digest.update(json.dumps(needs).encode())
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
    pooling_dir, dense = _modules(folder, shown)
    positions = int(config.get("max_position_embeddings") or MAX_LENGTH)
    if config.get("model_type") in {"roberta", "xlm-roberta", "camembert"}:
        positions -= 2  # RoBERTa's positions start after the padding index
    return ModelCard(
        name=name or folder.name,
        folder=folder.resolve(),
        kind=kind,
        weights=weights,
        pooling=_pooling(pooling_dir, shown) or known.pooling,
        query_prefix=prompts.get("query", known.query_prefix),
        document_prefix=prompts.get("document", prompts.get("passage", known.document_prefix)),
        max_length=min(int(sentence.get("max_seq_length") or MAX_LENGTH), positions, MAX_LENGTH),
        dense=dense,
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


def _modules(folder: Path, shown: str) -> tuple[Path, tuple[DenseLayer, ...]]:
    """The Pooling module's folder and the Dense layers that ``modules.json`` names (``1_Pooling`` and none without
    one); ``ModelFolderError`` for a module ctxrag does not run."""
    path = folder / "modules.json"
    if not path.is_file():
        return folder / "1_Pooling", ()
    try:
        modules = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ModelFolderError(f"model {shown}: {path} is not readable JSON ({error})") from None
    if not isinstance(modules, list):
        raise ModelFolderError(f"model {shown}: {path} is not a list of modules")
    pooling_dir, dense = folder / "1_Pooling", []
    for module in sorted(modules, key=lambda entry: int(entry.get("idx", 0)) if isinstance(entry, dict) else 0):
        kind = str(module.get("type", "") if isinstance(module, dict) else module).rsplit(".", 1)[-1]
        where = folder / str(module.get("path", "")) if isinstance(module, dict) else folder
        if kind not in MODULES:
            raise ModelFolderError(
                f"model {shown}: modules.json names a {kind or 'nameless'} module, which ctxrag does not run "
                f"(it runs {', '.join(MODULES)})"
            )
        if kind == "Transformer" and where.resolve() != folder.resolve():
            raise ModelFolderError(f"model {shown}: its transformer is in {where}: give that folder")
        if kind == "Pooling":
            pooling_dir = where
        if kind == "Dense":
            dense.append(_dense(where, shown))
    return pooling_dir, tuple(dense)


def _dense(where: Path, shown: str) -> DenseLayer:
    config = _json(where / "config.json", shown)
    activation = ACTIVATIONS.get(str(config.get("activation_function", "torch.nn.modules.linear.Identity")))
    if activation is None:
        raise ModelFolderError(
            f"model {shown}: its Dense module's activation {config.get('activation_function')} is not supported "
            f"(Identity or Tanh)"
        )
    if not (where / "model.safetensors").is_file():
        raise ModelFolderError(f"model {shown}: its Dense module has no {where / 'model.safetensors'}")
    return DenseLayer((where / "model.safetensors").resolve(), activation)


def _pooling(pooling_dir: Path, shown: str) -> str | None:
    """The pooling a sentence-transformers Pooling config names (CLS, mean or max), None when there is none: its
    ``pooling_mode`` (sentence-transformers 6) or its ``pooling_mode_*`` flags (earlier versions)."""
    pooling = _json(pooling_dir / "config.json", shown, required=False)
    named = pooling.get("pooling_mode")
    if isinstance(named, str | list):
        modes = [f"pooling_mode {mode}" for mode in ([named] if isinstance(named, str) else named)]
        found = [str(mode) for mode in ([named] if isinstance(named, str) else named)]
    else:
        modes = [key for key, value in pooling.items() if key.startswith("pooling_mode_") and value]
        found = [POOLING_MODES.get(key, key) for key in modes]
    if not modes:
        return None
    if len(found) > 1 or found[0] not in POOLING_MODES.values():
        raise ModelFolderError(f"model {shown}: pooling {', '.join(modes)} is not supported (one of CLS, mean or max)")
    if pooling.get("include_prompt") is False:
        raise ModelFolderError(f"model {shown}: pooling that leaves the prompt out is not supported")
    return found[0]


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
