"""A local model's needs come from its own files or the KNOWN table; a missing, incomplete or wrong folder is one clear
error before anything is embedded. These folders hold JSON only (and a placeholder weights file): no model runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxrag.storage.errors import InvalidInput
from ctxrag.tasks.embedding.embedder_spec import EmbedderSpec
from ctxrag.tasks.embedding.model_card import BGE_QUERY, ModelFolderError, read_model_folder
from ctxrag.tasks.embedding.model_sources import resolve_model

BERT = {"architectures": ["BertModel"], "model_type": "bert", "max_position_embeddings": 512}


def folder(path: Path, config: dict | None = None, weights: str = "model.safetensors", **files: object) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config or BERT))
    (path / "tokenizer.json").write_text("{}")
    if weights:
        (path / weights).parent.mkdir(parents=True, exist_ok=True)
        (path / weights).write_bytes(b"weights")
    for name, content in files.items():
        target = path / name.replace("__", "/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(content))
    return path


def test_sentence_transformers_files_say_pooling_prefixes_and_length(tmp_path: Path) -> None:
    card = read_model_folder(
        folder(
            tmp_path / "m",
            **{
                "1_Pooling__config.json": {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False},
                "config_sentence_transformers.json": {"prompts": {"query": "q: ", "passage": "p: "}},
                "sentence_bert_config.json": {"max_seq_length": 256},
            },
        )
    )
    assert (card.kind, card.pooling, card.query_prefix, card.document_prefix, card.max_length) == (
        "bi-encoder",
        "cls",
        "q: ",
        "p: ",
        256,
    )
    assert card.runtime == "torch" and card.precision == "fp32"


def test_the_table_fills_what_a_known_model_s_folder_does_not_say(tmp_path: Path) -> None:
    card = read_model_folder(folder(tmp_path / "bge-small-en-v1.5", weights="onnx/model_quantized.onnx"))
    assert (card.pooling, card.query_prefix, card.document_prefix) == ("cls", BGE_QUERY, "")
    assert card.runtime == "onnx" and card.quantized and card.precision == "int8"
    e5 = read_model_folder(folder(tmp_path / "anything"), name="intfloat/e5-small-v2")
    assert (e5.pooling, e5.query_prefix, e5.document_prefix) == ("mean", "query: ", "passage: ")
    plain = read_model_folder(folder(tmp_path / "unknown-model", config={**BERT, "max_position_embeddings": 128}))
    assert (plain.pooling, plain.query_prefix, plain.max_length) == ("mean", "", 128)


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda path: path, "is not a folder"),
        (lambda path: (path.mkdir(), path)[1], "has no tokenizer.json"),
        (lambda path: ((folder(path), (path / "config.json").unlink()), path)[1], "has no config.json"),
        (lambda path: ((folder(path), (path / "tokenizer.json").unlink()), path)[1], "has no tokenizer.json"),
        (lambda path: folder(path, weights=""), "has no weights"),
        (
            lambda path: ((folder(path), (path / "config.json").write_text("{not json")), path)[1],
            "is not readable JSON",
        ),
        (
            lambda path: folder(path, config={"architectures": ["BertForSequenceClassification"]}),
            "holds a cross-encoder",
        ),
        (
            lambda path: folder(path, **{"1_Pooling__config.json": {"pooling_mode_lasttoken": True}}),
            "pooling pooling_mode_lasttoken is not supported",
        ),
    ],
)
def test_a_bad_folder_is_one_error_naming_it(tmp_path: Path, setup, message: str) -> None:  # type: ignore[no-untyped-def]
    path = setup(tmp_path / "model")
    with pytest.raises(ModelFolderError, match=message) as raised:
        read_model_folder(path)
    assert str(tmp_path / "model") in str(raised.value) and isinstance(raised.value, InvalidInput)


def test_a_bi_encoder_is_refused_as_a_reranker(tmp_path: Path) -> None:
    with pytest.raises(ModelFolderError, match="holds a bi-encoder .*not a cross-encoder"):
        read_model_folder(folder(tmp_path / "m"), want="cross-encoder")


def test_an_id_that_is_not_here_says_so_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(
        ModelFolderError, match="not a folder here, and Hugging Face did not give it .HF_HUB_OFFLINE is set"
    ):
        resolve_model("someone/not-a-model-here")
    with pytest.raises(ModelFolderError, match="is not a folder"):
        resolve_model("./no/such/folder")


def test_a_folder_model_s_spec_records_where_it_is_and_its_fingerprint_keys_every_vector(tmp_path: Path) -> None:
    path = folder(tmp_path / "m", **{"sentence_bert_config.json": {"max_seq_length": 384}})
    spec = EmbedderSpec.choose("local", str(path), 512, None)
    assert (spec.model, spec.source, spec.max_seq_length, spec.precision) == ("m", str(path.resolve()), 384, "fp32")
    assert EmbedderSpec.from_dict(spec.to_dict()) == spec and not spec.packaged
    (path / "model.safetensors").write_bytes(b"other weights")
    changed = EmbedderSpec.choose("local", str(path), 512, None)
    assert changed.fingerprint != spec.fingerprint
    assert changed.cache_key("text", "document") != spec.cache_key("text", "document")
    packaged = EmbedderSpec.choose("local", None, 512, None)
    assert (
        packaged.packaged
        and "source" not in packaged.to_dict()
        and packaged == EmbedderSpec.choose("local", "all-MiniLM-L6-v2", 512, None)
    )


def onnx_only(path: Path, output: str) -> Path:
    """A folder as some packages ship a model: an ONNX file and its tokenizer, no config (a one-node graph here)."""
    import onnx
    from onnx import TensorProto, helper

    path.mkdir(parents=True, exist_ok=True)
    graph = helper.make_graph(
        [helper.make_node("Identity", ["input_ids"], [output])],
        "g",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, None)],
        [helper.make_tensor_value_info(output, TensorProto.INT64, None)],
    )
    onnx.save(helper.make_model(graph), str(path / "model_quantized.onnx"))
    (path / "tokenizer.json").write_text("{}")
    return path


def test_an_onnx_file_and_its_tokenizer_are_enough_and_its_outputs_tell_its_kind(tmp_path: Path) -> None:
    card = read_model_folder(onnx_only(tmp_path / "bge-small-en-v1.5-int8", "last_hidden_state"))
    assert (card.kind, card.precision, card.pooling, card.query_prefix, card.max_length) == (
        "bi-encoder",
        "int8",
        "cls",
        BGE_QUERY,
        512,
    )
    with pytest.raises(
        ModelFolderError, match=r"holds a cross-encoder \(model_quantized.onnx's outputs\), not a bi-encoder"
    ):
        read_model_folder(onnx_only(tmp_path / "reranker", "logits"))
    assert read_model_folder(tmp_path / "reranker", want="cross-encoder").kind == "cross-encoder"


@pytest.mark.parametrize(
    ("modules", "message"),
    [
        (
            [
                {"idx": 0, "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "path": "1_LSTM", "type": "sentence_transformers.models.LSTM"},
            ],
            "names a LSTM module, which ctxrag does not run",
        ),
        (
            [{"idx": 0, "path": "0_Transformer", "type": "sentence_transformers.models.Transformer"}],
            "its transformer is in",
        ),
        (
            [
                {"idx": 0, "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
            ],
            "has no",
        ),
    ],
)
def test_a_module_ctxrag_does_not_run_is_refused_naming_it(tmp_path: Path, modules: list, message: str) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": ["BertModel"], "max_position_embeddings": 128}))
    (folder / "tokenizer.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "2_Dense").mkdir()
    (folder / "2_Dense" / "config.json").write_text(
        json.dumps({"activation_function": "torch.nn.modules.activation.Tanh"})
    )
    with pytest.raises(ModelFolderError, match=message):
        read_model_folder(folder)


def test_pooling_modes_ctxrag_does_not_run_are_refused(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"architectures": ["BertModel"]}))
    (folder / "tokenizer.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"weights")
    for modes in (
        {"pooling_mode_mean_sqrt_len_tokens": True},
        {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": True},
    ):
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(modes))
        with pytest.raises(ModelFolderError, match="is not supported"):
            read_model_folder(folder)
