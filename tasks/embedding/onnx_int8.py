"""int8 weights of the packaged MiniLM for onnxruntime, made once per machine from the shipped model, without torch.

``make_int8_model``: the fused graph is built from the safetensors weights (``ctxrag.tasks.embedding.bert_graph``: one
Attention, SkipLayerNormalization and BiasGelu per layer, the graph onnxruntime's transformer optimizer made of torch's
export; the int8 file made from it is byte for byte the same weights, and its vectors the same, as the one made from
torch's), and ``quantize_dynamic`` makes the weights of every linear layer and attention projection int8 per output
channel (activations are quantized per run, and each input runs alone,
so nothing is calibrated and a text's vector is its own); the embeddings stay fp32. Fusing made int8 1.27x as fast;
keeping in fp32 the feed-forward output of the three layers whose int8 loses most took it from 1.25x to 1.08x bf16's
speed for +0.4 on the suite's mean at most (the first int8 record: `git show 091fb78:benchmarks/results/int8.md`). The
file is kept only if its vectors are within ``MIN_COSINE`` of the fp32 graph's on probe texts; its name is its
signature (model package, ``INT8_RECIPE``, onnxruntime's version).
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from importlib import metadata
from pathlib import Path

import numpy as np

from ctxrag.tasks.embedding.embedder_spec import INT8_RECIPE
from ctxrag.tasks.embedding.model_sources import PACKAGED
from ctxrag.tasks.embedding.onnx_queries import PACKAGE, PROBES, OnnxEncoder

logger = logging.getLogger(__name__)

MIN_COSINE = 0.98  # the least cosine of an int8 probe vector to the fp32 graph's for the file to be kept
INT8_PROBES = [
    *PROBES,
    "class RetryPolicy:\n    def __init__(self, attempts: int = 3, backoff: float = 0.5) -> None:\n        self.attempts = attempts",
    "File: http/client.py. HTTPConnection, HTTPResponse.\n\n    def getresponse(self):\n        if self.__response and self.__response.isclosed():",
    "The differential executor runs both targets and compares their outputs byte for byte. " * 8,
]


class Int8Refused(RuntimeError):
    """The int8 file cannot be made here (its vectors are not within tolerance of fp32): making it again would give
    the same answer."""


def int8_path(models_dir: Path, model: str) -> Path:
    """Where ``model``'s int8 file lives: named by what makes it (the model package's version, the recipe and
    onnxruntime's version, whose optimizer and quantizer write it), so any change makes a new one."""
    return (
        models_dir
        / f"{model}-{PACKAGE}-{PACKAGED.version}-{INT8_RECIPE}-onnxruntime-{metadata.version('onnxruntime')}.onnx"
    )


def make_int8_model(model_dir: Path, target: Path) -> bool:
    """Make ``target`` from the transformer at ``model_dir`` (atomically); False (and nothing written) if its vectors
    are not within ``MIN_COSINE`` of the fp32 graph's."""
    import onnx
    from onnxruntime.quantization import quantize_dynamic

    from ctxrag.tasks.embedding.bert_graph import build_bert_graph

    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.partial")
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".int8-") as scratch:
        fused = Path(scratch) / "fused.onnx"
        build_bert_graph(model_dir, fused)
        expected = OnnxEncoder(fused, model_dir, 512).embed(INT8_PROBES)
        quiet = _WithoutAdvice()
        logging.getLogger().addFilter(quiet)  # the quantizer logs advice for static quantization on the root logger
        try:
            quantize_dynamic(
                str(fused),
                str(partial),
                op_types_to_quantize=["MatMul", "Attention"],
                per_channel=True,
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
            got = OnnxEncoder(partial, model_dir, 512, alone=True).embed(INT8_PROBES)  # as the product runs it
            cosine = float(np.min(np.sum(expected * got, axis=1)))
            if cosine < MIN_COSINE:
                logger.warning(
                    "int8: %s's vectors are %.4f cosine from fp32 (%s needed); not kept",
                    model_dir.name,
                    cosine,
                    MIN_COSINE,
                )
                return False
            os.replace(partial, target)
            return True
        finally:
            logging.getLogger().removeFilter(quiet)
            partial.unlink(missing_ok=True)


class _WithoutAdvice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()
