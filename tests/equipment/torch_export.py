"""The packaged MiniLM's ONNX files as torch made them before the graph was built from the weights (the torch extra):
torch's export of the transformer, onnxruntime's transformer optimizer, the same dynamic quantization. The tests
compare the product's torch-free files with these."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def torch_export(model_dir: Path, target: Path, attention: str = "eager") -> None:
    """torch's export of the transformer at ``model_dir`` (its last hidden state; batch and tokens dynamic)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    class LastHiddenState(torch.nn.Module):
        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[no-untyped-def]
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    model = AutoModel.from_pretrained(str(model_dir), local_files_only=True, attn_implementation=attention).eval()
    sample = AutoTokenizer.from_pretrained(str(model_dir))(
        ["a short one", "and a longer second text"], return_tensors="pt", padding=True
    )
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            LastHiddenState(model),
            tuple(sample[name] for name in INPUTS),
            str(target),
            input_names=list(INPUTS),
            output_names=["last_hidden_state"],
            opset_version=17,
            dynamo=False,
            dynamic_axes={name: {0: "batch", 1: "tokens"} for name in (*INPUTS, "last_hidden_state")},
        )


def torch_int8(model_dir: Path, scratch: Path, target: Path) -> None:
    """The int8 file as it was made from torch's export: eager attention, the optimizer's fusion, per-channel weights."""
    import onnx
    from onnxruntime.quantization import quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model

    config = json.loads((model_dir / "config.json").read_text())
    exported, fused = scratch / "torch.onnx", scratch / "torch-fused.onnx"
    torch_export(model_dir, exported)
    optimize_model(
        str(exported), model_type="bert", num_heads=config["num_attention_heads"], hidden_size=config["hidden_size"]
    ).save_model_to_file(str(fused))
    quantize_dynamic(
        str(fused),
        str(target),
        op_types_to_quantize=["MatMul", "Attention"],
        per_channel=True,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
