"""Local simulator of the Voyage AI embeddings API (``POST /v1/embeddings``) — TEST EQUIPMENT.

It keeps the public request/response/error contract so the real ``voyageai`` SDK can be
pointed at it (``voyageai.Client(api_key="test", base_url=sim.url, max_retries=0)``), but
its vectors are deterministic pseudo-embeddings and its token counts are SIMULATED: never
quote anything it produces as a quality or cost figure.

Contract kept (docs.voyageai.com/reference/embeddings-api, read 2025):

* ``Authorization: Bearer <key>`` is required, otherwise 401.
* ``input`` is a string or a list of 1..1,000 non-empty strings.
* The total tokens of one request may not exceed the model's batch limit (``MODELS``):
  1M for voyage-4-lite / voyage-3.5-lite / voyage-3-lite; 320K for voyage-4 / voyage-3.5 /
  voyage-3 / voyage-2; 120K for voyage-4-large / voyage-3-large / voyage-code-3 /
  voyage-finance-2 / voyage-law-2.
* ``output_dimension`` (256/512/1024/2048) and non-float ``output_dtype`` only for the
  Matryoshka/quantization models (voyage-4*, voyage-3.5*, voyage-3-large, voyage-code-3).
* ``truncation=false`` with an input longer than the model's context length -> 400.
* Errors are ``{"detail": "..."}`` — the field the SDK reads for its exception message.
* ``encoding_format="base64"`` (what the SDK sends by default) returns base64 of the
  little-endian array (float32 for ``float``; int8 / uint8 for the quantized dtypes).

``POST /v1/contextualizedembeddings`` (voyage-context-3): ``inputs`` is a list of at most 1,000 lists of non-empty
strings (a document's chunks in order, or one query each with ``input_type="query"``), each list at most 32,000
tokens, 16,000 chunks and 120,000 tokens a request; the answer's ``data`` holds one list per input with one embedding
per chunk, and a chunk's vector leans towards its list's other chunks.

Simulated rules: tokens of one input = ceil(UTF-8 bytes / 4), capped at the context length
when ``truncation`` is true; the batch limit and ``usage.total_tokens`` use those counts.
A vector is the normalized sum of per-word Gaussian vectors seeded by sha256(word) plus an
``input_type`` component, so texts sharing words are close and query != document vectors.
Smaller ``output_dimension`` values are prefixes of the 2048-d vector, renormalized.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from tests.equipment._http import RecordedRequest, Reply, SimulatorServer

__all__ = ["CONTEXT_MODELS", "MODELS", "ModelSpec", "VoyageSimulator", "simulated_tokens", "RecordedRequest"]

MAX_INPUTS = 1_000
FLEXIBLE_DIMENSIONS = (256, 512, 1024, 2048)
OUTPUT_DTYPES = ("float", "int8", "uint8", "binary", "ubinary")
_MAX_DIM = 2048
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class ModelSpec:
    """Per-model limits used by the simulator (public numbers, see the module docstring)."""

    batch_token_limit: int
    default_dimension: int
    flexible: bool  # supports output_dimension and quantized output_dtype
    context_length: int = 32_000


MODELS: dict[str, ModelSpec] = {
    "voyage-4-large": ModelSpec(120_000, 1024, True),
    "voyage-4": ModelSpec(320_000, 1024, True),
    "voyage-4-lite": ModelSpec(1_000_000, 1024, True),
    "voyage-3.5": ModelSpec(320_000, 1024, True),
    "voyage-3.5-lite": ModelSpec(1_000_000, 1024, True),
    "voyage-3-large": ModelSpec(120_000, 1024, True),
    "voyage-code-3": ModelSpec(120_000, 1024, True),
    "voyage-3": ModelSpec(320_000, 1024, False),
    "voyage-3-lite": ModelSpec(1_000_000, 512, False),
    "voyage-2": ModelSpec(320_000, 1024, False, context_length=4_000),
    "voyage-finance-2": ModelSpec(120_000, 1024, False),
    "voyage-law-2": ModelSpec(120_000, 1024, False, context_length=16_000),
}


CONTEXT_MODELS = ("voyage-context-3",)  # contextualized chunk embeddings (POST /v1/contextualizedembeddings)
CONTEXT_LENGTH = 32_000  # tokens of one inner list (a document's chunks)
CONTEXT_BATCH_TOKENS = 120_000  # tokens of one request
CONTEXT_MAX_CHUNKS = 16_000  # chunks of one request


def simulated_tokens(text: str) -> int:
    """SIMULATED token count of one text: ceil(UTF-8 bytes / 4)."""
    return math.ceil(len(text.encode("utf-8")) / 4)


@lru_cache(maxsize=65_536)
def _seeded_vector(key: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "little")
    vec = np.random.default_rng(seed).standard_normal(_MAX_DIM)
    vec.setflags(write=False)
    return vec


def pseudo_embedding(text: str, input_type: str | None, dimension: int) -> np.ndarray:
    """Deterministic unit vector for (text, input_type) of length ``dimension``."""
    words = [w.lower() for w in _WORD.findall(text)] or [f"\x00text:{text}"]
    total = np.zeros(_MAX_DIM)
    for word in words:
        total += _seeded_vector(word)
    total /= np.linalg.norm(total)
    if input_type is not None:  # a shared offset per input type: same ranking, different vector
        total = total + 0.25 * _seeded_vector(f"\x00input_type:{input_type}") / math.sqrt(_MAX_DIM)
    vec = total[:dimension]
    return vec / np.linalg.norm(vec)


def _quantize(vec: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "float":
        return vec.astype("<f4")
    if dtype in ("int8", "uint8"):
        scaled = np.clip(np.round(vec / np.max(np.abs(vec)) * 127), -128, 127).astype(np.int16)
        return (scaled + 128).astype(np.uint8) if dtype == "uint8" else scaled.astype(np.int8)
    packed = np.packbits(vec > 0)  # "ubinary": 1 bit per dimension, dimension / 8 bytes
    return packed if dtype == "ubinary" else (packed.astype(np.int16) - 128).astype(np.int8)


class VoyageSimulator(SimulatorServer):
    """Voyage AI embeddings API on 127.0.0.1; ``url`` ends in ``/v1`` like the SDK's base URL."""

    base_path = "/v1"

    def error_body(self, status: int, message: str) -> Any:
        return {"detail": message}

    def handle(self, request: RecordedRequest) -> Reply:
        auth = request.headers.get("authorization", "")
        if not auth.startswith("Bearer ") or not auth[len("Bearer ") :].strip():
            return self.error(401, "Provided API key is invalid.")
        path = request.path.split("?")[0]
        if request.method != "POST" or path not in ("/v1/embeddings", "/v1/contextualizedembeddings"):
            return self.error(404, f"Not found: {request.method} {request.path}")
        body = request.json
        if not isinstance(body, dict):
            return self.error(400, "Request body must be a JSON object.")
        try:
            return self._embed(body) if path == "/v1/embeddings" else self._contextualized(body)
        except _BadRequest as exc:
            return self.error(400, str(exc))

    def _contextualized(self, body: dict[str, Any]) -> Reply:
        """``POST /v1/contextualizedembeddings``: each inner list of ``inputs`` (a document's chunks, in order, or one
        query) is embedded together; a chunk's vector leans towards its list's other chunks (SIMULATED)."""
        model = body.get("model")
        if model not in CONTEXT_MODELS:
            raise _BadRequest(f"Model {model!r} is not supported. Supported models: {sorted(CONTEXT_MODELS)}.")
        inputs = body.get("inputs")
        if (
            not isinstance(inputs, list)
            or not inputs
            or not all(
                isinstance(group, list) and group and all(isinstance(t, str) and t for t in group) for group in inputs
            )
        ):
            raise _BadRequest("`inputs` must be a non-empty list of non-empty lists of non-empty strings.")
        if len(inputs) > MAX_INPUTS:
            raise _BadRequest(f"The number of inputs is limited to {MAX_INPUTS}; got {len(inputs)}.")
        if sum(len(group) for group in inputs) > CONTEXT_MAX_CHUNKS:
            raise _BadRequest(f"The total number of chunks is limited to {CONTEXT_MAX_CHUNKS}.")
        input_type = body.get("input_type")
        if input_type not in (None, "query", "document"):
            raise _BadRequest(f"`input_type` must be null, 'query' or 'document', got {input_type!r}.")
        if input_type == "query" and any(len(group) != 1 for group in inputs):
            raise _BadRequest("A query input must be a list of exactly one string.")
        dimension = body.get("output_dimension")
        if dimension is not None and (dimension not in FLEXIBLE_DIMENSIONS or isinstance(dimension, bool)):
            raise _BadRequest(f"`output_dimension` must be one of {list(FLEXIBLE_DIMENSIONS)}, got {dimension!r}.")
        counts = [sum(simulated_tokens(text) for text in group) for group in inputs]
        for i, count in enumerate(counts):
            if count > CONTEXT_LENGTH:
                raise _BadRequest(
                    f"inputs[{i}] has {count} tokens, over the context length {CONTEXT_LENGTH} of {model}."
                )
        if sum(counts) > CONTEXT_BATCH_TOKENS:
            raise _BadRequest(
                f"The max allowed tokens per submitted batch is {CONTEXT_BATCH_TOKENS}; yours has {sum(counts)}."
            )
        dimension = dimension or 1024
        data = []
        for i, group in enumerate(inputs):
            whole = pseudo_embedding(" ".join(group), input_type, _MAX_DIM)
            vectors = []
            for j, text in enumerate(group):
                vec = (pseudo_embedding(text, input_type, _MAX_DIM) + 0.3 * whole)[:dimension]
                arr = (vec / np.linalg.norm(vec)).astype("<f4")
                encoded = (
                    base64.b64encode(arr.tobytes()).decode("ascii")
                    if body.get("encoding_format") == "base64"
                    else [float(x) for x in arr]
                )
                vectors.append({"object": "embedding", "embedding": encoded, "index": j})
            data.append({"object": "list", "data": vectors, "index": i})
        return Reply(200, {"object": "list", "data": data, "model": model, "usage": {"total_tokens": sum(counts)}})

    def _embed(self, body: dict[str, Any]) -> Reply:
        model = body.get("model")
        if not isinstance(model, str) or model not in MODELS:
            raise _BadRequest(f"Model {model!r} is not supported. Supported models: {sorted(MODELS)}.")
        spec = MODELS[model]
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            raise _BadRequest("`input` must be a non-empty string or a non-empty list of strings.")
        if len(texts) > MAX_INPUTS:
            raise _BadRequest(f"The batch size limit is {MAX_INPUTS}. Your batch size is {len(texts)}.")
        if any(t == "" for t in texts):
            raise _BadRequest("`input` cannot contain empty strings.")
        input_type = body.get("input_type")
        if input_type not in (None, "query", "document"):
            raise _BadRequest(f"`input_type` must be null, 'query' or 'document', got {input_type!r}.")
        truncation = body.get("truncation", True)
        if not isinstance(truncation, bool):
            raise _BadRequest("`truncation` must be a boolean.")
        encoding_format = body.get("encoding_format")
        if encoding_format not in (None, "base64"):
            raise _BadRequest(f"`encoding_format` must be null or 'base64', got {encoding_format!r}.")
        dtype = body.get("output_dtype") or "float"
        if dtype not in OUTPUT_DTYPES:
            raise _BadRequest(f"`output_dtype` must be one of {list(OUTPUT_DTYPES)}, got {dtype!r}.")
        if dtype != "float" and not spec.flexible:
            raise _BadRequest(f"Model {model} does not support output_dtype={dtype!r}.")
        dimension = body.get("output_dimension")
        if dimension is not None:
            if not spec.flexible:
                raise _BadRequest(f"Model {model} does not support the `output_dimension` argument.")
            if dimension not in FLEXIBLE_DIMENSIONS or isinstance(dimension, bool):
                raise _BadRequest(
                    f"`output_dimension` must be one of {list(FLEXIBLE_DIMENSIONS)} for {model}, got {dimension!r}."
                )
        dimension = dimension or spec.default_dimension

        counts = []
        for i, text in enumerate(texts):
            n = simulated_tokens(text)
            if n > spec.context_length and not truncation:
                raise _BadRequest(
                    f"Input {i} has {n} tokens, over the context length {spec.context_length} of {model}; "
                    "set truncation=true or shorten it."
                )
            counts.append(min(n, spec.context_length))
        total = sum(counts)
        if total > spec.batch_token_limit:
            raise _BadRequest(
                f"The max allowed tokens per submitted batch is {spec.batch_token_limit}. "
                f"Your batch has {total} tokens after truncation. Please lower the number of tokens in the batch."
            )

        data = []
        for i, text in enumerate(texts):
            arr = _quantize(pseudo_embedding(text, input_type, dimension), dtype)
            embedding: Any
            if encoding_format == "base64":
                embedding = base64.b64encode(arr.tobytes()).decode("ascii")
            else:
                embedding = [float(x) for x in arr] if dtype == "float" else [int(x) for x in arr]
            data.append({"object": "embedding", "embedding": embedding, "index": i})
        return Reply(200, {"object": "list", "data": data, "model": model, "usage": {"total_tokens": total}})


class _BadRequest(ValueError):
    """Internal: a 400 with this message in ``detail``."""
