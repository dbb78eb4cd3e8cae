"""The options of index, search and evaluate (ctxrag.tasks.options): one definition, read whole by the flows, and
flat by the command and the Python API; a deployment's run form shows each with its description."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import typer.main
from prefect.utilities.callables import parameter_schema
from typer.testing import CliRunner

from ctxrag import cli
from ctxrag.flows.evaluate import evaluate_index
from ctxrag.flows.index import index_corpus
from ctxrag.storage.errors import InvalidInput
from ctxrag.tasks.common.search_request import SearchRequest
from ctxrag.tasks.context.claude.settings import ClaudeSettings
from ctxrag.tasks.options import (
    DEFAULT_NAME,
    EvaluateOptions,
    IndexOptions,
    flat_options,
    from_flat,
    nested,
)


def command_options(command: str) -> dict[str, Any]:
    return {param.name: param for param in typer.main.get_command(cli.app).commands[command].params}


def test_every_index_option_is_a_command_option_with_its_default_help_and_bound() -> None:
    shown = command_options("index")
    assert shown["name"].default == DEFAULT_NAME
    for option in flat_options(IndexOptions):
        param = shown[option.name]
        assert param.default == option.default and param.help == option.description, option.name
        assert f"--{option.name.replace('_', '-')}" in param.opts
    refused = CliRunner().invoke(cli.app, ["index", "missing", "--concurrency", "0"])
    assert refused.exit_code == 2 and "--concurrency" in refused.output  # the field's least value
    assert {"rpm", "tpm", "gate", "gate_strategy", "claude_mode", "include"} <= set(shown)  # the command's own names
    assert not {"retry_attempts", "max_tokens", "batch_poll_seconds"} & set(shown)  # the calls' fixed shapes


@pytest.mark.parametrize(("command", "kind"), [("search", SearchRequest), ("evaluate", EvaluateOptions)])
def test_search_and_evaluate_defaults_are_the_options(command: str, kind: type) -> None:
    shown = command_options(command)
    for option in dataclasses.fields(kind):
        if option.default is not dataclasses.MISSING:  # (search's query is an argument)
            assert shown[option.name].default == option.default, option.name


def test_the_flows_take_the_options_whole() -> None:
    for flow, kind in ((index_corpus, IndexOptions), (evaluate_index, EvaluateOptions)):
        schema = parameter_schema(flow).model_dump()
        definitions = schema["definitions"]
        options = next(body for body in definitions.values() if body.get("title") == kind.__pydantic_config__["title"])
        assert all(field.get("description") for field in options["properties"].values()), (
            options
        )  # the run form's texts
    groups = {body["title"] for body in parameter_schema(index_corpus).model_dump()["definitions"].values()}
    assert {"Claude", "Embedding", "Files", "Quality gate", "Index options"} <= groups


def test_a_deployment_s_options_dict_becomes_the_object() -> None:
    """What Prefect does with a deployment's parameters: the dict is validated into the dataclasses."""
    validated = index_corpus.validate_parameters(
        {"source": "src", "options": {"contextualizer": "none", "embedding": {"embedder": "voyage"}}}
    )
    options = validated["options"]
    assert (
        isinstance(options, IndexOptions)
        and options.contextualizer == "none"
        and options.embedding.embedder == "voyage"
    )
    assert options.claude == ClaudeSettings() and options.files.max_file_bytes == IndexOptions().files.max_file_bytes


def test_flat_names_land_in_their_groups() -> None:
    options = from_flat(
        IndexOptions,
        {"rpm": 50, "gate": "q.jsonl", "embedder": "voyage", "include": ["*.py"], "claude_mode": "batch"},
        "t",
    )
    assert options.claude.requests_per_minute == 50 and options.claude.mode == "batch"
    assert (
        options.gate.evalset == "q.jsonl"
        and options.embedding.embedder == "voyage"
        and options.files.include == ["*.py"]
    )
    assert nested(IndexOptions, {"backend": "elasticsearch", "tpm": 9}, "t", into={"claude": {"model": "m"}}) == {
        "backend": "elasticsearch",
        "claude": {"model": "m", "tokens_per_minute": 9},
    }


def test_claude_settings_apply_only_to_claude_contextualizers() -> None:
    assert IndexOptions().contextualizer_claude() is None  # the default contextualizer is structural
    chosen = from_flat(IndexOptions, {"contextualizer": "claude", "rpm": 50}, "t").contextualizer_claude()
    assert chosen is not None and chosen.requests_per_minute == 50


def test_the_index_options_choose_the_embedder() -> None:
    assert from_flat(IndexOptions, {"context_tokens": 12}, "t").embedding.spec().context_tokens == 12
    assert (
        from_flat(IndexOptions, {"window_tokens": 0, "context_tokens": 12}, "t").embedding.spec().context_tokens == 0
    )  # whole texts
    with pytest.raises(InvalidInput, match="window_tokens 8"):
        from_flat(IndexOptions, {"window_tokens": 8}, "t").embedding.spec()


@pytest.mark.parametrize(
    ("k", "strategy", "ks", "strategies"),
    [
        (None, None, None, None),
        (5, "bm25", [5], ["bm25"]),
        ([5, 10], ["bm25", "vector"], [5, 10], ["bm25", "vector"]),
    ],
)
def test_evaluate_takes_one_value_or_several(k: Any, strategy: Any, ks: Any, strategies: Any) -> None:
    options = EvaluateOptions(k=k, strategy=strategy)
    assert (options.ks(), options.strategies()) == (ks, strategies)


def test_an_unknown_option_is_named_with_the_known_ones() -> None:
    with pytest.raises(InvalidInput, match=r"ctxrag.index: unknown option 'contextualiser'; options: contextualizer, "):
        from_flat(IndexOptions, {"contextualiser": "none"}, "ctxrag.index")
    assert from_flat(EvaluateOptions, {}, "ctxrag.evaluate") == EvaluateOptions()
    assert from_flat(EvaluateOptions, {"k": 3}, "ctxrag.evaluate").k == 3


def test_claude_retries_sets_each_call_s_budget() -> None:
    """``--claude-retries`` (ClaudeSettings.retry_attempts): what each call's retry policy is built from; that the
    policy holds to it is tests/flows/test_index_claude_limits.py's."""
    options = from_flat(IndexOptions, {"contextualizer": "claude", "claude_retries": 2}, "t")
    assert options.contextualizer_claude() == ClaudeSettings(retry_attempts=2)
    refused = CliRunner().invoke(cli.app, ["index", "missing", "--claude-retries", "0"])
    assert refused.exit_code == 2 and "--claude-retries" in refused.output
