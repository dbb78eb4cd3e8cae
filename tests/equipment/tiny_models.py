"""Tiny transformer models the tests build themselves (a few layers, a small vocabulary): nothing is downloaded.

``bi_encoder_folder`` writes a BERT bi-encoder as transformers saves it (config, ``model.safetensors``, a fast
tokenizer) and, if asked, sentence-transformers' files (pooling, prompts) and an ONNX export of the same weights.
``cross_encoder_folder`` writes a one-label BERT sequence classifier, the shape of a reranking cross-encoder. The
weights are random but seeded: the vectors mean nothing, but they are the same every time, so runtimes can be
compared with each other.
"""

from __future__ import annotations

import json
from pathlib import Path

WORDS = (
    "the a of to and in is it for on with as by how are do does what where when which retry retries request requests "
    "http client server error errors timeout delay delayed backoff parse parser token tokens file files read write open "
    "close index search query vector model chunk chunks document documents def class return import self none true false "
    "config settings path folder name value list dict string int float test tests run runs"
).split()
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCAB = [
    *SPECIALS,
    *WORDS,
    *(f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz0123456789"),
    *"abcdefghijklmnopqrstuvwxyz0123456789.,:;()[]{}=_-/'\"?!",
]


def _tokenizer(folder: Path) -> None:
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    vocab = {token: number for number, token in enumerate(VOCAB)}
    tokenizer = Tokenizer(WordPiece(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    from transformers import BertTokenizerFast

    BertTokenizerFast(tokenizer_object=tokenizer, model_max_length=128).save_pretrained(str(folder))
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")


def _config(**extra: object):  # type: ignore[no-untyped-def]
    from transformers import BertConfig

    return BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        **extra,
    )


def bi_encoder_folder(
    folder: Path,
    pooling: str | None = None,
    prompts: dict[str, str] | None = None,
    onnx: bool = False,
    torch_weights: bool = True,
    seed: int = 0,
) -> Path:
    """A tiny BERT bi-encoder in ``folder``; ``pooling`` ("mean"/"cls") and ``prompts`` as sentence-transformers files;
    ``onnx``: also ``model.onnx`` (last hidden state); ``torch_weights`` False leaves only the ONNX file."""
    import torch
    from transformers import BertModel

    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    model = BertModel(_config()).eval()
    model.save_pretrained(str(folder))
    _tokenizer(folder)
    if pooling:
        (folder / "1_Pooling").mkdir(exist_ok=True)
        (folder / "1_Pooling" / "config.json").write_text(
            json.dumps(
                {
                    "word_embedding_dimension": 32,
                    "pooling_mode_cls_token": pooling == "cls",
                    "pooling_mode_mean_tokens": pooling == "mean",
                }
            )
        )
        (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128}))
    if prompts is not None:
        (folder / "config_sentence_transformers.json").write_text(json.dumps({"prompts": prompts}))
    if onnx:
        _export(model, folder / "model.onnx")
    if not torch_weights:
        (folder / "model.safetensors").unlink()
    return folder


def _export(model, target: Path, output: str = "last_hidden_state") -> None:  # type: ignore[no-untyped-def]
    """``model``'s ``output`` (its token states, or a classifier's logits) as an ONNX file, batch and tokens dynamic."""
    import warnings

    import torch

    class LastHiddenState(torch.nn.Module):
        def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[no-untyped-def]
            return getattr(
                self.inner(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids), output
            )

    sample = torch.ones((1, 4), dtype=torch.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            LastHiddenState(model),
            (sample, sample, torch.zeros_like(sample)),
            str(target),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=[output],
            opset_version=17,
            dynamo=False,
            dynamic_axes={name: {0: "batch", 1: "tokens"} for name in ("input_ids", "attention_mask", "token_type_ids")}
            | {output: {0: "batch"}},
        )


def cross_encoder_folder(folder: Path, seed: int = 0, onnx: bool = False) -> Path:
    """A tiny one-label BERT sequence classifier (a cross-encoder's shape) in ``folder``; ``onnx``: its logits as
    ``model.onnx`` too."""
    import torch
    from transformers import BertForSequenceClassification

    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    model = BertForSequenceClassification(_config(num_labels=1)).eval()
    model.save_pretrained(str(folder))
    _tokenizer(folder)
    if onnx:
        _export(model, folder / "model.onnx", output="logits")
    return folder
