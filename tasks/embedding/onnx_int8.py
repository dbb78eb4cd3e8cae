"""int8 weights of the packaged MiniLM for onnxruntime, made once per machine from the shipped model.

``make_int8_model``: torch exports the transformer (eager attention), onnxruntime's transformer optimizer fuses each
layer (one Attention, SkipLayerNormalization, BiasGelu), and ``quantize_dynamic`` makes the weights of every linear
layer int8 per output channel (activations are quantized per batch at run time, so nothing is calibrated). Kept in
fp32: the embeddings and ``FP32_LAYERS``' feed-forward output (the inputs after GELU: the matrices whose int8 loses
most, benchmarks/results/int8.md). The file is kept only if its vectors are within ``MIN_COSINE`` of torch's fp32
vectors on probe texts; its name is its signature (model package, ``INT8_RECIPE``, onnxruntime's version).
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import threading
from importlib import metadata
from pathlib import Path

import numpy as np

from ctxrag.tasks.embedding.embedder_spec import INT8_RECIPE
from ctxrag.tasks.embedding.onnx_queries import PACKAGE, PROBES, OnnxEncoder, export_onnx

logger = logging.getLogger(__name__)

FP32_LAYERS = (0, 1, 2)  # layers whose feed-forward output matrix stays fp32
MIN_COSINE = 0.98  # the least cosine of an int8 probe vector to torch's fp32 one for the file to be kept
INT8_PROBES = [
    *PROBES,
    "class RetryPolicy:\n    def __init__(self, attempts: int = 3, backoff: float = 0.5) -> None:\n        self.attempts = attempts",
    "File: http/client.py. HTTPConnection, HTTPResponse.\n\n    def getresponse(self):\n        if self.__response and self.__response.isclosed():",
    "The differential executor runs both targets and compares their outputs byte for byte. " * 8,
]
_FEED_FORWARD_OUTPUT = re.compile(r"layer\.(\d+)/output/dense/MatMul$")


class Int8Refused(RuntimeError):
    """The int8 file cannot be made here: its vectors are not within tolerance of fp32, or the graph is not the
    recipe's. Making it again would give the same answer."""


def int8_path(models_dir: Path, model: str) -> Path:
    """Where ``model``'s int8 file lives: named by what makes it (the model package's version, the recipe and
    onnxruntime's version, whose optimizer and quantizer write it), so any change makes a new one."""
    return models_dir / f"{model}-{PACKAGE}-{metadata.version(PACKAGE)}-{INT8_RECIPE}-onnxruntime-{metadata.version('onnxruntime')}.onnx"


def make_int8_model(model_dir: Path, target: Path) -> bool:
    """Make ``target`` from the transformer at ``model_dir`` (atomically); False (and nothing written) if its vectors
    are not within ``MIN_COSINE`` of torch's or the graph is not the one the recipe expects."""
    import onnx
    from onnxruntime.quantization import quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model

    config = json.loads((model_dir / "config.json").read_text())
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.partial")
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".int8-") as scratch:
        exported, fused = Path(scratch) / "fp32.onnx", Path(scratch) / "fused.onnx"
        expected = export_onnx(model_dir, exported, INT8_PROBES, attention="eager")
        optimized = optimize_model(str(exported), model_type="bert", num_heads=config["num_attention_heads"], hidden_size=config["hidden_size"])
        optimized.save_model_to_file(str(fused))
        kept = [node.name for node in onnx.load(str(fused)).graph.node if node.op_type == "MatMul" and _kept_fp32(node.name)]
        if len(kept) != len(FP32_LAYERS):
            logger.warning("int8: the fused graph of %s is not the recipe's (fp32 matrices found: %s)", model_dir.name, kept)
            return False
        quiet = _WithoutAdvice()
        logging.getLogger().addFilter(quiet)  # the quantizer logs advice for static quantization on the root logger
        try:
            quantize_dynamic(
                str(fused), str(partial), op_types_to_quantize=["MatMul", "Attention"], per_channel=True,
                nodes_to_exclude=kept, extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
            got = OnnxEncoder(partial, model_dir, 512).embed(INT8_PROBES)
            cosine = float(np.min(np.sum(expected * got, axis=1)))
            if cosine < MIN_COSINE:
                logger.warning("int8: %s's vectors are %.4f cosine from fp32 (%s needed); not kept", model_dir.name, cosine, MIN_COSINE)
                return False
            os.replace(partial, target)
            return True
        finally:
            logging.getLogger().removeFilter(quiet)
            partial.unlink(missing_ok=True)


class _WithoutAdvice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


def _kept_fp32(name: str) -> bool:
    found = _FEED_FORWARD_OUTPUT.search(name)
    return found is not None and int(found.group(1)) in FP32_LAYERS
