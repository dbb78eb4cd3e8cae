"""The evaluate flow with reranking and end-to-end accuracy: against simulators, and without keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxrag.flows.evaluate import evaluate_index
from ctxrag.tasks.options import EvaluateOptions
from tests.equipment.anthropic_simulator import AnthropicSimulator
from tests.equipment.cohere_simulator import CohereSimulator
from tests.helpers import copy_home

pytestmark = pytest.mark.usefixtures("prefect_harness")

QUESTIONS = [
    {
        "id": "q0",
        "question": "How long does tinyq wait before retrying a failed task?",
        "correct_chunks": ["tinyq/retry.py#1"],
        "correct_answer": "Half a second, doubling.",
    },
    {
        "id": "q1",
        "question": "How can a task give up immediately instead of being retried?",
        "correct_chunks": ["tinyq/retry.py#0"],
        "correct_answer": "Raise PermanentError.",
    },
    {
        "id": "q2",
        "question": "What happens to a task priority above 100?",
        "correct_chunks": ["tinyq/queue.py#1"],
        "correct_answer": "It is clamped to 100.",
    },
]


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, sample_index: Path) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("paid-evaluate")
    home = copy_home(sample_index, folder / "home")
    questions = folder / "questions.json"
    questions.write_text(json.dumps(QUESTIONS))
    return home, questions


def judge(prompt: str) -> str:
    if "Generated Answer" not in prompt:
        return "An answer."
    if "Raise PermanentError" in prompt:
        return "I am not sure."  # unparseable: counted, not guessed
    return "<is_correct>true</is_correct>" if "Half a second" in prompt else "<is_correct>false</is_correct>"


def test_rerank_rows_and_end_to_end_accuracy(
    indexed: tuple[Path, Path], cohere_simulator: CohereSimulator, anthropic_simulator: AnthropicSimulator
) -> None:
    home, questions = indexed
    cohere_sim, claude_sim = cohere_simulator, anthropic_simulator
    claude_sim.reply_with(judge)
    result = evaluate_index(
        evalset=str(questions),
        name="sample",
        home=str(home),
        options=EvaluateOptions(strategy=["hybrid"], rerank="cohere", end_to_end=True),
    )
    assert list(result["metrics"]) == ["hybrid", "hybrid+rerank-cohere"]
    for row in result["metrics"].values():
        assert row["accuracy"] == pytest.approx(0.5)  # q0 true, q2 false, q1 unparseable and left out
    assert result["unparseable_judgements"] == {"hybrid": 1, "hybrid+rerank-cohere": 1}
    assert len(cohere_sim.requests) == 3 and all(len(r.json["documents"]) == 30 for r in cohere_sim.requests)  # k x 10
    assert result["paid_calls"]["calls"] == 3 + 2 * 3 * 2  # 3 reranks; answer + judge per query per row
    assert result["unavailable"] == {}


def test_without_keys_the_paid_rows_say_what_they_need(
    indexed: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    home, questions = indexed
    for variable in ("CO_API_KEY", "COHERE_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    result = evaluate_index(
        evalset=str(questions),
        name="sample",
        home=str(home),
        options=EvaluateOptions(strategy=["bm25"], rerank="cohere", end_to_end=True),
    )
    assert list(result["metrics"]) == ["bm25"] and "accuracy" not in result["metrics"]["bm25"]
    assert result["unavailable"] == {"bm25+rerank-cohere": "needs CO_API_KEY", "accuracy": "needs ANTHROPIC_API_KEY"}
