"""The options of index, search and evaluate: one set of defaults, read by the flows, the command and the Python API."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest
import typer.main

from ctxrag import cli
from ctxrag.flows.evaluate import evaluate_index
from ctxrag.flows.index import index_corpus
from ctxrag.flows.options import DEFAULT_NAME, EvaluateOptions, IndexOptions, SearchOptions, options_of
from ctxrag.storage.errors import InvalidInput
from ctxrag.tasks.context.claude.contextualizer import ClaudeSettings


def command_defaults(command: str) -> dict[str, Any]:
    return {param.name: param.default for param in typer.main.get_command(cli.app).commands[command].params}


def flow_defaults(flow: Any) -> dict[str, Any]:
    return {name: param.default for name, param in inspect.signature(flow.fn).parameters.items()}


@pytest.mark.parametrize(("command", "kind"), [("index", IndexOptions), ("search", SearchOptions), ("evaluate", EvaluateOptions)])
def test_the_command_s_defaults_are_the_options(command: str, kind: type) -> None:
    shown = command_defaults(command)
    assert shown["name"] == DEFAULT_NAME
    for option in dataclasses.fields(kind):
        assert shown[option.name] == option.default, option.name


def test_the_flows_defaults_are_the_options() -> None:
    index = flow_defaults(index_corpus)
    assert index["name"] == DEFAULT_NAME
    for parameter, value in IndexOptions().flow_parameters("source", DEFAULT_NAME).items():
        if parameter != "source":
            assert index[parameter] == value, parameter
    evaluate = flow_defaults(evaluate_index)
    for parameter, value in EvaluateOptions().flow_parameters("set.jsonl", DEFAULT_NAME).items():
        if parameter != "evalset":
            assert evaluate[parameter] == value, parameter


def test_claude_defaults_come_from_the_claude_settings() -> None:
    settings, options = ClaudeSettings(), IndexOptions()
    assert (options.model, options.claude_mode, options.cache_ttl, options.concurrency) == (
        settings.model, settings.mode, settings.cache_ttl, settings.concurrency
    )
    assert options.claude() is None  # the default contextualizer is structural
    claude = IndexOptions(contextualizer="claude", rpm=50, tpm=40_000).claude()
    assert claude is not None and ClaudeSettings(**claude).requests_per_minute == 50


def test_index_options_become_the_flow_s_parameters() -> None:
    parameters = IndexOptions(gate="q.jsonl", include=["*.py"], exclude=[], task_runner="dask").flow_parameters("src", "docs")
    assert parameters["gate_evalset"] == "q.jsonl" and parameters["include"] == ["*.py"] and parameters["exclude"] is None
    assert "task_runner" not in parameters  # how the flow runs, not what it does
    assert set(parameters) <= set(flow_defaults(index_corpus))


def test_the_index_options_choose_the_embedder_the_flow_builds() -> None:
    assert IndexOptions(context_tokens=12).embedder_spec().context_tokens == 12
    assert IndexOptions(context_tokens=12).flow_parameters("src", "docs")["context_tokens"] == 12
    assert IndexOptions(window_tokens=0, context_tokens=12).embedder_spec().context_tokens == 0  # whole texts: no cap
    with pytest.raises(InvalidInput, match="window_tokens 8"):
        IndexOptions(window_tokens=8).embedder_spec()


@pytest.mark.parametrize(("k", "strategy", "ks", "strategies"), [
    (None, None, None, None),
    (5, "bm25", [5], ["bm25"]),
    ([5, 10], ["bm25", "vector"], [5, 10], ["bm25", "vector"]),
])
def test_evaluate_takes_one_value_or_several(k: Any, strategy: Any, ks: Any, strategies: Any) -> None:
    parameters = EvaluateOptions(k=k, strategy=strategy).flow_parameters("set.jsonl", "docs")
    assert (parameters["ks"], parameters["strategies"]) == (ks, strategies)
    assert set(parameters) <= set(flow_defaults(evaluate_index))


def test_an_unknown_option_is_named_with_the_known_ones() -> None:
    with pytest.raises(InvalidInput, match=r"ctxrag.index: unknown option 'contextualiser'; options: contextualizer, "):
        options_of(IndexOptions, {"contextualiser": "none"}, "ctxrag.index")
    assert options_of(SearchOptions, {}, "ctxrag.search") == SearchOptions()
    assert options_of(SearchOptions, {"k": 3}, "ctxrag.search").k == 3
