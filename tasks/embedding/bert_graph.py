"""The packaged MiniLM's ONNX graph, built from its safetensors weights with ``onnx.helper``: no torch.

The graph is the one onnxruntime's transformer optimizer made of torch's export (``optimize_model``, model type bert):
``EmbedLayerNormalization`` (word, position and token-type embeddings, layer norm, and the mask's lengths), then per
layer a fused ``Attention`` (query, key and value weights side by side), a ``MatMul`` and a ``SkipLayerNormalization``
(residual, bias and layer norm in one), the feed-forward ``MatMul``, ``BiasGelu`` (erf GELU), ``MatMul`` and another
``SkipLayerNormalization``; its output is the last hidden state. These are onnxruntime's own operators (domain
``com.microsoft``, in every CPU build). fp32 vectors of this graph are those of sentence-transformers on torch within
1e-6 cosine; ``quantize_dynamic`` makes the int8 file from it as it did from the optimizer's graph
(``ctxrag.tasks.embedding.onnx_int8``). Inputs are padded on the right (the mask's lengths are its row sums).

Only what the packaged model is is built: a BERT encoder with absolute positions and GELU; anything else is refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT = "last_hidden_state"
OPSET = 17
MICROSOFT = "com.microsoft"


class UnsupportedModel(ValueError):
    """A model this builder does not make a graph of (it is not a BERT encoder of the packaged model's kind)."""


def build_bert_graph(model_dir: Path, target: Path) -> None:
    """Write the ONNX graph of the BERT encoder in ``model_dir`` (``config.json``, ``model.safetensors``) to ``target``."""
    import onnx

    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    _check(config, model_dir)
    from safetensors.numpy import load_file

    weights = load_file(str(model_dir / "model.safetensors"))
    onnx.save(bert_model(config, weights), str(target))


def _check(config: dict[str, Any], model_dir: Path) -> None:
    wanted = {"model_type": "bert", "hidden_act": "gelu", "position_embedding_type": "absolute"}
    for key, value in wanted.items():
        if config.get(key, value) != value:
            raise UnsupportedModel(
                f"model {model_dir}: {key} is {config.get(key)!r}; only {value!r} is built without torch"
            )


def bert_model(config: dict[str, Any], weights: dict[str, np.ndarray]) -> Any:
    """The ``onnx.ModelProto`` of a BERT encoder: ``config`` (transformers' config.json) and its ``weights`` by name."""
    from onnx import TensorProto, helper, numpy_helper

    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""
    epsilon = float(config.get("layer_norm_eps", 1e-12))
    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    initializers: list[Any] = []
    nodes: list[Any] = []

    def tensor(name: str, value: np.ndarray) -> str:
        initializers.append(numpy_helper.from_array(np.ascontiguousarray(value, dtype=np.float32), name))
        return name

    def weight(name: str) -> np.ndarray:
        try:
            return weights[prefix + name]
        except KeyError:
            raise UnsupportedModel(f"the weights have no {prefix + name}") from None

    for name in INPUTS:
        nodes.append(helper.make_node("Cast", [name], [f"{name}_int32"], to=TensorProto.INT32))
    embeddings = "embeddings."
    nodes.append(
        helper.make_node(
            "EmbedLayerNormalization",
            [
                "input_ids_int32",
                "token_type_ids_int32",
                tensor("word_embeddings", weight(embeddings + "word_embeddings.weight")),
                tensor("position_embeddings", weight(embeddings + "position_embeddings.weight")),
                tensor("token_type_embeddings", weight(embeddings + "token_type_embeddings.weight")),
                tensor("embeddings_gamma", weight(embeddings + "LayerNorm.weight")),
                tensor("embeddings_beta", weight(embeddings + "LayerNorm.bias")),
                "attention_mask_int32",
            ],
            ["layer_input_0", "mask_index"],
            domain=MICROSOFT,
            epsilon=epsilon,
        )
    )
    state = "layer_input_0"
    for number in range(int(config["num_hidden_layers"])):
        state = _layer(nodes, tensor, weight, number, state, heads, epsilon)
    nodes.append(helper.make_node("Identity", [state], [OUTPUT]))
    dims = ["batch", "tokens"]
    graph = helper.make_graph(
        nodes,
        "bert",
        [helper.make_tensor_value_info(name, TensorProto.INT64, dims) for name in INPUTS],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, [*dims, hidden])],
        initializers,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(MICROSOFT, 1)], producer_name="ctxrag"
    )
    model.ir_version = 8  # opset 17's; read by every onnxruntime this project allows
    return model


def _layer(nodes: list[Any], tensor: Any, weight: Any, number: int, state: str, heads: int, epsilon: float) -> str:
    """One encoder layer's nodes (appended to ``nodes``); the name of its output."""
    from onnx import helper

    at = f"encoder.layer.{number}."
    own = f"layer_{number}_"
    query, key, value = (weight(f"{at}attention.self.{part}.weight") for part in ("query", "key", "value"))
    biases = [weight(f"{at}attention.self.{part}.bias") for part in ("query", "key", "value")]
    nodes.append(
        helper.make_node(
            "Attention",
            [
                state,
                tensor(own + "qkv_weight", np.concatenate([query.T, key.T, value.T], axis=1)),
                tensor(own + "qkv_bias", np.concatenate(biases)),
                "mask_index",
            ],
            [own + "attention"],
            domain=MICROSOFT,
            num_heads=heads,
        )
    )
    nodes.append(
        helper.make_node(
            "MatMul",
            [own + "attention", tensor(own + "attention_output", weight(f"{at}attention.output.dense.weight").T)],
            [own + "attention_projected"],
        )
    )
    nodes.append(
        helper.make_node(
            "SkipLayerNormalization",
            [
                own + "attention_projected",
                state,
                tensor(own + "attention_gamma", weight(f"{at}attention.output.LayerNorm.weight")),
                tensor(own + "attention_beta", weight(f"{at}attention.output.LayerNorm.bias")),
                tensor(own + "attention_bias", weight(f"{at}attention.output.dense.bias")),
            ],
            [own + "attended"],
            domain=MICROSOFT,
            epsilon=epsilon,
        )
    )
    nodes.append(
        helper.make_node(
            "MatMul",
            [own + "attended", tensor(own + "intermediate", weight(f"{at}intermediate.dense.weight").T)],
            [own + "intermediate_linear"],
        )
    )
    nodes.append(
        helper.make_node(
            "BiasGelu",
            [own + "intermediate_linear", tensor(own + "intermediate_bias", weight(f"{at}intermediate.dense.bias"))],
            [own + "intermediate_gelu"],
            domain=MICROSOFT,
        )
    )
    nodes.append(
        helper.make_node(
            "MatMul",
            [own + "intermediate_gelu", tensor(own + "output", weight(f"{at}output.dense.weight").T)],
            [own + "output_linear"],
        )
    )
    nodes.append(
        helper.make_node(
            "SkipLayerNormalization",
            [
                own + "output_linear",
                own + "attended",
                tensor(own + "output_gamma", weight(f"{at}output.LayerNorm.weight")),
                tensor(own + "output_beta", weight(f"{at}output.LayerNorm.bias")),
                tensor(own + "output_bias", weight(f"{at}output.dense.bias")),
            ],
            [f"layer_input_{number + 1}"],
            domain=MICROSOFT,
            epsilon=epsilon,
        )
    )
    return f"layer_input_{number + 1}"
