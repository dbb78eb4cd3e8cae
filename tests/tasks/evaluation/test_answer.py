"""End-to-end answering and judging against the Anthropic simulator (scripted judge verdicts)."""

from __future__ import annotations

import pytest

from ctxrag.tasks.evaluation.answer import EndToEnd, parse_verdict
from tests.equipment.anthropic_simulator import AnthropicSimulator


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        (
            "<evaluation><content><explanation>ok</explanation><is_correct>true</is_correct></content></evaluation>",
            True,
        ),
        ("<is_correct> FALSE </is_correct>", False),
        ("I think it is correct.", None),
        ("<is_correct>maybe</is_correct>", None),
        ("<is_correct>true</is_correct> ... <is_correct>false</is_correct>", None),  # contradicts itself
    ],
)
def test_parse_verdict(text: str, verdict: bool | None) -> None:
    assert parse_verdict(text) is verdict


def test_answer_then_judge(anthropic_simulator: AnthropicSimulator) -> None:
    sim = anthropic_simulator
    sim.reply_with(lambda prompt: "<is_correct>true</is_correct>" if "Generated Answer" in prompt else "Use backoff.")
    rows: list = []
    end_to_end = EndToEnd(ledger=rows.extend, subject="tinyq")
    answer = end_to_end.answer("How are retries delayed?", ["retry with exponential backoff"])
    assert answer == "Use backoff."
    assert end_to_end.judge("How are retries delayed?", answer, "Exponential backoff.") is True
    prompts = [request.json["messages"][0]["content"] for request in sim.requests]
    assert "<documents>\nretry with exponential backoff\n</documents>" in prompts[0]
    assert "questions about tinyq" in prompts[1] and "Correct Answer: Exponential backoff." in prompts[1]
    assert [row.stage for row in rows] == ["answer", "judge"]
    assert [request.json["model"] for request in sim.requests] == ["claude-haiku-4-5", "claude-sonnet-4-5"]
